//! A station an operator can alert on (issue 52): a failed stream's series in `/metrics` and its
//! count in `/health` until it is removed, one audit line per add and remove, the delivery
//! line of a broker sink after SIGTERM with no broker, `--metrics-addr PORT`'s hint, progress
//! lines when stderr is no terminal, outputs locked against a second process, and a media file
//! GStreamer cannot tell the type of refused before it is added. Loopback only; every loop is
//! bounded.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::station::{free_port, Station};

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

/// The lines of `body` that name stream `id`.
fn series_of(body: &str, id: u32) -> Vec<&str> {
    let label = format!("stream=\"{id}\"");
    body.lines().filter(|l| l.contains(&label)).collect()
}

/// `/health` as JSON (its status must be 200).
fn health(s: &Station) -> serde_json::Value {
    let reply = s.get("/health").expect("an answer to /health");
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()
}

#[test]
fn a_failed_stream_is_in_metrics_and_health_until_removed_and_each_change_is_logged() {
    let dir = common::temp_dir("alerts-failed");
    let s = Station::start("failed", &dir, SINK, &[], &[]);
    let live =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    assert_eq!(s.add(live, Some(3)).status, 201);
    let port = free_port();
    let failing = format!(
        "media location=rtsp://admin:hunter2-pass@127.0.0.1:{port}/cam retry=1 retry-interval=0.1 ! boxes format=synthetic"
    );
    assert_eq!(s.add(&failing, Some(9)).status, 201);
    s.wait_state(9, "failed", Duration::from_secs(30));

    let body = s.get("/metrics").unwrap().body;
    assert!(
        body.contains("octopipe_stream_up{stream=\"3\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_stream_up{stream=\"9\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_stream_failed{stream=\"9\",reason=\"unreachable\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_streams{state=\"failed\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_streams{state=\"running\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_stream_failures{reason=\"unreachable\"} 1"),
        "{body}"
    );
    let h = health(&s);
    assert_eq!(
        (
            h["status"].as_str(),
            h["streams"].as_u64(),
            h["failed"].as_u64()
        ),
        (Some("degraded"), Some(1), Some(1)),
        "{h}"
    );

    let reply = s.request("DELETE", "/streams/9", "").unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    s.wait_state(9, "removed", Duration::from_secs(10));
    let body = s.get("/metrics").unwrap().body;
    assert_eq!(series_of(&body, 9), Vec::<&str>::new(), "{body}");
    assert!(
        body.contains("octopipe_streams{state=\"failed\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("octopipe_streams{state=\"removed\"} 1"),
        "{body}"
    );
    assert!(!body.contains("octopipe_stream_failures{"), "{body}");
    let h = health(&s);
    assert_eq!(
        (h["status"].as_str(), h["failed"].as_u64()),
        (Some("running"), Some(0)),
        "{h}"
    );

    let (_, _, log) = s.stop();
    let added = log
        .lines()
        .find(|l| l.contains("stream 9 added by 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no audit line of the add:\n{log}"));
    assert!(
        added.contains(&format!("rtsp://***@127.0.0.1:{port}/cam")),
        "{added}"
    );
    assert!(
        log.contains("stream 3 added by 127.0.0.1:"),
        "one line per add:\n{log}"
    );
    let removed = log
        .lines()
        .find(|l| l.contains("stream 9 removed by 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no audit line of the removal:\n{log}"));
    assert!(
        removed.contains("mode=drain") && removed.contains("rtsp://***@"),
        "{removed}"
    );
    assert!(!log.contains("hunter2"), "{log}");
}

#[test]
fn streams_that_end_and_are_never_removed_leave_a_bounded_page_and_are_counted() {
    let dir = common::temp_dir("alerts-ended");
    let s = Station::start("ended", &dir, SINK, &[], &[]);
    let n = octopipe::control::KEPT_ENDED as u32 + 8;
    for id in 0..n {
        let short = "testsrc width=64 height=48 num-buffers=2 ! boxes format=synthetic count=1";
        assert_eq!(s.add(short, Some(id)).status, 201);
        s.wait_state(id, "ended", Duration::from_secs(20));
    }
    // The last end is told to the metrics once its threads ended: wait for the page to settle.
    let start = Instant::now();
    let body = loop {
        let body = s.get("/metrics").unwrap().body;
        let up = body
            .lines()
            .filter(|l| l.starts_with("octopipe_stream_up{"))
            .count();
        if up <= octopipe::control::KEPT_ENDED {
            break body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{up} streams' series:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        body.contains(&format!("octopipe_streams{{state=\"ended\"}} {n}")),
        "{body}"
    );
    assert_eq!(
        series_of(&body, 0),
        Vec::<&str>::new(),
        "the oldest went: {body}"
    );
    assert!(
        body.contains(&format!("octopipe_stream_up{{stream=\"{}\"}} 0", n - 1)),
        "the newest stays: {body}"
    );
}

#[test]
fn a_media_file_of_no_type_gstreamer_can_tell_is_a_400_before_it_is_added() {
    let dir = common::temp_dir("alerts-typefind");
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let empty = allowed.join("empty.mp4");
    std::fs::write(&empty, b"").unwrap();
    // Bytes of no format: a simple generator, the same every run.
    let mut x: u32 = 0x1234_5678;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    let garbage = allowed.join("garbage.mp4");
    std::fs::write(&garbage, noise).unwrap();
    let allow = allowed.display().to_string();
    let s = Station::start("typefind", &dir, SINK, &["--allow-dir", &allow], &[]);
    for (file, words) in [
        (&empty, "the file is empty"),
        (&garbage, "GStreamer cannot tell what kind of file it is"),
    ] {
        let source = format!("media location={} ! boxes format=synthetic", file.display());
        let reply = s.add(&source, None);
        assert_eq!(reply.status, 400, "{}: {reply:?}", file.display());
        let error = reply.error();
        assert!(
            error.contains(&file.display().to_string()) && error.contains(words),
            "{error}"
        );
    }
    assert_eq!(s.streams().len(), 0, "nothing added");
    // A real video is still taken.
    let video = allowed.join("real.avi");
    common::encode(&format!(
        "videotestsrc num-buffers=10 ! video/x-raw,width=64,height=48 ! jpegenc ! avimux ! filesink location={}",
        video.display()
    ));
    let reply = s.add(
        &format!(
            "media location={} ! boxes format=synthetic",
            video.display()
        ),
        None,
    );
    assert_eq!(reply.status, 201, "{reply:?}");
}

#[test]
fn a_port_alone_as_metrics_addr_gets_a_hint() {
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            "testsrc num-buffers=1 ! boxes format=synthetic ! batch ! jsonl location=/dev/null",
            "--metrics-addr",
            "9185",
        ]),
        Duration::from_secs(30),
    );
    common::fails_with(
        &out,
        &["--metrics-addr 9185", "did you mean 127.0.0.1:9185?"],
    );
}

