//! One detect stage shared by several streams: every stream's boxes are exactly those it gets
//! alone, frames of several streams really share the model's calls, `interval` leaves frames to
//! the tracker, and (on a GPU) the CUDA path with CenterNet's peaks found on the GPU gives the
//! CPU's boxes. The detector is the shared COCO CenterNet cut at its heads, with a free batch
//! (`scripts/make_centernet_heads.py`, made here at test time from ../shared/data).

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use octopipe::pipeline::Pipeline;
use octopipe::sink::Object;
use octopipe::Builtin;

mod engine;
mod gpu;

/// The heads model: `$OCTOPIPE_CENTERNET_HEADS` when set (made ahead, as on the device),
/// else made into `dir`; `None` (with the reason printed) where the shared data or python's
/// onnx is missing.
fn heads_model(dir: &Path) -> Option<PathBuf> {
    made_ahead_or_heads("OCTOPIPE_CENTERNET_HEADS", dir, "centernet-heads.onnx", &[])
}

/// The model that `$VAR` names when set (made ahead, as on the device), else
/// [`make_heads`]`(dir, name, args)`; `None` (with the reason printed) where the shared data or
/// ONNX Runtime is missing.
fn made_ahead_or_heads(var: &str, dir: &Path, name: &str, args: &[&str]) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(made) if common::shared_data().is_some() && common::ort_ready() => {
            Some(PathBuf::from(made))
        }
        _ => make_heads(dir, name, args),
    }
}

/// `scripts/make_centernet_heads.py ARGS` on the shared detector, into `dir/name`; `None` (with
/// the reason printed) where the shared data or python's onnx is missing.
fn make_heads(dir: &Path, name: &str, args: &[&str]) -> Option<PathBuf> {
    let data = common::shared_data()?;
    if !common::ort_ready() {
        return None;
    }
    let out = dir.join(name);
    let made = std::process::Command::new("python3")
        .arg(common::root().join("scripts/make_centernet_heads.py"))
        .args(args)
        .arg(data.join("models/coco-centernet-512.onnx"))
        .arg(&out)
        .output();
    match made {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr).to_string();
            common::skip(&format!("make_centernet_heads.py failed: {why}"));
            None
        }
        Err(e) => {
            common::skip(&format!("python3: {e}"));
            None
        }
    }
}

/// A folder holding the first `n` images of `from` (sorted by name).
fn images(dir: &Path, name: &str, from: &Path, n: usize) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for f in common::sorted_files(from).into_iter().take(n) {
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
    to
}

/// Run `text` (a sink is appended); every object and the report's text.
fn run(text: &str, dir: &Path) -> (Vec<Object>, String) {
    std::fs::create_dir_all(dir).unwrap();
    let text = format!("{text} ! jsonl location={}", dir.join("o.jsonl").display());
    let mut pipeline = Pipeline::from_description(&text, &HashMap::new())
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let results = pipeline.results(1_000_000);
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{text}: {:?}", outcome.error);
    (results.try_iter().collect(), outcome.report.to_string())
}

/// Every object of each of `folders` run alone through `detect`, as rows numbered as stream i.
fn alone(folders: &[PathBuf], detect: &str, dir: &Path) -> Vec<Row> {
    let mut alone = Vec::new();
    for (i, f) in folders.iter().enumerate() {
        let (objects, _) = run(
            &format!("images location={} ! {detect}", f.display()),
            &dir.join(format!("alone{i}")),
        );
        alone.extend(rows(&objects).into_iter().map(|mut r| {
            r.0 = i as u32;
            r
        }));
    }
    alone.sort_by_key(|r| (r.0, r.1));
    alone
}

/// Frames per call from the report's detect line.
fn frames_per_call(report: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("detect:"))
        .unwrap_or_else(|| panic!("{report}"));
    eprintln!("{line}");
    let head = &line[..line
        .find(" frames and ")
        .unwrap_or_else(|| panic!("{line}"))];
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

/// (stream, frame, box, class, score in 1e-5 steps).
type Row = (u32, u64, [u32; 4], Option<u32>, i64);

/// Objects as comparable rows: (stream, frame, box, class, score in 1e-5 steps).
fn rows(objects: &[Object]) -> Vec<Row> {
    objects
        .iter()
        .map(|o| {
            let score = o.detection.as_ref().map_or(0.0, |d| d.score);
            (
                o.stream,
                o.frame,
                o.bbox,
                o.detection.as_ref().and_then(|d| d.class_id),
                (score * 1e5).round() as i64,
            )
        })
        .collect()
}

