//! The detect stage: decoders, NMS, letterbox and tiles on constructed ONNX detectors whose
//! outputs are known exactly (scripts/make_detector_models.py), what the stage feeds a model
//! (channel order, scale, padding), bad models and settings, and the real COCO CenterNet on the
//! VisDrone clip against its ground truth.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use octopipe::pipeline::Pipeline;
use octopipe::sink::Object;

fn model(name: &str) -> PathBuf {
    common::root().join("tests/data/models").join(name)
}

/// Run `description` (a sink is appended, replacing the last run's file), returning every
/// object in order and the report text.
fn run(description: &str, dir: &Path) -> (Vec<Object>, String) {
    let text = format!(
        "{description} ! jsonl overwrite=true location={}",
        dir.join("o.jsonl").display()
    );
    let mut pipeline = Pipeline::from_description(&text, &HashMap::new())
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let results = pipeline.results(100_000);
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{text}: {:?}", outcome.error);
    (results.try_iter().collect(), outcome.report.to_string())
}

/// The boxes of frame `frame` as `(bbox, class, label, score)`, best score first.
fn frame_boxes(objects: &[Object], frame: u64) -> Vec<([u32; 4], u32, String, f32)> {
    objects
        .iter()
        .filter(|o| o.frame == frame)
        .map(|o| {
            let d = o
                .detection
                .as_ref()
                .expect("detector boxes name their class");
            let label = d.label.as_deref().expect("detector boxes name their class");
            (o.bbox, d.class_id.unwrap(), label.to_string(), d.score)
        })
        .collect()
}

fn testsrc(w: u32, h: u32) -> String {
    format!("testsrc width={w} height={h} num-buffers=2")
}

/// What every constructed model answers (its input's pixels, 320x320): A (class 2, 0.9) and C
/// (class 0, 0.7) survive NMS and the 0.3 score; B is A's duplicate, D scores 0.2.
const A: [f32; 4] = [40.0, 40.0, 120.0, 80.0];
const C: [f32; 4] = [44.0, 40.0, 124.0, 80.0];

/// `[x1, y1, x2, y2]` scaled by (sx, sy) and shifted by (ox, oy), as a pixel box `[x, y, w, h]`.
fn placed(b: [f32; 4], sx: f32, sy: f32, ox: f32, oy: f32) -> [u32; 4] {
    let x1 = (b[0] * sx + ox).round() as u32;
    let y1 = (b[1] * sy + oy).round() as u32;
    let x2 = (b[2] * sx + ox).round() as u32;
    let y2 = (b[3] * sy + oy).round() as u32;
    [x1, y1, x2 - x1, y2 - y1]
}

/// Frame 0 and 1 of a whole-frame run on 640x480 hold exactly A and C, stretched by (2, 1.5).
fn assert_stretched(objects: &[Object], what: &str) {
    for frame in 0..2 {
        let got = frame_boxes(objects, frame);
        assert_eq!(got.len(), 2, "{what}: {got:?}");
        assert_eq!(
            (got[0].0, got[0].1, got[0].2.as_str()),
            (placed(A, 2.0, 1.5, 0.0, 0.0), 2, "class2"),
            "{what}"
        );
        assert_eq!(
            (got[1].0, got[1].1, got[1].2.as_str()),
            (placed(C, 2.0, 1.5, 0.0, 0.0), 0, "class0"),
            "{what}"
        );
        assert!(
            (got[0].3 - 0.9).abs() < 1e-3 && (got[1].3 - 0.7).abs() < 1e-3,
            "{what}"
        );
    }
}

#[test]
fn every_output_format_gives_the_same_boxes() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-formats");
    for (name, extra) in [
        // 'heads' comes first and is not a detection output: auto takes 'dets'.
        ("det-e2e.onnx", ""),
        ("det-e2e-2d.onnx", ""),
        ("det-e2e-f16.onnx", ""),
        ("det-yolov8.onnx", ""),
        ("det-yolov5.onnx", ""),
        ("det-e2e.onnx", "decoder=end2end output=dets"),
    ] {
        let (objects, report) = run(
            &format!(
                "{} ! detect model={} {extra} backend=cpu",
                testsrc(640, 480),
                model(name).display()
            ),
            &dir,
        );
        assert_stretched(&objects, name);
        assert!(report.contains("detect: 1 region per frame"), "{report}");
    }
}

