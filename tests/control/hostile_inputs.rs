//! Hostile inputs over HTTP, round 3 (issue 50, docs/security.md "Round 3"): `srt` URIs read
//! as GStreamer reads them (every `mode=`, decoded keys, every spelling of every interface),
//! hostile numbers in every float property a 400 and never a 500, a newline in a location
//! escaped in the log, the list and the report, and a long stage name refused at once. Each
//! on a real `octopipe run --streams` station on loopback; every loop is bounded.

use crate::common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::station::Station;
use octopipe::describe::Builtin;
use octopipe::stage::{PropType, Registry, Role};

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

#[test]
fn srt_listeners_are_refused_in_every_spelling_and_nothing_listens() {
    let dir = common::temp_dir("control-srt");
    // A port nothing uses: the station must never bind it.
    let port = UdpSocket::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = Station::start("srt", &dir, SINK, &[], &[]);
    let attacks = [
        format!("srt://[::0]:{port}?mode=caller&mode=listener"),
        format!("srt://cam.example:{port}?mo%64e=listener"),
        format!("srt://cam.example:{port}?mode=%6cistener"),
        format!("srt://cam.example:{port}?mode=rendezvous"),
        format!("srt://[::ffff:0.0.0.0]:{port}"),
        format!("srt://[::]:{port}?mode=caller"),
        format!("srt://[0:0::0]:{port}"),
        format!("srt://0:{port}"),
        format!("srt://0x0:{port}"),
        format!("srt://00.0.0.0:{port}"),
        format!("srt://%30.0.0.0:{port}"),
        format!("srt://:{port}"),
        format!("srt://user@:{port}"),
    ];
    for uri in &attacks {
        let source = format!("media location=\"{uri}\" ! boxes format=synthetic");
        let reply = s.add(&source, None);
        assert_eq!(reply.status, 403, "{uri}: {reply:?}");
        assert!(
            reply.error().contains("srt only as a caller"),
            "{uri}: {reply:?}"
        );
    }
    // Nothing listens on the port on any interface: it is ours to bind, v4 and v6.
    std::thread::sleep(Duration::from_millis(200));
    UdpSocket::bind(("0.0.0.0", port)).expect("the station listens on the port");
    if let Ok(v6) = UdpSocket::bind(("::", port)) {
        drop(v6);
    }
    assert!(s.streams().is_empty(), "{:?}", s.streams());
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
}

#[test]
fn hostile_numbers_in_every_float_property_are_a_400_never_a_500() {
    let dir = common::temp_dir("control-numbers");
    let mut s = Station::start("numbers", &dir, SINK, &[], &[]);
    let registry = Registry::builtin();
    let (mut requests, mut named) = (0, 0);
    let start = Instant::now();
    for decl in registry.decls() {
        for spec in decl.props {
            let floats3 = matches!(spec.ty, PropType::Floats3 { .. });
            if !floats3 && !matches!(spec.ty, PropType::Float { .. }) {
                continue;
            }
            for v in ["nan", "inf", "-inf", "1e300", "1e-300", "-1"] {
                let value = match floats3 {
                    true => format!("{v},{v},{v}"),
                    false => v.to_string(),
                };
                let stage = format!("{} {}={value}", decl.name, spec.name);
                let source = match decl.role {
                    Role::Source => stage,
                    _ => format!("testsrc num-buffers=1 ! {stage}"),
                };
                let reply = s.add(&source, None);
                requests += 1;
                // -1 may be in a range that takes negative numbers: then anything but a 500.
                let in_range = v == "-1" && spec.ty.accepts(&value);
                assert!(
                    (400..500).contains(&reply.status) || (in_range && reply.status != 500),
                    "{source}: {reply:?}"
                );
                if reply
                    .error()
                    .contains(&format!("{}: {} must be", decl.name, spec.name))
                {
                    named += 1;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(120),
                    "{requests} requests"
                );
            }
        }
    }
    eprintln!("{requests} hostile numbers: {named} refused naming the property");
    assert!(requests >= 60, "{requests}");
    // The ones every source has: refused naming the property.
    for source in [
        "testsrc timeout=1e300 num-buffers=1",
        "testsrc start-timeout=nan num-buffers=1",
        "testsrc framerate=1e-300 num-buffers=1",
    ] {
        let reply = s.add(source, None);
        assert_eq!(reply.status, 400, "{source}: {reply:?}");
        assert!(reply.error().contains("must be"), "{source}: {reply:?}");
    }
    assert!(s.child.try_wait().unwrap().is_none(), "{}", s.log());
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
}

