//! One failing stream never stops the station: a station with four healthy live streams takes,
//! one after the other, a stream failing in each way issue 24 found (a file that is not video,
//! a TCP server that went away, an RTSP camera that dropped, an RTSP server that accepts and
//! never answers, garbage packets on an RTP port); each failing stream ends alone with its
//! reason (`GET /streams`, the log, the report) while the healthy streams' frames keep
//! arriving in their JSONL. Loopback only; every loop is bounded.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::rtsp::RtspServer;
use common::station::{free_port, Station};

use gstreamer as gst;
use gstreamer::prelude::*;

/// Frames per stream in a JSONL of one line per frame (`count=1` boxes).
fn frames(jsonl: &Path) -> BTreeMap<u64, u64> {
    let text = std::fs::read_to_string(jsonl).unwrap_or_default();
    let mut n = BTreeMap::new();
    // The last line may be cut short while the sink writes: whole lines only.
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            *n.entry(v["stream"].as_u64().unwrap()).or_insert(0) += 1;
        }
    }
    n
}

/// Streams `ids` gain at least 10 frames each within 5 s of `before`.
fn keep_going(jsonl: &Path, ids: &[u64], after: &str) {
    let before = frames(jsonl);
    let start = Instant::now();
    loop {
        let now = frames(jsonl);
        let behind: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| {
                now.get(id).copied().unwrap_or(0) < before.get(id).copied().unwrap_or(0) + 10
            })
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "after {after}: streams {behind:?} stopped ({before:?} -> {now:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `n` UDP packets of junk to 127.0.0.1:`port`: half random bytes, half with a plausible RTP
/// header (version 2, payload type 96) and a random payload, so the depayloader and the
/// decoder both get garbage.
fn garbage(port: u16, n: u32, seed: u64) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..n {
        let len = 12 + (next() % 1200) as usize;
        let mut packet: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 {
            packet[0] = 0x80;
            packet[1] = 96;
        }
        socket.send_to(&packet, ("127.0.0.1", port)).unwrap();
    }
}

/// Send `frames` frames of H.264 over RTP to 127.0.0.1:`port` at 30 fps; returns when done.
fn send(port: u16, frames: u32) {
    gst::init().unwrap();
    let sender = gst::parse::launch(&format!(
        "videotestsrc is-live=true num-buffers={frames} pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=10 ! rtph264pay config-interval=1 pt=96 \
         ! udpsink host=127.0.0.1 port={port} sync=true"
    ))
    .unwrap();
    sender.set_state(gst::State::Playing).unwrap();
    let msg = sender.bus().unwrap().timed_pop_filtered(
        gst::ClockTime::from_seconds(60),
        &[gst::MessageType::Eos, gst::MessageType::Error],
    );
    sender.set_state(gst::State::Null).unwrap();
    assert!(matches!(
        msg.map(|m| m.type_()),
        Some(gst::MessageType::Eos)
    ));
}