#[test]
fn the_score_threshold_lets_low_boxes_through() {
    if !common::ort_ready() {
        return;
    }
    // D: objectness 0.4 x class score 0.5 = 0.2, class 1, [200, 200, 260, 300].
    let dir = common::temp_dir("detect-score");
    let (objects, _) = run(
        &format!(
            "{} ! detect model={} score=0.15",
            testsrc(640, 480),
            model("det-yolov5.onnx").display()
        ),
        &dir,
    );
    let got = frame_boxes(&objects, 0);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(
        got[2].0,
        placed([200.0, 200.0, 260.0, 300.0], 2.0, 1.5, 0.0, 0.0)
    );
    assert!((got[2].3 - 0.2).abs() < 1e-6);
}

#[test]
fn letterboxed_boxes_lose_the_padding() {
    if !common::ort_ready() {
        return;
    }
    // 640x480 letterboxed into 320x320: scale 2 both ways, 40 rows of padding on top.
    let dir = common::temp_dir("detect-letterbox");
    let (objects, _) = run(
        &format!(
            "{} ! detect model={} fit=letterbox",
            testsrc(640, 480),
            model("det-e2e.onnx").display()
        ),
        &dir,
    );
    let got = frame_boxes(&objects, 0);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, placed(A, 2.0, 2.0, 0.0, -80.0));
    assert_eq!(got[0].0, [80, 0, 160, 80]);
    assert_eq!(got[1].0, placed(C, 2.0, 2.0, 0.0, -80.0));
}

/// The boxes of a 640x640 frame cut into 4 tiles of 320x320: A and C in each, at its offset.
fn tile_boxes() -> Vec<[u32; 4]> {
    let mut v = Vec::new();
    for (ox, oy) in [(0.0, 0.0), (320.0, 0.0), (0.0, 320.0), (320.0, 320.0)] {
        v.push(placed(A, 1.0, 1.0, ox, oy));
        v.push(placed(C, 1.0, 1.0, ox, oy));
    }
    v.sort_unstable();
    v
}

#[test]
fn tiles_put_each_box_at_its_tile_and_batch_models_take_them_together() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-tiles");
    for (name, extra) in [
        // Fixed batch 1: tile by tile.
        ("det-e2e.onnx", ""),
        ("det-e2e-2d.onnx", ""),
        // Dynamic batch: runs of 3 + 1 tiles.
        ("det-yolov8.onnx", "max-batch=3"),
    ] {
        let (objects, report) = run(
            &format!(
                "{} ! detect model={} tiles=320x320 overlap=0 {extra}",
                testsrc(640, 640),
                model(name).display()
            ),
            &dir,
        );
        for frame in 0..2 {
            let mut got: Vec<[u32; 4]> = frame_boxes(&objects, frame).iter().map(|b| b.0).collect();
            got.sort_unstable();
            assert_eq!(got, tile_boxes(), "{name}");
        }
        assert!(report.contains("detect: 4 regions per frame"), "{report}");
    }
    // With the whole frame too: its A and C (scaled by 2) join the tiles' boxes.
    let (objects, report) = run(
        &format!(
            "{} ! detect model={} tiles=320x320 overlap=0 whole-frame=true",
            testsrc(640, 640),
            model("det-yolov8.onnx").display()
        ),
        &dir,
    );
    let mut want = tile_boxes();
    want.push(placed(A, 2.0, 2.0, 0.0, 0.0));
    want.push(placed(C, 2.0, 2.0, 0.0, 0.0));
    want.sort_unstable();
    let mut got: Vec<[u32; 4]> = frame_boxes(&objects, 0).iter().map(|b| b.0).collect();
    got.sort_unstable();
    assert_eq!(got, want);
    assert!(report.contains("detect: 5 regions per frame"), "{report}");
}

