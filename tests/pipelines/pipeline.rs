//! The whole pipeline, end to end, through the library API and the pipeline files.

use crate::common;

use std::path::Path;
use std::process::Command;

use octopipe::describe;
use octopipe::pipeline::{Outcome, Pipeline};
use octopipe::Builtin;

/// One pipeline at a time: each starts several threads, and the fairness test below
/// assumes its sources outrun its pipeline, which a second pipeline on a 2-core machine can break.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::serial()
}

fn run_file(pipe: &str, vars: &[(&str, &Path)]) -> Outcome {
    let text = std::fs::read_to_string(common::root().join(pipe)).unwrap();
    let desc = describe::parse(pipe, &text, &common::vars(vars)).unwrap();
    let config = describe::build(&desc).unwrap();
    Pipeline::build(config).unwrap().run()
}

#[test]
fn visdrone_clip_is_labelled_like_the_reference() {
    let _serial = serial();
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let out = common::temp_dir("clip").join("objects.jsonl");
    let start = std::time::SystemTime::now();
    let outcome = run_file(
        "pipelines/visdrone-classify.pipe",
        &[
            ("root", &data.join("visdrone/clip-9999999")),
            ("model", &data.join("models/visdrone-crops-64.onnx")),
            ("out", &out),
        ],
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert_eq!((r.frames_in, r.processed, r.dropped_total()), (34, 34, 0));
    assert_eq!(r.objects, 2012, "the clip has 2,012 classifiable objects");
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len(), 2012);
    let first = &objects[0];
    let images = std::fs::canonicalize(data.join("visdrone/clip-9999999/images")).unwrap();
    let name = "9999999_00023_d_0000001.jpg";
    assert_eq!(
        first["source"],
        format!("file://{}/{name}", images.display()),
        "the image as a file URI"
    );
    let (w, h) = image::image_dimensions(images.join(name)).unwrap();
    assert_eq!(
        (first["width"].as_u64(), first["height"].as_u64()),
        (Some(w.into()), Some(h.into()))
    );
    common::timestamps_within(&objects, start, std::time::SystemTime::now());
    // Annotation boxes: the VisDrone category under `annotation`, no detector class.
    assert!(first["annotation"]["category_id"].is_u64(), "{first}");
    assert!(
        first.get("category").is_none() && first.get("detection").is_none(),
        "{first}"
    );
    assert_eq!(first["frame"], 0);
    assert_eq!(first["pts_ms"], 0.0);
    assert!(
        first["bbox"].as_array().unwrap().len() == 4
            && first["label"].is_string()
            && first["score"].is_f64()
    );
    let (right, total) = common::accuracy(&objects);
    let share = right as f64 / total as f64;
    eprintln!(
        "clip: {right}/{total} labelled right ({:.2}%)",
        share * 100.0
    );
    assert!(
        share >= 0.98,
        "only {:.2}% labelled right (reference preprocessing: 99.2%)",
        share * 100.0
    );
}

/// Generate a few frames of the project's own synthetic demo (needs python3 with numpy and onnx).
fn demo_data(frames: u32) -> Option<std::path::PathBuf> {
    let dir = common::temp_dir(&format!("demo{frames}"));
    let status = Command::new("python3")
        .arg(common::root().join("scripts/make_demo.py"))
        .arg(&dir)
        .args([
            "--frames",
            &frames.to_string(),
            "--width",
            "640",
            "--height",
            "360",
        ])
        .status();
    match status {
        Ok(s) if s.success() => Some(dir),
        other => {
            common::skip(&format!(
                "scripts/make_demo.py failed ({other:?}): pip install -r scripts/requirements.txt"
            ));
            None
        }
    }
}

