//! The detect stage's settings and its declaration: every property, its default and its parsing.

use std::path::PathBuf;
use std::time::Duration;

use super::{Decoder, DetectEngine, Fit, Rect, Suppress, COCO_LABELS};
use crate::onnx::{CudaOptions, Ep, OnnxProps};
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{Element, Properties, Props, Role, StageDecl};
use octopipe_stages::preprocess::{
    BackendKind, ChannelOrder, DType, Interpolation, Layout, PreprocessConfig,
};
use octopipe_stages::tiles::Edge;

/// The fixed batch sizes on CUDA below `max-batch` when `batch-sizes` is not given.
pub const DEFAULT_BATCH_SIZES: [usize; 4] = [1, 8, 16, 32];

/// Settings of the detect stage.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectConfig {
    /// The ONNX model file.
    pub model: PathBuf,
    /// How the output is read; `None` picks it from the output's shape.
    pub decoder: Option<Decoder>,
    /// The outputs to read (two for `centernet`: scores, distances); empty: the first a decoder
    /// reads.
    pub output: Vec<String>,
    /// The model input's (width, height) when the model leaves it dynamic.
    pub size: Option<(u32, u32)>,
    /// Tile size; `None`: the whole frame only.
    pub tiles: Option<(u32, u32)>,
    /// Fraction of a tile shared with its neighbours.
    pub overlap: f64,
    /// With tiles, also look at the whole frame (as SAHI's standard prediction does).
    pub whole_frame: bool,
    /// How a tile is fitted to the input.
    pub fit: Fit,
    /// Letterbox padding value (0..255 scale).
    pub pad: f32,
    /// Resampling filter of the tiles.
    pub interpolation: Interpolation,
    /// Channel order the model takes.
    pub channels: ChannelOrder,
    /// Factor from 0..255 values to the model's units, before mean/std.
    pub scale: f32,
    /// Take `scale` from the model's metadata where it states the input's range
    /// (`octopipe.input_range` `0..1` or `0..255`): true unless `scale` was given.
    pub scale_from_model: bool,
    /// Per-channel mean (after `scale`).
    pub mean: [f32; 3],
    /// Per-channel standard deviation (after `scale`).
    pub std: [f32; 3],
    /// Least score kept.
    pub score: f32,
    /// When NMS drops a box.
    pub suppress: Suppress,
    /// Most boxes per frame.
    pub max_detections: usize,
    /// Class names in class-index order (empty: `class0`, `class1`, ...).
    pub labels: Vec<String>,
    /// Classes kept (names or indices); empty: all.
    pub classes: Vec<String>,
    /// Class renames for the stages after: `(from, to)`.
    pub map: Vec<(String, String)>,
    /// Preprocess backend for the tiles.
    pub backend: BackendKind,
    /// CPU preprocess threads (0: one per core).
    pub threads: usize,
    /// ONNX Runtime intra-op threads (0: its default).
    pub ort_threads: usize,
    /// Most tiles per inference call for a dynamic-batch model; frames (of every stream the
    /// stage serves) are collected until their tiles would pass it.
    pub max_batch: usize,
    /// The batch sizes a dynamic-batch model runs at on CUDA (each planned and warmed when the
    /// stage opens; a call is padded to the next); `None`: [`DEFAULT_BATCH_SIZES`] up to
    /// `max_batch`, and `max_batch` itself.
    pub batch_sizes: Option<Vec<usize>>,
    /// How long the first frame of a collection may wait for others; `None`: from its
    /// remaining budget.
    pub max_wait: Option<Duration>,
    /// Detect every `interval`-th frame of each stream (1: every frame); the frames between get
    /// the tracker's predicted boxes (a `track` stage must follow).
    pub interval: u64,
    /// Run the model on a thread of its own, a call at a time, while the stage collects and
    /// preprocesses the next call's frames and places the boxes of the call before; `false`:
    /// every step of a call on the stage's thread, one after the other; `None`: where the model
    /// runs on CUDA's execution provider (on the CPU's the cores the overlap would use are
    /// ONNX Runtime's already).
    pub overlap_calls: Option<bool>,
    /// How the sessions run on CUDA's execution provider.
    pub cuda: CudaOptions,
    /// ONNX Runtime's execution provider.
    pub ep: Ep,
    /// The GPU of the CUDA preprocessing (and of `ep` when it is CUDA's).
    pub device: usize,
    /// What runs the model: ONNX Runtime, or octopipe's own CUDA engine.
    pub engine: DetectEngine,
}

