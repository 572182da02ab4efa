//! `octopipe bench pipeline`: the whole pipeline, decode to classifier, on N streams of 1080p
//! H.264 or H.265 made from the real VisDrone clip at run time, or (`--images DIR`) on N image
//! streams of a folder of JPEG files.
//!
//! ```text
//! octopipe bench pipeline --streams 1,8,16 --decoder cpu,nvdec --ep cpu,cuda
//! octopipe bench pipeline --live --max-streams 96
//! octopipe bench pipeline --images $OCTOPIPE_DATA/visdrone/clip-9999999 --decoders cpu,nvjpeg --ep cuda
//! octopipe bench pipeline --codec h265 --bitrate 4000 --detector centernet.onnx --tiles 1920x1080 --classifiers 2
//! ```
//!
//! The clip's JPEG frames are scaled to the video size (1920x1080 by default), looped to
//! `--seconds` of video at 30 fps and encoded by `x264enc` (High profile, 4:2:0: NVDEC refuses
//! High 4:4:4) or `x265enc` (`--codec h265`, Main) at `--bitrate` into an mp4 in a folder of its
//! own under the system's temporary folder, removed at the end (`video.rs`). Each combination of
//! streams, decoder and execution provider is then one description ([`description`], `run.rs`),
//! built and run in this process through [`Pipeline`](octopipe_pipeline::pipeline::Pipeline):
//!
//! ```text
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28 ! mux.   (N-1 times)
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28
//!   ! batch name=mux max-frames=F max-crops=28F [devices=0,1]
//!   ! preprocess backend=cpu|cuda [memory=device]
//!   ! classify model=${model} ep=cpu|cuda max-batch=28F labels=person,two-wheeler,car,large-vehicle
//!   [! classify model=${model} ... labels=c2:person,...]                     (--classifiers 2)
//!   ! jsonl name=out location=/dev/null
//! ```
//!
//! (with `--devices 0,1`, the batch stage's `devices=0,1` makes one such chain per GPU, meeting
//! in the one sink; with `--detector`, a shared `detect` and `track` give the boxes,
//! `detector.rs`; with `--images`, each stream is `images location=${images} loop=L
//! decoder=cpu|nvjpeg|auto ! boxes format=det location=${annotations}`, `images.rs`, and an
//! nvJPEG that cannot run here is its row's reason).
//!
//! File mode (the default) reads the files as fast as the pipeline takes them, so nothing is
//! dropped and every frame is counted; `--live` plays each file at its 30 fps (`media
//! live=true`: frame edges hold one frame and drop the oldest) and searches the most streams held
//! with a p99 end-to-end latency under one frame interval and nothing dropped. Every run's
//! row has the process's CPU time over the wall time (cores busy) and, when `nvidia-smi` is
//! there, the GPUs' mean utilization and peak memory sampled every 200 ms while it ran
//! (`usage.rs`); with the video, the decode-only ceiling of its streams and decoder (GStreamer
//! alone, `decode_only.rs`) and the row's fps as a share of it. The table and the driver are in
//! `table.rs`. A run that fails (an execution provider the ONNX Runtime build lacks, no GPU, no
//! nvJPEG) has its error in its row; the others go on.

use std::path::PathBuf;

mod decode_only;
mod detector;
mod images;
mod run;
mod table;
mod usage;
mod video;

pub use decode_only::decode_only;
pub use detector::{parse_line, DetectBench, DetectStats};
pub use images::ImageStreams;
pub use run::{description, run_one, GpuStats, RunResult, RunSpec};
pub use table::pipeline;
pub use video::{encode_clip, Codec};

use super::BenchError;

/// Frame rate of the encoded video, and of `--live` playback.
pub const FPS: u32 = 30;
/// Default stream counts (`--streams`).
pub const DEFAULT_STREAMS: [usize; 5] = [1, 8, 16, 32, 64];
/// Default bound of the `--live` search (`--max-streams`).
pub const DEFAULT_MAX_STREAMS: usize = 96;
/// Default largest number of frames in one batch (`--batch-frames`): 16 frames of 28 boxes are
/// 448 crops, one inference call.
pub const DEFAULT_BATCH_FRAMES: usize = 16;
/// Crops a frame of annotated image streams is given room for in a batch (`max-crops`): the
/// clip's annotations have 59 boxes a frame on average.
pub const ANNOTATED_BOXES: u32 = 64;
/// Synthetic boxes per frame (the issue's drone workload).
pub const DEFAULT_BOXES: u32 = 28;
/// The decoder choices of the `media` stage's `decoder` property.
pub const DECODERS: [&str; 3] = ["auto", "cpu", "nvdec"];
/// The decoder choices of the `images` stage's `decoder` property (`--images`).
pub const IMAGE_DECODERS: [&str; 3] = ["auto", "cpu", "nvjpeg"];
/// Default encoder bitrate (`--bitrate`), kbit/s: a drone downlink's order of magnitude at
/// 1080p30.
pub const BITRATE_KBPS: u32 = 8000;
/// The most classifier stages per chain (`--classifiers`).
pub const MAX_CLASSIFIERS: usize = 4;
/// A row at or above this share of its decode-only fps is said to be held by the decoder.
pub const DECODER_BOUND: f64 = 0.9;
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
    /// Image streams of this folder (`--images`: JPEG files decoded by `images decoder=cpu|
    /// nvjpeg|auto`) instead of the encoded video; `None`: the video.
    pub images: Option<PathBuf>,
    /// The video's codec (`--codec`).
    pub codec: Codec,
    /// The video's bitrate, kbit/s (`--bitrate`).
    pub bitrate: u32,
    /// Classifier stages per chain, one after the other (`--classifiers`): the first is
    /// `model`, the others copies of it with labels of their own.
    pub classifiers: usize,
    /// Run the decode-only ceiling of each stream count and decoder (the video's streams
    /// decoded by GStreamer alone) and compare each row with it.
    pub decode_only: bool,
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
            images: None,
            codec: Codec::H264,
            bitrate: BITRATE_KBPS,
            classifiers: 1,
            decode_only: true,
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

/// The preprocess backend when `--backend` is not given: CUDA when the classifier reads device
/// tensors (`ep=cuda`) or the frames are in device memory (`decoder=nvdec` or `nvjpeg`: the
/// CPU backend reads host frames only), else the CPU.
pub fn default_backend(decoder: &str, ep: Compute) -> Compute {
    if ep == Compute::Cuda || decoder == "nvdec" || decoder == "nvjpeg" {
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

#[cfg(test)]
mod tests;
