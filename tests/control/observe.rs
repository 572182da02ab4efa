//! Observers on real runs: annotated frames, the crop mosaic, the latency plot, progress, energy,
//! and the JSON report from the command line.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use image::RgbImage;
use octopipe::batch::CropBatch;
use octopipe::budget::Report;
use octopipe::describe;
use octopipe::frame::Detection;
use octopipe::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe::observe::{
    AnnotateTarget, Annotator, Energy, LatencyPlot, Mosaic, Progress, ProgressStyle,
};
use octopipe::pipeline::{Observer, Outcome, Pipeline};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::{Backend, ChannelOrder, Layout, PreprocessConfig};

const FRAMES: u64 = 12;

fn model() -> PathBuf {
    common::root().join("tests/data/models/valid-64.onnx")
}

/// A file-rate testsrc run (I420, 320x240, 6 synthetic boxes a frame) with `setup` adding observers.
fn run(dir: &Path, setup: impl FnOnce(&mut Pipeline)) -> Outcome {
    let text = format!(
        "testsrc width=320 height=240 num-buffers={FRAMES} pattern=smpte \
         ! boxes format=synthetic count=6 ! classify model={} labels=person,two-wheeler,car,large-vehicle \
         ! jsonl location={}",
        model().display(),
        dir.join("objects.jsonl").display()
    );
    let desc = describe::parse("<test>", &text, &Default::default()).unwrap();
    let mut pipeline = Pipeline::build(describe::build(&desc).unwrap()).unwrap();
    setup(&mut pipeline);
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.report.processed, FRAMES);
    outcome
}

fn non_constant(img: &RgbImage) -> bool {
    let first = img.get_pixel(0, 0);
    img.pixels().any(|p| p != first)
}

/// A mosaic the system refuses to store (`/dev/full`) is reported as not written, naming the
/// file: a small one too, whose bytes all wait in the write buffer until it is flushed.
#[test]
fn a_mosaic_that_cannot_be_written_says_so() {
    if !common::ort_ready() || !common::dev_full() {
        return;
    }
    let dir = common::temp_dir("observe-full");
    let outcome = run(&dir, |p| {
        let pre = p.caps().get::<PreprocessConfig>().cloned().unwrap();
        p.observe(Box::new(Mosaic::new(Path::new("/dev/full"), pre, 1, 1)));
    });
    // Asked for and not written: the report's `not_written`, which fails the run.
    assert_eq!(
        outcome.report.not_written,
        ["--mosaic /dev/full: cannot write /dev/full: No space left on device (os error 28)"]
    );
    assert!(common::dev_full(), "the device is left in place");
}

