//! (a) The shared clip through the plugin gives the objects `octopipe run` gives with the same
//! stages and properties: every frame, box and label.

use std::collections::HashMap;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::*;

/// `pipelines/visdrone-classify.pipe`'s objects, by `octopipe run`'s own runner.
fn octopipe_run(data: &Path, out: &Path) -> Vec<serde_json::Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("pipelines/visdrone-classify.pipe")).unwrap();
    let vars = HashMap::from([
        (
            "root".to_string(),
            data.join("visdrone/clip-9999999").display().to_string(),
        ),
        (
            "model".to_string(),
            data.join("models/visdrone-crops-64.onnx")
                .display()
                .to_string(),
        ),
        ("out".to_string(), out.display().to_string()),
    ]);
    let outcome = octopipe_pipeline::pipeline::Pipeline::from_description(&text, &vars)
        .unwrap()
        .run();
    assert!(outcome.error.is_none(), "octopipe run: {:?}", outcome.error);
    objects(out)
}

/// What is compared: frame, box, the box source's category and the classifier's label.
fn key(o: &serde_json::Value) -> (u64, Vec<u64>, u64, String) {
    (
        o["frame"].as_u64().unwrap(),
        o["bbox"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect(),
        o["category"].as_u64().unwrap_or(99),
        o["label"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn the_clip_through_gstreamer_gives_the_objects_of_octopipe_run() {
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("clip");
    let frames = numbered_clip(&data, &dir.join("frames"));
    let reference = octopipe_run(&data, &dir.join("run.jsonl"));
    let out = dir.join("gst.jsonl");
    // jpegdec's I420 straight into octoclassify: octopipe's libjpeg-exact conversion applies;
    // with libjpeg's accurate integer IDCT, as the `images` source decodes.
    let launch = format!(
        "multifilesrc location={frames}/%05d.jpg index=0 stop-index={last} caps=image/jpeg,framerate=30/1 \
         ! jpegdec idct-method=islow ! octoboxes format=det location={ann} \
         ! octoclassify model={model} labels={LABELS} \
         ! octojsonl location={out} ! fakesink",
        frames = dir.join("frames").display(),
        last = frames - 1,
        ann = data.join("visdrone/clip-9999999/annotations").display(),
        model = data.join("models/visdrone-crops-64.onnx").display(),
        out = out.display(),
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).unwrap();
    let ours = objects(&out);
    assert_eq!(ours.len(), reference.len(), "objects");
    assert!(
        ours.len() > 2000,
        "the clip's 2,012 classifiable objects: {}",
        ours.len()
    );
    let mut same_label = 0;
    for (a, b) in ours.iter().zip(&reference) {
        let (ka, kb) = (key(a), key(b));
        assert_eq!(
            (ka.0, &ka.1, ka.2),
            (kb.0, &kb.1, kb.2),
            "frame, box, category: {a} vs {b}"
        );
        let image = Path::new(b["source"].as_str().unwrap())
            .file_stem()
            .unwrap();
        assert_eq!(
            a["source"].as_str(),
            image.to_str(),
            "the annotation file the frame matched"
        );
        same_label += usize::from(ka.3 == kb.3);
        let (sa, sb) = (a["score"].as_f64().unwrap(), b["score"].as_f64().unwrap());
        assert!((sa - sb).abs() < 1e-3, "score {sa} vs {sb}: {a}");
    }
    assert_eq!(same_label, ours.len(), "every label as octopipe run's");
    let frames_seen: std::collections::BTreeSet<u64> = ours.iter().map(|o| key(o).0).collect();
    assert_eq!(frames_seen.len(), frames, "every frame has objects");
}
