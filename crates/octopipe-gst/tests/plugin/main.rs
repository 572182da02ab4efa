//! The plugin's tests: real pipelines through its elements, registered in-process
//! (`gst::parse::launch`), and `gst-launch-1.0` / `gst-inspect-1.0` runs of the built
//! `libgstoctopipe.so`, on the shared VisDrone clip and model.

// The `analytics` feature's relation meta: runs against GStreamer 1.26 (scripts/gst126.sh), is
// ignored with the reason where the feature is not built.
mod analytics;
mod classifiers;
mod clip;
mod cuda;
mod cycles;
mod defaults;
mod docs;
mod errors;
mod in_flight;
mod inspect;
mod overlay;
mod roi;
mod shared;

use std::path::{Path, PathBuf};
use std::sync::Once;

use gstreamer as gst;
use gstreamer::prelude::*;

/// Initialise GStreamer and register the plugin in this process (once).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        gst::init().unwrap();
        gstoctopipe::plugin_register_static().unwrap();
    });
}

/// Run the tests of this binary one at a time: they measure the process's memory and time, and
/// each keeps the cores busy on its own.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Under CI a missing prerequisite is a failure, elsewhere a printed skip.
pub fn skip(reason: &str) -> bool {
    if std::env::var_os("CI").is_some() {
        panic!("prerequisite missing under CI: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    true
}

/// Whether GStreamer element `name` is missing here (skipped as [`skip`] does, saying `why`).
pub fn lacks_element(name: &str, why: &str) -> bool {
    gst::ElementFactory::find(name).is_none() && skip(&format!("{name} missing: {why}"))
}

/// Prints why a GPU test does not run here. CI has no GPU, so, unlike [`skip`], this never
/// fails under CI: the GPU tests run on the device (`scripts/device-gst-cuda.sh`).
pub fn skip_gpu(reason: &str) {
    eprintln!("SKIPPED (GPU test): {reason}");
}

/// The shared data folder (`$OCTOPIPE_DATA`, default `../shared/data` from the repository root).
pub fn data() -> Option<PathBuf> {
    let dir = std::env::var_os("OCTOPIPE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    if dir.join("visdrone/clip-9999999/images").is_dir() {
        return Some(dir);
    }
    skip(&format!(
        "shared data not found at {} (set OCTOPIPE_DATA: . scripts/env.sh)",
        dir.display()
    ));
    None
}

/// The shared data, with ONNX Runtime loadable (`ORT_DYLIB_PATH`, set by scripts/env.sh).
pub fn data_and_ort() -> Option<PathBuf> {
    let data = data()?;
    if let Err(e) = octopipe_onnx::onnx::environment() {
        skip(&format!(
            "ONNX Runtime not available: {e} (. scripts/env.sh)"
        ));
        return None;
    }
    Some(data)
}

/// The classifier's class names, in its class order.
pub const LABELS: &str = "person,two-wheeler,car,large-vehicle";

/// A folder of the clip's images as `00000.jpg`, `00001.jpg`, ... in name order (symbolic
/// links), for `multifilesrc location=DIR/%05d.jpg`; and how many.
pub fn numbered_clip(data: &Path, dir: &Path) -> usize {
    let images = data.join("visdrone/clip-9999999/images");
    let mut names: Vec<_> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    names.sort();
    std::fs::create_dir_all(dir).unwrap();
    for (i, p) in names.iter().enumerate() {
        let link = dir.join(format!("{i:05}.jpg"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(p, link).unwrap();
    }
    names.len()
}

/// A fresh temporary folder for `test`.
pub fn tmp(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("octopipe-gst-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `pipeline` to its end: `Ok` at EOS, `Err` with the first error's text (its source
/// element's name and the message and debug text).
pub fn run(pipeline: &gst::Pipeline) -> Result<(), String> {
    pipeline.set_state(gst::State::Playing).map_err(|e| {
        first_error(pipeline).unwrap_or_else(|| format!("state change failed: {e}"))
    })?;
    let bus = pipeline.bus().unwrap();
    let result = loop {
        let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_seconds(300),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) else {
            break Err("no EOS in 300 s".to_string());
        };
        match msg.view() {
            gst::MessageView::Eos(_) => break Ok(()),
            gst::MessageView::Error(e) => break Err(error_text(e)),
            _ => {}
        }
    };
    pipeline.set_state(gst::State::Null).unwrap();
    result
}

/// Each sample `pipeline` gives at its `appsink name=sink` as `read` reads it (at most 100,
/// each waited for at most 300 s), the pipeline played to its end; it must post no error
/// (`what` names it in the failure).
pub fn sink_samples<T>(
    pipeline: &gst::Pipeline,
    what: &str,
    mut read: impl FnMut(&gst::Sample) -> T,
) -> Vec<T> {
    let sink = pipeline
        .by_name("sink")
        .unwrap()
        .downcast::<gstreamer_app::AppSink>()
        .unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut samples = Vec::new();
    while let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(300)) {
        samples.push(read(&sample));
        assert!(samples.len() <= 100, "a bounded number of frames");
    }
    let error = first_error(pipeline);
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(error.is_none(), "{what}: {error:?}");
    samples
}

/// The first error message waiting on the pipeline's bus.
pub fn first_error(pipeline: &gst::Pipeline) -> Option<String> {
    let bus = pipeline.bus()?;
    let msg =
        bus.timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error])?;
    let gst::MessageView::Error(e) = msg.view() else {
        return None;
    };
    Some(error_text(e))
}

fn error_text(e: &gst::message::Error) -> String {
    format!(
        "{}: {} ({})",
        e.src().map(|s| s.name().to_string()).unwrap_or_default(),
        e.error(),
        e.debug().map(|d| d.to_string()).unwrap_or_default()
    )
}

/// The built plugin (`libgstoctopipe.so` beside the test binary's folder), in a folder of its
/// own for `GST_PLUGIN_PATH`; `None` (a skip) where it was not built.
pub fn plugin_dir() -> Option<PathBuf> {
    // `cargo test` builds the cdylib beside the test binary (target/PROFILE/deps).
    let exe = std::env::current_exe().unwrap();
    let so = exe.parent()?.join("libgstoctopipe.so");
    if !so.is_file() {
        skip(&format!(
            "{} not built (cargo build -p octopipe-gst)",
            so.display()
        ));
        return None;
    }
    let dir = tmp("plugin-path");
    std::os::unix::fs::symlink(&so, dir.join("libgstoctopipe.so")).unwrap();
    Some(dir)
}

/// A `gst-launch-1.0`/`gst-inspect-1.0` command that loads the plugin from `plugins` (with a
/// registry of its own, so the user's is left alone).
pub fn gst_command(tool: &str, plugins: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(tool);
    cmd.env("GST_PLUGIN_PATH", plugins)
        .env("GST_REGISTRY", plugins.join("registry.bin"))
        .env_remove("GST_DEBUG");
    cmd
}
/// The latency `element`'s src pad answers in `pipeline`: (live, min, max); fails the test
/// when the element does not answer.
pub fn latency_of(
    pipeline: &gst::Pipeline,
    element: &str,
) -> (bool, gst::ClockTime, Option<gst::ClockTime>) {
    let pad = pipeline
        .by_name(element)
        .unwrap()
        .static_pad("src")
        .unwrap();
    let mut q = gst::query::Latency::new();
    assert!(pad.query(&mut q), "{element} answers the latency query");
    q.result()
}

/// The clip's first `n` frames (`dir/frames/%05d.jpg`, made by [`numbered_clip`] or
/// `first_images`) encoded to H.264 in `dir/clip.mp4`, which it returns.
pub fn clip_h264(dir: &Path, n: usize) -> PathBuf {
    let mp4 = dir.join("clip.mp4");
    run(&gst::parse::launch(&format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
         ! jpegdec ! videoconvert ! video/x-raw,format=I420 ! x264enc speed-preset=ultrafast qp-max=20 \
         ! h264parse ! mp4mux ! filesink location={}",
        dir.join("frames").display(),
        n - 1,
        mp4.display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap())
    .unwrap();
    mp4
}

/// Six frames of 320x240 H.264 in `dir/six.mp4` and MOT rows for them in `dir/six.txt` (frame
/// index k has one box at x = 10 k), for the seek tests; `None` (a printed skip) where x264enc or
/// avdec_h264, which encode and decode them, is missing.
pub fn six_frames_with_boxes(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    for (element, package) in [
        ("x264enc", "gstreamer1.0-plugins-ugly"),
        ("avdec_h264", "gstreamer1.0-libav"),
    ] {
        if gst::ElementFactory::find(element).is_none()
            && skip(&format!("{element} missing: apt-get install {package}"))
        {
            return None;
        }
    }
    let mp4 = dir.join("six.mp4");
    run(&gst::parse::launch(&format!(
        "videotestsrc num-buffers=6 ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 \
         ! x264enc speed-preset=ultrafast ! h264parse ! mp4mux ! filesink location={}",
        mp4.display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap())
    .unwrap();
    let mot = dir.join("six.txt");
    let rows: String = (1..=6)
        .map(|k| format!("{k},1,{},10,20,20,1,4,0,0\n", 10 * k))
        .collect();
    std::fs::write(&mot, rows).unwrap();
    Some((mp4, mot))
}

/// The objects of a JSON Lines file.
pub fn objects(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
