//! Live input over loopback RTP: a GStreamer sender inside the test, octopipe receiving with a
//! GStreamer launch head. Live frames flow; when a stage is too slow, the oldest frames are dropped
//! at the source edge and counted, and latency stays bounded.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use octopipe::budget::Report;
use octopipe::pipeline::Pipeline;

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
        config
            .nodes
            .iter()
            .all(|n| n.queue == octopipe::pipeline::Queue::LIVE),
        "live edges are short and drop the oldest"
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
    let r = receive(&model, &out, 4, 60);
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
        objects[0]["source"].as_str().unwrap().starts_with("udpsrc"),
        "{}",
        objects[0]
    );
}

#[test]
fn a_slow_stage_drops_the_oldest_live_frames_and_latency_stays_bounded() {
    let Some(model) = model() else { return };
    let out = common::temp_dir("rtp-slow").join("o.jsonl");
    // ~300 crops per frame through the real classifier: several times slower than 30 fps here.
    let r = receive(&model, &out, 300, 60);
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