impl DetectConfig {
    /// Defaults for `model` (each property's declared default, [`DetectProps`]): the whole
    /// frame, stretched, RGB, `/255`, no mean/std.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        DetectConfig::from(DetectProps {
            onnx: OnnxProps {
                model: model.into(),
                ..OnnxProps::default()
            },
            ..DetectProps::default()
        })
    }

    /// The fixed batch sizes on CUDA, ascending: `batch_sizes`, or [`DEFAULT_BATCH_SIZES`] up to
    /// `max_batch` with `max_batch` itself.
    pub fn batch_sizes(&self) -> Vec<usize> {
        let mut sizes = match &self.batch_sizes {
            Some(s) => s.clone(),
            None => DEFAULT_BATCH_SIZES
                .iter()
                .copied()
                .filter(|&s| s < self.max_batch)
                .chain([self.max_batch])
                .collect(),
        };
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// Refuse a frame that `tiles` would cut into more than
    /// [`MAX_TILES`](octopipe_core::stage::limits::MAX_TILES) tiles, before any tile is made.
    pub fn check_tiles(
        &self,
        frame: &octopipe_core::frame::Frame,
    ) -> Result<(), super::error::DetectError> {
        let Some((tw, th)) = self.tiles else {
            return Ok(());
        };
        let (w, h) = (frame.layout.width, frame.layout.height);
        let count = octopipe_stages::tiles::regular_count(w, h, tw, th, self.overlap);
        let max = octopipe_core::stage::limits::MAX_TILES;
        match count <= max {
            true => Ok(()),
            false => Err(super::error::DetectError::Tiles {
                stream: frame.stream,
                frame: frame.seq,
                w,
                h,
                tw,
                th,
                count,
                max,
            }),
        }
    }

    /// The regions of a `w`x`h` frame the detector looks at: the tiles, and the whole frame when
    /// there are no tiles or `whole_frame` is set.
    pub fn regions(&self, w: u32, h: u32) -> Vec<Rect> {
        let mut r = match self.tiles {
            Some((tw, th)) => {
                octopipe_stages::tiles::regular(w, h, tw, th, self.overlap, Edge::Shift)
            }
            None => Vec::new(),
        };
        if self.tiles.is_none() || self.whole_frame {
            r.push([0, 0, w, h]);
        }
        r
    }

    /// The preprocessing that makes the model's input: `input` size, `layout` and `dtype` as the
    /// model takes them.
    pub fn preprocess_config(
        &self,
        input: (u32, u32),
        layout: Layout,
        dtype: DType,
    ) -> PreprocessConfig {
        PreprocessConfig {
            size: Some(input),
            mean: self.mean,
            std: self.std,
            scale: self.scale,
            channels: self.channels,
            layout,
            backend: self.backend,
            threads: self.threads,
            interpolation: self.interpolation,
            letterbox: (self.fit == Fit::Letterbox).then_some(self.pad),
            dtype,
            device: self.device,
            priority: self.cuda.priority,
            ..PreprocessConfig::default()
        }
    }
}

