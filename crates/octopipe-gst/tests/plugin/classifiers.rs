//! Two `octoclassify` elements one after the other: each adds its own classification structure
//! to every object (DL Streamer's convention), and `octojsonl` writes the first's answer as the
//! object's main result and both by name.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;

use super::*;

#[test]
fn two_octoclassify_elements_give_two_structures_and_octojsonl_keeps_both() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let out = tmp("classifiers").join("objects.jsonl");
    let model = data.join("models/visdrone-crops-64.onnx");
    let launch = format!(
        "videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=640,height=480,framerate=30/1 \
         ! octoboxes format=synthetic count=6 \
         ! octoclassify name=cls model={model} labels={LABELS} ort-threads=1 \
         ! octoclassify name=color model={model} labels=p,t,c,l top-k=2 ort-threads=1 \
         ! octojsonl location={out} ! fakesink name=sink",
        model = model.display(),
        out = out.display(),
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    // Each object's classification structures leaving the last element, by name: (label, id).
    type Structures = Vec<(String, String, i32)>;
    let seen: Arc<Mutex<Vec<Structures>>> = Arc::default();
    let into = seen.clone();
    pipeline
        .by_name("sink")
        .unwrap()
        .static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                for roi in buffer.iter_meta::<gst_video::VideoRegionOfInterestMeta>() {
                    let structures = roi
                        .params()
                        .filter(|s| s.name() != "detection" && s.has_field("label"))
                        .map(|s| {
                            (
                                s.name().to_string(),
                                s.get::<String>("label").unwrap(),
                                s.get::<i32>("label_id").unwrap(),
                            )
                        })
                        .collect();
                    into.lock().unwrap().push(structures);
                }
            }
            gst::PadProbeReturn::Ok
        });
    run(&pipeline).unwrap();
    let seen = seen.lock().unwrap();
    let objects: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 18, "3 frames of 6 boxes");
    assert_eq!(seen.len(), objects.len());
    for (s, o) in seen.iter().zip(&objects) {
        let names: Vec<&str> = s.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["cls", "color"],
            "one structure per classifier, in order"
        );
        let (cls, color) = (&s[0], &s[1]);
        assert_eq!(cls.2, color.2, "the same model: the same class");
        assert_eq!(color.1, cls.1[..1], "the second element's own labels");
        // The main result is the first classifier's; both are kept by name.
        assert_eq!(o["label"], cls.1.as_str(), "{o}");
        assert_eq!(o["class_id"], cls.2);
        let by_name = o["classifiers"].as_object().unwrap();
        assert_eq!(by_name.len(), 2, "{o}");
        assert_eq!(by_name["cls"]["label"], cls.1.as_str());
        assert_eq!(by_name["color"]["label"], color.1.as_str());
        assert_eq!(by_name["color"]["class_id"], color.2);
    }
}
