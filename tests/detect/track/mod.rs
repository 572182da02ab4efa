//! The `track` stage and `classify reinfer-interval` on real data: the tracker against the
//! VisDrone MOT ground truth (ids hidden), clean and spoilt; descriptions with a track stage;
//! track ids in the JSONL and the report; streams sharing a track stage and a batch; and label
//! reuse on the real clip against classifying every frame.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use octopipe::budget::Report;
use octopipe::Builtin;
use octopipe::Pipeline;

/// The clip's folders and the shared classifier, when the shared data is there.
fn clip() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let data = common::shared_data()?;
    let clip = data.join("visdrone/clip-9999999");
    Some((
        clip.join("images"),
        clip.join("annotations"),
        data.join("models/visdrone-crops-64.onnx"),
    ))
}

/// Run `text`; the report and the JSONL lines written to `out`.
fn run(text: &str, out: &Path) -> (Report, Vec<serde_json::Value>) {
    let pipeline =
        Pipeline::from_description(text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    (outcome.report, common::read_jsonl(out))
}

/// The report's `track: stream N: B tracks born, E ended, O open at the end` numbers.
fn born_ended_open(report: &Report, stream: u32) -> (u64, u64, u64) {
    let prefix = format!("track: stream {stream}: ");
    let line = report
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{report}"));
    let n: Vec<u64> = line[prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(
        line.contains("tracks born") && line.contains("ended"),
        "{line}"
    );
    (n[0], n[1], n[2])
}

fn kinds(text: &str) -> Vec<&'static str> {
    common::graph(text).nodes.iter().map(|n| n.kind).collect()
}

#[test]
fn descriptions_with_a_track_stage_build_in_role_order() {
    assert_eq!(
        kinds(
            "images location=i framerate=30 ! boxes format=det location=a ! track \
             ! classify model=m.onnx labels=a,b ! jsonl location=o.jsonl"
        ),
        [
            "images",
            "boxes",
            "track",
            "batch",
            "preprocess",
            "classify",
            "jsonl"
        ]
    );
    assert_eq!(
        kinds("images location=i ! boxes location=a ! track ! jsonl location=o.jsonl"),
        ["images", "boxes", "track", "batch", "jsonl"]
    );
    let error = |text: &str| {
        let desc = octopipe::describe::parse("<test>", text, &HashMap::new()).unwrap();
        octopipe::describe::build(&desc).unwrap_err().message
    };
    assert_eq!(
        error("images location=i ! track ! boxes location=a ! jsonl location=o"),
        "a boxes stage must come before 'track'"
    );
    let e = error("images location=i ! boxes location=a ! batch ! track ! jsonl location=o");
    assert!(e.starts_with("stage 'track' cannot come here"), "{e}");
    assert_eq!(
        error("images location=i ! boxes location=a ! track low=0.7 ! jsonl location=o"),
        "track: low=0.7 is above high=0.5: low-score boxes are those from low up to high"
    );
    assert_eq!(
        error("images location=i ! boxes location=a ! track iou=0 ! jsonl location=o"),
        "track: iou must be a number from 0 to 1, found '0'"
    );
    assert_eq!(
        error("images location=i ! boxes location=a ! track max-age=x ! jsonl location=o"),
        "track: max-age must be an integer from 0 to 100000, found 'x'"
    );
    assert_eq!(
        error("images location=i ! boxes location=a ! track ! classify model=m reinfer-interval=0 ! jsonl location=o"),
        "classify: reinfer-interval must be an integer from 1 to 1000000, found '0'"
    );
    // inspect lists it with its properties.
    let inspect = octopipe::stage::Registry::builtin()
        .inspect(Some("track"))
        .unwrap();
    for p in ["high", "low", "iou", "max-age", "min-hits", "camera-motion"] {
        assert!(inspect.contains(p), "{p}: {inspect}");
    }
}

/// `track` after `detect` follows the detector's score unless its `high` is given: with
/// `detect score=0.15` every box the detector keeps (one scores 0.2) starts a track and gets an
/// id; with `track high=0.5` the 0.2 box gets none. The report's track section says which.
/// The README's tracking example: `octopipe pan` makes the continuous video from the shared
/// data, `pipelines/pan-track.pipe` tracks its boxes and `octopipe eval tracks` scores the ids
/// (printed): the tracker keeps each object's id under the camera's pan and zoom.
#[test]
fn the_tracker_keeps_ids_on_the_continuous_video() {
    if common::shared_data().is_none() {
        return;
    }
    let dir = common::temp_dir("track-pan");
    let octopipe = |args: &[&str]| {
        let out = common::output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_octopipe"))
                .current_dir(common::root())
                .args(args),
            std::time::Duration::from_secs(300),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    };
    let pan = dir.join("pan");
    let tracks = dir.join("tracks.jsonl");
    let (pan_s, tracks_s) = (pan.to_str().unwrap(), tracks.to_str().unwrap());
    let (_, made) = octopipe(&["pan", "--out", pan_s]);
    assert!(made.contains("150 frames of 1280x720 at 30 fps"), "{made}");
    let (_, report) = octopipe(&[
        "run",
        "pipelines/pan-track.pipe",
        "--set",
        &format!("pan={pan_s}"),
        "--set",
        &format!("out={tracks_s}"),
    ]);
    assert!(
        report.contains("frames: 150 in = 150 processed + 0 dropped"),
        "{report}"
    );
    let (scores, _) = octopipe(&[
        "eval",
        "tracks",
        "--objects",
        tracks_s,
        "--truth",
        pan.join("gt.txt").to_str().unwrap(),
    ]);
    println!("pan-track.pipe on the continuous video:\n{scores}");
    let number = |key: &str| -> f64 {
        let at = scores
            .find(key)
            .unwrap_or_else(|| panic!("no {key:?} in {scores}"))
            + key.len();
        scores[at..]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (idf1, switches) = (number("IDF1 "), number("ID switches "));
    assert!(idf1 >= 0.9, "IDF1 {idf1}: {scores}");
    assert!(switches <= 10.0, "{switches} ID switches: {scores}");
    // One id per object: the ids the tracker gave are not many more than the true tracks.
    let objects = common::read_jsonl(&tracks);
    let ids: std::collections::BTreeSet<u64> =
        objects.iter().filter_map(|o| o["track"].as_u64()).collect();
    let gt = std::fs::read_to_string(pan.join("gt.txt")).unwrap();
    let truth_ids: std::collections::BTreeSet<&str> = gt
        .lines()
        .filter(|l| l.split(',').nth(6) == Some("1"))
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    println!(
        "{} track ids for {} true objects",
        ids.len(),
        truth_ids.len()
    );
    assert!(
        ids.len() <= truth_ids.len() * 11 / 10,
        "{} ids for {} objects",
        ids.len(),
        truth_ids.len()
    );
    // The README's commands refuse to overwrite: a second run says so and leaves the file.
    let again = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["pan", "--out", pan_s]),
        std::time::Duration::from_secs(60),
    );
    common::fails_with(&again, &["gt.txt", "--force replaces it"]);
    assert!(pan.join("video.mp4").metadata().unwrap().len() > 0);
}

