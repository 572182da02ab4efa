//! Streams added and removed while a pipeline runs (`Pipeline::streams`): each joins the shared
//! batch stage, keeps its report row when removed, and hundreds of add/remove cycles under load
//! neither deadlock nor leak threads or memory.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use octopipe::pipeline::{RemoveMode, StreamInfo, StreamState, Streams};
use octopipe::stage::Registry;
use octopipe::Builtin;
use octopipe::{describe, AppBox, AppFrame, Outcome, Pipeline, PixelFormat};

/// One pipeline at a time (each starts many threads on a 2-core machine).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::serial()
}

/// Abort the whole test binary (a deadlock would otherwise hang the suite) unless `done` is
/// dropped within `limit`.
struct Watchdog {
    _done: crossbeam_channel::Sender<()>,
}

fn watchdog(what: &'static str, limit: Duration) -> Watchdog {
    let (tx, rx) = crossbeam_channel::bounded::<()>(0);
    std::thread::spawn(move || {
        if let Err(crossbeam_channel::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
            eprintln!("{what}: not done after {limit:?}: deadlock? aborting");
            std::process::abort();
        }
    });
    Watchdog { _done: tx }
}

/// A pipeline with no stream of its own, taking streams.
fn open(text: &str) -> (Pipeline, Streams) {
    let desc = describe::parse("<test>", text, &HashMap::new()).unwrap();
    let graph = describe::build_open(&desc, &Registry::builtin()).unwrap_or_else(|e| panic!("{e}"));
    let mut pipeline = Pipeline::build(graph).unwrap_or_else(|e| panic!("{e}"));
    let streams = pipeline.streams(&Registry::builtin()).unwrap();
    (pipeline, streams)
}

/// A 64x48 RGB frame with two boxes.
fn frame(k: u64) -> AppFrame {
    AppFrame::packed(PixelFormat::Rgb, 64, 48, vec![(k % 250) as u8; 64 * 48 * 3])
        .pts(Duration::from_millis(k * 33))
        .boxes([
            AppBox::new(2.0, 2.0, 20.0, 20.0),
            AppBox::new(30.0, 10.0, 16.0, 30.0),
        ])
}

/// (in, processed, dropped by reason) of each stream of the report.
fn rows(outcome: &Outcome) -> BTreeMap<u32, (u64, u64, BTreeMap<String, u64>)> {
    outcome
        .report
        .streams
        .iter()
        .map(|s| {
            let dropped = s.dropped.iter().cloned().collect();
            (s.stream, (s.frames_in, s.processed, dropped))
        })
        .collect()
}

#[test]
fn added_streams_join_the_batch_and_removed_ones_keep_their_rows() {
    let _one = serial();
    let _dog = watchdog("streams join", Duration::from_secs(60));
    let (mut pipeline, streams) = open("batch max-frames=4 ! appsink");
    let objects = pipeline.results(100_000);
    let running = std::thread::spawn(move || pipeline.run());
    let a = streams.add_text("app name=a", Some(7)).unwrap();
    let b = streams.add_text("app name=b", None).unwrap();
    assert_eq!((a.id, b.id), (7, 8));
    let e = streams
        .add_text("app name=c", Some(7))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("stream 7 exists already"), "{e}");
    let (a_app, b_app) = (a.app.unwrap(), b.app.unwrap());
    for k in 0..40 {
        a_app.push(frame(k)).unwrap();
        b_app.push(frame(k)).unwrap();
    }
    streams.remove(7, RemoveMode::Drain).unwrap();
    assert!(
        a_app.push(frame(40)).is_err(),
        "a removed stream takes no more frames"
    );
    // A testsrc stream of its own boxes, while b goes on.
    let t = streams
        .add_text(
            "testsrc width=64 height=48 num-buffers=30 ! boxes format=synthetic count=3",
            None,
        )
        .unwrap();
    assert_eq!(t.id, 9);
    for k in 40..60 {
        b_app.push(frame(k)).unwrap();
    }
    b_app.close();
    let start = Instant::now();
    let busy = |s: &StreamInfo| matches!(s.state, StreamState::Running | StreamState::Removing);
    while streams.list().iter().any(busy) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            streams.list()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = streams.list();
    let states: Vec<(u32, StreamState)> = list.iter().map(|s| (s.id, s.state)).collect();
    assert_eq!(
        states,
        [
            (7, StreamState::Removed),
            (8, StreamState::Ended),
            (9, StreamState::Ended)
        ]
    );
    assert_eq!(
        list[2].source,
        "testsrc width=64 height=48 num-buffers=30 ! boxes format=synthetic count=3"
    );
    streams.close();
    let outcome = running.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let rows = rows(&outcome);
    assert_eq!(rows[&7], (40, 40, BTreeMap::new()));
    assert_eq!(rows[&8], (60, 60, BTreeMap::new()));
    assert_eq!(rows[&9], (30, 30, BTreeMap::new()));
    let mut per_stream: BTreeMap<u32, u64> = BTreeMap::new();
    for o in objects.try_iter() {
        *per_stream.entry(o.stream).or_default() += 1;
    }
    assert_eq!(per_stream, BTreeMap::from([(7, 80), (8, 120), (9, 90)]));
    let report = outcome.report.to_string();
    assert!(
        report.contains("frames: 130 in = 130 processed + 0 dropped"),
        "{report}"
    );
    assert!(streams.add_text("app", None).is_err(), "the run is over");
}

