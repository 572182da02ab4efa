//! `octopipe bench pipeline`: the whole pipeline, decode to classifier, on N streams of 1080p
//! H.264 made from the real VisDrone clip at run time.
//!
//! ```text
//! octopipe bench pipeline --streams 1,8,16 --decoder cpu,nvdec --ep cpu,cuda
//! octopipe bench pipeline --live --max-streams 96
//! ```
//!
//! The clip's JPEG frames are scaled to the video size (1920x1080 by default), looped to
//! `--seconds` of video at 30 fps and encoded by `x264enc` (High profile, 4:2:0: NVDEC refuses
//! High 4:4:4) into an mp4 in a folder of its own under the system's temporary folder, removed
//! at the end. Each combination of streams, decoder and execution provider is then one
//! description ([`description`]), built and run in this process through [`Pipeline`]:
//!
//! ```text
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28 ! mux.   (N-1 times)
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28
//!   ! batch name=mux max-frames=F max-crops=28F [devices=0,1]
//!   ! preprocess backend=cpu|cuda [memory=device]
//!   ! classify model=${model} ep=cpu|cuda max-batch=28F labels=person,two-wheeler,car,large-vehicle
//!   ! jsonl name=out location=/dev/null
//! ```
//!
//! (with `--devices 0,1`, the batch stage's `devices=0,1` makes one such chain per GPU, meeting
//! in the one sink).
//!
//! File mode (the default) reads the files as fast as the pipeline takes them, so nothing is
//! dropped and every frame is counted; `--live` plays each file at its 30 fps (`media
//! live=true`: frame edges hold one frame and drop the oldest) and searches the most streams held
//! with a p99 end-to-end latency under one frame interval and nothing dropped. Every run's
//! row has the process's CPU time over the wall time (cores busy) and, when `nvidia-smi` is
//! there, the GPUs' mean utilization and peak memory sampled every 200 ms while it ran
//! (`usage.rs`); the video is made by `video.rs`. A run
//! that fails (an execution provider the ONNX Runtime build lacks, no GPU) has its error in its
//! row; the others go on.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

mod detector;
mod usage;
mod video;

pub use detector::{parse_line, DetectBench, DetectStats};
pub use video::encode_clip;

use super::BenchError;
use crate::Pipeline;
use usage::{cpu_time, GpuSampler};
use video::{keep_copy, TempFolder};

/// Frame rate of the encoded video, and of `--live` playback.
pub const FPS: u32 = 30;
/// Default stream counts (`--streams`).
pub const DEFAULT_STREAMS: [usize; 5] = [1, 8, 16, 32, 64];
/// Default bound of the `--live` search (`--max-streams`).
pub const DEFAULT_MAX_STREAMS: usize = 96;
/// Default largest number of frames in one batch (`--batch-frames`): 16 frames of 28 boxes are
/// 448 crops, one inference call.
pub const DEFAULT_BATCH_FRAMES: usize = 16;
/// Synthetic boxes per frame (the issue's drone workload).
pub const DEFAULT_BOXES: u32 = 28;
/// The decoder choices of the `media` stage's `decoder` property.
pub const DECODERS: [&str; 3] = ["auto", "cpu", "nvdec"];
/// Encoder bitrate, kbit/s: a drone downlink's order of magnitude at 1080p30.
pub const BITRATE_KBPS: u32 = 8000;
/// Encoder key-frame interval, frames (3 s at 30 fps).
pub const KEY_INT: u32 = 90;
/// The shared classifier's classes.
pub const LABELS: &str = "person,two-wheeler,car,large-vehicle";
/// Where the objects go: written (the sink's real work) and thrown away.
pub const SINK: &str = "jsonl name=out location=/dev/null";
/// GPU sampling period of `nvidia-smi`, ms.
pub const GPU_SAMPLE_MS: u32 = 200;

/// Where a stage runs: the preprocess backend or the classifier's execution provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compute {
    /// The CPU.
    Cpu,
    /// A CUDA GPU.
    Cuda,
}

