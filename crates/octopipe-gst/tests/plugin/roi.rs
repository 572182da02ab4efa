//! (b) `octoclassify` labels the boxes another element attached as plain ROI metadata (here an
//! application's pad probe, with no parameters at all), and writes the documented structures.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;

use super::*;

/// The classifier's class for a VisDrone category (the shared model's README).
fn class_of(category: u32) -> Option<&'static str> {
    match category {
        1 | 2 => Some("person"),
        3 | 7 | 8 | 10 => Some("two-wheeler"),
        4 => Some("car"),
        5 | 6 | 9 => Some("large-vehicle"),
        _ => None,
    }
}

/// One object a probe saw leaving the classifier.
#[derive(Debug)]
struct Seen {
    rect: (u32, u32, u32, u32),
    roi_type: String,
    label: Option<String>,
    confidence: Option<f64>,
    detection_confidence: Option<f64>,
}

#[test]
fn octoclassify_labels_the_boxes_an_application_attached() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let clip = data.join("visdrone/clip-9999999");
    let name = "9999999_00023_d_0000001";
    // The annotation's classifiable boxes, as plain (x, y, w, h, category).
    let text = std::fs::read_to_string(clip.join(format!("annotations/{name}.txt"))).unwrap();
    let boxes: Vec<(u32, u32, u32, u32, u32)> = text
        .lines()
        .filter_map(|l| {
            let v: Vec<u32> = l
                .split(',')
                .take(6)
                .map(|x| x.trim().parse().unwrap())
                .collect();
            (v[4] > 0
                && class_of(v[5]).is_some()
                && v[2] >= 2
                && v[3] >= 2
                && v[0] + v[2] <= 2000
                && v[1] + v[3] <= 1500)
                .then_some((v[0], v[1], v[2], v[3], v[5]))
        })
        .collect();
    assert!(boxes.len() > 20, "{} boxes", boxes.len());
    let launch = format!(
        "filesrc location={img} ! jpegdec ! octoclassify name=cls model={model} labels={LABELS} threads=1 ! fakesink name=sink",
        img = clip.join(format!("images/{name}.jpg")).display(),
        model = data.join("models/visdrone-crops-64.onnx").display(),
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let cls = pipeline.by_name("cls").unwrap();
    // The application's probe: one ROI meta per box, of type "thing", with no parameters.
    let attach = boxes.clone();
    cls.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &mut info.data {
                let buffer = buffer.make_mut();
                for &(x, y, w, h, _) in &attach {
                    gst_video::VideoRegionOfInterestMeta::add(buffer, "thing", (x, y, w, h));
                }
            }
            gst::PadProbeReturn::Ok
        });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let sink = pipeline.by_name("sink").unwrap();
    sink.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                for roi in buffer.iter_meta::<gst_video::VideoRegionOfInterestMeta>() {
                    let ours = roi.param("cls");
                    let det = roi.param("detection");
                    into.lock().unwrap().push(Seen {
                        rect: roi.rect(),
                        roi_type: roi.roi_type().to_string(),
                        label: ours.and_then(|s| s.get::<String>("label").ok()),
                        confidence: ours.and_then(|s| s.get::<f64>("confidence").ok()),
                        detection_confidence: det.and_then(|s| s.get::<f64>("confidence").ok()),
                    });
                }
            }
            gst::PadProbeReturn::Ok
        });
    // The element's per-frame timing message, as a bus watch sees it.
    let timings = Arc::new(Mutex::new(Vec::new()));
    let into = timings.clone();
    pipeline.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Element(e) = msg.view() {
            let s = e.structure().unwrap();
            if s.name() == "octopipe-frame" && msg.src().is_some_and(|s| s.name() == "cls") {
                into.lock().unwrap().push((
                    s.get::<u32>("objects").unwrap(),
                    s.get::<f64>("process-ms").unwrap(),
                ));
            }
        }
        gst::BusSyncReply::Pass
    });
    run(&pipeline).unwrap();
    let timings = timings.lock().unwrap();
    assert_eq!(timings.len(), 1, "one frame, one timing message");
    assert_eq!(timings[0].0 as usize, boxes.len());
    assert!(timings[0].1 > 0.0, "{:?}", timings[0]);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.len(),
        boxes.len(),
        "one ROI per box leaves the classifier"
    );
    let mut right = 0;
    for (s, b) in seen.iter().zip(&boxes) {
        assert_eq!(s.rect, (b.0, b.1, b.2, b.3), "the box, in order");
        assert_eq!(s.roi_type, "thing", "the application's ROI type is kept");
        assert_eq!(
            s.detection_confidence,
            Some(1.0),
            "a box with no score has score 1"
        );
        let label = s.label.as_deref().expect("every box labelled");
        assert!(LABELS.split(',').any(|l| l == label), "{label}");
        let c = s.confidence.unwrap();
        assert!(c > 0.0 && c <= 1.0, "softmax score {c}");
        right += usize::from(Some(label) == class_of(b.4));
    }
    // The shared classifier labels 99% of the clip's objects as annotated.
    assert!(
        right * 100 >= boxes.len() * 95,
        "{right} of {} labelled as annotated",
        boxes.len()
    );
}

