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

#[test]
fn a_shared_element_adds_its_in_flight_frames_to_the_latency() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let p = gst::parse::launch(&format!(
        "videotestsrc is-live=true name=src ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 \
         ! octoboxes format=synthetic name=boxes \
         ! octoclassify shared=cls-latency in-flight=3 name=cls model={} labels={LABELS} ort-threads=1 \
         ! fakesink sync=true",
        data.join("models/visdrone-crops-64.onnx").display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    p.set_state(gst::State::Playing).unwrap();
    let (result, _, _) = p.state(gst::ClockTime::from_seconds(10));
    assert!(result.is_ok());
    let latency = |element: &str| latency_of(&p, element);
    let (live, min, max) = latency("boxes");
    let held = gst::ClockTime::from_nseconds(3 * 33_333_333);
    let (cls_live, cls_min, cls_max) = latency("cls");
    p.set_state(gst::State::Null).unwrap();
    assert!(live && cls_live, "a live source");
    assert_eq!(cls_min, min + held, "three frames at 30 fps added");
    assert_eq!(cls_max, max.map(|m| m + held));
}

#[test]
fn a_shared_classifier_keeps_order_after_a_flushing_seek() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("in-flight-seek");
    let Some((mp4, mot)) = six_frames_with_boxes(&dir) else {
        return;
    };
    let out = dir.join("objects.jsonl");
    let p = gst::parse::launch(&format!(
        "filesrc location={} ! qtdemux ! h264parse ! avdec_h264 ! octoboxes format=mot location={} \
         ! octoclassify shared=cls-seek in-flight=4 model={} labels={LABELS} ort-threads=1 \
         ! octojsonl location={} overwrite=true ! fakesink sync=false",
        mp4.display(),
        mot.display(),
        data.join("models/visdrone-crops-64.onnx").display(),
        out.display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let placed = |objects: &[serde_json::Value]| -> Vec<(u64, u64)> {
        assert!(
            objects.iter().all(|o| o["label"].is_string()),
            "{objects:?}"
        );
        objects
            .iter()
            .map(|o| (o["frame"].as_u64().unwrap(), o["bbox"][0].as_u64().unwrap()))
            .collect()
    };
    p.set_state(gst::State::Paused).unwrap();
    assert!(p.state(gst::ClockTime::from_seconds(10)).0.is_ok());
    // To the fourth frame (frame 3, at 100 ms).
    p.seek_simple(
        gst::SeekFlags::FLUSH | gst::SeekFlags::ACCURATE,
        gst::ClockTime::from_mseconds(100),
    )
    .unwrap();
    run(&p).unwrap();
    let after: Vec<(u64, u64)> = placed(&objects(&out))
        .into_iter()
        .filter(|(f, _)| *f != 0)
        .collect();
    // Frames 3, 4, 5, in order, each with its own box (MOT frame indices 4, 5, 6).
    assert_eq!(after, [(3, 40), (4, 50), (5, 60)]);
}

#[test]
fn a_shared_classifier_changes_state_in_any_order() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let out = tmp("in-flight-states").join("objects.jsonl");
    let p = gst::parse::launch(&format!(
        "videotestsrc num-buffers=5 pattern=ball ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 \
         ! octoboxes format=synthetic count=6 ! octotrack \
         ! octoclassify shared=cls-states in-flight=2 model={} labels={LABELS} ort-threads=1 \
         ! octojsonl location={} overwrite=true ! fakesink",
        data.join("models/visdrone-crops-64.onnx").display(),
        out.display(),
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    use gst::State::*;
    for state in [
        Ready, Null, Paused, Ready, Playing, Paused, Null, Playing, Ready, Paused, Null,
    ] {
        p.set_state(state).unwrap();
        let (result, now, _) = p.state(gst::ClockTime::from_seconds(30));
        assert!(
            result.is_ok(),
            "to {state:?}: {result:?} {:?}",
            first_error(&p)
        );
        assert!(now == state || state == Playing, "to {state:?}: {now:?}");
    }
    run(&p).unwrap();
    let objects = objects(&out);
    assert!(
        objects.iter().all(|o| o["label"].is_string()),
        "{objects:?}"
    );
    let frames: Vec<u64> = objects
        .iter()
        .map(|o| o["frame"].as_u64().unwrap())
        .collect();
    assert!(
        frames.windows(2).all(|w| w[0] <= w[1]),
        "in order: {frames:?}"
    );
    assert_eq!(frames.last(), Some(&4), "frames 0 to 4: {frames:?}");
}