/// The detector's class of an object.
fn class(o: &Object) -> Option<u32> {
    o.detection.as_ref().and_then(|d| d.class_id)
}

/// How many of `want`'s boxes `got` has (same stream, frame and class, IoU at least `min_iou`).
fn matched(want: &[Object], got: &[Object], min_iou: f64) -> usize {
    let iou = |a: [u32; 4], b: [u32; 4]| octopipe::track::iou_u32(a, b);
    want.iter()
        .filter(|c| {
            got.iter().any(|g| {
                g.stream == c.stream
                    && g.frame == c.frame
                    && class(g) == class(c)
                    && iou(g.bbox, c.bbox) >= min_iou
            })
        })
        .count()
}

const DETECT: &str = "labels=coco scale=1 tiles=960x960 overlap=0.15 score=0.3 iou=0.5 ios=0.85";

/// Model calls from the report's detect line.
fn calls(report: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("detect:"))
        .unwrap_or_else(|| panic!("{report}"));
    let head = &line[..line
        .find(" model calls of ")
        .unwrap_or_else(|| panic!("{line}"))];
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn streams_sharing_a_detector_get_the_boxes_each_gets_alone() {
    let dir = common::temp_dir("shared-detect");
    let Some(model) = heads_model(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    // Three streams of different frames and sizes: 1920x1080 and others, 2000x1500.
    let folders = [
        images(&dir, "a", &data.join("visdrone/val-frames/images"), 3),
        images(&dir, "b", &data.join("visdrone/clip-9999999/images"), 2),
        images(&dir, "c", &data.join("visdrone/val-frames/images"), 5),
    ];
    let detect = format!("detect model={} {DETECT} ep=cpu", model.display());
    // Alone, every step of a call on the stage's thread (the stage before calls overlapped).
    let alone = alone(&folders, &format!("{detect} overlap-calls=false"), &dir);
    assert!(!alone.is_empty());
    // One call for as many frames as 24 tiles hold (51 tiles in all: 3 calls); no deadline, so
    // calls are full. With `overlap-calls=true` (the default on CUDA, set here on the CPU) each
    // call is on the model's thread while the stage preprocesses the next and places the boxes
    // of the one before; without, one after the other.
    for overlap in [true, false] {
        let text = format!(
            "images location={} ! det.  images location={} ! det.  images location={} \
             ! {detect} name=det max-batch=24 max-wait-ms=100000 overlap-calls={overlap}",
            folders[0].display(),
            folders[1].display(),
            folders[2].display()
        );
        let (objects, report) = run(&text, &dir.join(format!("shared-{overlap}")));
        let mut shared = rows(&objects);
        shared.sort_by_key(|r| (r.0, r.1));
        // Each stream's boxes, in order: the same boxes, classes and scores.
        assert_eq!(shared.len(), alone.len(), "{report}");
        assert_eq!(shared, alone, "{report}");
        // Frames of several streams shared the model's calls, and there were several calls (a
        // call was started while the one before was on the model's thread).
        assert!(frames_per_call(&report) > 2.0, "{report}");
        assert!(calls(&report) >= 3, "{report}");
        // Every stream's frames left in their order.
        for s in 0..3 {
            let frames: Vec<u64> = objects
                .iter()
                .filter(|o| o.stream == s)
                .map(|o| o.frame)
                .collect();
            assert!(
                frames.windows(2).all(|w| w[0] <= w[1]),
                "stream {s}: {frames:?}"
            );
        }
    }
}

/// The detector rewritten for the GPU's sake (`--bias-fold --bias-sub all`: residual blocks'
/// biases deferred into the next 1x1 convolutions, the others added by a Sub) computes the same
/// sums in another order: the cut model's boxes, classes and scores.
/// The heads rewritten (biases moved, scores as logits) give the boxes of the heads as cut.
#[test]
fn the_detector_rewritten_gives_the_same_boxes() {
    let dir = common::temp_dir("shared-detect-bias");
    let Some(cut) = make_heads(&dir, "cut.onnx", &[]) else {
        return;
    };
    let rewrite = ["--bias-fold", "--bias-sub", "all", "--logits"];
    let Some(rewritten) = make_heads(&dir, "bias.onnx", &rewrite) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let folder = images(&dir, "a", &data.join("visdrone/clip-9999999/images"), 2);
    let boxes = |model: &Path, name: &str| {
        let text = format!(
            "images location={} ! detect model={} {DETECT} ep=cpu",
            folder.display(),
            model.display()
        );
        let mut rows = rows(&run(&text, &dir.join(name)).0);
        rows.sort_by_key(|r| (r.0, r.1, r.2));
        rows
    };
    let (a, b) = (boxes(&cut, "cut"), boxes(&rewritten, "bias"));
    assert!(a.len() > 20, "{} boxes", a.len());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.0, x.1, x.3), (y.0, y.1, y.3), "{x:?} {y:?}");
        assert!(
            x.2.iter().zip(&y.2).all(|(p, q)| p.abs_diff(*q) <= 1),
            "{x:?} {y:?}"
        );
        assert!(
            (x.4 - y.4).abs() <= 10,
            "scores 1e-4 apart at most: {x:?} {y:?}"
        );
    }
}

