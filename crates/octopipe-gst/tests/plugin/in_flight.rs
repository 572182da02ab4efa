//! (g) An element using a shared stage keeps several buffers in flight (`in-flight`, 4 by
//! default): the shared detector's calls hold several frames of each branch, and each branch's
//! buffers still leave in order with their own boxes.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;

use super::*;

/// The boxes of a JSONL file: (frame, box, label) per object, and the scores.
fn boxes(path: &Path) -> (Vec<(u64, String, String)>, Vec<f64>) {
    objects(path)
        .iter()
        .map(|o| {
            (
                (
                    o["frame"].as_u64().unwrap(),
                    o["bbox"].to_string(),
                    o["detection"]["label"].as_str().unwrap().to_string(),
                ),
                o["detection"]["score"].as_f64().unwrap(),
            )
        })
        .unzip()
}

#[test]
fn shared_detector_calls_hold_several_frames_of_each_branch_in_order() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("in-flight");
    numbered_clip(&data, &dir.join("frames"));
    let source = format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index=5 caps=image/jpeg,framerate=30/1 ! jpegdec",
        dir.join("frames").display()
    );
    let detect = format!(
        "octodetect model={} labels=coco scale=1 score=0.3 ort-threads=1 max-wait-ms=200",
        data.join("models/coco-centernet-512.onnx").display()
    );
    let alone = dir.join("alone.jsonl");
    run(&gst::parse::launch(&format!(
        "{source} ! {detect} ! octojsonl location={} ! fakesink",
        alone.display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap())
    .unwrap();
    let (expected, scores) = boxes(&alone);
    assert!(
        expected.len() >= 6,
        "the detector finds objects: {expected:?}"
    );

    // The shared engine logs the frames each call gives back.
    let calls = Arc::new(Mutex::new(Vec::<usize>::new()));
    let seen = calls.clone();
    gst::log::set_active(true);
    gst::log::set_threshold_for_name("octopipe-shared", gst::DebugLevel::Debug);
    let hook = gst::log::add_log_function(move |cat, _level, _file, _fn, _line, _obj, msg| {
        if cat.name() != "octopipe-shared" {
            return;
        }
        let Some(text) = msg.get() else { return };
        if let Some((n, _)) = text.split_once(" frames back from one call") {
            seen.lock().unwrap().push(n.parse().unwrap());
        }
    });
    let mut launch = format!("{source} ! tee name=t");
    for k in 0..4 {
        launch += &format!(
            " t. ! queue ! {detect} shared=det2 ! octojsonl location={} ! fakesink",
            dir.join(format!("branch{k}.jsonl")).display()
        );
    }
    let result = run(&gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap());
    gst::log::remove_log_function(hook);
    gst::log::set_threshold_for_name("octopipe-shared", gst::DebugLevel::None);
    result.unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls.iter().sum::<usize>(),
        4 * 6,
        "every frame comes back: {calls:?}"
    );
    // One frame of each branch at a time would give at most 4 a call.
    assert!(
        calls.iter().any(|&n| n > 4),
        "a call holds more than one frame of some branch: {calls:?}"
    );
    for k in 0..4 {
        let (got, got_scores) = boxes(&dir.join(format!("branch{k}.jsonl")));
        assert_eq!(got, expected, "branch {k}: its own boxes, in order");
        for (a, b) in got_scores.iter().zip(&scores) {
            assert!((a - b).abs() < 1e-4, "branch {k}: {a} vs {b}");
        }
    }
}
