//! Detect stage: an ONNX object detector finds the boxes, on the whole frame or on overlapping
//! tiles of it (sliced inference).
//!
//! ```text
//! images location=${root}/images ! detect model=coco-centernet-512.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 ! track ! classify ... ! jsonl ...
//! media location=flight.mp4 ! detect model=yolov8n.onnx labels-file=coco.names fit=letterbox ! jsonl ...
//! ```
//!
//! **Input.** The tiles of a frame (and/or the whole frame) are the crops of one ragged batch,
//! made by the same preprocess backends as the classifier's crops (CPU, or one CUDA kernel launch
//! for all of a frame's tiles): each is resized to the model's input size (`fit=stretch`, or
//! `letterbox` with `pad`), in the model's layout (NCHW or NHWC, read from the model's input),
//! channel order (`channels`), `value = (v * scale - mean) / std`, and the model's element type
//! (f32 or f16, read from the model). A model with a fixed batch of 1 runs tile by tile; a model
//! with a dynamic batch gets up to `max-batch` tiles per run.
//!
//! **Output.** `decoder` reads the output ([`Decoder`]; `auto` picks it from the output's shape):
//! `end2end` rows `x1, y1, x2, y2, score, class`, `yolov8` `[B, 4 + classes, anchors]`, `yolov5`
//! `[B, anchors, 5 + classes]`. Boxes under `score` are left out; the rest go back to frame
//! pixels (undoing the letterbox or stretch and the tile's offset), are merged across tiles and
//! suppressed within a tile by one per-class NMS (a box is dropped when a better one of its class
//! overlaps it by more than `iou`, or, with `ios` below 1, covers more than `ios` of the smaller
//! of the two: a box that a tile border cut short lies inside the whole object's box),
//! at most `max-detections` per frame, rounded to whole pixels and clipped to the frame (boxes
//! under 2 px are counted as skipped, as annotation boxes are).
//!
//! **Classes.** Names come from `labels` (`coco` is COCO's 80) or `labels-file`; `classes` keeps
//! only the named classes (names or indices); `map=from:to,...` renames classes for the stages
//! after (the classifier's crops, the JSONL `detection.label`).
//!
//! The report gets the stage's row like any stage, and a line with the detector's own split per
//! frame (preprocessing, inference, decoding and merging) and its box counts.

mod coco;
mod decode;
mod model;
mod section;
pub mod tiles;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::{BatchPool, CropBatch, CropMeta, DEFAULT_TILES_PER_BLOCK, DEFAULT_TILE_PIXELS};
use crate::budget::{Series, Tally};
use crate::describe::DescribeError;
use crate::frame::{Detection, Frame, SkipReason};
use crate::onnx::{Ep, OnnxError};
use crate::pipeline::RunPath;
use crate::preprocess::{
    create_backend, Backend, BackendKind, ChannelOrder, DType, Interpolation, Layout,
    PreprocessConfig, PreprocessError,
};
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Props, Role, Running, Stage, StageDecl,
};
use crate::tensor::TensorData;
use crate::tiles::Edge;

use crate::Error;
use model::Model;

pub use coco::COCO_LABELS;
pub use decode::{nms, Decoder, RawBox, Suppress};
pub use section::DetectSection;
pub use tiles::{Fit, Rect};

/// Default score threshold.
pub const DEFAULT_SCORE: f32 = 0.3;
/// Default NMS overlap threshold.
pub const DEFAULT_IOU: f32 = 0.5;
/// Default largest number of boxes per frame.
pub const DEFAULT_MAX_DETECTIONS: usize = 300;
/// Default largest number of tiles per inference call (dynamic-batch models).
pub const DEFAULT_MAX_BATCH: usize = 16;

/// Settings of the detect stage.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectConfig {
    /// The ONNX model file.
    pub model: PathBuf,
    /// How the output is read; `None` picks it from the output's shape.
    pub decoder: Option<Decoder>,
    /// The output to read; `None`: the first one a decoder reads.
    pub output: Option<String>,
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
    /// Most tiles per inference call for a dynamic-batch model.
    pub max_batch: usize,
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
            output: None,
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
            ep: Ep::default(),
            device: 0,
        }
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

/// The batch of a frame's `regions`, each a crop resized to `input`: preprocessing all of them is
/// one backend run (one kernel launch on the GPU, one parallel pass on the CPU). Its buffers come
/// from `pool` and go back to it when the batch is dropped (a 12-tile tensor is tens of MB: a
/// fresh one per frame would cost its page faults on every frame).
pub fn region_batch(
    pool: &BatchPool,
    frame: Frame,
    regions: &[Rect],
    input: (u32, u32),
) -> CropBatch {
    let mut batch = pool.batch();
    let per = input.0 * input.1 * 3;
    for (i, r) in regions.iter().enumerate() {
        batch.crops.push(CropMeta {
            frame: 0,
            x: r[0],
            y: r[1],
            w: r[2],
            h: r[3],
            out_w: input.0,
            out_h: input.1,
            out_offset: i as u32 * per,
        });
    }
    batch.frames.push(frame);
    batch.build_blocks(DEFAULT_TILE_PIXELS, DEFAULT_TILES_PER_BLOCK);
    batch
}