/// The heads cut to the six classes a drone pipeline keeps (`--keep-classes`, the score head's
/// other rows dropped) and without the identity reshapes (`--drop-reshapes`) give, named in that
/// order, the boxes and scores the whole COCO model gives for those classes; named with COCO's 80
/// labels, the stage refuses it.
#[test]
fn the_detector_cut_to_its_classes_gives_their_boxes() {
    let dir = common::temp_dir("shared-detect-classes");
    let Some(whole) = make_heads(&dir, "whole.onnx", &["--logits"]) else {
        return;
    };
    let cut = [
        "--logits",
        "--keep-classes",
        "0,1,2,3,5,7",
        "--drop-reshapes",
    ];
    let Some(six) = make_heads(&dir, "six.onnx", &cut) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let folder = images(&dir, "a", &data.join("visdrone/clip-9999999/images"), 2);
    let names = "person,bicycle,car,motorcycle,bus,truck";
    let boxes = |model: &Path, labels: &str, name: &str| {
        let detect = DETECT.replace("labels=coco", labels);
        let text = format!(
            "images location={} ! detect model={} {detect} classes={names} ep=cpu",
            folder.display(),
            model.display()
        );
        let mut rows: Vec<_> = run(&text, &dir.join(name))
            .0
            .into_iter()
            .map(|o| {
                let d = o.detection.expect("a detector's box");
                (o.frame, o.bbox, d.label, (d.score * 1e5).round() as i64)
            })
            .collect();
        rows.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
        rows
    };
    let a = boxes(&whole, "labels=coco", "whole");
    let b = boxes(&six, &format!("labels={names}"), "six");
    assert!(a.len() > 20, "{} boxes", a.len());
    assert!(
        a.iter().any(|r| r.2.as_deref() == Some("person"))
            && a.iter().any(|r| r.2.as_deref() == Some("car"))
    );
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.0, x.1, &x.2), (y.0, y.1, &y.2), "{x:?} {y:?}");
        assert!(
            (x.3 - y.3).abs() <= 10,
            "scores 1e-4 apart at most: {x:?} {y:?}"
        );
    }
    // With COCO's 80 names the six classes would be named wrongly (its 5th, bus, as COCO's 5th,
    // airplane): refused, naming the model.
    let text = format!(
        "images location={} ! detect model={} {DETECT} ep=cpu ! jsonl location={}",
        folder.display(),
        six.display(),
        dir.join("coco.jsonl").display()
    );
    let err = match Pipeline::from_description(&text, &HashMap::new()) {
        Err(e) => e.to_string(),
        Ok(p) => p.run().error.map(|e| e.to_string()).unwrap_or_default(),
    };
    assert!(
        err.contains("six.onnx")
            && err.contains("its scores have 6 classes but the labels name 80"),
        "{err}"
    );
}