#[test]
fn a_stream_described_wrong_is_refused_naming_why() {
    let _one = serial();
    let (_pipeline, streams) = open("batch ! appsink");
    for (text, words) in [
        (
            "testsrc ! boxes format=synthetic ! batch",
            "cannot come here: a stream added while running ends with its boxes",
        ),
        ("boxes format=synthetic", "a stream starts with its source"),
        ("testsrc", "the branch ends early"),
        (
            "testsrc ! boxes format=synthetic ! mux.",
            "joins the pipeline by itself",
        ),
        (
            "testsrc ! boxes format=synthetic ! boxes format=synthetic",
            "cannot be in a stream added while running",
        ),
        ("testsrc ! boxes formt=synthetic", "did you mean 'format'?"),
    ] {
        let e = streams
            .add_text(text, None)
            .err()
            .unwrap_or_else(|| panic!("{text} accepted"))
            .to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
    assert!(streams.list().is_empty(), "nothing was added");
    let e = streams
        .remove(3, RemoveMode::Drain)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "no stream 3");
}

#[test]
fn streams_are_added_and_removed_over_http() {
    let _one = serial();
    let _dog = watchdog("streams over HTTP", Duration::from_secs(60));
    let (mut pipeline, streams) = open("batch max-frames=4 ! appsink");
    let server = octopipe::observe::MetricsServer::serve("127.0.0.1:0").unwrap();
    pipeline.observe(server.observer());
    server.serve_streams(streams.clone()).unwrap();
    let addr = server.local_addr();
    let http = |method: &str, path: &str, body: &str| {
        let (status, body) = common::http(addr, method, path, body).expect("an answer");
        let json: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (status.trim_start_matches("HTTP/1.1 ").to_string(), json)
    };
    let running = std::thread::spawn(move || pipeline.run());
    let (status, health) = http("GET", "/health", "");
    assert_eq!(
        (status.as_str(), &health),
        (
            "200 OK",
            &serde_json::json!({"status": "running", "streams": 0, "failed": 0})
        )
    );

    let file = "testsrc width=64 height=48 num-buffers=20 ! boxes format=synthetic count=2";
    let live =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=2";
    let add = |source: &str, id: Option<u32>| {
        let mut body = serde_json::json!({ "source": source });
        if let Some(id) = id {
            body["id"] = id.into();
        }
        http("POST", "/streams", &body.to_string())
    };
    assert_eq!(
        add(file, Some(4)),
        ("201 Created".into(), serde_json::json!({"id": 4}))
    );
    assert_eq!(
        add(live, None),
        ("201 Created".into(), serde_json::json!({"id": 5}))
    );
    let (status, e) = add(file, Some(4));
    assert_eq!(status, "409 Conflict", "{e}");
    let (status, e) = add("testsrc ! boxes formt=synthetic", None);
    assert_eq!(status, "400 Bad Request");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("did you mean 'format'?"),
        "{e}"
    );
    let (status, e) = http("POST", "/streams", "{\"sauce\": 1}");
    assert_eq!(status, "400 Bad Request");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("expected {\"source\""),
        "{e}"
    );

    std::thread::sleep(Duration::from_millis(300));
    let (status, list) = http("GET", "/streams", "");
    assert_eq!(status, "200 OK");
    assert_eq!(list[1]["id"], 5);
    assert_eq!(list[1]["state"], "running");
    assert_eq!(list[1]["source"], live);
    assert!(list[1]["frames_in"].as_u64().unwrap() > 0, "{list}");
    let (status, health) = http("GET", "/health", "");
    assert_eq!(
        (status.as_str(), &health["streams"]),
        ("200 OK", &serde_json::json!(1))
    );

    assert_eq!(
        http("DELETE", "/streams/5?mode=sideways", "").0,
        "400 Bad Request"
    );
    assert_eq!(http("DELETE", "/streams/99", "").0, "404 Not Found");
    assert_eq!(http("DELETE", "/streams", "").0, "405 Method Not Allowed");
    let (status, removed) = http("DELETE", "/streams/5?mode=drop", "");
    assert_eq!(
        (status.as_str(), &removed),
        ("200 OK", &serde_json::json!({"id": 5, "mode": "drop"}))
    );
    let start = Instant::now();
    loop {
        let (_, list) = http("GET", "/streams", "");
        let states: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["state"].as_str().unwrap())
            .collect();
        if states == ["ended", "removed"] {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{list}");
        std::thread::sleep(Duration::from_millis(20));
    }
    streams.close();
    let outcome = running.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let rows = rows(&outcome);
    assert_eq!(rows[&4], (20, 20, BTreeMap::new()));
    let (frames_in, processed, dropped) = &rows[&5];
    assert_eq!(
        *frames_in,
        processed + dropped.values().sum::<u64>(),
        "{dropped:?}"
    );
    let (status, health) = http("GET", "/health", "");
    assert_eq!(
        (status.as_str(), &health),
        (
            "503 Service Unavailable",
            &serde_json::json!({"status": "finished"})
        )
    );
    assert_eq!(
        http(
            "POST",
            "/streams",
            &serde_json::json!({"source": file}).to_string()
        )
        .0,
        "503 Service Unavailable"
    );
}