/// Errors of the detect stage; each names the model.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// ONNX Runtime or the model file could not be loaded.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The model is not usable as configured.
    #[error("detect: model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What does not fit.
        reason: String,
    },
    /// Preprocessing the tiles failed.
    #[error("detect: {0}")]
    Preprocess(#[from] PreprocessError),
    /// Inference failed.
    #[error("detect: model {path}: inference failed on stream {stream} frame {frame}: {reason}")]
    Run {
        /// The model file.
        path: String,
        /// The frame's stream.
        stream: u32,
        /// The frame's number.
        frame: u64,
        /// ONNX Runtime's message.
        reason: String,
    },
}

/// Per-frame time spent in each part of the stage (bounded memory however long the run), and
/// box counts, for the report.
#[derive(Debug, Default)]
struct Split {
    preprocess: Series,
    infer: Series,
    decode: Series,
    total: Series,
    regions: usize,
    kept: u64,
    other_classes: u64,
    non_finite: u64,
}

/// Runtime state of the detect stage.
pub struct Detector {
    config: DetectConfig,
    model: Model,
    backend: Box<dyn Backend>,
    /// Class names after `map`, grown as class ids are met.
    names: Vec<Arc<str>>,
    /// Per class id (as `names`): the class it is merged with in NMS, the first one `map`
    /// renames alike.
    groups: Vec<u32>,
    /// Classes kept (`None`: all).
    keep: Option<Vec<u32>>,
    split: Split,
    /// Buffers of the regions' batches, reused frame after frame.
    pool: BatchPool,
    boxes: Vec<RawBox>,
    /// One region's boxes as decoded, before they go back to frame pixels.
    found: Vec<RawBox>,
}

impl Detector {
    /// Load the model, read its input and output, and make the preprocess backend.
    pub fn new(config: DetectConfig) -> Result<Self, DetectError> {
        let model = Model::open(&config)?;
        let keep = class_filter(&config).map_err(|reason| DetectError::Model {
            path: config.model.display().to_string(),
            reason,
        })?;
        let io = &model.io;
        let mut pre = config.preprocess_config(io.size, io.layout, io.dtype);
        // On CUDA's execution provider the tiles' tensor stays on the GPU it runs on.
        pre.device_output = model.sessions.cuda() == i32::try_from(pre.device).ok()
            && io.dtype == DType::F32
            && config.backend != BackendKind::Cpu;
        let backend = create_backend(&pre)?;
        let mut d = Detector {
            config,
            model,
            backend,
            names: Vec::new(),
            groups: Vec::new(),
            keep,
            split: Split::default(),
            pool: BatchPool::new(),
            boxes: Vec::new(),
            found: Vec::new(),
        };
        d.warm_up()?;
        Ok(d)
    }

    /// The model input's (width, height).
    pub fn input_size(&self) -> (u32, u32) {
        self.model.io.size
    }

    /// The decoder in use.
    pub fn decoder(&self) -> Decoder {
        self.model.io.decoder
    }

    /// The preprocess backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// One run on a zero input, so that ONNX Runtime's first-run planning does not land on the
    /// first frame's budget, and a model that cannot run fails at start-up.
    fn warm_up(&mut self) -> Result<(), DetectError> {
        let n = self.model.io.batch.unwrap_or(1);
        let len = n * self.model.io.size.0 as usize * self.model.io.size.1 as usize * 3;
        let zeros = match self.model.io.dtype {
            DType::F32 => TensorData::F32(vec![0.0; len]),
            DType::F16 => TensorData::F16(vec![0; len]),
        };
        self.model
            .run(&zeros, 0, n, |_, _| ())
            .map_err(|reason| DetectError::Model {
                path: self.config.model.display().to_string(),
                reason: format!("does not run on a zero input: {reason}"),
            })?;
        Ok(())
    }