#[test]
fn labels_classes_and_map() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-labels");
    let src = testsrc(640, 480);
    let m = model("det-e2e.onnx");
    let (objects, report) = run(
        &format!(
            "{src} ! detect model={} labels=person,bicycle,car classes=car map=car:vehicle",
            m.display()
        ),
        &dir,
    );
    let got = frame_boxes(&objects, 0);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].1, got[0].2.as_str()), (2, "vehicle"));
    assert!(report.contains("2 of other classes left out"), "{report}");
    // Names from a file, one per line (blank lines and spaces around ignored); an empty file is
    // refused naming it.
    let file = dir.join("names.txt");
    std::fs::write(&file, "person\n\n  bicycle \ncar\n").unwrap();
    let (objects, _) = run(
        &format!(
            "{src} ! detect model={} labels-file={}",
            m.display(),
            file.display()
        ),
        &dir,
    );
    let names: Vec<String> = frame_boxes(&objects, 0).into_iter().map(|b| b.2).collect();
    assert_eq!(names, ["car", "person"]);
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "\n \n").unwrap();
    let text = format!(
        "{src} ! detect model={} labels-file={} ! jsonl location={}",
        m.display(),
        empty.display(),
        dir.join("o.jsonl").display()
    );
    let e = Pipeline::from_description(&text, &HashMap::new())
        .err()
        .expect("an empty labels file is refused")
        .to_string();
    assert!(
        e.contains(&format!(
            "detect: labels-file '{}': no class names in it",
            empty.display()
        )),
        "{e}"
    );
    // COCO's names.
    let (objects, _) = run(
        &format!("{src} ! detect model={} labels=coco", m.display()),
        &dir,
    );
    let names: Vec<String> = frame_boxes(&objects, 0).into_iter().map(|b| b.2).collect();
    assert_eq!(names, ["car", "person"]);
    // Classes a map renames alike are merged by NMS as one class: C (person) overlaps A (car).
    let (objects, _) = run(
        &format!(
            "{src} ! detect model={} labels=coco map=car:thing,person:thing",
            m.display()
        ),
        &dir,
    );
    let got = frame_boxes(&objects, 0);
    assert_eq!(got.len(), 1, "{got:?}");
    // The box is the car's (A), its id the output label's: "thing" is person's 0 and car's 2,
    // and one label has one id, the lowest (issue 52: three COCO ids for one label before).
    assert_eq!((got[0].1, got[0].2.as_str()), (0, "thing"));
}

/// A 640x480 PNG of one colour.
fn solid_png(dir: &Path, rgb: [u8; 3]) -> PathBuf {
    let folder = dir.join("solid");
    std::fs::create_dir_all(&folder).unwrap();
    image::RgbImage::from_pixel(640, 480, image::Rgb(rgb))
        .save(folder.join("solid.png"))
        .unwrap();
    folder
}

#[test]
fn the_model_gets_the_channels_scale_and_padding_asked_for() {
    if !common::ort_ready() {
        return;
    }
    // det-probe answers one box whose score is the mean of input channel 0.
    let dir = common::temp_dir("detect-probe");
    let folder = solid_png(&dir, [200, 50, 10]);
    let probe = |extra: &str| {
        let (objects, _) = run(
            &format!(
                "images location={} ! detect model={} score=0 {extra}",
                folder.display(),
                model("det-probe.onnx").display()
            ),
            &dir,
        );
        assert_eq!(objects.len(), 1, "{extra}");
        objects[0].detection.as_ref().unwrap().score
    };
    let near = |a: f32, b: f32| (a - b).abs() < 1e-4;
    assert!(near(probe(""), 200.0 / 255.0));
    assert!(near(probe("channels=bgr"), 10.0 / 255.0));
    assert!(near(probe("scale=1"), 200.0));
    assert!(near(probe("scale=1 mean=100,0,0 std=2,1,1"), 50.0));
    // Letterboxed: 320x240 of the image, 80 rows of padding 0.
    assert!(near(probe("scale=1 fit=letterbox pad=0"), 150.0));
}

