//! Live input over loopback (127.0.0.1 only): GStreamer senders and servers inside the test,
//! octopipe receiving with a GStreamer launch head. Live frames flow; when a stage is too slow,
//! the oldest frames are dropped at the source edge and counted, and latency stays bounded. A
//! source that goes quiet says so (and fails with `timeout-action=fail`); a network head whose
//! connection ends reconnects (TCP and RTSP servers that close and come back).

use crate::common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use octopipe::budget::{Report, StreamReport};
use octopipe::pipeline::Pipeline;
use octopipe::source::SourceError;

/// A free UDP port on 127.0.0.1.
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Send `frames` frames of H.264 over RTP to 127.0.0.1:`port` at 30 fps; returns when done.
fn send(port: u16, frames: u32) {
    gst::init().unwrap();
    let sender = gst::parse::launch(&format!(
        "videotestsrc is-live=true num-buffers={frames} pattern=ball ! video/x-raw,width=320,height=240,framerate=30/1 \
         ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=10 ! rtph264pay config-interval=1 pt=96 \
         ! udpsink host=127.0.0.1 port={port} sync=true"
    ))
    .unwrap();
    sender.set_state(gst::State::Playing).unwrap();
    let bus = sender.bus().unwrap();
    let msg = bus.timed_pop_filtered(
        gst::ClockTime::from_seconds(30),
        &[gst::MessageType::Eos, gst::MessageType::Error],
    );
    assert!(
        matches!(msg.map(|m| m.type_()), Some(gst::MessageType::Eos)),
        "sender did not finish"
    );
    sender.set_state(gst::State::Null).unwrap();
}

/// The launch head receiving H.264 over RTP on 127.0.0.1:`port`, written as octopipe names the
/// source in its messages.
fn rtp_head(port: u16) -> String {
    format!(
        "udpsrc address=127.0.0.1 port={port} caps=application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000 \
         ! rtph264depay ! avdec_h264"
    )
}

/// How often the source of `stream` had `event` (`reconnects`, `went quiet`).
fn events(stream: &StreamReport, event: &str) -> u64 {
    stream
        .events
        .iter()
        .find(|(e, _)| e == event)
        .map_or(0, |(_, n)| *n)
}

/// Receive with `count` synthetic boxes per frame, while the sender sends `frames` frames.
fn receive(model: &Path, out: &Path, count: u32, frames: u32) -> Report {
    let port = free_port();
    let text = format!(
        "udpsrc address=127.0.0.1 port={port} caps=\"application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000\" \
         ! rtph264depay ! avdec_h264 \
         ! boxes format=synthetic count={count} ! classify model={} ! jsonl location={}",
        model.display(),
        out.display()
    );
    let config = common::graph(&text);
    assert!(config.is_live(), "udpsrc is a live source");
    assert!(
        config.nodes.iter().all(|n| n.queue
            == match n.role.output() {
                Some(item) if item == octopipe::stage::Item::BATCHES =>
                    octopipe::pipeline::Queue::LIVE_BATCHES,
                _ => octopipe::pipeline::Queue::LIVE,
            }),
        "live frame edges hold one frame and drop the oldest; batch edges hold a few and block"
    );
    let pipeline = Pipeline::build(config).unwrap();
    let stop = pipeline.stop_handle();
    let run = std::thread::spawn(move || pipeline.run());
    std::thread::sleep(Duration::from_millis(300));
    send(port, frames);
    std::thread::sleep(Duration::from_millis(500));
    stop.stop();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    outcome.report
}

fn model() -> Option<std::path::PathBuf> {
    let data = common::shared_data()?;
    common::ort_ready().then(|| data.join("models/visdrone-crops-64.onnx"))
}

#[test]
fn live_rtp_frames_flow_through() {
    let Some(model) = model() else { return };
    let out = common::temp_dir("rtp").join("o.jsonl");
    let start = std::time::SystemTime::now();
    let r = receive(&model, &out, 4, 60);
    let end = std::time::SystemTime::now();
    eprintln!("{r}");
    assert!(
        r.frames_in >= 50,
        "most of the 60 frames sent arrive: {}",
        r.frames_in
    );
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    assert!(r.processed >= 40, "{r}");
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len() as u64, r.objects);
    assert!(
        objects[0]["source"]
            .as_str()
            .unwrap()
            .starts_with("octopipe:udpsrc%20"),
        "{}",
        objects[0]
    );
    // The capture time of each frame, from the source's clock: within the run, in frame order.
    common::timestamps_within(&objects, start, end);
}