#[test]
fn a_newline_in_a_location_is_escaped_in_the_log_the_list_and_the_report() {
    let dir = common::temp_dir("control-newline");
    let s = Station::start("newline", &dir, SINK, &[], &[]);
    let forged = "octopipe: error: FORGED by the client";
    // A camera that refuses the connection: the stream is taken, then fails naming it.
    let port = common::station::free_port();
    let source = format!(
        "media location=\"rtsp://127.0.0.1:{port}/cam\n{forged}\u{1b}[2K\" retry=0 ! boxes format=synthetic"
    );
    let reply = s.add(&source, Some(7));
    let listed = match reply.status {
        201 => {
            let entry = s.wait_state(7, "failed", Duration::from_secs(30));
            entry.to_string()
        }
        _ => reply.body.clone(),
    };
    assert!(listed.contains("FORGED"), "{reply:?} {listed}");
    // JSON escapes a newline itself: what octopipe shows must hold it escaped (`\n` as two
    // characters, JSON-encoded `\\n`).
    assert!(
        listed.contains("\\\\n") && listed.contains("\\\\u{1b}"),
        "{listed}"
    );
    let (_, report, log) = s.stop();
    for line in log.lines() {
        assert!(
            !line.starts_with("octopipe: error: FORGED"),
            "a forged line:\n{log}"
        );
        assert!(!line.contains('\u{1b}'), "a terminal escape:\n{log}");
    }
    let report = report.to_string();
    if report.contains("FORGED") {
        assert!(report.contains("/cam\\\\n"), "{report}");
    }
}

#[test]
fn a_long_stage_name_is_refused_at_once_with_a_short_message() {
    let dir = common::temp_dir("control-long-name");
    let s = Station::start("long-name", &dir, SINK, &[], &[]);
    // The longest a body takes (64 KiB): its name as much of it as fits.
    let name = "q".repeat(60 * 1024);
    let start = Instant::now();
    let reply = s.add(&format!("testsrc ! {name}"), None);
    let took = start.elapsed();
    assert!((400..500).contains(&reply.status), "{}", reply.status);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(
        reply.error().contains("'qqqq"),
        "{}",
        &reply.body[..200.min(reply.body.len())]
    );
    assert!(
        reply.body.len() < 4096,
        "an answer of {} bytes",
        reply.body.len()
    );
    eprintln!("a {} KiB stage name refused in {took:?}", name.len() / 1024);
}