#[test]
fn objects_of_two_box_sources_have_ids_unique_on_the_buffer_from_0() {
    let _serial = serial();
    init();
    let pipeline = gst::parse::launch(
        "videotestsrc num-buffers=1 ! video/x-raw,format=I420,width=640,height=480,framerate=30/1 \
         ! octoboxes format=synthetic count=5 ! octoboxes format=synthetic count=7 seed=9 \
         ! octotrack ! fakesink name=sink",
    )
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let ids = Arc::new(Mutex::new(Vec::new()));
    let into = ids.clone();
    let sink = pipeline.by_name("sink").unwrap();
    sink.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                let mut ids: Vec<i32> = buffer
                    .iter_meta::<gst_video::VideoRegionOfInterestMeta>()
                    .map(|m| m.id())
                    .collect();
                ids.sort_unstable();
                into.lock().unwrap().push(ids);
            }
            gst::PadProbeReturn::Ok
        });
    run(&pipeline).unwrap();
    let ids = ids.lock().unwrap();
    assert_eq!(ids.len(), 1);
    let n = ids[0].len() as i32;
    assert!(n > 5, "both sources' boxes: {n}");
    assert_eq!(ids[0], (0..n).collect::<Vec<_>>(), "0..{n}, each once");
}

/// A Python 3 with PyGObject and GStreamer's typelibs (Debian's python3-gi: /usr/bin/python3,
/// whatever python3 comes first on PATH).
fn python_with_gi() -> Option<&'static str> {
    let check =
        "import gi; gi.require_version('GstVideo', '1.0'); from gi.repository import GstVideo";
    let found = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", check])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        skip("no python3 with PyGObject: apt-get install python3-gi gir1.2-gst-plugins-base-1.0");
    }
    found
}

#[test]
fn python_reads_the_objects_with_pygobject_as_the_docs_show() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let Some(plugins) = plugin_dir() else { return };
    let Some(python) = python_with_gi() else {
        return;
    };
    let dir = tmp("pygobject");
    let out = dir.join("objects.jsonl");
    let launch = format!(
        "videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=640,height=480,framerate=30/1 \
         ! octoboxes format=synthetic count=6 ! octotrack \
         ! octoclassify name=cls model={} labels={LABELS} \
         ! octojsonl location={} ! fakesink name=sink",
        data.join("models/visdrone-crops-64.onnx").display(),
        out.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugin/read_meta.py");
    let run = gst_command(python, &plugins)
        .arg(&script)
        .args([launch.as_str(), "cls"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Each line: frame x y w h detection-label classifier-label track.
    let seen: Vec<(u64, Vec<u64>, String)> = stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let bbox = f[1..5].iter().map(|v| v.parse().unwrap()).collect();
            (f[0].parse().unwrap(), bbox, f[6].to_string())
        })
        .collect();
    let written: Vec<(u64, Vec<u64>, String)> = objects(&out)
        .iter()
        .map(|o| {
            let bbox = o["bbox"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            (
                o["frame"].as_u64().unwrap(),
                bbox,
                o["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!written.is_empty());
    assert_eq!(seen, written, "Python reads what octojsonl writes");
}
