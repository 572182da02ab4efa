//! The options of `octopipe bench pipeline` and their checks.

use std::path::PathBuf;

use super::compute::Compute;
use super::images::ImageStreams;
use super::settings::{
    BITRATE_KBPS, DECODERS, DEFAULT_BATCH_FRAMES, DEFAULT_BOXES, DEFAULT_MAX_STREAMS,
    DEFAULT_STREAMS, FPS, IMAGE_DECODERS, MAX_CLASSIFIERS,
};
use super::spec::DetectBench;
use super::video::{Codec, Motion};
use crate::bench::error::BenchError;
use octopipe_core::stage::limits::MAX_INTERVAL;

/// Options of [`pipeline`](super::pipeline).
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
    /// Preprocess backend; `None`: [`default_backend`](super::default_backend) (CUDA with `ep=cuda` or `decoder=nvdec`).
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
    /// The pipeline's per-frame budget, ms (`None`: one frame interval).
    pub budget_ms: Option<f64>,
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
    /// Image streams of this folder (`--images`: JPEG files decoded by `images decoder=cpu|
    /// nvjpeg|auto`) instead of the encoded video; `None`: the video.
    pub images: Option<PathBuf>,
    /// The video's codec (`--codec`).
    pub codec: Codec,
    /// The video's bitrate, kbit/s (`--bitrate`).
    pub bitrate: u32,
    /// How the video moves (`--motion`).
    pub motion: Motion,
    /// Classifier stages per chain, one after the other (`--classifiers`): the first is
    /// `model`, the others copies of it with labels of their own.
    pub classifiers: usize,
    /// Classify a tracked box once every this many frames (`classify reinfer-interval`, 1:
    /// every box of every frame).
    pub reinfer: u64,
    /// More properties of the preprocess stage (`--preprocess-props`, e.g. "gpu-priority=high").
    pub preprocess_props: String,
    /// More properties of every classify stage (`--classify-props`).
    pub classify_props: String,
    /// Run the decode-only ceiling of each stream count and decoder (the video's streams
    /// decoded by GStreamer alone) and compare each row with it.
    pub decode_only: bool,
    /// Run the detector model alone at the batch size the pipeline's calls ran at, and give the
    /// pipeline's detector throughput as a share of it (`--detector`).
    pub detector_alone: bool,
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
            budget_ms: None,
            keep_video: None,
            devices: Vec::new(),
            workers: 1,
            gather: None,
            detector: None,
            images: None,
            codec: Codec::H264,
            bitrate: BITRATE_KBPS,
            motion: Motion::Still,
            classifiers: 1,
            reinfer: 1,
            preprocess_props: String::new(),
            classify_props: String::new(),
            decode_only: true,
            detector_alone: true,
        }
    }

    /// The decoder choices of this benchmark's source: the `images` stage's with
    /// [`images`](Self::images), else the `media` stage's.
    pub fn decoder_choices(&self) -> &'static [&'static str; 3] {
        if self.images.is_some() {
            &IMAGE_DECODERS
        } else {
            &DECODERS
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
        // At most 1e12 ms: past it (1e300) the budget would not fit a Duration.
        if let Some(b) = self.budget_ms.filter(|&b| !(b > 0.0 && b <= 1e12)) {
            return bad(format!(
                "--budget-ms {b}: expected a budget above 0 ms and at most 1e12 ms"
            ));
        }
        if self.decoders.is_empty() || self.eps.is_empty() {
            return bad("--decoder and --ep each need at least one value".into());
        }
        let choices = self.decoder_choices();
        if let Some(d) = self
            .decoders
            .iter()
            .find(|d| !choices.contains(&d.as_str()))
        {
            return bad(format!(
                "--decoder {d}: expected {}{}",
                choices.join(", "),
                if self.images.is_some() {
                    " (with --images)"
                } else {
                    ""
                }
            ));
        }
        if !(1..=102_400).contains(&self.bitrate) {
            return bad(format!(
                "--bitrate {}: expected 1 to 102400 kbit/s",
                self.bitrate
            ));
        }
        if !(1..=MAX_CLASSIFIERS).contains(&self.classifiers) {
            return bad(format!(
                "--classifiers {}: expected 1 to {MAX_CLASSIFIERS}",
                self.classifiers
            ));
        }
        // `classify reinfer-interval`'s bound.
        if !(1..=MAX_INTERVAL).contains(&self.reinfer) {
            return bad(format!(
                "--reinfer {}: expected 1 to {MAX_INTERVAL} frames",
                self.reinfer
            ));
        }
        if self.reinfer > 1 && self.workers > 1 {
            // `classify` refuses it: a reused label comes from the batch before, which another
            // worker may not have finished.
            return bad(format!(
                "--reinfer {} with --workers {}: a classifier that reuses its tracks' labels runs one worker",
                self.reinfer, self.workers
            ));
        }
        if let Some(dir) = &self.images {
            ImageStreams::find(dir)?;
            if self.keep_video.is_some() {
                return bad("--keep-video: image streams (--images) make no video".into());
            }
            if self.detector.is_some() {
                return bad("--images and --detector: choose one (image streams come with their annotations' boxes, or synthetic ones)".into());
            }
        }
        if self.boxes == 0 || self.batch_frames == 0 {
            return bad("--boxes and --batch-frames: expected at least 1".into());
        }
        if self.images.is_none() && !self.clip.join("images").is_dir() {
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