#[test]
fn synthetic_demo_scene_is_labelled_right_and_accounted_for() {
    let _serial = serial();
    if !common::ort_ready() {
        return;
    }
    let Some(dir) = demo_data(6) else { return };
    let out = dir.join("objects.jsonl");
    let outcome = run_file(
        "pipelines/visdrone-classify.pipe",
        &[
            ("root", &dir),
            ("model", &dir.join("model.onnx")),
            ("out", &out),
        ],
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert_eq!((r.frames_in, r.processed), (6, 6));
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len() as u64, r.objects);
    let skipped: u64 = r.skipped.iter().map(|(_, n)| n).sum();
    let annotated: usize = std::fs::read_dir(dir.join("annotations"))
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert_eq!(
        r.objects + skipped,
        annotated as u64,
        "objects in = classified + skipped"
    );
    let (right, total) = common::accuracy(&objects);
    assert!(
        right * 100 >= total * 95,
        "demo: {right}/{total} labelled right"
    );
}

#[test]
fn a_stage_failing_mid_run_stops_the_pipeline_cleanly() {
    let _serial = serial();
    if !common::ort_ready() {
        return;
    }
    let Some(dir) = demo_data(5) else { return };
    // Frame 3 has no annotation file: the boxes stage fails there.
    std::fs::remove_file(dir.join("annotations/frame_00003.txt")).unwrap();
    let out = dir.join("objects.jsonl");
    let outcome = run_file(
        "pipelines/visdrone-classify.pipe",
        &[
            ("root", &dir),
            ("model", &dir.join("model.onnx")),
            ("out", &out),
        ],
    );
    let err = outcome.error.expect("the run must fail").to_string();
    assert!(
        err.contains("frame_00003.txt") && err.contains("no annotation file"),
        "{err}"
    );
    let r = &outcome.report;
    assert_eq!(r.processed, 2, "frames before the damage are kept");
    assert_eq!(r.processed + r.dropped_total(), r.frames_in, "{r}");
    let frames: Vec<u64> = common::read_jsonl(&out)
        .iter()
        .map(|o| o["frame"].as_u64().unwrap())
        .collect();
    assert!(
        !frames.is_empty() && frames.iter().all(|f| *f < 2),
        "{frames:?}"
    );
}

#[test]
fn testsrc_with_synthetic_boxes_runs_without_any_files() {
    let _serial = serial();
    if !common::ort_ready() {
        return;
    }
    let Some(dir) = demo_data(1) else { return };
    let out = dir.join("t.jsonl");
    let text = format!(
        "testsrc width=320 height=240 num-buffers=7 format=nv12 ! boxes format=synthetic count=5 seed=3 \
         ! batch max-frames=2 ! classify model={} ! jsonl location={}",
        dir.join("model.onnx").display(),
        out.display()
    );
    let config = common::graph(&text);
    let outcome = Pipeline::build(config).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!((outcome.report.frames_in, outcome.report.processed), (7, 7));
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len(), 35);
    let frames: Vec<u64> = objects
        .iter()
        .map(|o| o["frame"].as_u64().unwrap())
        .collect();
    assert!(
        frames.windows(2).all(|w| w[0] <= w[1]),
        "frame order kept: {frames:?}"
    );
    assert_eq!(objects[0]["source"], "octopipe:videotestsrc?pattern=smpte");
}

#[test]
fn mot_annotations_follow_frame_numbers_and_keep_tracks() {
    let _serial = serial();
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let mot = data.join("visdrone/mot-test-dev-annotations/uav0000009_03358_v.txt");
    let rows = std::fs::read_to_string(&mot).unwrap();
    // MOT frame indices are 1-based: frames 0..3 of the stream take indices 1..=3.
    let wanted = rows
        .lines()
        .filter(|l| l.split(',').next().unwrap().parse::<u64>().unwrap() <= 3)
        .count() as u64;
    let out = common::temp_dir("mot").join("mot.jsonl");
    let text = format!(
        "testsrc width=1360 height=765 num-buffers=3 ! boxes format=mot location={} \
         ! classify model={} ! jsonl location={}",
        mot.display(),
        data.join("models/visdrone-crops-64.onnx").display(),
        out.display()
    );
    let config = common::graph(&text);
    let outcome = Pipeline::build(config).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    let skipped: u64 = r.skipped.iter().map(|(_, n)| n).sum();
    assert_eq!(
        r.objects + skipped,
        wanted,
        "objects in = classified + skipped"
    );
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len() as u64, r.objects);
    assert!(objects
        .iter()
        .all(|o| o["track"].is_u64() && o["frame"].as_u64().unwrap() < 3));
}