/// The detect stage's properties, declared once: the table `inspect` shows and the description
/// is checked against ([`DETECT`]), their defaults and their parsing; [`DetectConfig`] is made
/// from them.
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct DetectProps {
    /// The model, its class names, the execution provider, the GPU, ONNX Runtime's threads.
    #[prop(flatten)]
    pub onnx: OnnxProps,
    /// output format (auto: from the output's shape)
    #[prop(default = "auto")]
    pub decoder: Option<Decoder>,
    /// the output to read (auto: the first a decoder reads); centernet: SCORES,DISTANCES
    #[prop(default = "auto", value = Vec::new())]
    pub output: Vec<String>,
    /// the model's input size when the model leaves it dynamic
    #[prop(default = "auto", range = ..=octopipe_core::stage::limits::MAX_INPUT_SIDE)]
    pub size: Option<(u32, u32)>,
    /// tile size for sliced inference (unset: the whole frame)
    pub tiles: Option<(u32, u32)>,
    /// fraction of a tile shared with its neighbours
    #[prop(default = 0.2, range = 0.0..=0.9)]
    pub overlap: f64,
    /// with tiles, also run on the whole frame
    #[prop(default = false)]
    pub whole_frame: bool,
    /// how a tile is fitted to the input
    #[prop(default = "stretch")]
    pub fit: Fit,
    /// letterbox padding (0..255)
    #[prop(default = 114, range = 0.0..=255.0)]
    pub pad: f32,
    /// resampling of the tiles: OpenCV INTER_LINEAR, or INTER_AREA (antialiased downscaling)
    #[prop(default = "bilinear")]
    pub interpolation: Interpolation,
    /// channel order the model takes
    #[prop(default = "rgb")]
    pub channels: ChannelOrder,
    /// factor from 0..255 to the model's units (auto: the range the model's metadata states in
    /// octopipe.input_range, 0..1 or 0..255, else 1/255; 1: raw 0..255)
    #[prop(default = "auto", value = 1.0 / 255.0, positive)]
    pub scale: f32,
    /// per-channel mean, after scale
    #[prop(default = "0,0,0")]
    pub mean: [f32; 3],
    /// per-channel standard deviation, after scale
    #[prop(default = "1,1,1", positive)]
    pub std: [f32; 3],
    /// least score kept
    #[prop(default = 0.3, range = 0.0..=1.0)]
    pub score: f32,
    /// NMS: a box overlapping a better one of its class by more than this is dropped
    #[prop(default = 0.5, range = 0.0..=1.0)]
    pub iou: f32,
    /// NMS: also drop a box whose overlap covers more than this share of the smaller box (a box
    /// a tile border cut short; 1: off)
    #[prop(default = 1, range = 0.0..=1.0)]
    pub ios: f32,
    /// most boxes per frame
    #[prop(default = 300, range = 1..=octopipe_core::stage::limits::MAX_BOXES)]
    pub max_detections: usize,
    /// keep only these classes (names or indices)
    #[prop(default = "all", value = Vec::new())]
    pub classes: Vec<String>,
    /// rename classes for the stages after: from:to,...
    #[prop(value = Vec::new())]
    pub map: Vec<String>,
    /// preprocessing of the tiles (auto: CUDA when a GPU is present)
    #[prop(default = "auto")]
    pub backend: BackendKind,
    /// CPU preprocessing threads (0: one per core)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_THREADS)]
    pub threads: usize,
    /// most tiles per inference call (models with a dynamic batch); the stage collects frames of
    /// every stream it serves until their tiles would pass it, or their wait ends
    #[prop(default = 64, range = 1..=octopipe_core::stage::limits::MAX_BATCH)]
    pub max_batch: usize,
    /// on CUDA, the batch sizes the model runs at, each planned and warmed at start (auto:
    /// 1,8,16,32 below max-batch, and max-batch); a call is padded to the next
    #[prop(default = "auto", range = ..=octopipe_core::stage::limits::MAX_BATCH)]
    pub batch_sizes: Option<Vec<usize>>,
    /// longest a frame waits for others to share an inference call (auto: from its remaining
    /// budget)
    #[prop(default = "auto", range = 0.0..)]
    pub max_wait_ms: Option<f64>,
    /// detect every Nth frame of each stream; the tracker after the stage carries the boxes over
    /// the frames between (marked "predicted" in the output)
    #[prop(default = 1, range = 1..=octopipe_core::stage::limits::MAX_INTERVAL)]
    pub interval: u64,
    /// run the model on a thread of its own: while a call runs, the stage collects and
    /// preprocesses the next call's frames and places the boxes of the call before (false: each
    /// step of a call after the other, on the stage's thread; auto: true where the model runs on
    /// CUDA, false on the CPU, whose cores ONNX Runtime's threads already use)
    #[prop(default = "auto")]
    pub overlap_calls: Option<bool>,
    /// on CUDA at fixed batch sizes, replay each size's run as a CUDA graph (one launch per
    /// call); the graphs are captured when the stage opens, on a thread of the model's own that
    /// runs every call after: a stage opened while others use the GPU (a stream with its own
    /// detect added to a running pipeline) may break their CUDA calls then, and a size whose
    /// capture fails runs without a graph (warned). Off by default: 2 of 10 benchmark processes
    /// with it crashed as they ended (cause not yet found)
    #[prop(default = false)]
    pub cuda_graph: bool,
    /// on CUDA, let ONNX Runtime run the convolutions in NHWC
    #[prop(default = false)]
    pub prefer_nhwc: bool,
    /// on CUDA, add each convolution's bias inside its cuDNN call (cuDNN's runtime fusion,
    /// ONNX Runtime's `fuse_conv_bias`) instead of in a pass of its own: for a model whose
    /// convolutions keep their biases; planning takes some 20-30 s per batch size when the stage
    /// opens
    #[prop(default = false)]
    pub fuse_conv_bias: bool,
    /// on CUDA, the priority of the stage's GPU work (its tiles' preprocessing, the model, the
    /// peaks): normal leaves it behind the crops and classifiers of boxes already found (high
    /// by default), high schedules it with them, ahead of other applications' kernels
    #[prop(default = "normal")]
    pub gpu_priority: octopipe_cuda::StreamPriority,
    /// what runs the model: ort (ONNX Runtime, on the execution provider ep picks) or octopipe
    /// (octopipe's own CUDA engine, for a CenterNet of its op set with an f16 NHWC input and f16
    /// heads, such as the shared CenterNet's six-class heads model; one CUDA graph per batch
    /// size, built when the stage opens; a CUDA GPU only; docs/engine.md)
    #[prop(default = "ort")]
    pub engine: DetectEngine,
}