#[test]
fn track_follows_the_detectors_score_unless_given_high() {
    if !common::ort_ready() {
        return;
    }
    let model = common::root().join("tests/data/models/det-yolov5.onnx");
    let dir = common::temp_dir("track-follows-detect");
    let run_with = |track: &str, name: &str| {
        let out = dir.join(format!("{name}.jsonl"));
        let text = format!(
            "testsrc width=640 height=480 num-buffers=3 ! detect model={} score=0.15 ! {track} ! jsonl location={}",
            model.display(),
            out.display()
        );
        run(&text, &out)
    };
    let (report, objects) = run_with("track", "follows");
    assert_eq!(objects.len(), 9, "3 boxes a frame");
    let untracked: Vec<_> = objects.iter().filter(|o| o["track"].is_null()).collect();
    assert!(untracked.is_empty(), "{untracked:?}");
    let section = &report.sections::<octopipe::track::TrackSection>()[0];
    assert_eq!(
        (section.high, section.high_from),
        (0.15, octopipe::track::HighFrom::DetectScore)
    );
    assert!(
        report
            .to_string()
            .contains("; high=0.15 from the detector's score"),
        "{report}"
    );
    let (report, objects) = run_with("track high=0.5", "given");
    let low: Vec<_> = objects
        .iter()
        .filter(|o| (o["detection"]["score"].as_f64().unwrap() - 0.2).abs() < 1e-6)
        .collect();
    assert_eq!(low.len(), 3);
    assert!(low.iter().all(|o| o["track"].is_null()), "{low:?}");
    let section = &report.sections::<octopipe::track::TrackSection>()[0];
    assert_eq!(section.high_from, octopipe::track::HighFrom::Track);
}