impl Compute {
    /// The name, as the pipeline text writes it.
    pub fn name(self) -> &'static str {
        match self {
            Compute::Cpu => "cpu",
            Compute::Cuda => "cuda",
        }
    }

    /// Parse `cpu` or `cuda`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cpu" => Some(Compute::Cpu),
            "cuda" => Some(Compute::Cuda),
            _ => None,
        }
    }
}

/// Options of [`pipeline`].
#[derive(Debug, Clone)]
pub struct PipelineBenchOptions {
    /// The clip folder (its `images/` are the video's frames, in file-name order).
    pub clip: PathBuf,
    /// The classifier.
    pub model: PathBuf,
    /// Seconds of video per stream (at [`FPS`]).
    pub seconds: f64,
    /// Video (width, height).
    pub size: (u32, u32),
    /// Stream counts to run (file mode; `--live` searches instead).
    pub streams: Vec<usize>,
    /// Decoders (`auto`, `cpu`, `nvdec`).
    pub decoders: Vec<String>,
    /// Execution providers of the classifier.
    pub eps: Vec<Compute>,
    /// Preprocess backend; `None`: [`default_backend`] (CUDA with `ep=cuda` or `decoder=nvdec`).
    pub backend: Option<Compute>,
    /// Synthetic boxes per frame.
    pub boxes: u32,
    /// Largest number of frames in one batch.
    pub batch_frames: usize,
    /// Play the streams at 30 fps and search the most held.
    pub live: bool,
    /// Bound of the live search.
    pub max_streams: usize,
    /// Live: these stream counts are played instead of searching (empty: search).
    pub live_streams: Vec<usize>,
    /// Live: the p99 end-to-end latency (ms) a run must stay under to hold (`None`: one frame
    /// interval).
    pub p99_ms: Option<f64>,
    /// Keep the encoded video at this path (refused if something is there already).
    pub keep_video: Option<PathBuf>,
    /// Spread the streams over these GPUs (empty: GPU 0 alone).
    pub devices: Vec<usize>,
    /// Classifiers per chain (`classify workers=`; above 1 each gets its share of the cores as
    /// ONNX Runtime threads).
    pub workers: usize,
    /// `preprocess gather=` of the CUDA backend (`None`: its default, auto).
    pub gather: Option<String>,
    /// Boxes from a detector shared by the streams (then tracked) instead of synthetic ones.
    pub detector: Option<DetectBench>,
}

impl PipelineBenchOptions {
    /// The defaults of the issue for `clip` and `model`: 10 s of 1920x1080, streams 1, 8, 16, 32,
    /// 64, decoder cpu, ep cpu.
    pub fn new(clip: PathBuf, model: PathBuf) -> Self {
        PipelineBenchOptions {
            clip,
            model,
            seconds: 10.0,
            size: (1920, 1080),
            streams: DEFAULT_STREAMS.to_vec(),
            decoders: vec!["cpu".into()],
            eps: vec![Compute::Cpu],
            backend: None,
            boxes: DEFAULT_BOXES,
            batch_frames: DEFAULT_BATCH_FRAMES,
            live: false,
            max_streams: DEFAULT_MAX_STREAMS,
            live_streams: Vec::new(),
            p99_ms: None,
            keep_video: None,
            devices: Vec::new(),
            workers: 1,
            gather: None,
            detector: None,
        }
    }

    /// Frames of video per stream.
    pub fn frames_per_stream(&self) -> u64 {
        ((self.seconds * FPS as f64).round() as u64).max(1)
    }