impl From<DetectProps> for DetectConfig {
    /// The settings of checked properties (`labels=coco`: COCO's 80 names; `map` entries
    /// without a `:` are left out, [`DETECT`]'s constructor refuses them first).
    fn from(d: DetectProps) -> Self {
        let ep = d.onnx.ep();
        let labels = match d.onnx.labels.as_slice() {
            [coco] if coco == "coco" => COCO_LABELS.iter().map(|s| s.to_string()).collect(),
            _ => d.onnx.labels,
        };
        DetectConfig {
            model: d.onnx.model,
            decoder: d.decoder,
            output: d.output,
            size: d.size,
            tiles: d.tiles,
            overlap: d.overlap,
            whole_frame: d.whole_frame,
            fit: d.fit,
            pad: d.pad,
            interpolation: d.interpolation,
            channels: d.channels,
            scale: d.scale,
            scale_from_model: true,
            mean: d.mean,
            std: d.std,
            score: d.score,
            suppress: Suppress {
                iou: d.iou,
                ios: d.ios,
            },
            max_detections: d.max_detections,
            labels,
            classes: d.classes,
            map: d.map.iter().filter_map(|m| map_entry(m)).collect(),
            backend: d.backend,
            threads: d.threads,
            ort_threads: d.onnx.ort_threads,
            max_batch: d.max_batch,
            batch_sizes: d.batch_sizes,
            max_wait: d.max_wait_ms.map(|v| Duration::from_secs_f64(v / 1000.0)),
            interval: d.interval,
            overlap_calls: d.overlap_calls,
            cuda: CudaOptions {
                graph: d.cuda_graph,
                nhwc: d.prefer_nhwc,
                fuse_bias: d.fuse_conv_bias,
                priority: d.gpu_priority,
                ..CudaOptions::default()
            },
            ep,
            device: d.onnx.device,
            engine: d.engine,
        }
    }
}

