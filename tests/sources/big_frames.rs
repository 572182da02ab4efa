//! A frame with more boxes than a batch holds travels in parts, a batch each: memory stays bounded
//! by the batch limits whatever one frame brings, every box is classified and written in order,
//! and the report counts the frame once.
//!
//! Alone in its test binary: the peak memory of the CLI child is read with
//! `getrusage(RUSAGE_CHILDREN)`, which covers every child this process has waited for.

use crate::common;

use std::process::Command;
use std::time::Duration;

use octopipe::boxes::{clip_box, Synthetic};

const BOXES: u32 = 100_000;

/// Largest resident set of the children waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage fills the struct it is given; RUSAGE_CHILDREN is a valid `who`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn a_frame_with_100000_boxes_travels_in_parts_in_bounded_memory() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("big-frame");
    let out = dir.join("o.jsonl");
    let model = common::root().join("tests/data/models/valid-64.onnx");
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "testsrc width=640 height=480 num-buffers=1 ! boxes format=synthetic count={BOXES} \
                 ! batch max-crops=256 ! classify model={} ! jsonl location={}",
                model.display(),
                out.display()
            ),
        ]),
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // Whole, the frame's tensor alone was 100,000 x 3 x 64 x 64 floats (4.9 GB; 5.2 GiB peak).
    let peak = children_peak_rss();
    eprintln!("peak RSS of the run: {} MiB", peak >> 20);
    assert!(peak < 1 << 30, "peak RSS {} MiB", peak >> 20);

    assert_eq!(common::frame_accounting(&stderr), (1, 1, 0), "{stderr}");
    let (objects, classified, skipped) = common::object_accounting(&stderr);
    let objects_written = common::read_jsonl(&out);
    assert_eq!((objects, skipped), (BOXES as u64, 0), "{stderr}");
    assert_eq!(objects_written.len() as u64, classified, "{stderr}");
    // In the frame's box order, each classified, all of frame 0.
    let boxes = Synthetic::new(7).frame_boxes(0, 0, BOXES, 640, 480);
    let expected: Vec<[u32; 4]> = boxes
        .iter()
        .filter_map(|r| clip_box(r.bbox, 640, 480).ok())
        .collect();
    assert_eq!(expected.len(), objects_written.len());
    for (o, b) in objects_written.iter().zip(&expected) {
        assert_eq!(o["frame"], 0);
        assert_eq!(o["bbox"], serde_json::json!(b), "{o}");
        assert!(o["label"].is_string(), "{o}");
    }
}