    /// Check the options before anything is encoded or run.
    pub fn check(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Options(m));
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            return bad(format!(
                "--seconds {}: expected 0 < s <= 3600",
                self.seconds
            ));
        }
        let (w, h) = self.size;
        if w < 16 || h < 16 || w % 2 != 0 || h % 2 != 0 || w > 7680 || h > 4320 {
            return bad(format!(
                "--width {w} --height {h}: expected even sizes from 16x16 to 7680x4320 (I420)"
            ));
        }
        if !self.live && (self.streams.is_empty() || self.streams.contains(&0)) {
            return bad("--streams: expected stream counts of at least 1".into());
        }
        if self.live && self.max_streams == 0 {
            return bad("--max-streams: expected at least 1".into());
        }
        if self.live_streams.contains(&0) || (!self.live && !self.live_streams.is_empty()) {
            return bad("--live-streams: expected stream counts of at least 1, with --live".into());
        }
        if let Some(p) = self
            .p99_ms
            .filter(|&p| !(p > 0.0 && p.is_finite() && self.live))
        {
            return bad(format!(
                "--p99-ms {p}: expected a latency above 0 ms, with --live"
            ));
        }
        if self.decoders.is_empty() || self.eps.is_empty() {
            return bad("--decoder and --ep each need at least one value".into());
        }
        if let Some(d) = self
            .decoders
            .iter()
            .find(|d| !DECODERS.contains(&d.as_str()))
        {
            return bad(format!("--decoder {d}: expected auto, cpu or nvdec"));
        }
        if self.boxes == 0 || self.batch_frames == 0 {
            return bad("--boxes and --batch-frames: expected at least 1".into());
        }
        if !self.clip.join("images").is_dir() {
            return bad(format!(
                "--clip {}: no images/ folder in it",
                self.clip.display()
            ));
        }
        if !self.model.is_file() {
            return bad(format!("--model {}: not a file", self.model.display()));
        }
        if let Some(d) = &self.detector {
            if !d.model.is_file() {
                return bad(format!("--detector {}: not a file", d.model.display()));
            }
            if d.interval == 0 || d.max_batch == 0 {
                return bad("--interval and --detector-batch: expected at least 1".into());
            }
        }
        if let Some(keep) = &self.keep_video {
            if keep.symlink_metadata().is_ok() {
                return bad(format!(
                    "--keep-video {}: something is there already; choose a new path",
                    keep.display()
                ));
            }
        }
        Ok(())
    }
}

/// One run: its streams and where each stage runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// Streams (branches into the one batch stage).
    pub streams: usize,
    /// The `media` decoder (`cpu`, `nvdec`, `auto`).
    pub decoder: String,
    /// The classifier's execution provider.
    pub ep: Compute,
    /// The preprocess backend.
    pub backend: Compute,
    /// Synthetic boxes per frame.
    pub boxes: u32,
    /// Largest number of frames in one batch.
    pub batch_frames: usize,
    /// Play at 30 fps (`media live=true`).
    pub live: bool,
    /// The GPUs the streams are spread over (empty: GPU 0).
    pub devices: Vec<usize>,
    /// Classifiers per chain (`classify workers=`).
    pub workers: usize,
    /// `preprocess gather=` of the CUDA backend (`None`: not written).
    pub gather: Option<String>,
    /// A detector shared by the streams, and a tracker (`None`: synthetic boxes).
    pub detector: Option<DetectBench>,
}