#[test]
fn several_streams_share_one_batch_keep_their_order_and_none_starves() {
    let _serial = serial();
    if !common::ort_ready() {
        return;
    }
    let Some(dir) = demo_data(1) else { return };
    let out = dir.join("multi.jsonl");
    let branch = |pattern: &str, size: &str| {
        format!(
            "testsrc pattern={pattern} num-buffers=100 {size} ! boxes format=synthetic count=40"
        )
    };
    let text = format!(
        "{} ! mux.\n{} ! mux.\n{} ! batch name=mux max-frames=3 ! classify model={} ! jsonl location={}",
        branch("smpte", "width=160 height=120 format=i420"),
        branch("smpte", "width=160 height=120 format=nv12"),
        branch("smpte", "width=160 height=120 format=rgb"),
        dir.join("model.onnx").display(),
        out.display()
    );
    let config = common::graph(&text);
    assert_eq!(config.sources().count(), 3);
    let outcome = Pipeline::build(config).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert_eq!(r.streams.len(), 3, "{r}");
    for s in &r.streams {
        assert_eq!(
            (s.frames_in, s.processed, s.dropped_total()),
            (100, 100, 0),
            "stream {}: {r}",
            s.stream
        );
    }
    let objects = common::read_jsonl(&out);
    assert_eq!(objects.len(), 3 * 100 * 40);
    // Each stream's frames come out in order, and no stream runs far ahead of the others.
    let mut last = [0u64; 3];
    let mut done = [0u64; 3];
    for o in &objects {
        let (s, f) = (
            o["stream"].as_u64().unwrap() as usize,
            o["frame"].as_u64().unwrap(),
        );
        assert!(f >= last[s], "stream {s}: frame {f} after {}", last[s]);
        last[s] = f;
        done[s] = f + 1;
        // The sources are faster than the pipeline, so all of them wait on it; none runs far
        // ahead: the gap is bounded by what the edges in front of the batch stage hold (4 + 12 +
        // the stages' own), not by the streams' length: blocked sources are served in turn.
        let (lo, hi) = (done.iter().min().unwrap(), done.iter().max().unwrap());
        assert!(
            *lo == 0 || *hi == 100 || hi - lo <= 24,
            "stream progress {done:?}"
        );
    }
}

/// A preprocess stage, registered by this test, that works for `ok` batches, then fails.
#[derive(Debug)]
struct FailingAfter(usize);

struct Failing {
    ok: usize,
    cpu: octopipe::preprocess::cpu::CpuBackend,
}

impl octopipe::stage::Stage<octopipe::batch::CropBatch, octopipe::batch::CropBatch> for Failing {
    fn process(
        &mut self,
        mut batch: octopipe::batch::CropBatch,
        out: &mut Vec<octopipe::batch::CropBatch>,
    ) -> Result<(), octopipe::Error> {
        use octopipe::preprocess::Backend;
        if self.ok == 0 {
            return Err(octopipe::preprocess::PreprocessError::Cuda(
                octopipe::preprocess::cuda::CudaError::Invalid(
                    "DriverError(CUDA_ERROR_LAUNCH_FAILED, \"unspecified launch failure\")".into(),
                ),
            )
            .into());
        }
        self.ok -= 1;
        self.cpu.run(&mut batch)?;
        out.push(batch);
        Ok(())
    }
}

impl octopipe::stage::Element for FailingAfter {
    fn configure(&mut self, caps: &mut octopipe::stage::Caps) {
        caps.insert(octopipe::preprocess::PreprocessConfig::default());
    }
    fn open(
        self: Box<Self>,
        ctx: &mut octopipe::stage::OpenContext,
    ) -> Result<octopipe::stage::Running, octopipe::Error> {
        let config = ctx
            .caps
            .get::<octopipe::preprocess::PreprocessConfig>()
            .cloned()
            .unwrap_or_default();
        let cpu = octopipe::preprocess::cpu::CpuBackend::new(config)?;
        Ok(octopipe::stage::Running::stage(Box::new(Failing {
            ok: self.0,
            cpu,
        })))
    }
}