/// `from:to`, both not empty, trimmed.
fn map_entry(pair: &str) -> Option<(String, String)> {
    match pair.split_once(':') {
        Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
            Some((from.trim().to_string(), to.trim().to_string()))
        }
        _ => None,
    }
}

/// `detect model=m.onnx tiles=640x640 overlap=0.15 score=0.3`: an ONNX detector.
pub const DETECT: StageDecl = StageDecl {
    name: "detect",
    role: Role::Boxes,
    doc: "ONNX object detector on the whole frame or its tiles (sliced inference): boxes, NMS",
    props: DetectProps::PROPS,
    needs: &[],
    provides: &[],
    make: detect_config,
};

/// [`DetectProps`], then the checks across properties and the labels file.
fn detect_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let mut d = DetectProps::from_props(p)?;
    if p.given("whole-frame").is_some() && d.tiles.is_none() {
        return Err(p.error(
            "whole-frame",
            "detect: whole-frame adds the whole frame to the tiles: set tiles=WxH too",
        ));
    }
    d.onnx.read_labels_file("detect", p)?;
    if let Some(pair) = d.map.iter().find(|m| map_entry(m).is_none()) {
        return Err(p.error(
            "map",
            format!("detect: map entry '{pair}' is not from:to (e.g. map=car:vehicle,bus:vehicle)"),
        ));
    }
    if let Some(sizes) = &d.batch_sizes {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(p.error(
                "batch-sizes",
                "detect: batch-sizes needs one or more sizes above 0 (e.g. 1,8,16,64)",
            ));
        }
        if let Some(big) = sizes.iter().find(|&&s| s > d.max_batch) {
            return Err(p.error(
                "batch-sizes",
                format!(
                    "detect: batch size {big} is over max-batch={} (a call never holds more)",
                    d.max_batch
                ),
            ));
        }
    }
    let mut config = DetectConfig::from(d);
    config.scale_from_model = p.given("scale").is_none();
    Ok(Box::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::tensor::{DType, Layout};
    use octopipe_cuda::StreamPriority;

    #[test]
    fn new_takes_the_declared_defaults() {
        let d = DetectConfig::new("m.onnx");
        assert_eq!(d.model, PathBuf::from("m.onnx"));
        assert_eq!(d.score, 0.3);
        assert_eq!(d.suppress.iou, 0.5);
        assert_eq!(d.suppress.ios, 1.0);
        assert_eq!(d.max_detections, 300);
        assert_eq!(d.max_batch, 64);
        assert_eq!((d.scale, d.overlap, d.pad), (1.0 / 255.0, 0.2, 114.0));
        assert_eq!((d.ep, d.cuda), (Ep::Auto(0), CudaOptions::default()));
        assert_eq!(d.cuda.priority, StreamPriority::Normal);
        // The tiles' preprocessing runs at the stage's priority.
        let high = DetectConfig {
            cuda: CudaOptions {
                priority: StreamPriority::High,
                ..CudaOptions::default()
            },
            ..d.clone()
        };
        let pre = high.preprocess_config((512, 512), Layout::Nchw, DType::F16);
        assert_eq!(pre.priority, StreamPriority::High);
        assert!(d.labels.is_empty() && d.output.is_empty() && d.map.is_empty());
        assert_eq!(
            (d.decoder, d.tiles, d.batch_sizes, d.max_wait),
            (None, None, None, None)
        );
    }
}