/// The description of one run, with `${video}` and `${model}` for the paths (as `octopipe run
/// --set video=... --set model=...` takes it). With GPUs given (`devices`), the batch stage
/// spreads the streams over them (`batch devices=0,1`): of N streams, stream `i` goes to GPU
/// `devices[i * K / N]`,
/// decoded there (NVDEC), batched, preprocessed and classified by that GPU's own chain (its batch
/// stage, engine and ONNX Runtime sessions); the chains meet in one sink, so one report covers
/// them all. A batch holds the frames of one GPU's streams: `max-frames` is
/// `ceil(streams / K)`, at most `batch_frames`.
pub fn description(spec: &RunSpec) -> String {
    let streams = spec.streams.max(1);
    let k = spec.devices.len().clamp(1, streams);
    let mut media = format!("media location=${{video}} decoder={}", spec.decoder);
    if spec.live {
        media.push_str(" live=true");
    }
    let (branch, join) = match &spec.detector {
        Some(d) if d.per_stream => (format!("{media}{}", detector::stages(spec, d)), "mux."),
        Some(d) => match d.queue {
            Some(n) => (format!("{media} ! queue size={n}"), "det."),
            None => (media, "det."),
        },
        None => (
            format!("{media} ! boxes format=synthetic count={}", spec.boxes),
            "mux.",
        ),
    };
    let frames = streams.div_ceil(k).clamp(1, spec.batch_frames);
    let crops = frames * spec.boxes as usize;
    let mut text = String::new();
    for _ in 1..streams {
        let _ = writeln!(text, "{branch} ! {join}");
    }
    let _ = writeln!(text, "{branch}");
    if let Some(d) = spec.detector.as_ref().filter(|d| !d.per_stream) {
        let _ = writeln!(text, "{}", detector::stages(spec, d));
    }
    let mut batch = format!("  ! batch name=mux max-frames={frames} max-crops={crops}");
    if !spec.devices.is_empty() {
        let list: Vec<String> = spec.devices.iter().map(usize::to_string).collect();
        let _ = write!(batch, " devices={}", list.join(","));
    }
    let _ = writeln!(text, "{batch}");
    let mut pre = format!("  ! preprocess backend={}", spec.backend.name());
    if spec.backend == Compute::Cuda && spec.ep == Compute::Cuda {
        pre.push_str(" memory=device");
    }
    if let (Some(gather), Compute::Cuda) = (&spec.gather, spec.backend) {
        let _ = write!(pre, " gather={gather}");
    }
    let _ = writeln!(text, "{pre}");
    let mut classify = format!(
        "  ! classify model=${{model}} ep={} max-batch={crops} labels={LABELS}",
        spec.ep.name()
    );
    if spec.workers > 1 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (cores / spec.workers).max(1);
        let _ = write!(classify, " workers={} ort-threads={threads}", spec.workers);
    }
    let _ = writeln!(text, "{classify}");
    let _ = write!(text, "  ! {SINK}");
    text
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// What ran.
    pub spec: RunSpec,
    /// Frames that entered.
    pub frames_in: u64,
    /// Frames processed (reached the sink).
    pub processed: u64,
    /// Frames dropped, all reasons.
    pub dropped: u64,
    /// Frames the decoder lost (never entered).
    pub lost: u64,
    /// Processed frames per second of the run's wall time, all streams together.
    pub fps: f64,
    /// End-to-end latency, p50, ms.
    pub p50_ms: f64,
    /// End-to-end latency, p99, ms.
    pub p99_ms: f64,
    /// The process's CPU time over the run's wall time.
    pub cores_busy: f64,
    /// GPU utilization and memory while it ran (`None`: no `nvidia-smi`, or no sample).
    pub gpu: Option<GpuStats>,
    /// The run's error, if it failed.
    pub error: Option<String>,
    /// Each stage's time per frame, p50 and p99 ms, as the report's rows give them.
    pub stages: Vec<(String, f64, f64)>,
    /// Frames dropped, by where and why.
    pub drops: Vec<(String, u64)>,
    /// What the shared detector's calls did, from its report line (with one detector per GPU,
    /// their mean).
    pub detect: Option<DetectStats>,
    /// Detect stages that reported (one per GPU with `--devices`).
    pub detectors: usize,
    /// The detector against the model alone (filled in by [`pipeline`]).
    pub detect_note: Option<String>,
}

impl RunResult {
    /// Whether a live run held: it ran, dropped and lost nothing, and its p99 end-to-end
    /// latency is under `budget_ms`.
    pub fn held(&self, budget_ms: f64) -> bool {
        self.error.is_none()
            && self.dropped == 0
            && self.lost == 0
            && self.processed > 0
            && self.p99_ms < budget_ms
    }
}

/// GPU use while a run ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuStats {
    /// Mean utilization, %, of the samples taken while the pipeline ran.
    pub util_mean: f64,
    /// Peak memory used on the GPU (all processes), MiB, from the build on.
    pub mem_peak_mib: f64,
}