#[test]
fn track_ids_reach_the_jsonl_and_streams_sharing_a_batch_keep_their_own_tracks() {
    let Some((images, annotations, _)) = clip() else {
        return;
    };
    let dir = common::temp_dir("track-streams");
    let (images, annotations) = panned_clip(&images, &annotations, &dir, 2, 20);
    let (one, two) = (dir.join("one.jsonl"), dir.join("two.jsonl"));
    let head = format!(
        "images location={} framerate=30 ! boxes format=det location={}",
        images.display(),
        annotations.display()
    );
    // One stream, no classifier: boxes, track ids, JSONL.
    let track = "track max-age=10";
    let (r1, single) = run(
        &format!("{head} ! {track} ! jsonl location={}", one.display()),
        &one,
    );
    // Two streams of the same frames, through one track stage and one batch stage.
    let (r2, both) = run(
        &format!(
            "{head} ! t.\n{head} ! {track} name=t ! batch max-frames=4 ! jsonl location={}",
            two.display()
        ),
        &two,
    );
    eprintln!("{r1}\n{r2}");
    let boxes: usize = std::fs::read_dir(&annotations)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    let skipped: u64 = r1.skipped.iter().map(|(_, n)| n).sum();
    assert_eq!(
        single.len() + skipped as usize,
        boxes,
        "every box of the video"
    );
    assert!(single.iter().all(|o| o["stream"] == 0));
    let tracked = single.iter().filter(|o| o["track"].is_u64()).count();
    let ids: std::collections::HashSet<u64> =
        single.iter().filter_map(|o| o["track"].as_u64()).collect();
    eprintln!(
        "one stream: {tracked} of {} boxes tracked, {} ids",
        single.len(),
        ids.len()
    );
    // Annotation boxes score 1: all but the first frame of a track born after frame 0
    // (min-hits=2) carry an id.
    assert!(tracked as f64 >= 0.95 * single.len() as f64, "{tracked}");
    let (born, ended, open) = born_ended_open(&r1, 0);
    assert_eq!(born as usize, ids.len(), "{r1}");
    assert_eq!(born, ended + open, "{r1}");
    // Two shots of 20 frames: about the boxes of each shot's first frame, plus those that
    // come in through the edges; the first shot's tracks end 10 frames after the cut.
    let first = |k: u64| single.iter().filter(|o| o["frame"] == k).count() as u64;
    assert!(born < (first(0) + first(20)) * 3 / 2, "{born} tracks");
    assert!(ended >= first(0) * 3 / 4 && ended < born, "{r1}");

    // Each stream's boxes and ids are the single stream's, frame by frame: nothing mixed.
    assert_eq!(both.len(), 2 * single.len());
    for stream in [0, 1] {
        let mine: Vec<_> = both.iter().filter(|o| o["stream"] == stream).collect();
        assert_eq!(mine.len(), single.len());
        for (a, b) in mine.iter().zip(&single) {
            for key in ["frame", "bbox", "track"] {
                assert_eq!(a[key], b[key], "stream {stream}: {a} vs {b}");
            }
        }
        assert_eq!(born_ended_open(&r2, stream), (born, ended, open), "{r2}");
    }
}

/// Label reuse against classifying every frame, on the same frames and boxes.
struct Reuse {
    /// Crops made with `reinfer-interval=1` and with N.
    crops: (usize, usize),
    /// Objects out, the share whose label is the same in both runs (matched by frame and box).
    objects: usize,
    agreement: f64,
    /// Right labels against the annotations' categories, in both runs.
    right: (usize, usize),
}