#[test]
fn annotated_frames_mosaic_and_plots_are_written() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("observe");
    let frames = dir.join("frames");
    let outcome = run(&dir, |p| {
        let pre = p.caps().get::<PreprocessConfig>().cloned().unwrap();
        p.keep_pixels(true);
        p.observe(Box::new(
            Annotator::new(
                AnnotateTarget::from_path(&frames),
                Duration::from_millis(33),
            )
            .unwrap(),
        ));
        p.observe(Box::new(Mosaic::new(&dir.join("mosaic.png"), pre, 20, 2)));
        p.observe(Box::new(LatencyPlot::new(&dir.join("latency.svg"))));
        p.observe(Box::new(LatencyPlot::new(&dir.join("latency.png"))));
        p.observe(Box::new(Progress::new(ProgressStyle::Lines(
            Duration::ZERO,
        ))));
        p.observe(Box::new(Energy::new()));
    });
    let r = &outcome.report;

    // One annotated PNG per processed frame, at the frame's size, with boxes in palette colours.
    let mut pngs: Vec<_> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pngs.sort();
    assert_eq!(pngs.len() as u64, r.processed, "{pngs:?}");
    assert!(pngs[0].ends_with("s0-000000.png"));
    let img = image::open(&pngs[0]).unwrap().to_rgb8();
    assert_eq!(img.dimensions(), (320, 240));
    let boxed = img
        .pixels()
        .filter(|p| {
            p.0 == [255, 0, 255]
                || p.0 == [0, 255, 255]
                || p.0 == [0, 255, 0]
                || p.0 == [255, 140, 0]
        })
        .count();
    assert!(boxed > 100, "only {boxed} box pixels");
    assert!(
        r.extra.iter().any(|l| l
            == &format!(
                "annotated: {FRAMES} frames written to PNG files in {}",
                frames.display()
            )),
        "{:?}",
        r.extra
    );

    // The mosaic: 20 tiles of 64x64 at 2x in a 5x4 grid, with real pixels.
    let mosaic = image::open(dir.join("mosaic.png")).unwrap().to_rgb8();
    let (cols, rows) = (5, 4);
    assert_eq!(
        mosaic.dimensions(),
        (cols * (128 + 4) + 4, rows * (128 + 2 * 8 + 3 + 4) + 4)
    );
    assert!(non_constant(&mosaic));
    assert!(r.extra.iter().any(|l| l.starts_with("mosaic: 20 crops")));

    // The SVG plot: the end-to-end line has a point per frame, the budget is drawn and labelled,
    // and each frame over budget is marked.
    let svg = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    let points_per_line: Vec<usize> = svg
        .split("<polyline")
        .skip(1)
        .filter_map(|p| {
            let pts = p.split("points=\"").nth(1)?.split('"').next()?;
            Some(pts.split_whitespace().count())
        })
        .collect();
    assert!(
        points_per_line.contains(&(FRAMES as usize)),
        "{points_per_line:?}"
    );
    assert!(svg.contains(&format!("budget {:.1} ms", r.budget.as_secs_f64() * 1000.0)));
    assert_eq!(svg.matches("<circle").count() as u64, r.over_budget);
    for stage in ["decode", "preprocess", "classify", "sink"] {
        assert!(
            svg.contains(&format!(">{stage}<")) || svg.contains(&format!(">\n{stage}")),
            "{stage}"
        );
    }
    let png = image::open(dir.join("latency.png")).unwrap().to_rgb8();
    assert_eq!(png.dimensions(), (1200, 800));
    assert!(png.pixels().any(|p| p.0 == [255, 0, 0]), "no budget line");

    // Energy: a line either way (here usually "not available (no NVML: ...)").
    assert!(
        r.extra.iter().any(|l| l.starts_with("energy: ")),
        "{:?}",
        r.extra
    );
}

#[test]
fn the_report_serializes_with_milliseconds() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("observe-json");
    let outcome = run(&dir, |_| {});
    let v = serde_json::to_value(&outcome.report).unwrap();
    let r = &outcome.report;
    assert_eq!(v["processed"], FRAMES);
    assert_eq!(v["frames_in"], FRAMES);
    assert_eq!(v["dropped_total"], 0);
    assert_eq!(v["objects"], r.objects);
    assert!((v["budget_ms"].as_f64().unwrap() - r.budget.as_secs_f64() * 1e3).abs() < 1e-9);
    let stages = v["stages"].as_array().unwrap();
    let names: Vec<&str> = stages
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["decode", "boxes", "batch", "preprocess", "classify", "sink"]
    );
    assert_eq!(stages[0]["count"], FRAMES);
    assert!(
        (v["total"]["p99_ms"].as_f64().unwrap() - r.total.p99.as_secs_f64() * 1e3).abs() < 1e-9
    );
    assert_eq!(v["streams"][0]["processed"], FRAMES);
}

#[test]
fn cli_report_json_goes_to_stdout_and_the_plot_is_written() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("observe-cli");
    let text = format!(
        "testsrc width=160 height=120 num-buffers=5 ! boxes format=synthetic count=3 \
         ! classify model={} ! jsonl location={}",
        model().display(),
        dir.join("o.jsonl").display()
    );
    let plot = dir.join("latency.svg");
    let out = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &text,
            "--report",
            "json",
            "--progress",
            "lines",
            "--plot",
            plot.to_str().unwrap(),
            "--mosaic",
            dir.join("m.png").to_str().unwrap(),
        ]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["processed"], 5);
    assert!(v["extra"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().starts_with("preprocess backend: ")));
    assert!(v["extra"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().starts_with("plot: latency of 5 frames")));
    assert!(plot.is_file());
    assert!(dir.join("m.png").is_file());
    assert!(
        !stderr.contains("stage (ms)"),
        "the text table is not printed with --report json"
    );
}