/// Build and run `spec` on `video` with `model`; never fails: an error goes into the result.
pub fn run_one(spec: &RunSpec, video: &Path, model: &Path) -> RunResult {
    let mut result = RunResult {
        spec: spec.clone(),
        frames_in: 0,
        processed: 0,
        dropped: 0,
        lost: 0,
        fps: 0.0,
        p50_ms: 0.0,
        p99_ms: 0.0,
        cores_busy: 0.0,
        gpu: None,
        error: None,
        stages: Vec::new(),
        drops: Vec::new(),
        detect: None,
        detectors: 0,
        detect_note: None,
    };
    let mut vars = HashMap::from([
        ("video".to_string(), video.display().to_string()),
        ("model".to_string(), model.display().to_string()),
    ]);
    if let Some(d) = &spec.detector {
        vars.insert("detector".into(), d.model.display().to_string());
    }
    // Sampling starts before the build, so the peak memory counts the sessions and contexts.
    let sampler = GpuSampler::start(&spec.devices);
    let pipeline = match Pipeline::from_description(&description(spec), &vars) {
        Ok(p) => p,
        Err(e) => {
            result.error = Some(e.to_string());
            drop(sampler);
            return result;
        }
    };
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let outcome = pipeline.run();
    let wall = t0.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let t1 = Instant::now();
    result.gpu = sampler.and_then(|s| s.finish(t0, t1));
    let report = outcome.report;
    result.frames_in = report.frames_in;
    result.processed = report.processed;
    result.dropped = report.dropped_total();
    result.drops = report.dropped.clone();
    result.lost = report.lost;
    result.fps = report.processed as f64 / wall.as_secs_f64().max(1e-9);
    result.p50_ms = report.total.p50.as_secs_f64() * 1e3;
    result.p99_ms = report.total.p99.as_secs_f64() * 1e3;
    result.cores_busy = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    result.error = outcome.error.map(|e| e.to_string());
    let detectors: Vec<DetectStats> = report
        .sections
        .iter()
        .filter(|s| s.kind == "detect")
        .filter_map(|s| parse_line(&s.text))
        .collect();
    result.detectors = detectors.len();
    result.detect = DetectStats::mean(&detectors);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    result.stages = report
        .stages
        .iter()
        .map(|(name, s)| (name.clone(), ms(s.p50), ms(s.p99)))
        .collect();
    result
}