    /// Find the boxes of `frame` and put them in its detections (replacing any there).
    pub fn detect(&mut self, frame: Frame) -> Result<Frame, DetectError> {
        let (w, h) = (frame.layout.width, frame.layout.height);
        let regions = self.config.regions(w, h);
        self.split.regions = regions.len();
        let t0 = Instant::now();
        let mut batch = region_batch(&self.pool, frame, &regions, self.model.io.size);
        self.backend.run(&mut batch)?;
        if let Some(d) = batch.tensor.device() {
            // The model's CUDA stream waits for the preprocess kernel; the host does not.
            self.model.sessions.after(d.stream)?;
        }
        let t1 = Instant::now();
        let mut frame = batch.frames.pop().expect("the batch holds its frame");
        let tensor = &batch.tensor.data;
        let (stream, seq) = (frame.stream, frame.seq);
        let path = self.config.model.display().to_string();
        let run_err = |reason: String| DetectError::Run {
            path: path.clone(),
            stream,
            frame: seq,
            reason,
        };
        let chunk = self.model.io.batch.unwrap_or(self.config.max_batch.max(1));
        let (decoder, input, fit) = (self.model.io.decoder, self.model.io.size, self.config.fit);
        let score = self.config.score;
        let mut boxes = std::mem::take(&mut self.boxes);
        boxes.clear();
        let mut decode_time = Duration::ZERO;
        let mut non_finite = 0;
        let mut start = 0;
        while start < regions.len() {
            let n = chunk.min(regions.len() - start);
            let mut found = std::mem::take(&mut self.found);
            self.model
                .run(tensor, start, n, |shape, data| {
                    let d0 = Instant::now();
                    for (i, region) in regions[start..start + n].iter().enumerate() {
                        found.clear();
                        non_finite += decoder.decode(data, shape, i, score, &mut found);
                        boxes.extend(found.iter().map(|b| RawBox {
                            b: tiles::to_frame(b.b, *region, input, fit),
                            ..*b
                        }));
                    }
                    decode_time += d0.elapsed();
                })
                .map_err(&run_err)?;
            self.found = found;
            start += n;
        }
        self.split.non_finite += non_finite as u64;
        let t2 = Instant::now();
        if let Some(keep) = &self.keep {
            let before = boxes.len();
            boxes.retain(|b| keep.contains(&b.class));
            self.split.other_classes += (before - boxes.len()) as u64;
        }
        // Classes a map renames alike are merged as one.
        let top = boxes.iter().map(|b| b.class).max().unwrap_or(0);
        self.name(top);
        let groups = &self.groups;
        nms(
            &mut boxes,
            self.config.suppress,
            self.config.max_detections,
            |c| groups[c as usize],
        );
        frame.detections.clear();
        for b in &boxes {
            match pixel_box(b.b, w, h) {
                Ok(bbox) => {
                    let label = self.name(b.class);
                    frame.detections.push(Detection {
                        bbox,
                        class_id: Some(b.class),
                        label: Some(label),
                        score: b.score,
                        track: None,
                        classification: None,
                        stats: None,
                    });
                }
                Err(reason) => frame.skip(reason),
            }
        }
        self.split.kept += frame.detections.len() as u64;
        self.boxes = boxes;
        let t3 = Instant::now();
        self.split.preprocess.push(t1 - t0);
        self.split.infer.push(t2 - t1 - decode_time);
        self.split.decode.push(t3 - t2 + decode_time);
        self.split.total.push(t3 - t0);
        Ok(frame)
    }

    /// The shared name of class `id`, after `map`.
    fn name(&mut self, id: u32) -> Arc<str> {
        while self.names.len() <= id as usize {
            let next = self.names.len();
            let name = self
                .config
                .labels
                .get(next)
                .cloned()
                .unwrap_or_else(|| format!("class{next}"));
            let name = self
                .config
                .map
                .iter()
                .find(|(from, _)| *from == name)
                .map_or(name, |(_, to)| to.clone());
            let first = self.names.iter().position(|n| **n == *name);
            self.groups.push(first.unwrap_or(next) as u32);
            self.names.push(Arc::from(name));
        }
        self.names[id as usize].clone()
    }

    /// The report line: the stage's time per frame against the frame `budget`, its split, and
    /// box counts.
    pub fn report_line(&self, budget: Duration) -> Option<String> {
        self.report_section(budget).map(|s| s.to_string())
    }
}

/// A frame box `[x1, y1, x2, y2]` as whole pixels `[x, y, w, h]` inside a `fw`x`fh` frame (edges
/// rounded to the nearest pixel); refused when outside or under 2 px.
fn pixel_box(b: [f32; 4], fw: u32, fh: u32) -> Result<[u32; 4], SkipReason> {
    let x0 = b[0].round() as i64;
    let y0 = b[1].round() as i64;
    let x1 = b[2].round() as i64;
    let y1 = b[3].round() as i64;
    crate::boxes::clip_box([x0, y0, x1 - x0, y1 - y0], fw, fh)
}

/// The class ids `classes` names (names through `labels`, or indices); `None` keeps all.
fn class_filter(config: &DetectConfig) -> Result<Option<Vec<u32>>, String> {
    if config.classes.is_empty() {
        return Ok(None);
    }
    config
        .classes
        .iter()
        .map(|c| {
            if let Some(i) = config.labels.iter().position(|l| l == c) {
                return Ok(i as u32);
            }
            c.parse::<u32>().map_err(|_| {
                format!("classes: '{c}' is neither a class name in labels nor a class index")
            })
        })
        .collect::<Result<Vec<u32>, String>>()
        .map(Some)
}