/// A 64x48 RGB frame, left half `a`, right half `b`, with two boxes, one per half.
fn two_colour_frame(a: [u8; 3], b: [u8; 3]) -> Frame {
    let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
    let mut px = Vec::with_capacity(64 * 48 * 3);
    for _y in 0..48 {
        for x in 0..64 {
            px.extend_from_slice(if x < 32 { &a } else { &b });
        }
    }
    let mut f = Frame::new(
        0,
        0,
        "t",
        layout,
        Colorimetry::JPEG,
        PooledBuf::unpooled(px),
    );
    for bbox in [[2, 2, 20, 30], [40, 10, 16, 16]] {
        f.detections.push(Detection::new(bbox));
    }
    f
}

#[test]
fn mosaic_tiles_undo_normalization_channel_order_and_layout() {
    let (a, b) = ([200, 40, 10], [15, 120, 250]);
    for layout in [Layout::Nchw, Layout::Nhwc] {
        for channels in [ChannelOrder::Rgb, ChannelOrder::Bgr] {
            let config = PreprocessConfig {
                size: Some((24, 16)),
                layout,
                channels,
                threads: 1,
                ..PreprocessConfig::default()
            };
            let mut batch = CropBatch::default();
            batch.push_frame(two_colour_frame(a, b), 24, 16, 3);
            batch.build_blocks(64, 2);
            CpuBackend::new(config.clone())
                .unwrap()
                .run(&mut batch)
                .unwrap();
            for (i, want) in [(0, a), (1, b)] {
                let tile = Mosaic::crop_image(&config, &batch, i).unwrap();
                assert_eq!(tile.dimensions(), (24, 16));
                for p in tile.pixels() {
                    for k in 0..3 {
                        assert!(
                            (p.0[k] as i32 - want[k] as i32).abs() <= 1,
                            "{layout:?} {channels:?} crop {i}: {:?} != {want:?}",
                            p.0
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn progress_counts_frames_objects_misses_and_gaps() {
    let mut p = Progress::new(ProgressStyle::Lines(Duration::from_secs(3600)));
    let mut batch = CropBatch::default();
    let budget = Duration::from_millis(10);
    for (seq, late) in [(0u64, false), (1, true), (4, false)] {
        let mut f = two_colour_frame([0; 3], [255; 3]);
        f.seq = seq;
        let t = f.times.arrival;
        let done = t + if late { budget * 3 } else { budget / 2 };
        f.times.mark(0, done);
        batch.frames.push(f);
    }
    p.batch(&batch, budget);
    let s = p.status();
    assert!(s.starts_with("frames 3 ("), "{s}");
    assert!(s.contains("objects 6"), "{s}");
    assert!(s.contains("over 1"), "{s}");
    assert!(s.contains("drops 2"), "{s}");
    assert!(s.contains("/ 10.00 ms"), "{s}");
    let mut report: Report = octopipe::budget::Budget::new(budget, vec!["sink".into()]).finish();
    p.finish(&mut report);
}

#[test]
fn progress_shows_the_total_and_the_percentage_when_known() {
    let mut p = Progress::new(ProgressStyle::Lines(Duration::from_secs(3600)));
    p.expected_frames(8);
    let mut batch = CropBatch::default();
    for seq in [0u64, 1, 4] {
        let mut f = two_colour_frame([0; 3], [255; 3]);
        f.seq = seq;
        f.times.mark(0, f.times.arrival);
        batch.frames.push(f);
    }
    p.batch(&batch, Duration::from_millis(10));
    // 3 processed and 2 missing below frame 4 (dropped upstream): 5 of 8 done.
    let s = p.status();
    assert!(s.starts_with("frames 3/8 (62%) at "), "{s}");
}

/// Records what the runner tells observers of the run's length.
struct Length(std::sync::Arc<std::sync::Mutex<Option<u64>>>);

impl Observer for Length {
    fn expected_frames(&mut self, total: u64) {
        *self.0.lock().unwrap() = Some(total);
    }
}

/// Build `text` (no classifier: no ONNX Runtime needed), run it, and return
/// (`Pipeline::expected_frames` once built, what the observers heard, frames processed).
fn length_of(text: &str) -> (Option<u64>, Option<u64>, u64) {
    let desc = describe::parse("<test>", text, &Default::default()).unwrap();
    let mut pipeline = Pipeline::build(describe::build(&desc).unwrap()).unwrap();
    let built = pipeline.expected_frames();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(None));
    pipeline.observe(Box::new(Length(heard.clone())));
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{text}: {:?}", outcome.error);
    let heard = *heard.lock().unwrap();
    (built, heard, outcome.report.processed)
}

#[test]
fn sources_tell_their_length() {
    let dir = common::temp_dir("observe-length");
    std::fs::create_dir_all(dir.join("images")).unwrap();
    for i in 0..3 {
        RgbImage::from_pixel(64, 48, image::Rgb([i as u8 * 40, 80, 120]))
            .save(dir.join(format!("images/f{i}.png")))
            .unwrap();
    }
    let out = dir.join("o.jsonl");
    let tail = format!(
        "boxes format=synthetic count=2 ! jsonl overwrite=true location={}",
        out.display()
    );
    // An image sequence: images x loops.
    let images = format!("images location={}/images loop=2 ! {tail}", dir.display());
    assert_eq!(length_of(&images), (Some(6), Some(6), 6));
    // The test source: num-buffers; two streams add up.
    let two = format!(
        "testsrc width=64 height=48 num-buffers=4 ! boxes format=synthetic count=2 ! mux. \
         testsrc width=64 height=48 num-buffers=5 ! boxes format=synthetic count=2 ! batch name=mux \
         ! jsonl overwrite=true location={}",
        out.display()
    );
    let desc = describe::parse("<test>", &two, &Default::default()).unwrap();
    let graph = describe::build(&desc).unwrap();
    let pipeline = Pipeline::build(graph).unwrap();
    assert_eq!(pipeline.expected_frames(), Some(9));
    drop(pipeline);
    // A media file declaring its duration: known once it decodes (60 frames at 30 fps).
    let mp4 = dir.join("flight.mp4");
    common::encode(&format!(
        "videotestsrc num-buffers=60 ! video/x-raw,width=64,height=48,framerate=30/1 \
         ! x264enc ! mp4mux ! filesink location={}",
        mp4.display()
    ));
    let media = format!("media location={} ! {tail}", mp4.display());
    let (_, heard, processed) = length_of(&media);
    assert_eq!((heard, processed), (Some(60), 60));
}

#[test]
fn cli_progress_lines_show_the_total_and_the_percentage() {
    let dir = common::temp_dir("observe-progress-cli");
    let text = format!(
        "testsrc width=64 height=48 num-buffers=6 ! boxes format=synthetic count=2 ! jsonl location={}",
        dir.join("o.jsonl").display()
    );
    let out = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &text,
            "--progress",
            "lines",
        ]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The plain lines end with where the run got to.
    let last = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("progress "))
        .unwrap_or_else(|| panic!("no progress line:\n{stderr}"));
    assert!(last.contains(": frames 6/6 (100%) at "), "{last}");
    assert!(last.contains("| objects 12 |"), "{last}");
}

#[test]
fn annotated_mp4_decodes_back_to_every_frame() {
    if !common::ort_ready() {
        return;
    }
    if !octopipe::source::element_exists("x264enc") {
        common::skip("GStreamer x264enc missing: apt-get install gstreamer1.0-plugins-ugly");
        return;
    }
    let dir = common::temp_dir("observe-mp4");
    let mp4 = dir.join("annotated.mp4");
    let outcome = run(&dir, |p| {
        p.keep_pixels(true);
        let target = AnnotateTarget::from_path(&mp4);
        assert_eq!(target, AnnotateTarget::Mp4(mp4.clone()));
        p.observe(Box::new(
            Annotator::new(target, Duration::from_millis(33)).unwrap(),
        ));
    });
    assert!(outcome
        .report
        .extra
        .iter()
        .any(|l| l.starts_with(&format!("annotated: {FRAMES} frames written to"))));
    // Decode it with octopipe itself: as many frames, at the frames' size.
    let text = format!(
        "media location={} ! boxes format=synthetic count=1 ! classify model={} ! jsonl location={}",
        mp4.display(),
        model().display(),
        dir.join("again.jsonl").display()
    );
    let desc = describe::parse("<test>", &text, &Default::default()).unwrap();
    let again = Pipeline::build(describe::build(&desc).unwrap())
        .unwrap()
        .run();
    assert!(again.error.is_none(), "{:?}", again.error);
    assert_eq!(again.report.processed, FRAMES);
}