#[test]
fn a_slow_stage_drops_the_oldest_live_frames_and_latency_stays_bounded() {
    let Some(model) = model() else { return };
    let out = common::temp_dir("rtp-slow").join("o.jsonl");
    // 900 crops per frame through the real classifier: 27,000 crops a second at 30 fps, about
    // three times what this 2-core machine classifies (300 a frame kept up at times: nothing
    // dropped).
    let r = receive(&model, &out, 900, 60);
    eprintln!("{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    let dropped: u64 = r
        .dropped
        .iter()
        .filter(|(reason, _)| reason.starts_with("live: oldest dropped at"))
        .map(|(_, n)| *n)
        .sum();
    assert!(dropped > 0 && r.processed > 0, "{r}");
    // Latency does not pile up: at most a few frames' work, never the whole backlog.
    assert!(
        r.total.p99 < Duration::from_millis(1500),
        "p99 {:?}\n{r}",
        r.total.p99
    );
}

#[test]
fn a_udp_source_with_no_sender_fails_after_its_timeout() {
    let out = common::temp_dir("udp-none").join("o.jsonl");
    let head = rtp_head(free_port());
    let text = format!(
        "{head} ! head timeout=1 timeout-action=fail ! boxes format=synthetic count=2 ! jsonl location={}",
        out.display()
    );
    let start = Instant::now();
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
        Duration::from_secs(20),
    );
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(took < Duration::from_secs(4), "took {took:?}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "octopipe: error: {head}: no frame in 1 s (timeout=1, timeout-action=fail): nothing was received; is the sender running?"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("source 0: failed: 1, went quiet: 1"),
        "{stderr}"
    );
    assert_eq!(common::frame_accounting(&stderr), (0, 0, 0), "{stderr}");
}

#[test]
fn a_udp_source_with_no_sender_warns_and_keeps_waiting() {
    let out = common::temp_dir("udp-wait").join("o.jsonl");
    let head = rtp_head(free_port());
    let text = format!(
        "{head} ! head timeout=0.5 ! boxes format=synthetic count=2 ! jsonl location={}",
        out.display()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", &text])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1800));
    assert!(child.try_wait().unwrap().is_none(), "it keeps waiting");
    let id = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &id])
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("still running 10 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{stderr}");
    for waited in ["0.5", "1"] {
        assert!(
            stderr.contains(&format!(
                "octopipe: warning: {head}: no frame yet after {waited} s (timeout=0.5): still waiting"
            )),
            "{stderr}"
        );
    }
    assert!(stderr.contains("source 0: went quiet: 1"), "{stderr}");
}

/// Run `text` (a live head ... ! appsink) on a thread; returns the stop handle, the frames
/// received so far (counted as batches arrive) and the run's outcome.
fn run_counting(
    text: &str,
) -> (
    octopipe::StopHandle,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::sync::mpsc::Receiver<octopipe::Outcome>,
) {
    use std::sync::atomic::Ordering;
    let mut pipeline = Pipeline::build(common::graph(text)).unwrap();
    let batches = pipeline.batches(64);
    let frames = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = frames.clone();
    std::thread::spawn(move || {
        for b in batches {
            counted.fetch_add(b.frames.len() as u64, Ordering::SeqCst);
        }
    });
    let stop = pipeline.stop_handle();
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(pipeline.run());
    });
    (stop, frames, outcome)
}