/// A pipeline that starts with its detect stage takes streams while it runs (as over HTTP):
/// each added stream joins the one detector, shares its calls with the others, and gets the
/// boxes it gets alone.
#[test]
fn streams_added_while_running_join_the_shared_detector() {
    let dir = common::temp_dir("shared-detect-added");
    let Some(model) = heads_model(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let folders = [
        images(&dir, "a", &data.join("visdrone/val-frames/images"), 4),
        images(&dir, "b", &data.join("visdrone/clip-9999999/images"), 3),
    ];
    let detect = format!("detect model={} {DETECT} ep=cpu", model.display());
    let alone = alone(&folders, &detect, &dir);
    let out = dir.join("added.jsonl");
    let text = format!(
        "{detect} max-batch=24 max-wait-ms=100000 ! jsonl location={}",
        out.display()
    );
    let registry = octopipe::stage::Registry::builtin();
    let desc = octopipe::describe::parse("<test>", &text, &HashMap::new()).unwrap();
    let graph = octopipe::describe::build_open(&desc, &registry).unwrap_or_else(|e| panic!("{e}"));
    let mut pipeline = Pipeline::build(graph).unwrap_or_else(|e| panic!("{e}"));
    let streams = pipeline.streams(&registry).unwrap();
    let results = pipeline.results(1_000_000);
    // A stream that holds its own detector is refused: it would be detected twice.
    let e = streams
        .add_text("testsrc ! detect model=x.onnx", None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("streams join this pipeline's 'detect' stage"),
        "{e}"
    );
    let run = std::thread::spawn(move || pipeline.run());
    for (i, f) in folders.iter().enumerate() {
        let added = streams
            .add_text(&format!("images location={}", f.display()), Some(i as u32))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(added.id, i as u32);
    }
    // Both streams' sources ended; the frames still held go with the close.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !streams
        .list()
        .iter()
        .all(|s| s.state == octopipe::pipeline::StreamState::Ended)
    {
        assert!(std::time::Instant::now() < deadline, "{:?}", streams.list());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    streams.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let report = outcome.report.to_string();
    let objects: Vec<Object> = results.try_iter().collect();
    let mut shared = rows(&objects);
    shared.sort_by_key(|r| (r.0, r.1));
    assert!(!alone.is_empty());
    assert_eq!(shared, alone, "{report}");
    assert!(frames_per_call(&report) > 1.5, "{report}");
}

#[test]
fn an_interval_leaves_frames_to_the_tracker() {
    let dir = common::temp_dir("detect-interval");
    let Some(model) = heads_model(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let clip = images(&dir, "clip", &data.join("visdrone/clip-9999999/images"), 4);
    let base = format!(
        "images location={} ! detect model={} {DETECT} ep=cpu",
        clip.display(),
        model.display()
    );
    // Without a tracker after it the stage refuses to skip frames.
    let text = format!(
        "{base} interval=2 ! jsonl location={}",
        dir.join("x.jsonl").display()
    );
    let e = match Pipeline::from_description(&text, &HashMap::new()) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("put a track stage after detect"), "{e}");

    let (every, _) = run(&format!("{base} ! track min-hits=1"), &dir.join("every"));
    let (objects, report) = run(
        &format!("{base} interval=2 ! track min-hits=1"),
        &dir.join("interval"),
    );
    assert!(
        report.contains("2 frames left to the tracker (interval=2)"),
        "{report}"
    );
    let frame = |objs: &[Object], f: u64| -> Vec<Object> {
        objs.iter().filter(|o| o.frame == f).cloned().collect()
    };
    // Frames 0 and 2 detected as without the interval; frames 1 and 3 the tracks' predictions.
    for f in [0, 2] {
        let got = frame(&objects, f);
        assert!(got.iter().all(|o| !o.predicted));
        let boxes: Vec<[u32; 4]> = got.iter().map(|o| o.bbox).collect();
        let want: Vec<[u32; 4]> = frame(&every, f).iter().map(|o| o.bbox).collect();
        assert_eq!(boxes, want, "frame {f}");
    }
    for f in [1, 3] {
        let got = frame(&objects, f);
        assert!(!got.is_empty(), "frame {f}: the tracks' boxes");
        assert!(
            got.iter().all(|o| o.predicted && o.track.is_some()),
            "frame {f}"
        );
        // Each predicted box carries its track's class from the frame before.
        let before = frame(&objects, f - 1);
        for o in &got {
            let src = before
                .iter()
                .find(|b| b.track == o.track)
                .expect("its track");
            assert_eq!(
                o.detection.as_ref().unwrap().label,
                src.detection.as_ref().unwrap().label
            );
        }
    }
    let line = std::fs::read_to_string(dir.join("interval/o.jsonl")).unwrap();
    assert!(
        line.contains("\"predicted\":true"),
        "the JSONL marks predicted boxes"
    );
}

/// `interval=2` on two streams sharing the stage, a frame a call: a frame left to the tracker
/// comes while its stream's frame before is on the model's thread (with `overlap-calls`), and
/// leaves behind it. Every stream's frames leave in their order, and the boxes (detected and
/// predicted) are those of the stage that runs each call on its own thread one after the other.
#[test]
fn an_interval_keeps_each_streams_order_with_calls_in_flight() {
    let dir = common::temp_dir("detect-interval-shared");
    let Some(model) = heads_model(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let a = images(&dir, "a", &data.join("visdrone/clip-9999999/images"), 5);
    let b = images(&dir, "b", &data.join("visdrone/val-frames/images"), 4);
    let out = |overlap: bool| {
        let text = format!(
            "images location={} ! det.  images location={} ! det.  detect name=det model={} \
             {DETECT} ep=cpu interval=2 max-batch=1 overlap-calls={overlap} ! track min-hits=1",
            a.display(),
            b.display(),
            model.display()
        );
        run(&text, &dir.join(format!("run-{overlap}")))
    };
    let (with, report) = out(true);
    let (without, _) = out(false);
    assert!(
        report.contains("4 frames left to the tracker (interval=2)"),
        "{report}"
    );
    // (stream, frame, box, predicted), in the order they left.
    let keyed = |objects: &[Object]| -> Vec<(u32, u64, [u32; 4], bool)> {
        objects
            .iter()
            .map(|o| (o.stream, o.frame, o.bbox, o.predicted))
            .collect()
    };
    let (mut got, mut want) = (keyed(&with), keyed(&without));
    for s in 0..2 {
        let frames: Vec<u64> = got.iter().filter(|o| o.0 == s).map(|o| o.1).collect();
        assert!(
            frames.windows(2).all(|w| w[0] <= w[1]),
            "stream {s}: {frames:?}"
        );
        // Odd frames predicted, even ones detected.
        assert!(got
            .iter()
            .filter(|o| o.0 == s)
            .all(|o| o.3 == (o.1 % 2 == 1)));
        assert!(
            got.iter().any(|o| o.0 == s && o.3),
            "stream {s}: predictions"
        );
    }
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "{report}");
}

/// Live, a shared detect hands on a call's frames at once: the frame edges after it hold
/// `max-batch` frames and block (the tracker's too), while the sources' edges into it keep four
/// frames and drop the oldest (where a live pipeline lets frames in; one call in flight may
/// hold a frame up); a stream added over HTTP gets the same edge into it, and a source's edge
/// into anything else keeps one frame.
#[test]
fn live_edges_after_a_shared_detect_hold_its_calls() {
    let text = "testsrc live=true ! det.  testsrc live=true \
                ! detect name=det model=d.onnx max-batch=24 ! track ! batch ! jsonl location=/dev/null";
    let desc = octopipe::describe::parse("<test>", text, &HashMap::new()).unwrap();
    let graph = octopipe::describe::build(&desc).unwrap_or_else(|e| panic!("{e}"));
    let block = octopipe::pipeline::Queue {
        size: 24,
        policy: octopipe::pipeline::EdgePolicy::Block,
    };
    for n in &graph.nodes {
        let want = match n.kind {
            "detect" | "track" => block,
            "batch" | "jsonl" => octopipe::pipeline::Queue::LIVE_BATCHES,
            _ => octopipe::pipeline::Queue::LIVE_INTO_COLLECTOR,
        };
        assert_eq!(n.queue, want, "the edge after {}", n.kind);
    }
    assert_eq!(octopipe::pipeline::Queue::LIVE_INTO_COLLECTOR.size, 4);

    let registry = octopipe::stage::Registry::builtin();
    let added = octopipe::describe::parse("<test>", "testsrc live=true", &HashMap::new()).unwrap();
    let branch = octopipe::describe::build_branch(&added, &registry, true, false).unwrap();
    assert_eq!(
        branch.last().unwrap().queue,
        octopipe::pipeline::Queue::LIVE_INTO_COLLECTOR
    );
    let plain = "testsrc live=true ! boxes format=synthetic ! batch ! jsonl location=/dev/null";
    let desc = octopipe::describe::parse("<test>", plain, &HashMap::new()).unwrap();
    let graph = octopipe::describe::build(&desc).unwrap();
    assert_eq!(graph.nodes[0].queue, octopipe::pipeline::Queue::LIVE);
}