/// Run `images location=IMAGES framerate=30 ! boxes format=det location=ANNOTATIONS ! track !
/// classify ... ! jsonl` with `reinfer-interval=1` and `=interval`, and check what must hold
/// whatever the frames: every box comes out once, in the same order, reused ones marked and
/// labelled; the crops made, the report's classified count and the fresh labels agree; the
/// object accounting is exact.
fn reuse(images: &Path, annotations: &Path, model: &Path, interval: u64, dir: &Path) -> Reuse {
    let run_with = |interval: u64| {
        let out = dir.join(format!("every-{interval}.jsonl"));
        let text = format!(
            "images location={} framerate=30 ! boxes format=det location={} ! track \
             ! classify model={} labels=person,two-wheeler,car,large-vehicle reinfer-interval={interval} \
             ! jsonl location={}",
            images.display(),
            annotations.display(),
            model.display(),
            out.display()
        );
        let mut pipeline = Pipeline::from_description(&text, &HashMap::new()).unwrap();
        // The crops made, counted on the batches themselves.
        let batches = pipeline.batches(4);
        let reader = std::thread::spawn(move || {
            batches
                .iter()
                .map(|b| {
                    let boxes: usize = b.frames.iter().map(|f| f.detections.len()).sum();
                    (b.crops.len(), boxes)
                })
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        });
        let outcome = pipeline.run();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        let (crops, boxes) = reader.join().unwrap();
        eprintln!("{}\n", outcome.report);
        (outcome.report, common::read_jsonl(&out), crops, boxes)
    };
    let (r1, every, crops1, boxes) = run_with(1);
    let (rn, reused, crops, boxes_n) = run_with(interval);
    let n = every.len();
    assert_eq!((boxes, boxes_n, reused.len()), (n, n, n));
    assert_eq!((crops1, r1.objects, r1.reused), (n, n as u64, 0));
    for (a, b) in every.iter().zip(&reused) {
        for key in ["stream", "frame", "bbox", "track"] {
            assert_eq!(a[key], b[key], "{a} vs {b}");
        }
        assert!(a.get("reused").is_none(), "{a}");
        // Only tracked boxes reuse a label, and every object has one.
        assert!(b.get("reused").is_none() || b["track"].is_u64(), "{b}");
        assert!(b["label"].is_string(), "{b}");
    }
    let marked = reused.iter().filter(|o| o["reused"] == true).count();
    assert_eq!(crops + marked, n);
    assert_eq!(
        (rn.objects, rn.reused, rn.reused_unlabelled),
        (crops as u64, marked as u64, 0)
    );
    let skipped: u64 = rn.skipped.iter().map(|(_, k)| k).sum();
    let line = format!(
        "objects: {} in = {crops} classified + {marked} reused + {skipped} skipped",
        n as u64 + skipped
    );
    assert!(rn.to_string().contains(&line), "{line}\n{rn}");
    // Both runs track alike.
    assert_eq!(born_ended_open(&r1, 0), born_ended_open(&rn, 0));
    let agree = every
        .iter()
        .zip(&reused)
        .filter(|(a, b)| a["label"] == b["label"])
        .count();
    Reuse {
        crops: (crops1, crops),
        objects: n,
        agreement: agree as f64 / n as f64,
        right: (common::accuracy(&every).0, common::accuracy(&reused).0),
    }
}

/// The clip as the data README says to play it. Its 34 frames are VisDrone-DET samples of one
/// flight, views far apart (consecutive frames share almost no object: the median best IoU of
/// a box with the next frame's boxes is 0), so little is tracked and little reused: the numbers
/// are recorded (BENCHMARKS.md), the accounting and the labels checked.
#[test]
fn reinfer_interval_on_the_clip_accounts_for_every_object() {
    let Some((images, annotations, model)) = clip() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("track-reinfer-clip");
    let r = reuse(&images, &annotations, &model, 10, &dir);
    eprintln!(
        "clip, reinfer-interval=10: {} crops instead of {} ({:.2}x fewer), labels agree on {:.2}% of {}; right: {} vs {}",
        r.crops.1,
        r.crops.0,
        r.crops.0 as f64 / r.crops.1 as f64,
        r.agreement * 100.0,
        r.objects,
        r.right.0,
        r.right.1
    );
    assert_eq!(r.objects, 2012);
    assert!(r.crops.1 < r.crops.0);
    assert!(r.agreement >= 0.98, "{:.4}", r.agreement);
}

/// A video made from the clip's frames: each of `shots` frames (taken evenly) filmed for
/// `frames` frames by a camera panning across it (a 1280x960 window moving 8 px right and 5 px
/// down a frame), each frame JPEG-encoded anew, its DET annotations moved with the window. Real
/// pixels, real boxes, a real camera motion, and a cut between shots. Returns the images and
/// annotations folders.
fn panned_clip(
    images: &Path,
    annotations: &Path,
    out: &Path,
    shots: usize,
    frames: u32,
) -> (PathBuf, PathBuf) {
    let (img_out, ann_out) = (out.join("images"), out.join("annotations"));
    std::fs::create_dir_all(&img_out).unwrap();
    std::fs::create_dir_all(&ann_out).unwrap();
    let mut names = common::sorted_files(images);
    names.retain(|p| p.extension().is_some_and(|e| e == "jpg"));
    let (w, h) = (1280u32, 960u32);
    for shot in 0..shots {
        let src = &names[shot * names.len() / shots];
        let rgb = image::open(src).unwrap().to_rgb8();
        let stem = src.file_stem().unwrap().to_string_lossy();
        let rows = std::fs::read_to_string(annotations.join(format!("{stem}.txt"))).unwrap();
        for k in 0..frames {
            let (ox, oy) = (40 + 8 * k, 30 + 5 * k);
            let view = image::imageops::crop_imm(&rgb, ox, oy, w, h).to_image();
            let name = format!("pan-{shot:02}-{k:03}");
            let file = std::fs::File::create(img_out.join(format!("{name}.jpg"))).unwrap();
            let mut encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(file, 90);
            encoder.encode_image(&view).unwrap();
            // Moved with the window; the boxes stage clips them to the frame.
            let moved: String = rows
                .lines()
                .filter_map(|l| {
                    let mut v: Vec<i64> =
                        l.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                    if v.len() < 6 {
                        return None;
                    }
                    v[0] -= ox as i64;
                    v[1] -= oy as i64;
                    let inside =
                        v[0] + v[2] > 0 && v[1] + v[3] > 0 && v[0] < w as i64 && v[1] < h as i64;
                    inside.then(|| {
                        let fields: Vec<String> = v.iter().map(i64::to_string).collect();
                        fields.join(",") + "\n"
                    })
                })
                .collect();
            std::fs::write(ann_out.join(format!("{name}.txt")), moved).unwrap();
        }
    }
    (img_out, ann_out)
}

