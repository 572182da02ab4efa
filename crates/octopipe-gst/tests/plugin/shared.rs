//! (c) Four branches sharing one `octodetect` (`shared=det0`: one detector, one model session,
//! one collector across the branches) each get the boxes the element gives alone.

use gstreamer as gst;
use gstreamer::prelude::*;

use super::*;

/// The boxes of a JSONL file: (frame, box, label, score) per object.
fn boxes(path: &Path) -> Vec<(u64, Vec<u64>, String, f64)> {
    objects(path)
        .iter()
        .map(|o| {
            (
                o["frame"].as_u64().unwrap(),
                o["bbox"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect(),
                o["detection"]["label"].as_str().unwrap().to_string(),
                o["detection"]["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn four_branches_sharing_one_detector_get_the_boxes_it_gives_alone() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("shared");
    numbered_clip(&data, &dir.join("frames"));
    let source = format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index=3 caps=image/jpeg,framerate=30/1 ! jpegdec",
        dir.join("frames").display()
    );
    let detect = format!(
        "octodetect model={} labels=coco scale=1 score=0.3 ort-threads=1",
        data.join("models/coco-centernet-512.onnx").display()
    );
    let alone = dir.join("alone.jsonl");
    let launch = format!(
        "{source} ! {detect} ! octojsonl location={} ! fakesink",
        alone.display()
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).unwrap();
    let expected = boxes(&alone);
    assert!(
        expected.len() >= 4,
        "the detector finds objects on the clip: {expected:?}"
    );

    let mut launch = format!("{source} ! tee name=t");
    for k in 0..4 {
        launch += &format!(
            " t. ! queue ! {detect} shared=det0 ! octojsonl location={} ! fakesink",
            dir.join(format!("branch{k}.jsonl")).display()
        );
    }
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).unwrap();
    for k in 0..4 {
        let got = boxes(&dir.join(format!("branch{k}.jsonl")));
        assert_eq!(got.len(), expected.len(), "branch {k}");
        for (a, b) in got.iter().zip(&expected) {
            assert_eq!((a.0, &a.1, &a.2), (b.0, &b.1, &b.2), "branch {k}");
            assert!((a.3 - b.3).abs() < 1e-4, "branch {k}: {a:?} vs {b:?}");
        }
    }
}

#[test]
fn four_branches_sharing_one_classifier_get_the_labels_it_gives_alone() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("shared-classify");
    numbered_clip(&data, &dir.join("frames"));
    let source = format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index=2 caps=image/jpeg,framerate=30/1 \
         ! jpegdec idct-method=islow ! octoboxes format=det location={}",
        dir.join("frames").display(),
        data.join("visdrone/clip-9999999/annotations").display()
    );
    let classify = format!(
        "octoclassify model={} labels={LABELS} ort-threads=1",
        data.join("models/visdrone-crops-64.onnx").display()
    );
    let labels = |path: &Path| -> Vec<(u64, String, String)> {
        objects(path)
            .iter()
            .map(|o| {
                (
                    o["frame"].as_u64().unwrap(),
                    o["bbox"].to_string(),
                    o["label"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let alone = dir.join("alone.jsonl");
    let launch = format!(
        "{source} ! {classify} ! octojsonl location={} ! fakesink",
        alone.display()
    );
    run(&gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap())
    .unwrap();
    let expected = labels(&alone);
    assert!(expected.len() > 100, "{}", expected.len());
    let mut launch = format!("{source} ! tee name=t");
    for k in 0..4 {
        launch += &format!(
            " t. ! queue ! {classify} shared=cls0 ! octojsonl location={} ! fakesink",
            dir.join(format!("branch{k}.jsonl")).display()
        );
    }
    run(&gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap())
    .unwrap();
    for k in 0..4 {
        assert_eq!(
            labels(&dir.join(format!("branch{k}.jsonl"))),
            expected,
            "branch {k}"
        );
    }
}

#[test]
fn elements_sharing_a_detector_with_other_properties_are_an_element_error() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let model = data.join("models/coco-centernet-512.onnx");
    let launch = format!(
        "videotestsrc num-buffers=2 ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 ! tee name=t \
         t. ! queue ! octodetect shared=det1 model={m} labels=coco scale=1 score=0.3 ! fakesink \
         t. ! queue ! octodetect shared=det1 model={m} labels=coco scale=1 score=0.5 ! fakesink",
        m = model.display()
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let e = run(&pipeline).expect_err("the second element is refused");
    assert!(
        e.starts_with("octodetect") && e.contains("shared=det1: score"),
        "{e}"
    );
}
