//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod messages;
pub mod mosquitto;
pub mod rtsp;
pub mod station;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One HTTP/1.1 request with a plain TcpStream: (status line, body); `None` when nothing
/// answers (a process that is gone).
pub fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let limit = std::time::Duration::from_secs(10);
    let mut conn = std::net::TcpStream::connect_timeout(&addr, limit).ok()?;
    conn.set_read_timeout(Some(limit)).unwrap();
    // A body is JSON, as the control plane takes it.
    let kind = match body.is_empty() {
        true => "",
        false => "Content-Type: application/json\r\n",
    };
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{kind}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Under CI a missing prerequisite is a failure, elsewhere a printed skip.
pub fn skip(reason: &str) -> bool {
    if std::env::var_os("CI").is_some() {
        panic!("prerequisite missing under CI: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    true
}

/// Whether `/dev/full` is the kernel's always-full device (every write fails with ENOSPC), for
/// tests of writes the system refuses; prints or (under CI) fails when it is not.
pub fn dev_full() -> bool {
    use std::os::unix::fs::FileTypeExt;
    let device = std::fs::metadata("/dev/full").is_ok_and(|m| m.file_type().is_char_device());
    device || !skip("/dev/full is not the kernel's full device here")
}

/// Whether GStreamer element `name` is installed; prints or (under CI) fails with the package
/// to install when not.
pub fn element_or_skip(name: &str, package: &str) -> bool {
    octopipe::source::element_exists(name)
        || !skip(&format!(
            "GStreamer element {name} missing: apt-get install {package}"
        ))
}

/// Whether a GPU is usable; prints why a GPU test (or its GPU part) skips when not. Never fails,
/// also under CI (which has no GPU).
pub fn gpu(test: &str) -> bool {
    match octopipe::preprocess::cuda::available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED {test}: no GPU ({why})");
            false
        }
    }
}

/// A `w`x`h` frame of `format` holding pseudo-random bytes, every plane's rows padded by 64 bytes
/// (as decoders and CUDA pitched allocations pad them); BT.709 for YUV formats.
pub fn random_frame(format: octopipe::PixelFormat, w: u32, h: u32, seed: u64) -> octopipe::Frame {
    let mut layout = octopipe::FrameLayout::packed(format, w, h);
    let mut offset = 0;
    for p in 0..format.planes() {
        let rows = if p == 0 { h } else { h.div_ceil(2) } as usize;
        layout.strides[p] += 64;
        layout.offsets[p] = offset;
        offset += layout.strides[p] * rows;
    }
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let data: Vec<u8> = (0..layout.size())
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let colorimetry = if format.is_yuv() {
        octopipe::Colorimetry::BT709
    } else {
        octopipe::Colorimetry::default()
    };
    octopipe::Frame::new(
        0,
        seed,
        "random",
        layout,
        colorimetry,
        octopipe::frame::PooledBuf::unpooled(data),
    )
}

/// The shared data folder (`$OCTOPIPE_DATA`, default `../shared/data`), if present.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("OCTOPIPE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/data"));
    if dir.join("visdrone/clip-9999999/images").is_dir() {
        Some(dir)
    } else {
        skip(&format!(
            "shared data not found at {} (set OCTOPIPE_DATA)",
            dir.display()
        ));
        None
    }
}

/// Whether ONNX Runtime loads (`ORT_DYLIB_PATH`); prints why not.
pub fn ort_ready() -> bool {
    match octopipe::onnx::environment() {
        Ok(_) => true,
        Err(e) => !skip(&format!("ONNX Runtime not available: {e}")),
    }
}

/// VisDrone category -> class of the shared and demo classifiers
/// (person, two-wheeler, car, large-vehicle).
pub fn class_of(category: u64) -> Option<u64> {
    match category {
        1 | 2 => Some(0),
        3 | 7 | 8 | 10 => Some(1),
        4 => Some(2),
        5 | 6 | 9 => Some(3),
        _ => None,
    }
}

/// Parse a JSONL file into objects.
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line {l:?}: {e}")))
        .collect()
}

/// The JSONL file's lines without each frame's wall-clock `timestamp` (each run's own), to
/// compare the objects of two runs line for line.
pub fn untimed_lines(path: &Path) -> Vec<String> {
    read_jsonl(path)
        .into_iter()
        .map(|mut o| {
            o.as_object_mut().map(|m| m.remove("timestamp"));
            o.to_string()
        })
        .collect()
}

/// Each object's `timestamp` read back: RFC 3339 in UTC with milliseconds
/// (`2026-11-27T16:02:11.042Z`), between `start` and `end` (the run), the same for the objects
/// of one frame and not decreasing from frame to frame of a stream.
pub fn timestamps_within(
    objects: &[serde_json::Value],
    start: std::time::SystemTime,
    end: std::time::SystemTime,
) -> Vec<std::time::SystemTime> {
    let mut last = std::collections::HashMap::new();
    let mut out = Vec::new();
    for o in objects {
        let text = o["timestamp"]
            .as_str()
            .unwrap_or_else(|| panic!("no timestamp: {o}"));
        assert!(
            text.len() == 24 && text.ends_with('Z') && text.as_bytes()[19] == b'.',
            "{o}"
        );
        let t = humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let ms = std::time::Duration::from_millis(1);
        assert!(
            t + ms >= start && t <= end + ms,
            "{text} is outside the run: {o}"
        );
        let key = (o["stream"].as_u64(), o["frame"].as_u64().unwrap());
        if let Some((frame, before)) = last.insert(key.0, (key.1, t)) {
            assert!(
                (frame == key.1 && before == t) || (frame < key.1 && before <= t),
                "frame {} at {text} after frame {frame}: {o}",
                key.1
            );
        }
        out.push(t);
    }
    out
}

