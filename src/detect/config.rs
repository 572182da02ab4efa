//! The detect stage's settings and its declaration: every property, its default and its parsing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Decoder, Fit, Rect, Suppress, COCO_LABELS};
use super::{DEFAULT_IOU, DEFAULT_MAX_BATCH, DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE};
use crate::description::DescribeError;
use crate::onnx::{CudaOptions, Ep};
use crate::preprocess::{
    BackendKind, ChannelOrder, DType, Interpolation, Layout, PreprocessConfig,
};
use crate::stage::{Element, PropSpec, PropType, Props, Role, StageDecl};
use crate::tiles::Edge;

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
}

impl DetectConfig {
    /// Defaults for `model`: the whole frame, stretched, RGB, `/255`, no mean/std.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        DetectConfig {
            model: model.into(),
            decoder: None,
            output: Vec::new(),
            size: None,
            tiles: None,
            overlap: 0.2,
            whole_frame: false,
            fit: Fit::Stretch,
            pad: 114.0,
            interpolation: Interpolation::Bilinear,
            channels: ChannelOrder::Rgb,
            scale: 1.0 / 255.0,
            mean: [0.0; 3],
            std: [1.0; 3],
            score: DEFAULT_SCORE,
            suppress: Suppress {
                iou: DEFAULT_IOU,
                ios: 1.0,
            },
            max_detections: DEFAULT_MAX_DETECTIONS,
            labels: Vec::new(),
            classes: Vec::new(),
            map: Vec::new(),
            backend: BackendKind::Auto,
            threads: 0,
            ort_threads: 0,
            max_batch: DEFAULT_MAX_BATCH,
            batch_sizes: None,
            max_wait: None,
            interval: 1,
            overlap_calls: None,
            cuda: CudaOptions::default(),
            ep: Ep::default(),
            device: 0,
        }
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

    /// The regions of a `w`x`h` frame the detector looks at: the tiles, and the whole frame when
    /// there are no tiles or `whole_frame` is set.
    pub fn regions(&self, w: u32, h: u32) -> Vec<Rect> {
        let mut r = match self.tiles {
            Some((tw, th)) => crate::tiles::regular(w, h, tw, th, self.overlap, Edge::Shift),
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
            ..PreprocessConfig::default()
        }
    }
}