/// Threads of this process and its resident memory in kB, from /proc/self/status (after the
/// allocator gave back what it holds free: freed memory is what matters, not its arenas).
fn threads_and_rss() -> (u64, u64) {
    // SAFETY: malloc_trim only releases free heap memory; it takes no pointer of ours.
    unsafe {
        libc::malloc_trim(0);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("Threads:"), field("VmRSS:"))
}

#[test]
fn hundreds_of_streams_come_and_go_under_load() {
    let _one = serial();
    let cycles = 300;
    let _dog = watchdog("add/remove stress", Duration::from_secs(240));
    // Frames of 128 kB and more get memory of their own, given back when freed: by default glibc
    // raises that threshold as such blocks are freed and then serves them from its arenas, which
    // keep their peak (RSS would measure the allocator's history, not what the run holds).
    // SAFETY: mallopt sets a tuning parameter of the allocator; no pointer is involved.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    let (mut pipeline, streams) =
        open("batch max-frames=8 max-crops=64 ! preprocess size=32x32 ! appsink");
    let objects = pipeline.results(16);
    // Read results as an application would, so the end of the pipeline keeps up.
    let reader = std::thread::spawn(move || objects.iter().count());
    let running = std::thread::spawn(move || pipeline.run());
    // The load: three live streams of 20 boxes each for the whole run.
    for id in 0..3 {
        let load = "testsrc width=320 height=240 live=true num-buffers=1000000 \
                    ! boxes format=synthetic count=20";
        streams.add_text(load, Some(id)).unwrap();
    }
    let mut pushed: BTreeMap<u32, u64> = BTreeMap::new();
    let mut dropped_mode: BTreeMap<u32, bool> = BTreeMap::new();
    // Up to 8 streams come and go at once besides the load; each is removed (drained or
    // dropped, in turn) when it is the oldest, running or already ended.
    let mut alive = std::collections::VecDeque::new();
    let mut warm = None;
    let start = Instant::now();
    for cycle in 0..cycles {
        let id = match cycle % 3 {
            0 => {
                // A stream the application feeds.
                let added = streams.add_text("app name=drone", None).unwrap();
                let app = added.app.unwrap();
                let n = (cycle % 7) as u64;
                for k in 0..n {
                    app.push(frame(k)).unwrap();
                }
                pushed.insert(added.id, n);
                added.id
            }
            1 => {
                // A live stream, removed while it gives frames.
                let text = "testsrc width=160 height=120 live=true num-buffers=100000 \
                            ! boxes format=synthetic count=8";
                streams.add_text(text, None).unwrap().id
            }
            _ => {
                // A file-like stream of 5 to 44 large frames, as fast as the pipeline takes them:
                // removed when done, or with frames waiting on its edges.
                let n = 5 + cycle % 40;
                let text = format!(
                    "testsrc width=640 height=480 num-buffers={n} ! boxes format=synthetic count=30"
                );
                streams.add_text(&text, None).unwrap().id
            }
        };
        dropped_mode.insert(id, cycle % 2 == 1);
        alive.push_back(id);
        if alive.len() > 8 {
            remove(&streams, alive.pop_front().unwrap(), &dropped_mode);
        }
        std::thread::sleep(Duration::from_millis(15));
        if cycle == 100 {
            settle(&streams, &mut alive, &dropped_mode);
            warm = Some(threads_and_rss());
        }
    }
    settle(&streams, &mut alive, &dropped_mode);
    let end = threads_and_rss();
    let elapsed = start.elapsed();
    for id in 0..3 {
        streams.remove(id, RemoveMode::Drain).unwrap();
    }
    streams.close();
    let outcome = running.join().unwrap();
    let objects = reader.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let (warm_threads, warm_rss) = warm.unwrap();
    eprintln!(
        "{cycles} add/remove cycles in {:.1} s; threads {warm_threads} -> {}, RSS {warm_rss} -> {} kB; {objects} objects",
        elapsed.as_secs_f64(),
        end.0,
        end.1
    );
    // Every stream's frames are accounted for, each by its own row.
    let rows = rows(&outcome);
    assert_eq!(
        rows.len(),
        3 + cycles as usize,
        "one row per stream ever added"
    );
    let removed = octopipe::pipeline::STREAM_REMOVED;
    for (id, (frames_in, processed, dropped)) in &rows {
        let total: u64 = dropped.values().sum();
        assert_eq!(frames_in, &(processed + total), "stream {id}: {dropped:?}");
        if let Some(n) = pushed.get(id) {
            assert_eq!(frames_in, n, "stream {id}: every frame pushed entered");
        }
        // Drops: frames of streams removed with mode=drop, and live streams' oldest frames.
        for reason in dropped.keys() {
            let drained = dropped_mode.get(id) != Some(&true);
            let ok = match reason == removed {
                true => !drained,
                false => reason.starts_with("live: oldest dropped"),
            };
            assert!(ok, "stream {id} (drained: {drained}): {dropped:?}");
        }
    }
    assert!(
        rows.values().take(3).all(|r| r.1 > 60),
        "the load ran: {:?}",
        &rows[&0]
    );
    let mut came_and_went = (0, 0, BTreeMap::<String, u64>::new());
    for (_, (frames_in, processed, dropped)) in rows.range(3..) {
        came_and_went.0 += frames_in;
        came_and_went.1 += processed;
        for (reason, n) in dropped {
            let reason = reason.split(" at ").next().unwrap_or(reason);
            *came_and_went.2.entry(reason.to_string()).or_default() += n;
        }
    }
    eprintln!("streams that came and went: {came_and_went:?} (in, processed, dropped)");
    assert!(
        came_and_went.1 > 1000,
        "the streams that came and went gave frames"
    );
    assert!(
        came_and_went.2.get(removed) > Some(&0),
        "mode=drop dropped frames"
    );
    // Flat: no thread kept per stream that came and went, and of memory only what a stream's
    // report row and record hold (about 2 kB each, measured: 2.3 MB over 900 streams).
    assert!(
        end.0 <= warm_threads + 2,
        "threads {warm_threads} -> {}",
        end.0
    );
    let kept = 8 * (cycles as u64 - 100);
    assert!(
        end.1 <= warm_rss + kept + 8192,
        "RSS {warm_rss} -> {} kB",
        end.1
    );
}

/// Remove stream `id`, dropping its frames or draining them as `dropped_mode` says.
fn remove(streams: &Streams, id: u32, dropped_mode: &BTreeMap<u32, bool>) {
    let mode = match dropped_mode[&id] {
        true => RemoveMode::Drop,
        false => RemoveMode::Drain,
    };
    streams.remove(id, mode).unwrap();
}

/// Remove the streams still `alive` and wait until only the load streams (0, 1, 2) run, so that
/// every other stream's threads ended and were joined.
fn settle(
    streams: &Streams,
    alive: &mut std::collections::VecDeque<u32>,
    dropped_mode: &BTreeMap<u32, bool>,
) {
    for id in alive.drain(..) {
        remove(streams, id, dropped_mode);
    }
    let start = Instant::now();
    loop {
        let list = streams.list();
        let busy: Vec<_> = list
            .iter()
            .filter(|s| {
                s.id >= 3 && matches!(s.state, StreamState::Running | StreamState::Removing)
            })
            .collect();
        if busy.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still busy: {busy:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