/// Run the benchmark: encode the video, run every combination (or, live, search each
/// decoder and execution provider's most streams), and return the markdown table with its
/// preamble. `progress` gets a line as each step starts and ends.
pub fn pipeline(
    opts: &PipelineBenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<String, BenchError> {
    opts.check()?;
    let folder = TempFolder::new()?;
    let video = folder.path().join("clip.mp4");
    let per_stream = opts.frames_per_stream();
    progress(&format!(
        "encoding {per_stream} frames of {}x{} H.264 from {} ...",
        opts.size.0,
        opts.size.1,
        opts.clip.display()
    ));
    let t = Instant::now();
    encode_clip(&opts.clip.join("images"), &video, opts.size, per_stream)?;
    let encode_s = t.elapsed().as_secs_f64();
    progress(&format!("encoded in {encode_s:.1} s"));
    if let Some(keep) = &opts.keep_video {
        keep_copy(&video, keep)?;
    }
    // The process's CUDA start (driver, primary context: seconds) belongs to no run: the
    // context is made once here and kept for the whole benchmark.
    let _cuda = octopipe_cuda::available()
        .ok()
        .and_then(|()| cudarc::driver::CudaContext::new(0).ok());

    let specs = |streams: usize| -> Vec<RunSpec> {
        let mut v = Vec::new();
        for decoder in &opts.decoders {
            for &ep in &opts.eps {
                v.push(RunSpec {
                    streams,
                    decoder: decoder.clone(),
                    ep,
                    backend: opts.backend.unwrap_or(default_backend(decoder, ep)),
                    boxes: opts.boxes,
                    batch_frames: opts.batch_frames,
                    workers: opts.workers,
                    gather: opts.gather.clone(),
                    live: opts.live,
                    devices: opts.devices.clone(),
                    detector: opts.detector.clone(),
                });
            }
        }
        v
    };
    let first = specs(if opts.live { 1 } else { opts.streams[0] })
        .into_iter()
        .next()
        .expect("checked: at least one decoder and ep");
    let mut out = preamble(opts, per_stream, encode_s, &first);
    out.push_str(TABLE_HEADER);

    let budget_ms = opts.p99_ms.unwrap_or(1e3 / FPS as f64);
    // The detector model alone, per execution provider and batch size.
    let mut alone: HashMap<(Compute, usize), Option<f64>> = HashMap::new();
    let mut run = |spec: &RunSpec, out: &mut String| -> RunResult {
        progress(&format!(
            "run: streams={} decoder={} ep={} preprocess={}{} ...",
            spec.streams,
            spec.decoder,
            spec.ep.name(),
            spec.backend.name(),
            if spec.live { " live" } else { "" }
        ));
        let mut r = run_one(spec, &video, &opts.model);
        if let (Some(d), Some(stats)) = (&spec.detector, r.detect) {
            let rows = stats.call_rows.round().max(1.0) as usize;
            let key = (spec.ep, rows);
            if let std::collections::hash_map::Entry::Vacant(slot) = alone.entry(key) {
                progress(&format!("the detector alone at batch {rows} ..."));
                let tuning = detector::tuning(spec, d);
                let t = super::model_throughput(&d.model, detector::ep(spec), tuning, rows, 30);
                slot.insert(t.ok());
            }
            r.detect_note = Some(detector::note(&stats, r.detectors, alone[&key]));
        }
        let row = table_row(&r, per_stream, budget_ms);
        progress(row.trim_end());
        let stages: Vec<String> = r
            .stages
            .iter()
            .map(|(name, p50, p99)| format!("{name} {p50:.2}/{p99:.2}"))
            .collect();
        progress(&format!("  stage p50/p99 ms: {}", stages.join(", ")));
        if !r.drops.is_empty() {
            let drops: Vec<String> = r
                .drops
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect();
            progress(&format!("  dropped: {}", drops.join(", ")));
        }
        out.push_str(&row);
        r
    };

    if !opts.live {
        for &n in &opts.streams {
            for spec in specs(n) {
                run(&spec, &mut out);
            }
        }
        return Ok(out);
    }
    if !opts.live_streams.is_empty() {
        for &n in &opts.live_streams {
            for spec in specs(n) {
                run(&spec, &mut out);
            }
        }
        return Ok(out);
    }
    let mut answers = Vec::new();
    for spec in specs(1) {
        let held = search_streams(opts.max_streams, |n| {
            let spec = RunSpec {
                streams: n,
                ..spec.clone()
            };
            run(&spec, &mut out).held(budget_ms)
        });
        answers.push((spec, held));
    }
    out.push('\n');
    for (spec, held) in answers {
        let _ = writeln!(
            out,
            "most streams held live (p99 < {budget_ms:.1} ms, nothing dropped), decoder={} ep={} preprocess={}: {held}{}",
            spec.decoder,
            spec.ep.name(),
            spec.backend.name(),
            if held == opts.max_streams { " (the --max-streams bound)" } else { "" }
        );
    }
    Ok(out)
}

/// The preprocess backend when `--backend` is not given: CUDA when the classifier reads device
/// tensors (`ep=cuda`) or the frames are in device memory (`decoder=nvdec`: the CPU backend
/// reads host frames only), else the CPU.
pub fn default_backend(decoder: &str, ep: Compute) -> Compute {
    if ep == Compute::Cuda || decoder == "nvdec" {
        Compute::Cuda
    } else {
        Compute::Cpu
    }
}

/// The most streams `holds` accepts, up to `max`: 1, 2, 4, ... until one fails or `max` is
/// reached, then bisection between the last held and the first failed. 0 when 1 fails.
/// Assumes that fewer streams hold when more do.
pub fn search_streams(max: usize, mut holds: impl FnMut(usize) -> bool) -> usize {
    let (mut good, mut bad) = (0, None);
    let mut n = 1;
    while n <= max {
        if holds(n) {
            good = n;
            if n == max {
                break;
            }
            n = (n * 2).min(max);
        } else {
            bad = Some(n);
            break;
        }
    }
    if let Some(mut bad) = bad {
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if holds(mid) {
                good = mid;
            } else {
                bad = mid;
            }
        }
    }
    good
}