/// `detect model=m.onnx tiles=640x640 overlap=0.15 score=0.3`: an ONNX detector.
pub const DETECT: StageDecl = StageDecl {
    name: "detect",
    role: Role::Boxes,
    doc: "ONNX object detector on the whole frame or its tiles (sliced inference): boxes, NMS",
    props: &[
        PropSpec::new("model", PropType::Path, "-", "the .onnx detector"),
        PropSpec::new(
            "decoder",
            PropType::Choice(&["auto", "end2end", "yolov8", "yolov5", "centernet"]),
            "auto",
            "output format (auto: from the output's shape)",
        ),
        PropSpec::new(
            "output",
            PropType::List,
            "auto",
            "the output to read (auto: the first a decoder reads); centernet: SCORES,DISTANCES",
        ),
        PropSpec::new(
            "size",
            PropType::Size,
            "auto",
            "the model's input size when the model leaves it dynamic",
        ),
        PropSpec::new(
            "tiles",
            PropType::Size,
            "-",
            "tile size for sliced inference (unset: the whole frame)",
        ),
        PropSpec::new(
            "overlap",
            PropType::Float {
                min: 0.0,
                max: 0.9,
                open_min: false,
            },
            "0.2",
            "fraction of a tile shared with its neighbours",
        ),
        PropSpec::new(
            "whole-frame",
            PropType::Bool,
            "false",
            "with tiles, also run on the whole frame",
        ),
        PropSpec::new(
            "fit",
            PropType::Choice(&["stretch", "letterbox"]),
            "stretch",
            "how a tile is fitted to the input",
        ),
        PropSpec::new(
            "pad",
            PropType::Float {
                min: 0.0,
                max: 255.0,
                open_min: false,
            },
            "114",
            "letterbox padding (0..255)",
        ),
        PropSpec::new(
            "interpolation",
            PropType::Choice(&["bilinear", "area"]),
            "bilinear",
            "resampling of the tiles: OpenCV INTER_LINEAR, or INTER_AREA (antialiased downscaling)",
        ),
        PropSpec::new(
            "channels",
            PropType::Choice(&["rgb", "bgr"]),
            "rgb",
            "channel order the model takes",
        ),
        PropSpec::new(
            "scale",
            PropType::POSITIVE_FLOAT,
            "auto",
            "factor from 0..255 to the model's units (auto: 1/255; 1: raw 0..255)",
        ),
        PropSpec::new(
            "mean",
            PropType::Floats3 { positive: false },
            "0,0,0",
            "per-channel mean, after scale",
        ),
        PropSpec::new(
            "std",
            PropType::Floats3 { positive: true },
            "1,1,1",
            "per-channel standard deviation, after scale",
        ),
        PropSpec::new(
            "score",
            PropType::Float {
                min: 0.0,
                max: 1.0,
                open_min: false,
            },
            "0.3",
            "least score kept",
        ),
        PropSpec::new(
            "iou",
            PropType::Float {
                min: 0.0,
                max: 1.0,
                open_min: false,
            },
            "0.5",
            "NMS: a box overlapping a better one of its class by more than this is dropped",
        ),
        PropSpec::new(
            "ios",
            PropType::Float {
                min: 0.0,
                max: 1.0,
                open_min: false,
            },
            "1",
            "NMS: also drop a box whose overlap covers more than this share of the smaller box (a box a tile border cut short; 1: off)",
        ),
        PropSpec::new(
            "max-detections",
            PropType::POSITIVE,
            "300",
            "most boxes per frame",
        ),
        PropSpec::new(
            "labels",
            PropType::List,
            "class0,...",
            "class names in class-index order (coco: COCO's 80)",
        ),
        PropSpec::new(
            "labels-file",
            PropType::Path,
            "-",
            "a file with one class name per line",
        ),
        PropSpec::new(
            "classes",
            PropType::List,
            "all",
            "keep only these classes (names or indices)",
        ),
        PropSpec::new(
            "map",
            PropType::List,
            "-",
            "rename classes for the stages after: from:to,...",
        ),
        PropSpec::new(
            "backend",
            PropType::Choice(&["auto", "cpu", "cuda"]),
            "auto",
            "preprocessing of the tiles (auto: CUDA when a GPU is present)",
        ),
        PropSpec::new(
            "threads",
            PropType::COUNT,
            "0",
            "CPU preprocessing threads (0: one per core)",
        ),
        PropSpec::new(
            "ort-threads",
            PropType::COUNT,
            "0",
            "ONNX Runtime intra-op threads (0: its default)",
        ),
        PropSpec::new(
            "max-batch",
            PropType::POSITIVE,
            "64",
            "most tiles per inference call (models with a dynamic batch); the stage collects \
             frames of every stream it serves until their tiles would pass it, or their wait ends",
        ),
        PropSpec::new(
            "batch-sizes",
            PropType::Ints { max: 4096 },
            "auto",
            "on CUDA, the batch sizes the model runs at, each planned and warmed at start \
             (auto: 1,8,16,32 below max-batch, and max-batch); a call is padded to the next",
        ),
        PropSpec::new(
            "max-wait-ms",
            PropType::Float {
                min: 0.0,
                max: f64::INFINITY,
                open_min: false,
            },
            "auto",
            "longest a frame waits for others to share an inference call (auto: from its \
             remaining budget)",
        ),
        PropSpec::new(
            "interval",
            PropType::POSITIVE,
            "1",
            "detect every Nth frame of each stream; the tracker after the stage carries the \
             boxes over the frames between (marked \"predicted\" in the output)",
        ),
        PropSpec::new(
            "overlap-calls",
            PropType::Bool,
            "auto",
            "run the model on a thread of its own: while a call runs, the stage collects and \
             preprocesses the next call's frames and places the boxes of the call before \
             (false: each step of a call after the other, on the stage's thread; auto: true \
             where the model runs on CUDA, false on the CPU, whose cores ONNX Runtime's \
             threads already use)",
        ),
        PropSpec::new(
            "cuda-graph",
            PropType::Bool,
            "false",
            "on CUDA at fixed batch sizes, replay each size's run as a CUDA graph (one launch \
             per call); the graphs are captured when the stage opens, on a thread of the \
             model's own that runs every call after: a stage opened while others use the GPU \
             (a stream with its own detect added to a running pipeline) may break their CUDA \
             calls then, and a size whose capture fails runs without a graph (warned). Off by \
             default: 2 of 10 benchmark processes with it crashed as they ended (cause not yet \
             found)",
        ),
        PropSpec::new(
            "prefer-nhwc",
            PropType::Bool,
            "false",
            "on CUDA, let ONNX Runtime run the convolutions in NHWC",
        ),

        PropSpec::new(
            "ep",
            PropType::Choice(&["auto", "cpu", "cuda"]),
            "auto",
            "ONNX Runtime execution provider (auto: CUDA when its build has it and a GPU is present; with cuda the tiles preprocessed on the GPU stay there)",
        ),
        PropSpec::new(
            "device",
            PropType::COUNT,
            "0",
            "the GPU of the CUDA preprocessing and execution provider",
        ),
    ],
    needs: &[],
    provides: &[],
    make: detect_config,
};

