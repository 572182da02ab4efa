//! The `mqtt` sink over TLS with a user name and password, against a real mosquitto on
//! 127.0.0.1 that requires both (and a client certificate): a CA, the broker's certificate (for
//! 127.0.0.1) and the station's are made at test time with the openssl command.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::messages::{report_line, run, run_any, two_streams};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and certificates it signed for the broker (127.0.0.1) and the station.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=octopipe test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    for (name, ext) in [("server", true), ("client", false)] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        let (csr, out) = (format!("{name}.csr"), format!("{name}.pem"));
        let mut args = vec![
            "x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key",
        ];
        args.extend(["-CAcreateserial", "-days", "2", "-out", &out]);
        if ext {
            args.extend(["-extfile", "san.ext"]);
        }
        openssl(dir, &args);
    }
}

/// mosquitto on `port` asking for TLS, a client certificate and a password.
struct Broker {
    child: Child,
    dir: PathBuf,
}

impl Broker {
    fn start(dir: &Path, port: u16) -> Broker {
        let pw = dir.join("passwords");
        let out = Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&pw)
            .args(["station-7", "correct horse battery"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let user = if unsafe { libc::getuid() } == 0 {
            "user root\n"
        } else {
            ""
        };
        let d = dir.display();
        std::fs::write(
            dir.join("mosquitto.conf"),
            format!(
                "listener {port} 127.0.0.1\ncafile {d}/ca.pem\ncertfile {d}/server.pem\nkeyfile {d}/server.key\n\
                 require_certificate true\nallow_anonymous false\npassword_file {}\n\
                 log_dest file {d}/mosquitto.log\nlog_type all\n{user}",
                pw.display()
            ),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(dir.join("mosquitto.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "mosquitto did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Broker {
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn tls_with_a_client_certificate_and_a_password_from_a_file() {
    if Command::new("mosquitto").arg("-h").output().is_err()
        || Command::new("openssl").arg("version").output().is_err()
    {
        common::skip("mosquitto or openssl is not installed (scripts/setup.sh)");
        return;
    }
    let dir = common::temp_dir("mqtt-tls");
    certificates(&dir);
    let port = common::station::free_port();
    let broker = Broker::start(&dir, port);
    let password = dir.join("password");
    std::fs::write(&password, "correct horse battery\n").unwrap();
    let d = dir.display();
    let tls = format!(
        "mqtt port={port} tls=true ca-file={d}/ca.pem cert-file={d}/client.pem key-file={d}/client.key username=station-7"
    );
    let (outcome, _) = run(
        two_streams(&format!("{tls} password-file={}", password.display())),
        50,
        |_| {},
    );
    let line = report_line(&outcome, &format!("mqtt 127.0.0.1:{port}: "));
    assert!(
        line.ends_with("100 messages = 100 acknowledged + 0 dropped (buffer full)"),
        "{line}\n{}",
        broker.log()
    );
    let log = broker.log();
    assert!(
        log.contains("u'station-7'")
            && log.contains("New client connected")
            && log.contains("octopipe-"),
        "{log}"
    );

    // The same from an environment variable; a wrong password delivers nothing, says so, and
    // never shows the password.
    std::env::set_var("OCTOPIPE_TEST_MQTT_PASSWORD", "wrong horse battery");
    let (outcome, _) = run_any(
        two_streams(&format!(
            "{tls} password-env=OCTOPIPE_TEST_MQTT_PASSWORD flush-timeout=1"
        )),
        20,
        |_| {},
    );
    let e = outcome.error.expect("nothing delivered").to_string();
    assert!(e.contains("delivered none of the 40 messages"), "{e}");
    let report = format!("{}", outcome.report);
    assert!(
        !report.contains("horse") && !e.contains("horse"),
        "{report}\n{e}"
    );

    // Without the CA the broker's certificate is not trusted: nothing is sent in clear.
    let (outcome, _) = run_any(
        two_streams(&format!(
            "mqtt port={port} tls=true ca-file={d}/client.pem username=station-7 password-file={} flush-timeout=1",
            password.display()
        )),
        10,
        |_| {},
    );
    assert!(outcome.error.is_some(), "an untrusted broker got messages");
}

#[test]
fn bad_tls_and_credential_settings_name_the_property() {
    for (text, words) in [
        ("mqtt ca-file=/x.pem", "ca-file needs tls=true"),
        (
            "mqtt tls=true ca-file=/nonexistent.pem",
            "ca-file '/nonexistent.pem'",
        ),
        ("mqtt tls=true ca-file=/dev/zero", "not a regular file"),
        ("mqtt password-env=HOME", "a password needs username="),
        (
            "mqtt username=u password-env=OCTOPIPE_NOT_SET_ANYWHERE",
            "OCTOPIPE_NOT_SET_ANYWHERE is not set",
        ),
        (
            "mqtt username=u password-file=/a password-env=B",
            "not both",
        ),
    ] {
        let e = octopipe::Pipeline::from_description(&format!("app ! {text}"), &Default::default())
            .err()
            .unwrap_or_else(|| panic!("{text} should be refused"))
            .to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
}

#[test]
fn bad_tls_files_are_refused_before_the_run_starts() {
    let dir = common::temp_dir("mqtt-bad-pem");
    certificates(&dir);
    let not_pem = dir.join("notes.txt");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let (ca, cert, key) = (
        dir.join("ca.pem"),
        dir.join("client.pem"),
        dir.join("client.key"),
    );
    // PEM armour around garbage (issue 50): passed the PEM check, failed only at the broker.
    let garbage = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v";
    let (bad_key, bad_cert) = (dir.join("garbage.key"), dir.join("garbage.pem"));
    std::fs::write(
        &bad_key,
        format!("-----BEGIN PRIVATE KEY-----\n{garbage}\n-----END PRIVATE KEY-----\n"),
    )
    .unwrap();
    std::fs::write(
        &bad_cert,
        format!("-----BEGIN CERTIFICATE-----\n{garbage}\n-----END CERTIFICATE-----\n"),
    )
    .unwrap();
    let d = |p: &Path| p.display().to_string();
    let cases = [
        (
            format!(
                "tls=true ca-file={} cert-file={} key-file={}",
                d(&ca),
                d(&cert),
                d(&bad_key)
            ),
            "not a private key TLS can use",
            "garbage.key",
        ),
        (
            format!("tls=true ca-file={}", d(&bad_cert)),
            "is not an X.509 certificate",
            "garbage.pem",
        ),
        (
            format!("tls=true ca-file={}", d(&not_pem)),
            "no PEM certificate",
            "ca-file",
        ),
        (
            format!(
                "tls=true ca-file={} cert-file={} key-file={}",
                d(&ca),
                d(&cert),
                d(&ca)
            ),
            "no PEM private key",
            "key-file",
        ),
        (
            format!(
                "tls=true ca-file={} cert-file={} key-file={}",
                d(&ca),
                d(&key),
                d(&key)
            ),
            "no PEM certificate",
            "cert-file",
        ),
    ];
    for (props, words, key) in cases {
        // The CLI: refused before anything runs, naming the property and the file.
        let start = Instant::now();
        let out = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
                "run",
                &format!(
                    "testsrc num-buffers=3 ! boxes format=synthetic ! batch ! mqtt host=127.0.0.1 port=1 flush-timeout=5 {props}"
                ),
            ]),
            Duration::from_secs(30),
        );
        let stderr = common::fails_with(&out, &[key, words]);
        assert!(
            start.elapsed() < Duration::from_secs(5) && !stderr.contains("delivered none"),
            "{props}: found only at the end ({:?}): {stderr}",
            start.elapsed()
        );
    }
}

#[test]
fn a_silent_broker_is_warned_about_at_most_every_ten_seconds() {
    // A "broker" that takes the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let dir = common::temp_dir("mqtt-silent");
    let sink = format!(
        "batch max-frames=4 ! mqtt host=127.0.0.1 port={port} buffer=0.3 flush-timeout=0.5"
    );
    let s = common::station::Station::start("silent", &dir, &sink, &[], &[]);
    // Two live streams: their messages are dropped by turns, which started a spell of drops
    // (and its warning) at every batch.
    for id in 0..2 {
        let live = "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=2";
        assert_eq!(s.add(live, Some(id)).status, 201);
    }
    std::thread::sleep(Duration::from_secs(5));
    let log = s.log();
    let warnings = log
        .matches("are dropped until the receiver takes them")
        .count();
    drop(s);
    drop(silent);
    assert!(
        (1..=2).contains(&warnings),
        "{warnings} warnings about drops in 5 s:\n{log}"
    );
}
