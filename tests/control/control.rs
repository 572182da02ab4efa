//! The control plane as an attacker on loopback sees it (docs/security.md): every finding of
//! issue 24 sent as an attacker would send it, to a real `octopipe run --streams` station, each
//! answered with the status and message that closes it. Loopback only; every loop is bounded.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::station::{raw, Station};

/// Long enough to pass the token checks' length rule.
const TOKEN: &str = "test-token-0123456789abcdef";

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

fn station(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Station, std::path::PathBuf) {
    let dir = common::temp_dir(&format!("control-{name}"));
    (Station::start(name, &dir, SINK, args, env), dir)
}

#[test]
fn gstreamer_launch_text_from_the_network_is_refused() {
    let (s, dir) = station("launch", &[], &[]);
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    let stolen = dir.join("stolen.txt");
    // The escape of the issue: a value ending in `\` ate the ` ! ` octopipe put after it, so the
    // chain check passed and GStreamer copied the file.
    let escape = format!(
        "filesrc location={} ! filesink location={} name=w\\ ! videotestsrc num-buffers=5 ! boxes format=synthetic",
        secret.display(),
        stolen.display()
    );
    let cases = [
        (escape.clone(), "filesrc"),
        (
            format!(
                "filesrc location={} ! decodebin ! boxes format=synthetic",
                secret.display()
            ),
            "filesrc",
        ),
        (
            "souphttpsrc location=http://127.0.0.1:9/x ! decodebin ! boxes format=synthetic".into(),
            "souphttpsrc",
        ),
        (
            "tcpclientsrc host=127.0.0.1 port=9 ! tsdemux ! h264parse ! avdec_h264 ! boxes format=synthetic"
                .into(),
            "tcpclientsrc",
        ),
        (
            "videotestsrc num-buffers=5 ! boxes format=synthetic".into(),
            "videotestsrc",
        ),
    ];
    for (source, element) in cases {
        let reply = s.add(&source, None);
        assert_eq!(reply.status, 403, "{source}: {reply:?}");
        let e = reply.error();
        assert!(
            e.contains(&format!("GStreamer element '{element}'")) && e.contains("--allow-element"),
            "{e}"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!stolen.exists(), "the secret was copied");
    assert!(s.streams().is_empty(), "{:?}", s.streams());
}

#[test]
fn files_are_read_only_under_the_directories_the_operator_allows() {
    let dir = common::temp_dir("control-dirs");
    let allowed = dir.join("allowed");
    let media = allowed.join("media");
    std::fs::create_dir_all(&media).unwrap();
    std::fs::write(dir.join("secret.txt"), "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(dir.join("secret.txt"), media.join("link.mp4")).unwrap();
    let labels = allowed.join("labels.txt");
    std::fs::write(&labels, "a\nb\n").unwrap();
    let allow = allowed.display().to_string();
    let s = Station::start(
        "dirs",
        &dir,
        SINK,
        &["--allow-dir", &allow, "--allow-element", "videotestsrc"],
        &[],
    );
    let outside = dir.join("secret.txt").display().to_string();
    let refused = [
        (format!("media location={outside}"), "media location"),
        (format!("media location=file://{outside}"), "media location"),
        (
            format!("media location={allow}/../secret.txt"),
            "media location",
        ),
        (
            format!("media location={allow}/media/link.mp4"),
            "media location",
        ),
        ("media location=fd://0".to_string(), "media location"),
        ("media location=/dev/zero".to_string(), "media location"),
        (
            format!("images location={}", dir.display()),
            "images location",
        ),
        (
            "testsrc num-buffers=1 ! detect model=/x.onnx labels-file=/dev/zero".to_string(),
            "detect model",
        ),
        (
            format!("testsrc num-buffers=1 ! detect model={allow}/d.onnx labels-file=/dev/zero"),
            "detect labels-file",
        ),
        (
            "testsrc num-buffers=1 ! boxes format=mot location=/etc/passwd".to_string(),
            "boxes location",
        ),
    ];
    for (source, what) in &refused {
        let source = match source.contains(" ! ") {
            true => source.clone(),
            false => format!("{source} ! boxes format=synthetic"),
        };
        let reply = s.add(&source, None);
        assert_eq!(reply.status, 403, "{source}: {reply:?}");
        let e = reply.error();
        assert!(e.contains(what), "{source}: {e}");
    }
    // Inside the allowed folder a bad file is the station's usual 400 (it is not video): the
    // stream was looked at, not refused.
    std::fs::write(media.join("notes.txt"), "not an image\n").unwrap();
    let reply = s.add(
        &format!("images location={allow}/media ! boxes format=synthetic"),
        None,
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    // An element the operator listed.
    let reply = s.add(
        "videotestsrc num-buffers=3 ! boxes format=synthetic",
        Some(3),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    assert!(!s.log().contains("TOP SECRET"));
}

#[test]
fn streams_need_the_api_token() {
    let (s, _dir) = station("token", &[], &[("OCTOPIPE_API_TOKEN", TOKEN)]);
    let source = "testsrc width=64 height=48 num-buffers=3 ! boxes format=synthetic count=1";
    let body = serde_json::json!({ "source": source }).to_string();
    let post = |auth: Option<&str>| {
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /streams HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            s.addr,
            body.len()
        );
        raw(s.addr, request.as_bytes(), Duration::from_secs(10)).unwrap()
    };
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789abcdef"),
        Some(&format!("Basic {TOKEN}")),
        Some("Bearer "),
    ] {
        let reply = post(auth);
        assert_eq!(reply.status, 401, "{auth:?}: {reply:?}");
        assert_eq!(reply.header("WWW-Authenticate").as_deref(), Some("Bearer"));
        assert!(reply.error().contains("OCTOPIPE_API_TOKEN"), "{reply:?}");
    }
    assert_eq!(post(Some(&format!("Bearer {TOKEN}"))).status, 201);
    // Reading the streams needs it too; health and metrics stay open (docs/security.md).
    let anonymous = |method: &str, path: &str| {
        let request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n\r\n", s.addr);
        raw(s.addr, request.as_bytes(), Duration::from_secs(10)).unwrap()
    };
    assert_eq!(anonymous("GET", "/streams").status, 401);
    assert_eq!(anonymous("DELETE", "/streams/0").status, 401);
    assert_eq!(anonymous("GET", "/health").status, 200);
    assert_eq!(anonymous("GET", "/metrics").status, 200);
    assert_eq!(s.streams().len(), 1);
    assert!(!s.log().contains(TOKEN), "the token is never echoed");
}

#[test]
fn the_token_can_come_from_a_file_and_must_be_long() {
    let dir = common::temp_dir("control-token-file");
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let path = file.display().to_string();
    let mut s = Station::start("file", &dir, SINK, &["--api-token-file", &path], &[]);
    assert_eq!(s.get("/streams").unwrap().status, 401);
    s.token = Some(TOKEN.into());
    assert_eq!(s.get("/streams").unwrap().status, 200);
    drop(s);
    std::fs::write(&file, "short\n").unwrap();
    let out = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(["run", SINK, "--streams", "--metrics-addr", "127.0.0.1:0"])
            .args(["--api-token-file", &path]),
        Duration::from_secs(20),
    );
    common::fails_with(&out, &["--api-token-file", "at least 16"]);
}

#[test]
fn a_non_loopback_address_is_refused_without_a_token() {
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = common::output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_octopipe"))
                .args(["run", SINK, "--streams", "--metrics-addr", addr])
                .env_remove("OCTOPIPE_API_TOKEN"),
            Duration::from_secs(20),
        );
        let stderr = common::fails_with(
            &out,
            &[addr, "not a loopback address", "OCTOPIPE_API_TOKEN"],
        );
        assert!(
            !stderr.contains("metrics: http://"),
            "it never listened: {stderr}"
        );
    }
}