const OK_PROPS: &[octopipe::stage::PropSpec] = &[octopipe::stage::PropSpec::new(
    "ok",
    octopipe::stage::PropType::COUNT,
    "3",
    "batches before failing",
)];

#[test]
fn a_preprocess_stage_failing_mid_run_stops_the_pipeline_cleanly() {
    use octopipe::stage::{Registry, Role, StageDecl};
    let _serial = serial();
    if !common::ort_ready() {
        return;
    }
    let Some(dir) = demo_data(1) else { return };
    let out = dir.join("pre.jsonl");
    let mut registry = Registry::builtin();
    registry.register(StageDecl {
        name: "failing-preprocess",
        role: Role::Preprocess,
        doc: "preprocesses `ok` batches on the CPU, then fails",
        props: OK_PROPS,
        needs: &[Role::Batch],
        provides: &[],
        make: |p| Ok(Box::new(FailingAfter(p.usize("ok").unwrap_or(3)))),
    });
    let text = format!(
        "testsrc width=320 height=240 num-buffers=200 ! boxes format=synthetic count=5 \
         ! batch max-frames=1 ! failing-preprocess ok=3 ! classify model={} ! jsonl location={}",
        dir.join("model.onnx").display(),
        out.display()
    );
    let desc = octopipe::describe::parse("<test>", &text, &Default::default()).unwrap();
    let graph = octopipe::describe::build_with(&desc, &registry).unwrap();
    let outcome = Pipeline::build(graph).unwrap().run();
    let err = outcome.error.expect("the run must fail").to_string();
    assert!(err.contains("CUDA_ERROR_LAUNCH_FAILED"), "{err}");
    let r = &outcome.report;
    assert_eq!(
        r.processed, 3,
        "the batches before the failure are kept: {r}"
    );
    assert_eq!(r.processed + r.dropped_total(), r.frames_in, "{r}");
    assert_eq!(
        common::read_jsonl(&out).len(),
        15,
        "their objects are written"
    );
}

/// With `interpolation=area`, the batch stage sizes blocks by the source pixels they read: a large
/// box shrunk to 64x64 is cut into more blocks than a small one; with bilinear every crop gets
/// blocks of equal output.
#[test]
fn area_pipelines_weight_blocks_by_input() {
    let _serial = serial();
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    struct Blocks(Arc<Mutex<Vec<usize>>>);
    impl octopipe::pipeline::Observer for Blocks {
        fn batch(&mut self, batch: &octopipe::batch::CropBatch, _: Duration) {
            self.0.lock().unwrap().push(batch.blocks.len());
        }
    }
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("area-blocks");
    // Frame 1: a 600x400 box (240,000 source pixels for 4,096 outputs) and a 30x30 one.
    let mot = dir.join("boxes.txt");
    std::fs::write(
        &mot,
        "1,1,10,10,600,400,1,4,0,0\n1,2,700,10,30,30,1,4,0,0\n",
    )
    .unwrap();
    let blocks = |interpolation: &str| {
        let text = format!(
            "testsrc width=800 height=600 num-buffers=1 ! boxes format=mot location={} \
             ! preprocess interpolation={interpolation} ! classify model={} ! jsonl location={}",
            mot.display(),
            common::root()
                .join("tests/data/models/valid-64.onnx")
                .display(),
            dir.join(format!("{interpolation}.jsonl")).display()
        );
        let mut p = Pipeline::build(common::graph(&text)).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        p.observe(Box::new(Blocks(seen.clone())));
        let outcome = p.run();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert_eq!(outcome.report.objects, 2);
        let seen = seen.lock().unwrap().clone();
        seen
    };
    // 64x64 = 16 tiles of 256 pixels. Bilinear: 4 tiles per block for both crops (4 + 4 blocks).
    // Area: the large crop reads ~59 source pixels per output, so 16 Ki source pixels per block
    // allow one tile (16 blocks); the small one keeps 4 tiles per block (4 blocks).
    assert_eq!(blocks("bilinear"), vec![8]);
    assert_eq!(blocks("area"), vec![20]);
}