#[test]
fn bad_models_and_settings_are_named() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-bad");
    let src = testsrc(640, 480);
    let fails = |description: String, words: &[&str]| {
        let text = format!(
            "{description} ! jsonl location={}",
            dir.join("o.jsonl").display()
        );
        let e = match Pipeline::from_description(&text, &HashMap::new()) {
            Err(e) => e.to_string(),
            Ok(p) => match p.run().error {
                Some(e) => e.to_string(),
                None => panic!("{text} ran"),
            },
        };
        for w in words {
            assert!(e.contains(w), "expected {w:?} in: {e}");
        }
    };
    // A classifier: its output [batch, 4] is no detection output.
    let classifier = model("valid-64.onnx");
    fails(
        format!("{src} ! detect model={}", classifier.display()),
        &[
            &classifier.display().to_string(),
            "no output reads as detections",
            "decoder=",
        ],
    );
    fails(
        format!(
            "{src} ! detect model={} decoder=yolov5",
            model("det-yolov8.onnx").display()
        ),
        &["no output reads as detections with decoder=yolov5"],
    );
    fails(
        format!(
            "{src} ! detect model={} output=nope",
            model("det-e2e.onnx").display()
        ),
        &["has no output 'nope'", "'dets' [1, 5, 6]"],
    );
    fails(
        format!(
            "{src} ! detect model={} labels=coco classes=zebra,unicorn",
            model("det-e2e.onnx").display()
        ),
        &["classes: 'unicorn' is neither a class name in labels nor a class index"],
    );
    fails(
        format!(
            "{src} ! detect model={} size=640x640",
            model("det-e2e.onnx").display()
        ),
        &["is 320x320, but size=640x640 was given"],
    );
    fails(
        format!(
            "{src} ! detect model={} whole-frame=true",
            model("det-e2e.onnx").display()
        ),
        &["whole-frame", "set tiles=WxH too"],
    );
    fails(
        format!(
            "{src} ! detect model={} map=car",
            model("det-e2e.onnx").display()
        ),
        &["map entry 'car' is not from:to"],
    );
    fails(
        format!(
            "{src} ! detect model={}",
            dir.join("missing.onnx").display()
        ),
        &["missing.onnx", "no such file"],
    );
}

/// A model that runs one image but fails in ONNX Runtime on more (`det-batch1-only.onnx`): run
/// an image a call it finds every frame's boxes; with two frames a call, the first call fails
/// and the run ends with its error, naming the call's first frame and ONNX Runtime's reason,
/// nothing handed on. Two streams share the stage so that with `overlap-calls=true` the next
/// call is already on the model's thread when the failed one is completed: the run still ends,
/// and in time (no hang).
#[test]
fn a_failing_call_is_the_stage_error() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-failing-call");
    let m = model("det-batch1-only.onnx");
    let (objects, _) = run(
        &format!(
            "{} ! detect model={} ep=cpu max-batch=1",
            testsrc(320, 320),
            m.display()
        ),
        &dir,
    );
    for frame in 0..2 {
        assert_eq!(frame_boxes(&objects, frame).len(), 2, "frame {frame}");
    }
    for overlap in [true, false] {
        let src = "testsrc width=320 height=320 num-buffers=6";
        let text = format!(
            "{src} ! det.  {src} ! det.  detect name=det model={} ep=cpu max-batch=2 \
             max-wait-ms=100000 overlap-calls={overlap} ! jsonl overwrite=true location={}",
            m.display(),
            dir.join("o.jsonl").display()
        );
        let mut pipeline = Pipeline::from_description(&text, &HashMap::new())
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let results = pipeline.results(1000);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // The receiver gone: the test already failed on its wait.
            let _ = tx.send(pipeline.run());
        });
        let outcome = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("overlap-calls={overlap}: the run did not end"));
        let e = outcome
            .error
            .unwrap_or_else(|| panic!("overlap-calls={overlap}: no error"))
            .to_string();
        for w in [
            &m.display().to_string(),
            "inference failed on stream ",
            " frame 0 and 1 more frames run with it",
            "cannot be reshaped",
        ] {
            assert!(
                e.contains(w),
                "overlap-calls={overlap}: expected {w:?} in: {e}"
            );
        }
        assert_eq!(results.try_iter().count(), 0, "overlap-calls={overlap}");
    }
}