#[test]
fn browsers_cannot_post_across_origins() {
    let (s, _dir) = station("browser", &[], &[]);
    let body = serde_json::json!({
        "source": "testsrc width=64 height=48 num-buffers=3 ! boxes format=synthetic count=1"
    })
    .to_string();
    let post = |headers: &str| {
        let request = format!(
            "POST /streams HTTP/1.1\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        raw(s.addr, request.as_bytes(), Duration::from_secs(10)).unwrap()
    };
    let host = format!("Host: {}\r\n", s.addr);
    // A simple cross-origin form post (no preflight) and a plain text one.
    for kind in [
        "",
        "Content-Type: text/plain\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
    ] {
        let reply = post(&format!("{host}{kind}"));
        assert_eq!(reply.status, 415, "{kind}: {reply:?}");
        assert!(reply.error().contains("application/json"), "{reply:?}");
    }
    let json = "Content-Type: application/json\r\n";
    // DNS rebinding: the page's own name in Host.
    let reply = post(&format!("Host: rebind.example:{}\r\n{json}", s.addr.port()));
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(reply.error().contains("Host 'rebind.example:"), "{reply:?}");
    assert_eq!(post(json).status, 403, "no Host at all");
    // A page of another origin.
    let reply = post(&format!("{host}{json}Origin: http://evil.example\r\n"));
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(
        reply.error().contains("Origin 'http://evil.example'"),
        "{reply:?}"
    );
    assert!(s.streams().is_empty());
    // The same origin, localhost by name, and a JSON type with its charset are fine.
    let origin = format!("Origin: http://{}\r\n", s.addr);
    assert_eq!(post(&format!("{host}{json}{origin}")).status, 201);
    let local = format!("Host: localhost:{}\r\n", s.addr.port());
    assert_eq!(
        post(&format!(
            "{local}Content-Type: application/json; charset=utf-8\r\n"
        ))
        .status,
        201
    );
}

#[test]
fn idle_and_trickling_clients_never_hold_up_health() {
    let (s, _dir) = station("slow", &[], &[]);
    let addr = s.addr;
    let idle: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // One client trickles its request a byte at a time (bounded: 40 bytes).
    let trickle = std::thread::spawn(move || {
        let mut conn = TcpStream::connect(addr).unwrap();
        let start = Instant::now();
        let mut cut_off = None;
        for b in b"GET /health HTTP/1.1\r\nX-Slow: aaaaaaaaaaa".iter() {
            if conn.write_all(&[*b]).is_err() {
                cut_off = Some(start.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        let closed = conn.read_to_end(&mut rest).is_ok();
        (
            cut_off.unwrap_or(start.elapsed()),
            closed,
            String::from_utf8_lossy(&rest).into_owned(),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..5 {
        let start = Instant::now();
        let reply = raw(
            addr,
            format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
            Duration::from_secs(1),
        );
        let took = start.elapsed();
        assert!(
            reply.as_ref().is_some_and(|r| r.status == 200) && took < Duration::from_secs(1),
            "/health took {took:?} with 150 idle and 1 trickling client: {reply:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (after, closed, said) = trickle.join().unwrap();
    assert!(closed, "the trickling client was cut off");
    assert!(said.is_empty() || said.contains("408"), "{said}");
    eprintln!("the trickling client was cut off after {after:?}");
    drop(idle);
}

#[test]
fn oversized_heads_and_bodies_are_refused() {
    let (s, _dir) = station("sizes", &[], &[]);
    let big = "a".repeat(1 << 20);
    let request = format!(
        "GET /health HTTP/1.1\r\nHost: {}\r\nX-Big: {big}\r\n\r\n",
        s.addr
    );
    let reply = raw(s.addr, request.as_bytes(), Duration::from_secs(10)).expect("an answer");
    assert_eq!(reply.status, 431, "{reply:?}");
    let request = format!("GET /{big} HTTP/1.1\r\nHost: {}\r\n\r\n", s.addr);
    let reply = raw(s.addr, request.as_bytes(), Duration::from_secs(10)).expect("an answer");
    assert!(matches!(reply.status, 414 | 431), "{reply:?}");
    let many: String = (0..200).map(|i| format!("X-H{i}: x\r\n")).collect();
    let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\n{many}\r\n", s.addr);
    let reply = raw(s.addr, request.as_bytes(), Duration::from_secs(10)).expect("an answer");
    assert_eq!(reply.status, 431, "{reply:?}");
    let body = "x".repeat(100 << 10);
    let reply = s.request("POST", "/streams", &body).unwrap();
    assert_eq!(reply.status, 413, "{reply:?}");
    assert_eq!(s.get("/health").unwrap().status, 200);
}

#[test]
fn connections_and_streams_are_capped() {
    let (s, _dir) = station(
        "caps",
        &["--max-connections", "8", "--max-streams", "2"],
        &[],
    );
    let live =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    assert_eq!(s.add(live, Some(1)).status, 201);
    assert_eq!(s.add(live, Some(2)).status, 201);
    let reply = s.add(live, Some(3));
    assert_eq!(reply.status, 429, "{reply:?}");
    assert!(reply.error().contains("--max-streams 2"), "{reply:?}");
    assert_eq!(
        s.request("DELETE", "/streams/1?mode=drop", "")
            .unwrap()
            .status,
        200
    );
    s.wait_state(1, "removed", Duration::from_secs(10));
    assert_eq!(s.add(live, Some(3)).status, 201);

    let held: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(s.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // Over the cap, /streams is a 503 at once; /health is still answered (round 2).
    let start = Instant::now();
    let reply = s.get("/streams");
    assert!(
        reply.as_ref().is_some_and(|r| r.status == 503) && start.elapsed() < Duration::from_secs(2),
        "over the cap: {reply:?} after {:?}",
        start.elapsed()
    );
    assert!(reply.unwrap().error().contains("too many connections"));
    assert_eq!(s.get("/health").unwrap().status, 200);
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.get("/streams").unwrap().status, 200);
}

#[test]
fn the_list_of_streams_is_bounded() {
    let (s, _dir) = station("list", &[], &[]);
    let file = "testsrc width=64 height=48 num-buffers=1 ! boxes format=synthetic count=1";
    for id in 0..5 {
        assert_eq!(s.add(file, Some(id)).status, 201);
    }
    let page = s.get("/streams?limit=2").unwrap();
    let ids: Vec<u64> = page
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(page.header("X-Next-After").as_deref(), Some("1"));
    let page = s.get("/streams?limit=2&after=1").unwrap();
    let ids: Vec<u64> = page
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [2, 3]);
    let last = s.get("/streams?after=3").unwrap();
    assert_eq!(last.json().as_array().unwrap().len(), 1);
    assert_eq!(last.header("X-Next-After"), None);
    assert_eq!(s.get("/streams?limit=0").unwrap().status, 400);
    assert_eq!(s.get("/streams?limit=x").unwrap().status, 400);
}

#[test]
fn credentials_in_uris_are_redacted_everywhere() {
    let dir = common::temp_dir("control-redact");
    let s = Station::start("redact", &dir, SINK, &[], &[]);
    let port = common::station::free_port();
    let source = format!(
        "media location=rtsp://admin:hunter2-pass@127.0.0.1:{port}/cam retry=1 retry-interval=0.1 ! boxes format=synthetic"
    );
    assert_eq!(s.add(&source, Some(9)).status, 201);
    let entry = s.stream(9);
    let shown = entry["source"].as_str().unwrap();
    assert!(
        shown.contains(&format!("rtsp://***@127.0.0.1:{port}/cam")),
        "{entry}"
    );
    let ended = s.wait_state(9, "failed", Duration::from_secs(30));
    assert!(!ended.to_string().contains("hunter2"), "{ended}");
    let (_, report, log) = s.stop();
    assert!(!report.to_string().contains("hunter2"), "{report}");
    assert!(!log.contains("hunter2"), "{log}");
    assert!(log.contains("rtsp://***@127.0.0.1"), "{log}");
}

#[test]
fn a_labels_file_is_read_within_its_cap() {
    let dir = common::temp_dir("control-labels");
    let big = dir.join("big.txt");
    std::fs::write(&big, "label\n".repeat(400_000)).unwrap();
    for (file, words) in [
        ("/dev/zero", ["labels-file", "not a regular file"]),
        (big.to_str().unwrap(), ["labels-file", "larger than"]),
    ] {
        let out = common::output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
                "run",
                &format!("testsrc num-buffers=1 ! detect model=/nonexistent.onnx labels-file={file} ! jsonl location=-"),
            ]),
            Duration::from_secs(20),
        );
        common::fails_with(&out, &words);
    }
}

#[test]
fn a_misspelt_stage_gets_the_command_lines_did_you_mean() {
    let (s, _dir) = station("typo", &[], &[]);
    let reply = s.add("testsrc num-buffers=5 ! boxs format=synthetic", None);
    assert_eq!(reply.status, 400, "{reply:?}");
    let e = reply.error();
    assert!(
        e.contains("unknown stage 'boxs' (did you mean 'boxes'?)")
            && !e.contains("--allow-element"),
        "{e}"
    );
    // An installed element stays the operator's to allow, misspelt stage or not.
    let reply = s.add("queue2 ! boxes format=synthetic", None);
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(
        reply.error().contains("--allow-element queue2"),
        "{reply:?}"
    );
    assert!(s.streams().is_empty(), "{:?}", s.streams());
}

#[test]
fn a_stream_over_http_takes_the_booleans_a_description_takes() {
    let (s, _dir) = station("booleans", &[], &[]);
    let reply = s.add(
        "testsrc live=maybe num-buffers=5 ! boxes format=synthetic",
        None,
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(
        reply.error().contains(
            "testsrc: live must be a boolean: true/false, yes/no, on/off, 1/0 (any case), found 'maybe'"
        ),
        "{reply:?}"
    );
    let reply = s.add(
        "testsrc live=On num-buffers=5 ! boxes format=synthetic",
        None,
    );
    assert_eq!(reply.status, 201, "{reply:?}");
}