fn detect_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let mut cfg = DetectConfig::new(p.required("model")?);
    cfg.decoder = match p.str("decoder") {
        Some("end2end") => Some(Decoder::End2End),
        Some("yolov8") => Some(Decoder::Yolov8),
        Some("yolov5") => Some(Decoder::Yolov5),
        Some("centernet") => Some(Decoder::CenterNet),
        _ => None,
    };
    cfg.output = p
        .given("output")
        .map(|o| o.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    cfg.size = p.size("size");
    cfg.tiles = p.size("tiles");
    cfg.overlap = p.float("overlap").unwrap_or(cfg.overlap);
    cfg.whole_frame = p.bool("whole-frame").unwrap_or(false);
    if p.given("whole-frame").is_some() && cfg.tiles.is_none() {
        return Err(p.error(
            "whole-frame",
            "detect: whole-frame adds the whole frame to the tiles: set tiles=WxH too",
        ));
    }
    cfg.fit = match p.str("fit") {
        Some("letterbox") => Fit::Letterbox,
        _ => Fit::Stretch,
    };
    cfg.pad = p.float("pad").map_or(cfg.pad, |v| v as f32);
    cfg.interpolation = match p.str("interpolation") {
        Some("area") => Interpolation::Area,
        _ => Interpolation::Bilinear,
    };
    cfg.channels = match p.str("channels") {
        Some("bgr") => ChannelOrder::Bgr,
        _ => ChannelOrder::Rgb,
    };
    cfg.scale = p.float("scale").map_or(cfg.scale, |v| v as f32);
    cfg.mean = p.floats3("mean").unwrap_or(cfg.mean);
    cfg.std = p.floats3("std").unwrap_or(cfg.std);
    cfg.score = p.float("score").map_or(cfg.score, |v| v as f32);
    cfg.suppress = Suppress {
        iou: p.float("iou").map_or(DEFAULT_IOU, |v| v as f32),
        ios: p.float("ios").map_or(1.0, |v| v as f32),
    };
    cfg.max_detections = p.usize("max-detections").unwrap_or(cfg.max_detections);
    if let Some(l) = p.given("labels") {
        cfg.labels = match l.trim() {
            "coco" => COCO_LABELS.iter().map(|s| s.to_string()).collect(),
            _ => l.split(',').map(|s| s.trim().to_string()).collect(),
        };
    }
    if let Some(f) = p.given("labels-file") {
        let labels = crate::onnx::read_labels(Path::new(f)).map_err(|e| e.to_string());
        cfg.labels = labels
            .and_then(|l| match l.is_empty() {
                true => Err("no class names in it".to_string()),
                false => Ok(l),
            })
            .map_err(|e| p.error("labels-file", format!("detect: labels-file '{f}': {e}")))?;
    }
    let list = |key| p.given(key).map(|v| v.split(',').map(str::trim));
    if let Some(c) = list("classes") {
        cfg.classes = c.map(String::from).collect();
    }
    if let Some(m) = list("map") {
        cfg.map = m
            .map(|pair| match pair.split_once(':') {
                Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
                    Ok((from.trim().to_string(), to.trim().to_string()))
                }
                _ => Err(p.error(
                    "map",
                    format!("detect: map entry '{pair}' is not from:to (e.g. map=car:vehicle,bus:vehicle)"),
                )),
            })
            .collect::<Result<_, _>>()?;
    }
    cfg.backend = BackendKind::from_prop(p.str("backend"));
    cfg.threads = p.usize("threads").unwrap_or(0);
    cfg.ort_threads = p.usize("ort-threads").unwrap_or(0);
    cfg.max_batch = p.usize("max-batch").unwrap_or(cfg.max_batch);
    if let Some(sizes) = p.ints("batch-sizes") {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(p.error(
                "batch-sizes",
                "detect: batch-sizes needs one or more sizes above 0 (e.g. 1,8,16,64)",
            ));
        }
        let sizes: Vec<usize> = sizes.into_iter().map(|s| s as usize).collect();
        if let Some(big) = sizes.iter().find(|&&s| s > cfg.max_batch) {
            return Err(p.error(
                "batch-sizes",
                format!(
                    "detect: batch size {big} is over max-batch={} (a call never holds more)",
                    cfg.max_batch
                ),
            ));
        }
        cfg.batch_sizes = Some(sizes);
    }
    cfg.max_wait = p
        .float("max-wait-ms")
        .map(|v| Duration::from_secs_f64(v / 1000.0));
    cfg.interval = p.usize("interval").map_or(1, |v| v as u64);
    cfg.overlap_calls = p.bool("overlap-calls");
    cfg.cuda.graph = p.bool("cuda-graph").unwrap_or(cfg.cuda.graph);
    cfg.cuda.nhwc = p.bool("prefer-nhwc").unwrap_or(cfg.cuda.nhwc);
    cfg.device = p.usize("device").unwrap_or(0);
    let device = i32::try_from(cfg.device).unwrap_or(i32::MAX);
    cfg.ep = match p.str("ep") {
        Some("cpu") => Ep::Cpu,
        Some("cuda") => Ep::Cuda(device),
        _ => Ep::Auto(device),
    };
    Ok(Box::new(cfg))
}
