//! The station under an address-space cap (issue 38, docs/security.md "Round 2"): memory the
//! system refuses to a stream's frames is that stream's error, the station and its other
//! streams go on. A real `octopipe run --streams` on loopback, under `ulimit -v`; every loop is
//! bounded.

use crate::common;

use std::time::{Duration, Instant};

use common::station::{status_kb, Station};

/// A batch that holds a stream's frames for seconds: the big stream's frames pile up in it, each
/// a fresh copy out of the decoder, until the system refuses one.
const HOLDING: &str = "batch max-frames=256 max-wait-ms=3000 ! jsonl location=/dev/null";

/// Address space above the idle station's peak: room for the streams' threads, GStreamer's
/// buffers of the big stream (a few frames of 96 MiB) and the small stream, far less than the
/// big stream's frames in the batch (dozens of 96 MiB).
const MARGIN_KB: u64 = 1024 * 1024;

#[test]
fn a_frame_the_system_refuses_fails_its_stream_alone_under_an_address_space_cap() {
    let dir = common::temp_dir("control-capped");
    // The frames' estimate (the station's own check) lets the big stream in: the cap, not the
    // budget, refuses its memory (the default budget, half of what the cap leaves, would refuse
    // the stream itself: set out of the way).
    let args = ["--max-stream-memory", "8GiB", "--memory-budget", "64GiB"];
    // One malloc arena per thread would reserve 64 MiB of address space each: two, so that
    // the margin measures frames, not arenas.
    let env = [("MALLOC_ARENA_MAX", "2")];
    // ONNX Runtime, GStreamer and the threads reserve address space: measured, not guessed.
    let idle = Station::start("capped-idle", &dir, HOLDING, &args, &env);
    let peak = status_kb(idle.child.id(), "VmPeak:");
    assert!(peak > 0, "no VmPeak for the idle station");
    let (status, _, _) = idle.stop();
    assert_eq!(status.code(), Some(143), "{status:?}");
    let cap = peak + MARGIN_KB;
    eprintln!("idle station: VmPeak {peak} kB; cap {cap} kB");
    let s = Station::start_capped("capped", &dir, HOLDING, &args, &env, Some(cap));
    // 8192x8192 I420: 100663296 bytes a frame.
    let big = "testsrc width=8192 height=8192 pattern=black num-buffers=400 \
               ! boxes format=synthetic count=1";
    // Not live: none of its frames is dropped for being late on a busy machine.
    let small = "testsrc width=64 height=48 num-buffers=60 ! boxes format=synthetic count=1";
    assert_eq!(s.add(big, Some(1)).status, 201);
    assert_eq!(s.add(small, Some(2)).status, 201);
    // Both end, the station answering throughout.
    let start = Instant::now();
    let (big, small) = loop {
        let health = s.get("/health");
        assert_eq!(
            health.as_ref().map(|r| r.status),
            Some(200),
            "{health:?}\n{}",
            s.log()
        );
        let (b, m) = (s.stream(1), s.stream(2));
        if b["state"] != "running" && m["state"] != "running" {
            break (b, m);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "streams still running: {b} {m}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let error = big["error"].as_str().unwrap_or_default();
    eprintln!("big stream: {error}");
    assert_eq!(big["state"], "failed", "{big}");
    assert!(
        error.contains("(8192x8192 I420) needs 100663296 bytes, more than the memory this process may still take"),
        "{big}"
    );
    assert_eq!(small["state"], "ended", "{small}\n{}", s.log());
    // A clean stop: the exit status of SIGTERM (128 + 15), not of a signal that killed it.
    let (status, report, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
    let rows = report["streams"].as_array().unwrap();
    let small = rows.iter().find(|r| r["stream"] == 2);
    assert_eq!(
        small.map(|r| r["processed"].clone()),
        Some(60.into()),
        "{report}"
    );
}
