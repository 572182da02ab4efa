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
        o["annotation"]["category_id"].as_u64().unwrap_or(99),
        o["label"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn the_clip_through_gstreamer_gives_the_objects_of_octopipe_run() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("clip");
    let frames = numbered_clip(&data, &dir.join("frames"));
    let started = std::time::Instant::now();
    let reference = octopipe_run(&data, &dir.join("run.jsonl"));
    let run_time = started.elapsed();
    let out = dir.join("gst.jsonl");
    // jpegdec's I420 straight into octoclassify: octopipe's libjpeg-exact conversion applies;
    // with libjpeg's accurate integer IDCT, as the `images` source decodes.
    let launch = format!(
        "multifilesrc location={frames}/%05d.jpg index=0 stop-index={last} caps=image/jpeg,framerate=30/1 \
         ! jpegdec idct-method=islow ! octoboxes format=det location={ann} \
         ! octoclassify model={model} labels={LABELS} \
         ! octojsonl location={out} ! fakesink sync=false",
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
    // octopipe's budget report, posted by octojsonl at end of stream.
    let report = std::sync::Arc::new(std::sync::Mutex::new(None));
    let into = report.clone();
    pipeline.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Element(e) = msg.view() {
            let s = e.structure().unwrap();
            if s.name() == "octopipe-report" {
                *into.lock().unwrap() = Some(s.to_owned());
            }
        }
        gst::BusSyncReply::Pass
    });
    let started = std::time::Instant::now();
    run(&pipeline).unwrap();
    let report = report
        .lock()
        .unwrap()
        .clone()
        .expect("octojsonl posts the report at EOS");
    eprintln!("{report}");
    check_report(&report, frames as u64);
    eprintln!(
        "{frames} frames: octopipe run {:.2} s, the gst pipeline {:.2} s",
        run_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
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
            Some(format!("octopipe:{}", image.to_str().unwrap()).as_str()),
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

/// The report message's fields: one per number, the rows' columns as arrays in row order, no
/// text to unescape; the objects as `octopipe run` counts them on the clip (the skipped boxes
/// come along on the buffer).
fn check_report(report: &gst::StructureRef, frames: u64) {
    let u = |f: &str| {
        report
            .get::<u64>(f)
            .unwrap_or_else(|e| panic!("{f}: {e}: {report}"))
    };
    assert_eq!((u("frames-in"), u("processed")), (frames, frames));
    assert_eq!(
        (u("objects-in"), u("objects"), u("skipped")),
        (2032, 2012, 20),
        "objects: 2032 in = 2012 classified + 20 skipped: {report}"
    );
    assert!(report.get::<bool>("classified").unwrap());
    let strings = |f: &str| -> Vec<String> {
        let a = report.get::<gst::Array>(f).unwrap();
        a.iter().map(|v| v.get::<String>().unwrap()).collect()
    };
    assert_eq!(strings("skipped-reasons"), ["ignored-region"]);
    let counts = report.get::<gst::Array>("skipped-counts").unwrap();
    assert_eq!(
        counts
            .iter()
            .map(|v| v.get::<u64>().unwrap())
            .collect::<Vec<_>>(),
        [20]
    );
    // The elements' rows (named after the elements: octoclassify0, ...), then end-to-end.
    let rows = strings("stages");
    let kinds: Vec<&str> = rows
        .iter()
        .map(|r| r.trim_end_matches(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        kinds,
        ["octoboxes", "octoclassify", "octojsonl", "end-to-end"]
    );
    for column in ["p50-ms", "p95-ms", "p99-ms", "max-ms"] {
        let values = report.get::<gst::Array>(column).unwrap();
        assert_eq!(values.len(), 4, "{column}: a value per row");
        assert!(values.iter().all(|v| v.get::<f64>().unwrap() >= 0.0));
    }
    // No text field, no empty column: every field a number, a boolean or an array of them.
    for (name, value) in report.iter() {
        assert!(
            !value.type_().is_a(String::static_type()),
            "{name} is a string: {report}"
        );
    }
    // `gst-launch-1.0 -m` prints it on one line of fields, none escaped.
    let shown = report.to_string();
    assert!(!shown.contains('\\'), "{shown}");
}

/// The first `n` images of the clip, under their own names, in a folder of their own (for the
/// `images` source), and the same as `00000.jpg`, ... (for `multifilesrc`).
pub(super) fn first_images(data: &Path, dir: &Path, n: usize) {
    let images = data.join("visdrone/clip-9999999/images");
    let mut names: Vec<_> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    names.sort();
    std::fs::create_dir_all(dir.join("named")).unwrap();
    std::fs::create_dir_all(dir.join("frames")).unwrap();
    for (i, p) in names.iter().take(n).enumerate() {
        std::os::unix::fs::symlink(p, dir.join("named").join(p.file_name().unwrap())).unwrap();
        std::os::unix::fs::symlink(p, dir.join(format!("frames/{i:05}.jpg"))).unwrap();
    }
}

/// `octopipe run SOURCE ! detect ! TRACK ! batch ! preprocess ! classify ! jsonl` and the same
/// stages as elements after `gst_source` give the same objects: frame, box, track, the
/// detector's and the classifier's labels, the classifier's score, the source. Gives the
/// objects.
pub(super) fn same_objects_detected(
    data: &Path,
    dir: &Path,
    (source, gst_source): (&str, &str),
    extra: &str,
    track: &str,
) -> Vec<serde_json::Value> {
    // pipelines/visdrone-detect.pipe's detector (with `extra`), tracker and classifier.
    let detect = format!(
        "detect model={} labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 iou=0.5 ios=0.85 \
         classes=person,bicycle,car,motorcycle,bus,truck \
         map=car:vehicle,bus:vehicle,truck:vehicle,bicycle:two-wheeler,motorcycle:two-wheeler {extra}",
        data.join("models/coco-centernet-512.onnx").display()
    );
    let classify = format!(
        "classify model={} labels={LABELS}",
        data.join("models/visdrone-crops-64.onnx").display()
    );
    let reference = dir.join("run.jsonl");
    let text = format!(
        "{source} ! {detect} ! {track} ! batch max-crops=256 \
         ! preprocess channels=rgb layout=nchw mean=0.485,0.456,0.406 std=0.229,0.224,0.225 \
         ! {classify} ! jsonl location={}",
        reference.display()
    );
    let outcome = octopipe_pipeline::pipeline::Pipeline::from_description(&text, &HashMap::new())
        .unwrap()
        .run();
    assert!(outcome.error.is_none(), "octopipe run: {:?}", outcome.error);
    let reference = objects(&reference);
    let out = dir.join("gst.jsonl");
    let launch = format!(
        "{gst_source} ! octo{detect} ! octo{track} ! octo{classify} \
         ! octojsonl location={} ! fakesink",
        out.display()
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).unwrap();
    let ours = objects(&out);
    assert!(
        reference.len() > 20,
        "the detector finds objects: {}",
        reference.len()
    );
    assert_eq!(ours.len(), reference.len(), "objects");
    for (a, b) in ours.iter().zip(&reference) {
        for field in [
            "frame",
            "bbox",
            "track",
            "label",
            "class_id",
            "predicted",
            "stream",
        ] {
            assert_eq!(a[field], b[field], "{field}: {a} vs {b}");
        }
        assert_eq!(
            a["detection"]["label"], b["detection"]["label"],
            "{a} vs {b}"
        );
        let (sa, sb) = (a["score"].as_f64().unwrap(), b["score"].as_f64().unwrap());
        assert!((sa - sb).abs() < 1e-3, "score {sa} vs {sb}: {a}");
    }
    ours
}

#[test]
fn the_clip_detected_tracked_and_classified_through_gstreamer_gives_the_objects_of_octopipe_run() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("clip-detect");
    let n = 4;
    first_images(&data, &dir, n);
    // A bare `track` after `detect score=0.3` follows the detector's score (as in `octopipe
    // run`): every box may start a track, not only those over track's own `high=0.5`.
    let (a, b) = clip_sources(&dir, n);
    let ours = same_objects_detected(&data, &dir, (&a, &b), "", "track");
    let low = ours
        .iter()
        .filter(|o| o["detection"]["score"].as_f64().unwrap() < 0.5)
        .filter(|o| o["track"].is_u64())
        .count();
    assert!(low > 0, "boxes scoring under 0.5 are tracked: {ours:?}");
}

/// The clip's first `n` images (made by [`first_images`]) as `octopipe run`'s `images` source
/// and as a GStreamer source decoding them as it does.
fn clip_sources(dir: &Path, n: usize) -> (String, String) {
    (
        format!("images location={} framerate=30", dir.join("named").display()),
        format!(
            "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
             ! jpegdec idct-method=islow",
            dir.join("frames").display(),
            n - 1
        ),
    )
}

#[test]
fn the_clip_encoded_to_h264_through_gstreamer_gives_the_objects_of_octopipe_run() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    if lacks_element("x264enc", "apt-get install gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = tmp("clip-h264");
    let n = 4;
    first_images(&data, &dir, n);
    // The clip's first frames as an H.264 MP4, made here.
    let mp4 = clip_h264(&dir, n);
    let ours = same_objects_detected(
        &data,
        &dir,
        (
            &format!("media location={}", mp4.display()),
            &format!(
                "filesrc location={} ! qtdemux ! h264parse ! avdec_h264",
                mp4.display()
            ),
        ),
        "",
        "track high=0.3",
    );
    // The frames' source is the file upstream, as `octopipe run` names it.
    let uri = gst::glib::filename_to_uri(&mp4, None).unwrap();
    let reference = objects(&dir.join("run.jsonl"));
    assert!(
        ours.iter()
            .chain(&reference)
            .all(|o| o["source"] == uri.as_str()),
        "{uri}: {ours:?}"
    );
}

#[test]
fn detecting_every_other_frame_the_tracker_predicts_the_frames_between_as_octopipe_run_does() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let dir = tmp("clip-interval");
    let n = 4;
    first_images(&data, &dir, n);
    let (a, b) = clip_sources(&dir, n);
    same_objects_detected(&data, &dir, (&a, &b), "interval=2", "track high=0.3");
    let objects = objects(&dir.join("gst.jsonl"));
    assert!(
        objects.iter().any(|o| o["predicted"] == true),
        "frames 1 and 3 carry the tracker's predicted boxes"
    );
}
