//! One run of the pipeline benchmark: its description ([`description`]), built and run in this
//! process ([`run_one`]), and what it measured ([`RunResult`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::compute::Compute;
use super::detector::{self, parse_line, DetectStats};
use super::images::{self, ImageStreams};
use super::lateness::{self, Lateness};
use super::settings::{ANNOTATED_BOXES, LABELS, SINK};
use super::spec::{push_props, DetectBench, RunSpec};
use super::usage::{cpu_time, GpuSampler, GpuStats};
use octopipe_pipeline::pipeline::Pipeline;

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
    let (branch, join) = match (&spec.images, &spec.detector) {
        (Some(images), _) => (images.branch(&spec.decoder, spec.live, spec.boxes), "mux."),
        (None, shared) => match shared {
            Some(d) if d.per_stream => (format!("{media}{}", detector::stages(spec, d)), "mux."),
            Some(d) => match d.queue {
                Some(n) => (format!("{media} ! queue size={n}"), "det."),
                None => (media, "det."),
            },
            None => (
                format!("{media} ! boxes format=synthetic count={}", spec.boxes),
                "mux.",
            ),
        },
    };
    let frames = streams.div_ceil(k).clamp(1, spec.batch_frames);
    // Annotated image streams carry their annotations' boxes (the clip: 59 a frame on average).
    let per_frame = match &spec.images {
        Some(ImageStreams {
            annotations: Some(_),
            ..
        }) => ANNOTATED_BOXES,
        _ => spec.boxes,
    };
    let crops = frames * per_frame as usize;
    let mut text = String::new();
    for _ in 1..streams {
        let _ = writeln!(text, "{branch} ! {join}");
    }
    let _ = writeln!(text, "{branch}");
    if let Some(d) = spec
        .detector
        .as_ref()
        .filter(|d| !d.per_stream && spec.images.is_none())
    {
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
    push_props(&mut pre, &spec.preprocess_props);
    let _ = writeln!(text, "{pre}");
    for head in 1..=spec.classifiers.max(1) {
        let mut classify = format!(
            "  ! classify model=${{model}} ep={} max-batch={crops} labels={}",
            spec.ep.name(),
            head_labels(head)
        );
        if spec.reinfer > 1 {
            let _ = write!(classify, " reinfer-interval={}", spec.reinfer);
        }
        if spec.workers > 1 {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let threads = (cores / spec.workers).max(1);
            let _ = write!(classify, " workers={} ort-threads={threads}", spec.workers);
        }
        push_props(&mut classify, &spec.classify_props);
        let _ = writeln!(text, "{classify}");
    }
    let _ = write!(text, "  ! {SINK}");
    text
}

/// The labels of classifier stage `head` (from 1): the shared classifier's classes, those of
/// the second and later stages prefixed `c2:`, `c3:`, ... so that each stage's answers are its
/// own.
pub fn head_labels(head: usize) -> String {
    if head <= 1 {
        return LABELS.to_string();
    }
    LABELS
        .split(',')
        .map(|l| format!("c{head}:{l}"))
        .collect::<Vec<_>>()
        .join(",")
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
    /// The detector against the model alone (filled in by [`pipeline`](super::pipeline)).
    pub detect_note: Option<String>,
    /// Files the nvJPEG route decoded on the CPU instead (image streams).
    pub fallbacks: u64,
    /// The same streams decoded alone, frames per second (filled in by
    /// [`pipeline`](super::pipeline); `None`: not measured or it failed).
    pub decode_only: Option<f64>,
    /// Where the frames over the run's bound lost their time (`None`: the run did not start).
    pub lateness: Option<Lateness>,
    /// Boxes classified from a crop (the report's `objects`).
    pub classified: u64,
    /// Boxes that took their track's last label instead (`classify reinfer-interval`).
    pub reused: u64,
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

/// Build and run `spec` on `video` (or its image streams) with `model`; never fails: an error
/// goes into the result. Frames over `bound_ms` end to end are the late ones of its
/// [`RunResult::lateness`].
pub fn run_one(spec: &RunSpec, video: &Path, model: &Path, bound_ms: f64) -> RunResult {
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
        fallbacks: 0,
        decode_only: None,
        lateness: None,
        classified: 0,
        reused: 0,
    };
    let mut vars = HashMap::from([
        ("video".to_string(), video.display().to_string()),
        ("model".to_string(), model.display().to_string()),
    ]);
    if let Some(d) = &spec.detector {
        vars.insert("detector".into(), d.model.display().to_string());
    }
    if let Some(i) = &spec.images {
        vars.extend(i.vars());
        // A decoder that cannot run here is its row's reason, not a failed build.
        if spec.decoder == "nvjpeg" {
            if let Some(why) = images::nvjpeg_missing(&spec.devices) {
                result.error = Some(why);
                return result;
            }
        }
    }
    // Sampling starts before the build, so the peak memory counts the sessions and contexts.
    let sampler = GpuSampler::start(&spec.devices);
    let mut pipeline = match build(spec, &vars) {
        Ok(p) => p,
        Err(e) => {
            result.error = Some(e.to_string());
            drop(sampler);
            return result;
        }
    };
    let (recorder, recorded) = lateness::recorder();
    pipeline.observe(Box::new(recorder));
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
    result.classified = report.objects;
    result.reused = report.reused;
    result.fps = report.processed as f64 / wall.as_secs_f64().max(1e-9);
    result.p50_ms = report.total.p50.as_secs_f64() * 1e3;
    result.p99_ms = report.total.p99.as_secs_f64() * 1e3;
    result.cores_busy = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    result.error = outcome.error.map(|e| e.to_string());
    result.fallbacks = images::fallbacks(&report);
    result.lateness = Some(recorded.lateness(bound_ms, spec.streams, &spec.devices));
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

/// `spec`'s detect stage as its description sets it (its defaults and [`DetectBench::props`]),
/// for the model alone to run as the stage does (its CUDA options, its engine); the stage's
/// defaults if the description does not build.
pub(super) fn detect_config(
    spec: &RunSpec,
    d: &DetectBench,
) -> octopipe_onnx::detect::DetectConfig {
    let vars = std::collections::HashMap::from([
        ("video".to_string(), "video.mp4".to_string()),
        ("model".to_string(), "model.onnx".to_string()),
        ("detector".to_string(), d.model.display().to_string()),
    ]);
    octopipe_pipeline::describe::parse("bench", &description(spec), &vars)
        .ok()
        .and_then(|desc| octopipe_pipeline::describe::build(&desc).ok())
        .and_then(|graph| {
            graph
                .elements::<octopipe_onnx::detect::DetectConfig>()
                .next()
                .cloned()
        })
        .unwrap_or_else(|| octopipe_onnx::detect::DetectConfig::new(&d.model))
}

/// The run's pipeline: its description built, with the budget of `spec` where it has one.
fn build(spec: &RunSpec, vars: &HashMap<String, String>) -> Result<Pipeline, octopipe_core::Error> {
    use octopipe_pipeline::describe;
    let desc = describe::parse("<description>", &description(spec), vars)?;
    let mut graph = describe::build(&desc)?;
    if let Some(ms) = spec.budget_ms {
        graph.budget = Duration::from_secs_f64(ms / 1e3);
    }
    Pipeline::build(graph)
}