/// (labelled right, total) of JSONL objects against their annotation categories.
pub fn accuracy(objects: &[serde_json::Value]) -> (usize, usize) {
    let right = objects
        .iter()
        .filter(|o| {
            class_of(o["annotation"]["category_id"].as_u64().unwrap()) == o["class_id"].as_u64()
        })
        .count();
    (right, objects.len())
}

/// Variables for a description.
pub fn vars(pairs: &[(&str, &Path)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .collect()
}

/// Parse and build a description given in a test.
pub fn graph(text: &str) -> octopipe::pipeline::Graph {
    let desc = octopipe::describe::parse("<test>", text, &HashMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    octopipe::describe::build(&desc).unwrap_or_else(|e| panic!("{e}"))
}

/// Run a `gst-launch`-style encoding line to end of stream (test inputs made by the tests).
pub fn encode(line: &str) {
    use gstreamer as gst;
    use gstreamer::prelude::*;
    gst::init().unwrap();
    let pipeline = gst::parse::launch(line).expect("encode pipeline");
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(20),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("encode finished");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(matches!(msg.view(), gst::MessageView::Eos(_)), "{msg:?}");
}

/// The paths of the entries of `dir`, in name order (panics naming `dir` when it cannot be read).
pub fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// A fresh temporary folder for one test, removed when the test binary exits (kept when
/// `OCTOPIPE_KEEP_TEST_DIRS` is set, to look into a failure): a test run leaves no disk behind.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("octopipe-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit(&dir);
    dir
}

/// The folders `temp_dir` made, removed by `remove_test_dirs` when the process exits.
static TEST_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn remove_at_exit(dir: &Path) {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        if std::env::var_os("OCTOPIPE_KEEP_TEST_DIRS").is_none() {
            // SAFETY: `remove_test_dirs` is an `extern "C"` function of no arguments that
            // cannot unwind; atexit only stores it.
            unsafe { libc::atexit(remove_test_dirs) };
        }
    });
    TEST_DIRS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

extern "C" fn remove_test_dirs() {
    let dirs = std::mem::take(&mut *TEST_DIRS.lock().unwrap_or_else(|e| e.into_inner()));
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Run `cmd` to completion with its output captured; kill it and fail the test if it takes longer
/// than `limit` (a hung pipeline must not hang the test suite).
pub fn output_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut v).map(|_| v)
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut v).map(|_| v)
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err.join().unwrap().unwrap_or_default();
            panic!(
                "still running after {limit:?}: killed (hang?)\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap().unwrap_or_default(),
        stderr: err.join().unwrap().unwrap_or_default(),
    }
}

/// Fails with a non-zero exit, no panic, and every one of `words` on stderr; returns stderr.
pub fn fails_with(out: &std::process::Output, words: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "should fail:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for w in words {
        assert!(stderr.contains(w), "expected {w:?} in:\n{stderr}");
    }
    stderr
}

/// The numbers of the report line starting with `prefix`, in order.
pub fn line_numbers(report: &str, prefix: &str) -> Vec<u64> {
    let line = report
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{report}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

/// The first three numbers of a report line starting with `prefix` (`N in = A ... + B ...`).
fn accounting(report: &str, prefix: &str) -> (u64, u64, u64) {
    let n = line_numbers(report, prefix);
    (n[0], n[1], n[2])
}

/// `(in, processed, dropped)` from a report's `frames: N in = P processed + D dropped` line.
pub fn frame_accounting(report: &str) -> (u64, u64, u64) {
    accounting(report, "frames: ")
}

/// `(in, classified, skipped)` from a report's `objects: N in = C classified + S skipped` line.
pub fn object_accounting(report: &str) -> (u64, u64, u64) {
    accounting(report, "objects: ")
}

/// Play JPEG files through `appsrc ! jpegdec ! videoconvert ! TAIL` to end of stream, file `k` of
/// `frames` at presentation time `position_k / 30 s` (positions may leave gaps, which then stay
/// in the stream's timestamps). A tail ending in a sink with `sync=true` plays them at that rate
/// (a live sender).
pub fn play_jpegs(frames: &[(PathBuf, u64)], tail: &str) {
    use gstreamer as gst;
    use gstreamer::prelude::*;
    gst::init().unwrap();
    let pipeline = gst::parse::launch(&format!(
        "appsrc name=src format=time caps=image/jpeg,framerate=30/1 ! jpegdec ! videoconvert ! {tail}"
    ))
    .expect("jpeg pipeline")
    .downcast::<gst::Pipeline>()
    .unwrap();
    let src = pipeline
        .by_name("src")
        .unwrap()
        .downcast::<gstreamer_app::AppSrc>()
        .unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let at = |position: u64| gst::ClockTime::from_nseconds(position * 1_000_000_000 / 30);
    for (path, position) in frames {
        let mut buffer = gst::Buffer::from_mut_slice(std::fs::read(path).unwrap());
        let b = buffer.get_mut().unwrap();
        b.set_pts(at(*position));
        b.set_duration(at(position + 1) - at(*position));
        src.push_buffer(buffer).unwrap();
    }
    src.end_of_stream().unwrap();
    let msg = pipeline
        .bus()
        .unwrap()
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(60),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("the JPEGs played to the end");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(matches!(msg.view(), gst::MessageView::Eos(_)), "{msg:?}");
}

/// One test at a time among the tests that take it, across the files of a test binary (each
/// file's `serial()` says why its tests need it).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