#[test]
fn progress_lines_come_when_stderr_is_no_terminal() {
    // A run of 11 s: `--progress auto` (the default) writes a line every 10 s to a log.
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args([
                "run",
                "testsrc width=64 height=48 framerate=10 live=true num-buffers=112 ! boxes format=synthetic count=1 ! batch ! jsonl location=/dev/null",
            ])
            .stdin(Stdio::null()),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress "))
        .collect();
    // One at 10 s, one at the end.
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].contains("frames "), "{stderr}");
    // A short run adds none, and `never` none at all.
    for args in [&["--progress", "auto"][..], &["--progress", "never"][..]] {
        let out = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_octopipe"))
                .args([
                    "run",
                    "testsrc width=64 height=48 num-buffers=3 ! boxes format=synthetic count=1 ! batch ! jsonl location=/dev/null",
                ])
                .args(args),
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("progress "), "{args:?}: {stderr}");
    }
}

#[test]
fn a_file_a_running_station_writes_is_refused_to_a_second_process_even_with_force() {
    let dir = common::temp_dir("alerts-lock");
    let out = dir.join("objects.jsonl");
    let sink = format!("batch max-frames=4 ! jsonl location={}", out.display());
    let s = Station::start("lock", &dir, &sink, &[], &[]);
    let live =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    assert_eq!(s.add(live, Some(1)).status, 201);
    let start = Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "nothing written");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = std::fs::metadata(&out).unwrap().len();
    let second = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "testsrc num-buffers=2 ! boxes format=synthetic ! batch ! jsonl location={}",
                out.display()
            ),
            "--force",
        ]),
        Duration::from_secs(30),
    );
    common::fails_with(&second, &["objects.jsonl", "another running process"]);
    let after = std::fs::metadata(&out).unwrap().len();
    assert!(
        after >= before,
        "the file was emptied: {before} -> {after} bytes"
    );
    let (_, _, log) = s.stop();
    let text = std::fs::read(&out).unwrap();
    assert!(!text.contains(&0u8), "NUL bytes in the output\n{log}");
    // Once the station is gone, --force replaces it.
    let third = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "testsrc num-buffers=2 ! boxes format=synthetic ! batch ! jsonl location={}",
                out.display()
            ),
            "--force",
        ]),
        Duration::from_secs(30),
    );
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
}

#[cfg(feature = "mqtt")]
#[test]
fn sigterm_with_no_broker_still_reports_what_became_of_the_messages() {
    let dir = common::temp_dir("alerts-delivery");
    // Nobody listens on this port: the sink holds its messages and connects again and again.
    let port = free_port();
    let sink = format!("batch max-frames=4 ! mqtt port={port} qos=1");
    let s = Station::start("delivery", &dir, &sink, &[], &[]);
    let live =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    assert_eq!(s.add(live, Some(1)).status, 201);
    let start = Instant::now();
    while s.stream(1)["processed"].as_u64().unwrap_or(0) < 5 {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, report, log) = s.stop();
    let brokers = report["sections"]["brokers"].as_array().cloned();
    let brokers = brokers.unwrap_or_else(|| panic!("no delivery section: {report}\n{log}"));
    assert_eq!(brokers.len(), 1, "{report}");
    let b = &brokers[0];
    assert_eq!(b["broker"], format!("mqtt 127.0.0.1:{port}"), "{b}");
    assert_eq!(b["delivered"], 0, "{b}");
    let messages = b["messages"].as_u64().unwrap();
    assert!(messages >= 5, "{b}");
    let accounted = [
        "delivered",
        "unmatched",
        "dropped_buffer_full",
        "dropped_too_large",
        "outstanding",
    ]
    .iter()
    .map(|k| b[k].as_u64().unwrap())
    .sum::<u64>();
    assert_eq!(accounted, messages, "{b}");
}

#[test]
fn f16_crops_into_a_float32_classifier_are_refused_at_the_start() {
    if !common::ort_ready() {
        return;
    }
    let model = common::root().join("tests/data/models/valid-64.onnx");
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "testsrc width=64 height=48 num-buffers=2 ! boxes format=synthetic count=1 ! batch ! preprocess dtype=f16 ! classify model={} ! jsonl location=-",
                model.display()
            ),
        ]),
        Duration::from_secs(60),
    );
    let stderr = common::fails_with(
        &out,
        &[
            "valid-64.onnx",
            "it takes float32 crops, but the preprocess stage before it makes f16",
            "give preprocess dtype=f32",
        ],
    );
    assert!(out.stdout.is_empty(), "no object written: {stderr}");
    assert!(!stderr.contains("inference failed"), "{stderr}");
}