/// `pipelines/visdrone-detect.pipe` on the shared clip with the shared COCO CenterNet (12 tiles of
/// 640x640, overlap 0.15, score >= 0.3), scored against the ground truth at IoU >= 0.5: the
/// reference (shared/data/README.md) finds 0.61 of the vehicles and 0.27 of the people.
#[cfg(feature = "bench")]
#[test]
fn the_shared_detector_on_tiles_of_the_clip_finds_what_the_reference_finds() {
    use octopipe_tools::bench::eval::{evaluate_files, Group};
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("detect-clip");
    let clip = data.join("visdrone/clip-9999999");
    let out = dir.join("objects.jsonl");
    let o = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &common::root()
                .join("pipelines/visdrone-detect.pipe")
                .display()
                .to_string(),
            "--set",
            &format!("root={}", clip.display()),
            "--set",
            &format!(
                "detector={}",
                data.join("models/coco-centernet-512.onnx").display()
            ),
            "--set",
            &format!(
                "model={}",
                data.join("models/visdrone-crops-64.onnx").display()
            ),
            "--set",
            &format!("out={}", out.display()),
        ]),
        std::time::Duration::from_secs(600),
    );
    let report = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{report}");
    assert!(report.contains("detect: 12 regions per frame"), "{report}");
    let e = evaluate_files(&out, &clip.join("annotations"), &clip.join("images"), None).unwrap();
    let vehicles = e.group(Group::Vehicles).recall().unwrap();
    let people = e.group(Group::People).recall().unwrap();
    let fp = e.per_frame(e.all());
    eprintln!("vehicles {vehicles:.3}, people {people:.3}, {fp:.2} false positives per frame");
    assert!(vehicles >= 0.58, "vehicle recall {vehicles:.3}");
    assert!(people >= 0.25, "people recall {people:.3}");
    assert!(fp <= 16.0, "{fp:.2} false positives per frame");
    // Every detected box went on to the classifier; the tracker numbered the ones it confirmed.
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len(), e.detections);
    assert!(objects
        .iter()
        .all(|o| o["label"].is_string() && o["detection"]["score"].as_f64() >= Some(0.3)));
    let tracked = objects.iter().filter(|o| o["track"].is_u64()).count();
    eprintln!("{tracked} of {} boxes on a confirmed track", objects.len());
    assert!(tracked > 0);
    assert!(report.contains("track: stream 0: "), "{report}");
}

/// The CUDA tunings of `detect` (`cuda-graph`, `prefer-nhwc`, `fuse-conv-bias`, `gpu-priority`)
/// reach the options its model sessions open with; none given, the sessions get the defaults.
#[test]
fn the_cuda_tunings_reach_the_model_sessions() {
    use octopipe::detect::DetectConfig;
    use octopipe::onnx::CudaOptions;
    let tuned = common::graph(
        "testsrc num-buffers=1 ! detect model=m.onnx cuda-graph=true prefer-nhwc=true \
         fuse-conv-bias=true gpu-priority=high ! jsonl location=-",
    );
    let cuda = tuned.element::<DetectConfig>().unwrap().cuda;
    assert!(cuda.graph && cuda.nhwc && cuda.fuse_bias, "{cuda:?}");
    assert_eq!(cuda.priority, octopipe::cuda::StreamPriority::High);
    assert!(!cuda.exhaustive, "{cuda:?}");
    let plain = common::graph("testsrc num-buffers=1 ! detect model=m.onnx ! jsonl location=-");
    assert_eq!(
        plain.element::<DetectConfig>().unwrap().cuda,
        CudaOptions::default()
    );
}

#[test]
fn the_gpu_priority_reaches_the_crops_and_the_classifiers() {
    use octopipe::classify::ClassifyConfig;
    use octopipe::cuda::StreamPriority;
    use octopipe::preprocess::PreprocessConfig;
    let priorities = |text: &str| {
        let g = common::graph(text);
        (
            g.element::<PreprocessConfig>().unwrap().priority,
            g.element::<ClassifyConfig>().unwrap().priority,
        )
    };
    // By default the crops and the classifier go ahead of a detector's calls (normal).
    assert_eq!(
        priorities(
            "testsrc num-buffers=1 ! boxes format=synthetic count=2 ! batch ! preprocess \
             ! classify model=m.onnx ! jsonl location=-"
        ),
        (StreamPriority::High, StreamPriority::High)
    );
    assert_eq!(
        priorities(
            "testsrc num-buffers=1 ! boxes format=synthetic count=2 ! batch \
             ! preprocess backend=cuda gpu-priority=normal \
             ! classify model=m.onnx gpu-priority=normal ! jsonl location=-"
        ),
        (StreamPriority::Normal, StreamPriority::Normal)
    );
    for bad in [
        "preprocess gpu-priority=urgent ! classify model=m.onnx",
        "preprocess ! classify model=m.onnx gpu-priority=urgent",
    ] {
        let text = format!(
            "testsrc num-buffers=1 ! boxes format=synthetic ! batch ! {bad} ! jsonl location=-"
        );
        let desc = octopipe::describe::parse("<test>", &text, &HashMap::new()).unwrap();
        let err = octopipe::describe::build(&desc).unwrap_err().to_string();
        assert!(err.contains("urgent"), "{err}");
    }
}