/// A TCP server that accepts connections and never says a word (an RTSP server that hung):
/// it holds what it accepted until dropped.
struct Silent {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok((conn, _)) = listener.accept() {
                    held.push(conn);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Silent {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An MPEG-TS file of `frames` frames of H.264.
fn ts_file(dir: &Path, frames: u32) -> PathBuf {
    let path = dir.join("stream.ts");
    common::encode(&format!(
        "videotestsrc num-buffers={frames} pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc key-int-max=10 ! mpegtsmux ! filesink location={}",
        path.display()
    ));
    path
}

fn prerequisites() -> bool {
    [
        "x264enc",
        "rtspsrc",
        "tsdemux",
        "avdec_h264",
        "rtph264depay",
    ]
    .iter()
    .all(|e| {
        common::element_or_skip(
            e,
            "gstreamer1.0-plugins-{good,bad,ugly}, gstreamer1.0-libav",
        )
    })
}

#[test]
fn a_station_keeps_its_healthy_streams_through_every_kind_of_failing_stream() {
    if !prerequisites() {
        return;
    }
    let dir = common::temp_dir("isolation-station");
    let jsonl = dir.join("out.jsonl");
    std::fs::write(dir.join("not-video.mp4"), "this is not video\n".repeat(100)).unwrap();
    let ts = std::fs::read(ts_file(&dir, 30)).unwrap();
    let allow = dir.display().to_string();
    // The RTP port of step 5: a station takes streams over HTTP on UDP ports it lists only.
    let rtp_port = free_port();
    let s = Station::start(
        "station",
        &dir,
        &format!("batch max-frames=8 ! jsonl location={}", jsonl.display()),
        &[
            "--allow-dir",
            &allow,
            "--allow-element",
            "tcpclientsrc,tsdemux,h264parse,avdec_h264",
            "--allow-udp-port",
            &rtp_port.to_string(),
        ],
        &[],
    );
    // An RTSP server that accepts and never answers, with the default first-frame timeout:
    // looked at last (it takes its 20 s).
    let hung = Silent::start();
    let hung_uri = format!("rtsp://127.0.0.1:{}/cam", hung.port);
    assert_eq!(
        s.add(
            &format!("media location={hung_uri} ! boxes format=synthetic count=1"),
            Some(20)
        )
        .status,
        201
    );
    let added = Instant::now();
    let healthy =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    for id in 0..4 {
        assert_eq!(s.add(healthy, Some(id)).status, 201);
    }
    let ids = [0, 1, 2, 3];
    keep_going(&jsonl, &ids, "start");
    let failed = |id: u32, words: &[&str]| {
        let entry = s.wait_state(id, "failed", Duration::from_secs(30));
        let error = entry["error"].as_str().unwrap_or_default().to_string();
        for w in words {
            assert!(error.contains(w), "stream {id}: {w:?} not in {entry}");
        }
        error
    };

    // 1. A file that is not video: refused before it is added (issue 52: a 400, not a 201
    // then failed).
    let reply = s.add(
        &format!("media location={allow}/not-video.mp4 ! boxes format=synthetic count=1"),
        Some(10),
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(
        reply.error().contains("not-video.mp4")
            && reply
                .error()
                .contains("GStreamer cannot tell what kind of file it is"),
        "{reply:?}"
    );
    keep_going(&jsonl, &ids, "a file that is not video");

    // 2. A TCP server that goes away after one connection.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(&ts).unwrap();
    });
    let reply = s.add(
        &format!(
            "tcpclientsrc host=127.0.0.1 port={port} ! tsdemux ! h264parse ! avdec_h264 \
             ! head retry=2 retry-interval=0.2 ! boxes format=synthetic count=1"
        ),
        Some(11),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    server.join().unwrap();
    failed(11, &["tcpclientsrc", "after 2 reconnects"]);
    keep_going(&jsonl, &ids, "a TCP server that went away");

    // 3. An RTSP camera that drops.
    let rtsp_port = free_port();
    let camera = RtspServer::start(rtsp_port);
    let uri = format!("rtsp://127.0.0.1:{rtsp_port}/test");
    let reply = s.add(
        &format!(
            "media location={uri} retry=2 retry-interval=0.2 ! boxes format=synthetic count=1"
        ),
        Some(12),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    s.wait_frames(12, 10, Duration::from_secs(20));
    camera.stop();
    failed(12, &[&uri]);
    keep_going(&jsonl, &ids, "an RTSP camera that dropped");

    // 4. An RTSP server that accepts and never answers: its first-frame timeout.
    let silent = Silent::start();
    let silent_uri = format!("rtsp://127.0.0.1:{}/cam", silent.port);
    let reply = s.add(
        &format!("media location={silent_uri} start-timeout=2 ! boxes format=synthetic count=1"),
        Some(13),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    failed(13, &[&silent_uri, "no first frame in 2 s (start-timeout=2"]);
    keep_going(&jsonl, &ids, "an RTSP server that never answered");

    // 5. Garbage on an RTP port: dropped, reported, never fatal; then real frames go through.
    let reply = s.add(
        &format!(
            "rtp address=127.0.0.1 port={rtp_port} encoding=h264 ! boxes format=synthetic count=1"
        ),
        Some(14),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    std::thread::sleep(Duration::from_millis(300));
    garbage(rtp_port, 150, 24);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(s.stream(14)["state"], "running", "{}", s.stream(14));
    keep_going(&jsonl, &ids, "garbage on an RTP port");
    send(rtp_port, 60);
    let got = frames(&jsonl).get(&14).copied().unwrap_or(0);
    assert!(
        got >= 50,
        "the RTP stream after the garbage: {got} of 60 frames"
    );
    assert_eq!(s.request("DELETE", "/streams/14", "").unwrap().status, 200);

    // The hung server of the start, with the default timeout.
    let error = failed(20, &[&hung_uri, "start-timeout=20"]);
    let took = added.elapsed();
    assert!(
        took < Duration::from_secs(40),
        "the hung server's stream ended after {took:?}: {error}"
    );
    keep_going(&jsonl, &ids, "the hung RTSP server");
    drop((hung, silent));

    let health = s.get("/health").unwrap().json();
    assert_eq!(health["streams"], 4, "{health}");
    let (status, report, log) = s.stop();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{log}");
    let extra = report["extra"].to_string();
    for id in [11, 12, 13, 20] {
        let said = format!("stream {id} failed: ");
        assert!(
            extra.contains(&said),
            "{said} not in the report's lines: {extra}"
        );
        assert!(log.contains(&said), "{said} not in the log:\n{log}");
    }
    assert!(extra.contains("stream 14: garbage"), "{extra}");
    for row in report["streams"].as_array().unwrap() {
        let dropped: u64 = row["dropped"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(
            row["frames_in"].as_u64().unwrap(),
            row["processed"].as_u64().unwrap() + dropped,
            "{row}"
        );
    }
}

/// `octopipe run TEXT` in the background, stderr to a file.
fn spawn_run(text: &str, log: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", text, "--progress", "off"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

#[test]
fn a_run_ends_with_its_failed_stream_only_after_the_healthy_one_finished() {
    let dir = common::temp_dir("isolation-run");
    let bad = dir.join("not-video.mp4");
    std::fs::write(&bad, "this is not video\n".repeat(100)).unwrap();
    let out = dir.join("out.jsonl");
    let text = format!(
        "testsrc width=64 height=48 live=true num-buffers=45 ! boxes format=synthetic count=1 ! mux.\n\
         media location={} ! boxes format=synthetic count=1 ! mux.\n\
         batch name=mux ! jsonl location={}",
        bad.display(),
        out.display()
    );
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text, "--progress", "off"]),
        Duration::from_secs(30),
    );
    let stderr = common::fails_with(&run, &[&format!("octopipe: error: {}", bad.display())]);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    // A live source may drop its oldest frames on a loaded machine; it still
    // runs to its 45th frame, and every frame it passed on reaches the file.
    let row = stream_row(&stderr, 0);
    assert_eq!(row[0], 45, "the healthy stream ran to its end:\n{stderr}");
    assert_eq!(row[0], row[1] + row[2], "{stderr}");
    assert_eq!(frames(&out).get(&0), Some(&row[1]), "{stderr}");
    assert!(
        row[1] >= 30,
        "the healthy stream lost most frames:\n{stderr}"
    );
    assert!(stderr.contains("stream 1 failed: "), "{stderr}");
}

/// `[in, processed, dropped]` of stream `id` in the report's per-stream table.
fn stream_row(report: &str, id: u64) -> [u64; 3] {
    let line = report
        .lines()
        .skip_while(|l| !l.starts_with("stream "))
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no row for stream {id}:\n{report}"));
    let n: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(3)
        .map(|v| v.parse().unwrap())
        .collect();
    [n[0], n[1], n[2]]
}

#[test]
fn garbage_rtp_packets_spend_no_retries_and_end_nothing() {
    if !prerequisites() {
        return;
    }
    let dir = common::temp_dir("isolation-garbage");
    let out = dir.join("out.jsonl");
    let log = dir.join("run.log");
    let port = free_port();
    let text = format!(
        "udpsrc address=127.0.0.1 port={port} caps=\"application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000\" \
         ! rtph264depay ! avdec_h264 ! head retry=1 ! boxes format=synthetic count=1 ! jsonl location={}",
        out.display()
    );
    let mut child = spawn_run(&text, &log);
    std::thread::sleep(Duration::from_millis(500));
    garbage(port, 150, 7);
    std::thread::sleep(Duration::from_secs(2));
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        child.try_wait().unwrap().is_none(),
        "150 garbage packets ended the run:\n{}",
        read_log()
    );
    // A live stream with bursts of garbage in it (50 packets every 1.5 s): frames are lost
    // around each burst at most.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bursts = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for k in 0..6 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1500));
                garbage(port, 50, 100 + k);
            }
        })
    };
    send(port, 240);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    bursts.join().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "garbage ended the run:\n{}",
        read_log()
    );
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    let log = read_log();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{log}");
    let got = frames(&out).get(&0).copied().unwrap_or(0);
    assert!(
        got >= 216,
        "{got} of 240 frames with garbage bursts in the stream:\n{log}"
    );
    assert!(
        !log.contains("reconnecting"),
        "garbage spent no retries:\n{log}"
    );
    assert!(log.contains("stream 0: garbage"), "{log}");
}

#[test]
fn a_server_that_accepts_and_never_answers_ends_the_run_naming_it() {
    if !common::element_or_skip("rtspsrc", "gstreamer1.0-plugins-good") {
        return;
    }
    let silent = Silent::start();
    let uri = format!("rtsp://127.0.0.1:{}/cam", silent.port);
    let started = Instant::now();
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "media location={uri} ! boxes format=synthetic count=1 ! jsonl location=/dev/null"
            ),
            "--progress",
            "off",
        ]),
        Duration::from_secs(45),
    );
    let took = started.elapsed();
    common::fails_with(
        &run,
        &[&format!(
            "octopipe: error: {uri}: no first frame in 20 s (start-timeout=20"
        )],
    );
    assert!(took < Duration::from_secs(30), "ended after {took:?}");
}
