//! Round 2 of the stream lifecycle as an attacker on loopback sees it (issue 38,
//! docs/security.md "Round 2 (issue 38): the control plane and stream lifecycle"): every stream
//! ends, a port is one stream's, ids and secrets. Loopback only; every loop is bounded.

use crate::common;

use std::time::Duration;

use common::rtsp::EndlessHeaders;
use common::station::{free_port, Station};

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

fn station(name: &str, args: &[&str]) -> Station {
    let dir = common::temp_dir(&format!("lifecycle-{name}"));
    Station::start(name, &dir, SINK, args, &[])
}

#[test]
fn two_streams_on_one_rtp_port_are_refused() {
    let (port, other_port) = (free_port(), free_port());
    let allowed = format!("{port},{other_port}");
    let s = station("port", &["--allow-udp-port", &allowed]);
    let rtp = format!("rtp address=127.0.0.1 port={port} ! boxes format=synthetic count=1");
    assert_eq!(s.add(&rtp, Some(1)).status, 201);
    let reply = s.add(&rtp, Some(2));
    assert_eq!(reply.status, 409, "{reply:?}");
    let e = reply.error();
    assert!(
        e.contains(&format!("UDP port {port}")) && e.contains("stream 1"),
        "{e}"
    );
    // Typed stages and a udp:// location name the same port.
    let typed = serde_json::json!({
        "stages": [{"stage": "rtp", "port": port}, {"stage": "boxes", "format": "synthetic"}]
    });
    let reply = s.request("POST", "/streams", &typed.to_string()).unwrap();
    assert_eq!(reply.status, 409, "{reply:?}");
    // Another port is fine; once the first is removed, its port is free again.
    let other = format!("rtp address=127.0.0.1 port={other_port} ! boxes format=synthetic count=1");
    assert_eq!(s.add(&other, Some(3)).status, 201);
    assert_eq!(s.request("DELETE", "/streams/1", "").unwrap().status, 200);
    s.wait_state(1, "removed", Duration::from_secs(15));
    assert_eq!(s.add(&rtp, Some(4)).status, 201);
}

#[test]
fn an_id_beyond_the_automatic_range_blocks_no_add() {
    let s = station("ids", &[]);
    let file = "testsrc width=64 height=48 num-buffers=2 ! boxes format=synthetic count=1";
    let reply = s.add(file, Some(u32::MAX));
    assert_eq!(reply.status, 201, "{reply:?}");
    for want in 0..3u64 {
        let reply = s.add(file, None);
        assert_eq!(reply.status, 201, "{reply:?}");
        assert_eq!(reply.json()["id"], want, "{reply:?}");
    }
    assert_eq!(s.add(file, Some(u32::MAX)).status, 409);
}

#[test]
fn secrets_in_uri_queries_are_redacted_everywhere() {
    // http allowed, so that the description below reaches the parser and its error.
    let s = station("secrets", &["--allow-scheme", "http"]);
    let port = free_port();
    let secret = "s3cret-Passphrase-42";
    let source = format!(
        "media location=srt://127.0.0.1:{port}?mode=caller&passphrase={secret}&latency=20 \
         retry=0 start-timeout=2 ! boxes format=synthetic"
    );
    assert_eq!(s.add(&source, Some(5)).status, 201);
    let entry = s.stream(5);
    let shown = entry["source"].as_str().unwrap();
    assert!(
        shown.contains("passphrase=***&latency=20") && !shown.contains(secret),
        "{entry}"
    );
    let ended = s.wait_state(5, "failed", Duration::from_secs(30));
    assert!(!ended.to_string().contains(secret), "{ended}");
    // An error that quotes the description hides it too.
    let bad =
        format!("media location=http://127.0.0.1:{port}/x.m3u8?token={secret} ! boxes formt=x");
    let reply = s.add(&bad, None);
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(!reply.body.contains(secret), "{reply:?}");
    let (_, report, log) = s.stop();
    assert!(!report.to_string().contains(secret), "{report}");
    assert!(!log.contains(secret), "{log}");
}

#[test]
fn a_server_that_sends_endless_headers_cannot_hold_a_stream() {
    // 1 KiB header lines after `200 OK`, at most 64 MiB per connection.
    let hostile = EndlessHeaders::start(64 << 20);
    let s = station("endless", &["--max-streams", "2"]);
    let uri = format!("rtsp://127.0.0.1:{}/cam", hostile.port);
    // Headers past the station's bound on an answer's head (64 KiB): the stream fails naming it,
    // before start-timeout.
    let source = format!("media location={uri} start-timeout=2 retry=0 ! boxes format=synthetic");
    let start = std::time::Instant::now();
    assert_eq!(s.add(&source, Some(1)).status, 201);
    let failed = s.wait_state(1, "failed", Duration::from_secs(20));
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("a message head of more than 65536 bytes"),
        "{failed}"
    );
    eprintln!("failed after {:?}: {error}", start.elapsed());
    // One with no start-timeout, removed: it ends (or is detached) within the remove deadline.
    let source = format!("media location={uri} start-timeout=0 retry=0 ! boxes format=synthetic");
    assert_eq!(s.add(&source, Some(2)).status, 201);
    std::thread::sleep(Duration::from_secs(2));
    let removed = std::time::Instant::now();
    assert_eq!(s.request("DELETE", "/streams/2", "").unwrap().status, 200);
    s.wait_state(
        2,
        "removed",
        octopipe::pipeline::REMOVE_DEADLINE + Duration::from_secs(5),
    );
    eprintln!("removed after {:?}", removed.elapsed());
    let live = "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic";
    assert_eq!(s.add(live, Some(3)).status, 201);
    assert_eq!(s.add(live, Some(4)).status, 201);
    drop(hostile);
}

#[test]
fn what_an_ended_stream_keeps_is_cut() {
    let s = station("kept", &[]);
    let port = free_port();
    // A 40 KB location of a server that is not there: the stream fails naming it.
    let path = "a".repeat(40_000);
    let source = format!(
        "media location=rtsp://127.0.0.1:{port}/{path} retry=0 start-timeout=1 ! boxes format=synthetic"
    );
    assert_eq!(s.add(&source, Some(1)).status, 201);
    let failed = s.wait_state(1, "failed", Duration::from_secs(30));
    let shown = failed["source"].as_str().unwrap();
    let error = failed["error"].as_str().unwrap();
    assert!(
        shown.len() < 600 && shown.contains("bytes in all"),
        "{} bytes: {shown}",
        shown.len()
    );
    assert!(error.len() < 1100, "{} bytes: {error}", error.len());
    let (_, report, _) = s.stop();
    let text = report.to_string();
    assert!(text.len() < 8_000, "the report keeps {} bytes", text.len());
}