/// Wait until `frames` reaches `n` (false after `limit`).
fn wait_for(frames: &std::sync::atomic::AtomicU64, n: u64, limit: Duration) -> bool {
    let start = Instant::now();
    while frames.load(std::sync::atomic::Ordering::SeqCst) < n {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn a_sender_that_stops_mid_run_is_reported_then_fails_with_its_frames_accounted() {
    let port = free_port();
    // 2 s: the first frame must come in time though the sender starts after the receiver.
    let text = format!(
        "{} ! head timeout=2 timeout-action=fail ! boxes format=synthetic count=2 ! appsink",
        rtp_head(port)
    );
    let (_stop, _frames, outcome) = run_counting(&text);
    std::thread::sleep(Duration::from_millis(100));
    send(port, 30);
    let outcome = outcome
        .recv_timeout(Duration::from_secs(15))
        .expect("the run fails about 1 s after the sender stopped");
    let r = &outcome.report;
    match outcome
        .error
        .as_ref()
        .map(|e| e.downcast_ref::<SourceError>())
    {
        Some(Some(SourceError::Quiet { frames, .. })) => {
            assert!(*frames >= 20 && *frames == r.frames_in, "{frames}\n{r}")
        }
        _ => panic!("expected a timeout: {:?}", outcome.error),
    }
    let message = outcome.error.as_ref().unwrap().to_string();
    assert!(
        message.ends_with(&format!(
            "no frame for 2 s after {} frames (timeout=2, timeout-action=fail)",
            r.frames_in
        )),
        "{message}"
    );
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    assert_eq!(events(&r.streams[0], "went quiet"), 1, "{r}");
}

#[test]
fn a_udp_sender_that_pauses_is_reported_and_its_frames_come_again() {
    let port = free_port();
    let text = format!(
        "{} ! head timeout=0.5 ! boxes format=synthetic count=2 ! appsink",
        rtp_head(port)
    );
    let (stop, frames, outcome) = run_counting(&text);
    std::thread::sleep(Duration::from_millis(300));
    send(port, 20);
    std::thread::sleep(Duration::from_millis(1200));
    let before = frames.load(std::sync::atomic::Ordering::SeqCst);
    send(port, 20);
    assert!(
        wait_for(&frames, before + 10, Duration::from_secs(10)),
        "frames after the pause"
    );
    stop.stop();
    let outcome = outcome.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert!(r.frames_in >= 30, "{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    assert!(events(&r.streams[0], "went quiet") >= 1, "{r}");
    assert_eq!(events(&r.streams[0], "reconnects"), 0, "{r}");
}

/// An MPEG-TS file of `frames` H.264 frames, made by the test.
fn ts_file(dir: &Path, frames: u32) -> std::path::PathBuf {
    let path = dir.join("stream.ts");
    common::encode(&format!(
        "videotestsrc num-buffers={frames} pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc key-int-max=10 ! mpegtsmux ! filesink location={}",
        path.display()
    ));
    path
}

#[test]
fn a_tcp_head_with_a_demuxer_reconnects_when_the_server_closes() {
    let dir = common::temp_dir("tcp-reconnect");
    let frames_per_connection = 30;
    let data = std::fs::read(ts_file(&dir, frames_per_connection)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Serve the stream to two connections, closing each; then keep listening without serving
    // (a third connection waits quietly) until the test ends.
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut conn, _) = listener.accept().unwrap();
            std::io::Write::write_all(&mut conn, &data).unwrap();
        }
        listener
    });
    let text = format!(
        "tcpclientsrc host=127.0.0.1 port={port} ! tsdemux ! h264parse ! avdec_h264 \
         ! head retry=3 retry-interval=0.2 ! boxes format=synthetic count=2 ! appsink"
    );
    let (stop, frames, outcome) = run_counting(&text);
    let all = 2 * u64::from(frames_per_connection);
    let got = wait_for(&frames, all, Duration::from_secs(20));
    stop.stop();
    let outcome = outcome.recv_timeout(Duration::from_secs(10)).unwrap();
    let _listener = server.join().unwrap();
    let r = &outcome.report;
    assert!(got, "frames of both connections: {r}");
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!((r.frames_in, r.processed), (all, all), "{r}");
    assert!(events(&r.streams[0], "reconnects") >= 1, "{r}");
}

#[test]
fn a_network_head_with_nobody_listening_fails_after_its_retries() {
    let port = free_tcp_port();
    let head =
        format!("tcpclientsrc host=127.0.0.1 port={port} ! tsdemux ! h264parse ! avdec_h264");
    let text = format!(
        "{head} ! head retry=2 retry-interval=0.1 ! boxes format=synthetic ! jsonl location=-"
    );
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    for line in [
        format!("octopipe: warning: {head}: Could not open resource for reading.; reconnecting in 0.1 s (1 of 2 in a row)"),
        format!("octopipe: warning: {head}: Could not open resource for reading.; reconnecting in 0.2 s (2 of 2 in a row)"),
        format!("octopipe: error: {head}: Could not open resource for reading. (after 2 reconnects in a row)"),
        "source 0: failed: 1, reconnects: 2".to_string(),
    ] {
        assert!(stderr.contains(&line), "{line}\nin:\n{stderr}");
    }
}

/// A free TCP port on 127.0.0.1.
fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn an_rtsp_head_reconnects_when_the_server_restarts() {
    if !common::element_or_skip("rtspsrc", "gstreamer1.0-plugins-good")
        || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly")
    {
        return;
    }
    // The source's warnings (reconnects) show with --nocapture.
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let port = free_tcp_port();
    let server = common::rtsp::RtspServer::start(port);
    let text = format!(
        "rtspsrc location=rtsp://127.0.0.1:{port}/test protocols=tcp latency=0 \
         ! rtph264depay ! avdec_h264 ! head retry=10 retry-interval=0.3 \
         ! boxes format=synthetic count=1 ! appsink"
    );
    let (stop, frames, outcome) = run_counting(&text);
    let first = wait_for(&frames, 15, Duration::from_secs(20));
    server.stop();
    std::thread::sleep(Duration::from_millis(1000));
    let before = frames.load(std::sync::atomic::Ordering::SeqCst);
    let server = common::rtsp::RtspServer::start(port);
    let again = wait_for(&frames, before + 15, Duration::from_secs(30));
    stop.stop();
    let outcome = outcome.recv_timeout(Duration::from_secs(10)).unwrap();
    drop(server);
    let r = &outcome.report;
    assert!(
        first && again,
        "frames before ({first}) and after ({again}) the restart: {r}"
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert!(events(&r.streams[0], "reconnects") >= 1, "{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
}