/// `reinfer-interval=10` on a video made from the clip ([`panned_clip`]: 4 shots of 30
/// frames): at least 5 times fewer crops, and the same label as when classifying every frame
/// on at least 98% of the objects.
#[test]
fn reinfer_interval_cuts_the_crops_and_keeps_the_labels() {
    let Some((images, annotations, model)) = clip() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("track-reinfer-pan");
    let (pan_images, pan_annotations) = panned_clip(&images, &annotations, &dir, 4, 30);
    let r = reuse(&pan_images, &pan_annotations, &model, 10, &dir);
    let cut = r.crops.0 as f64 / r.crops.1 as f64;
    eprintln!(
        "panned clip, reinfer-interval=10: {} crops instead of {} ({cut:.2}x fewer), labels agree on {:.2}% of {}; right: {} vs {}",
        r.crops.1,
        r.crops.0,
        r.agreement * 100.0,
        r.objects,
        r.right.0,
        r.right.1
    );
    assert!(cut >= 5.0, "crops cut {cut:.2}x");
    assert!(
        r.agreement >= 0.98,
        "labels agree on {:.2}%",
        r.agreement * 100.0
    );
}

/// Two classifiers one after the other with `reinfer-interval=10` on the panned clip: each gives
/// every box its own answer under its name, a reused box its track's last answer of its own
/// (not the other classifier's), and the first's is the box's main result. Before the chain
/// shared one plan, reused boxes came out with no entry at all, and the second classifier kept
/// the first's answers as its own.
#[test]
fn a_chain_of_classifiers_reuses_each_ones_own_answers() {
    let Some((images, annotations, model)) = clip() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("track-reinfer-chain");
    let (pan_images, pan_annotations) = panned_clip(&images, &annotations, &dir, 2, 30);
    let out = dir.join("chain.jsonl");
    let labels = "person,two-wheeler,car,large-vehicle";
    let text = format!(
        "images location={} framerate=30 ! boxes format=det location={} ! track \
         ! classify model={m} labels={labels} reinfer-interval=10 \
         ! classify name=again model={m} labels=c2:person,c2:two-wheeler,c2:car,c2:large-vehicle \
         reinfer-interval=10 ! jsonl location={}",
        pan_images.display(),
        pan_annotations.display(),
        out.display(),
        m = model.display(),
    );
    let (report, objects) = run(&text, &out);
    assert!(report.reused > 0 && report.objects > 0, "{report}");
    assert_eq!(report.reused_unlabelled, 0, "{report}");
    // Each classifier's last fresh answer per track, in frame order.
    let mut last: HashMap<(u64, u64, &str), &serde_json::Value> = HashMap::new();
    let mut reused = 0;
    for o in &objects {
        let c = &o["classifiers"];
        for name in ["classify", "again"] {
            assert!(c[name]["label"].is_string(), "{name} missing: {o}");
        }
        assert_eq!(o["label"], c["classify"]["label"], "{o}");
        assert!(
            c["again"]["label"].as_str().unwrap().starts_with("c2:"),
            "{o}"
        );
        let track = (
            o["stream"].as_u64().unwrap(),
            o["track"].as_u64().unwrap_or(u64::MAX),
        );
        for name in ["classify", "again"] {
            let key = (track.0, track.1, name);
            if o["reused"] == true {
                assert_eq!(
                    Some(&&c[name]),
                    last.get(&key),
                    "{name}'s reused answer: {o}"
                );
            } else {
                last.insert(key, &c[name]);
            }
        }
        reused += usize::from(o["reused"] == true);
    }
    assert_eq!(reused as u64, report.reused);
    assert!(
        reused * 2 > objects.len(),
        "{reused} of {} reused",
        objects.len()
    );
}

#[cfg(feature = "bench")]
mod mot;