#[test]
fn a_live_source_whose_first_frame_is_due_past_its_start_timeout_fails_and_frees_its_slot() {
    let dir = common::temp_dir("control-epoch");
    let s = Station::start("epoch", &dir, SINK, &["--max-streams", "1"], &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // A timeline that starts in a year: its first frame would be due then.
    let source = format!(
        "testsrc live=true epoch={} width=64 height=48 ! boxes format=synthetic",
        now + 365 * 86400
    );
    // Refused as it opens (a 400), or taken and failed: either way naming start-timeout.
    let start = Instant::now();
    let reply = s.add(&source, Some(1));
    let error = match reply.status {
        201 => s.wait_state(1, "failed", Duration::from_secs(30))["error"].to_string(),
        _ => reply.error(),
    };
    assert!(
        (reply.status == 201 || reply.status == 400)
            && error.contains("the first frame is due in")
            && error.contains("after start-timeout=20 s"),
        "{reply:?} {error}"
    );
    eprintln!("refused in {:?}: {error}", start.elapsed());
    // Its slot is free again: another stream is taken.
    let start = Instant::now();
    loop {
        let reply = s.add(
            "testsrc num-buffers=5 width=64 height=48 ! boxes format=synthetic",
            None,
        );
        if reply.status == 201 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{reply:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_page_of_streams_lists_the_right_ones_among_many_removed() {
    let dir = common::temp_dir("control-pages");
    let s = Station::start("pages", &dir, SINK, &[], &[]);
    let n = 120u32;
    for id in 1..=n {
        let source = "testsrc num-buffers=1 width=16 height=16 ! boxes format=synthetic";
        // A removed stream counts against --max-streams until it has stopped: wait for one.
        let start = Instant::now();
        let mut reply = s.add(source, Some(id));
        while reply.status == 429 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
            reply = s.add(source, Some(id));
        }
        assert_eq!(reply.status, 201, "{id}: {reply:?}");
        let gone = s.request("DELETE", &format!("/streams/{id}"), "").unwrap();
        assert!(gone.status < 300, "{id}: {gone:?}");
    }
    let page = |query: &str| {
        let reply = s.get(&format!("/streams?{query}")).unwrap();
        assert_eq!(reply.status, 200, "{query}: {reply:?}");
        let ids: Vec<u64> = reply
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        (ids, reply.header("x-next-after"))
    };
    let start = Instant::now();
    assert_eq!(page("limit=1"), (vec![1], Some("1".into())));
    let took = start.elapsed();
    assert_eq!(
        page("after=100&limit=5"),
        (vec![101, 102, 103, 104, 105], Some("105".into()))
    );
    assert_eq!(page("after=117&limit=5"), (vec![118, 119, 120], None));
    assert_eq!(page("after=120&limit=5"), (vec![], None));
    assert_eq!(page("after=99999999999&limit=5"), (vec![], None));
    assert_eq!(page("limit=1000").0.len(), n as usize);
    eprintln!("GET /streams?limit=1 among {n} ended streams: {took:?}");
}

#[test]
fn secrets_by_key_list_encoded_keys_and_path_credentials_are_redacted_everywhere() {
    let dir = common::temp_dir("control-redact");
    let s = Station::start("redact", &dir, SINK, &[], &[]);
    // A camera that refuses the connection: the stream is taken, then fails naming it.
    let port = common::station::free_port();
    let secrets = [
        "Jwt-S3cret-1",
        "Sess-S3cret-2",
        "Enc-S3cret-3",
        "Path-S3cret-4",
    ];
    let source = format!(
        "media location=\"rtsp://127.0.0.1:{port}/admin:{}@cam?jwt={}&session={}&pass%77ord={}&x=1\" \
         retry=0 ! boxes format=synthetic",
        secrets[3], secrets[0], secrets[1], secrets[2]
    );
    let reply = s.add(&source, Some(3));
    assert_eq!(reply.status, 201, "{reply:?}");
    let listed = s.stream(3).to_string();
    assert!(
        listed.contains("/***@cam?jwt=***&session=***&pass%77ord=***&x=1"),
        "{listed}"
    );
    let failed = s
        .wait_state(3, "failed", Duration::from_secs(30))
        .to_string();
    let (_, report, log) = s.stop();
    for text in [&listed, &failed, &report.to_string(), &log] {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
    }
}

#[test]
fn with_rust_log_too_a_newline_in_a_location_forges_no_line() {
    let port = common::station::free_port();
    let forged = "FORGED by the client";
    let text = format!(
        "media location=\"rtsp://127.0.0.1:{port}/cam\n{forged}\" retry=0 ! boxes format=synthetic \
         ! batch ! jsonl location=/dev/null"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", &text])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("/cam\\n{forged}")), "{stderr}");
    assert!(
        stderr.lines().all(|l| !l.starts_with(forged)),
        "a forged line:\n{stderr}"
    );
}