/// The detect stage at run time: the detector and where its report line goes.
struct DetectStage(Detector, Tally, Duration);

impl Stage<Frame, Frame> for DetectStage {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        out.push(self.0.detect(frame)?);
        Ok(())
    }
    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        if let Some(section) = self.0.report_section(self.2) {
            self.1.with(|t| t.add_section(&section));
        }
        Ok(())
    }
}

impl Element for DetectConfig {
    fn configure(&mut self, caps: &mut crate::stage::Caps) {
        // A `track` after it follows this threshold unless given its own.
        caps.detect_score = Some(self.score);
    }
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let detector = Detector::new(*self)?;
        tracing::info!(
            "detect: {}x{} input, {} decoder, {} preprocessing",
            detector.model.io.size.0,
            detector.model.io.size.1,
            detector.model.io.decoder.name(),
            detector.backend.name()
        );
        Ok(Running::Frames(Box::new(DetectStage(
            detector,
            ctx.tally.clone(),
            ctx.budget,
        ))))
    }
    fn inputs(&self) -> Vec<RunPath> {
        vec![RunPath::file("detect model", &self.model)]
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
            PropType::Choice(&["auto", "end2end", "yolov8", "yolov5"]),
            "auto",
            "output format (auto: from the output's shape)",
        ),
        PropSpec::new(
            "output",
            PropType::Str,
            "auto",
            "the output to read (auto: the first a decoder reads)",
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
            "16",
            "most tiles per inference call (models with a dynamic batch)",
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
        _ => None,
    };
    cfg.output = p.given("output").map(String::from);
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
    cfg.device = p.usize("device").unwrap_or(0);
    let device = i32::try_from(cfg.device).unwrap_or(i32::MAX);
    cfg.ep = match p.str("ep") {
        Some("cpu") => Ep::Cpu,
        Some("cuda") => Ep::Cuda(device),
        _ => Ep::Auto(device),
    };
    Ok(Box::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_across_a_tile_border_is_one_box() {
        // 640x640 tiles of a 1184x640 frame with overlap 0.15: the second starts at 544. A car at
        // x 600..700 is cut at 640 in the first tile and whole in the second.
        let tiles = crate::tiles::regular(1184, 640, 640, 640, 0.15, Edge::Shift);
        assert_eq!(tiles, [[0, 0, 640, 640], [544, 0, 640, 640]]);
        let input = (320, 320);
        // Each tile's model input is its 640x640 pixels halved.
        let cut = tiles::to_frame([300.0, 50.0, 320.0, 70.0], tiles[0], input, Fit::Stretch);
        let whole = tiles::to_frame([28.0, 50.0, 78.0, 70.0], tiles[1], input, Fit::Stretch);
        assert_eq!(cut, [600.0, 100.0, 640.0, 140.0]);
        assert_eq!(whole, [600.0, 100.0, 700.0, 140.0]);
        // Another car beside it, overlapping the whole one a little: kept either way.
        let beside = [690.0, 100.0, 790.0, 140.0];
        let boxes = vec![
            RawBox {
                b: cut,
                score: 0.8,
                class: 2,
            },
            RawBox {
                b: whole,
                score: 0.7,
                class: 2,
            },
            RawBox {
                b: beside,
                score: 0.6,
                class: 2,
            },
        ];
        let plain = Suppress { iou: 0.5, ios: 1.0 };
        let mut v = boxes.clone();
        nms(&mut v, plain, 100, |c| c);
        assert_eq!(v.len(), 3, "IoU 0.4: plain NMS keeps the cut box");
        let merging = Suppress {
            iou: 0.5,
            ios: 0.85,
        };
        let mut v = boxes;
        nms(&mut v, merging, 100, |c| c);
        let kept: Vec<[f32; 4]> = v.iter().map(|b| b.b).collect();
        assert_eq!(
            kept,
            [whole, beside],
            "the cut box, best scored, grows to the whole object"
        );
    }

    #[test]
    fn pixel_boxes_round_and_clip() {
        assert_eq!(
            pixel_box([10.4, 20.6, 30.5, 40.0], 100, 100),
            Ok([10, 21, 21, 19])
        );
        assert_eq!(
            pixel_box([-5.0, -5.0, 10.0, 10.0], 100, 100),
            Ok([0, 0, 10, 10])
        );
        assert_eq!(
            pixel_box([99.2, 0.0, 120.0, 10.0], 100, 100),
            Err(SkipReason::TooSmall)
        );
        assert_eq!(
            pixel_box([150.0, 0.0, 160.0, 10.0], 100, 100),
            Err(SkipReason::OutsideFrame)
        );
    }
}