const TABLE_HEADER: &str = "| streams | decoder | ep | preprocess | frames | fps | p50 ms | p99 ms | CPU cores busy | GPU util % | GPU mem MiB | dropped | note |\n|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";

/// What was run, how, and the first run's description.
fn preamble(
    opts: &PipelineBenchOptions,
    per_stream: u64,
    encode_s: f64,
    first: &RunSpec,
) -> String {
    let mut out = String::new();
    let (w, h) = opts.size;
    let _ = writeln!(
        out,
        "Whole pipeline: {per_stream} frames per stream ({} s at {FPS} fps) of {w}x{h} H.264 (the clip's JPEG frames scaled and looped; x264enc High 4:2:0, speed-preset=fast, {BITRATE_KBPS} kbit/s, key-int-max={KEY_INT}; encoded in {encode_s:.1} s), {} synthetic boxes per frame, one shared batch (max-frames = min(streams, {})), {}.",
        opts.seconds,
        opts.boxes,
        opts.batch_frames,
        if opts.live {
            "played live at 30 fps (edges drop the oldest), each decoder and ep searched for the most streams held"
        } else {
            "file mode (sources wait for the pipeline: nothing dropped)"
        }
    );
    let _ = writeln!(
        out,
        "{} CPU cores; fps = processed frames of all streams / wall time; p50/p99 = end-to-end frame latency; CPU cores busy = process CPU time / wall time; GPU = nvidia-smi (the GPUs used, every {GPU_SAMPLE_MS} ms): mean utilization while running (over the GPUs), peak memory used (all processes, summed over the GPUs); '-' without nvidia-smi.",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let _ = writeln!(
        out,
        "\nThe first run (keep the video with --keep-video clip.mp4):\n\n    octopipe run --set video=clip.mp4 --set model={} '{}'\n",
        opts.model.display(),
        description(first).replace('\n', " ").replace("   ", " ")
    );
    out
}

/// One markdown row.
fn table_row(r: &RunResult, per_stream: u64, budget_ms: f64) -> String {
    let s = &r.spec;
    let head = format!(
        "| {} | {} | {} | {} |",
        s.streams,
        s.decoder,
        s.ep.name(),
        s.backend.name()
    );
    if let Some(e) = &r.error {
        // The first line: a description error's caret lines do not fit a table cell.
        let e = e.lines().next().unwrap_or_default().replace('|', "\\|");
        let frames = if r.frames_in > 0 {
            r.processed.to_string()
        } else {
            "-".into()
        };
        return format!("{head} {frames} | - | - | - | - | - | - | - | failed: {e} |\n");
    }
    let (util, mem) = match r.gpu {
        Some(g) => (
            format!("{:.0}", g.util_mean),
            format!("{:.0}", g.mem_peak_mib),
        ),
        None => ("-".into(), "-".into()),
    };
    let expected = per_stream * s.streams as u64;
    let mut notes = Vec::new();
    if r.frames_in != expected {
        notes.push(format!("{} of {expected} frames entered", r.frames_in));
    }
    if r.lost > 0 {
        notes.push(format!("{} lost by the decoder", r.lost));
    }
    if let Some(n) = &r.detect_note {
        notes.push(n.clone());
    }
    if s.live {
        notes.push(if r.held(budget_ms) {
            "held".to_string()
        } else {
            "not held".to_string()
        });
    }
    format!(
        "{head} {} | {:.1} | {:.1} | {:.1} | {:.2} | {util} | {mem} | {} | {} |\n",
        r.processed,
        r.fps,
        r.p50_ms,
        r.p99_ms,
        r.cores_busy,
        r.dropped,
        notes.join("; ")
    )
}

#[cfg(test)]
mod tests;
