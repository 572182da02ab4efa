//! The detector at run time: the model, the tiles' preprocessing, and boxes back to frames. Any
//! number of frames (of any streams) go through one call of [`Detector::detect_frames`]: their
//! regions are one ragged batch (one preprocess run: one kernel launch on the GPU), the model runs
//! them in calls of up to `max-batch` regions, and each frame gets its own boxes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::model::Model;
use super::{nms, tiles, DetectConfig, DetectError, RawBox, Rect};
use crate::batch::{BatchPool, CropBatch, CropMeta, DEFAULT_TILES_PER_BLOCK, DEFAULT_TILE_PIXELS};
use crate::budget::Series;
use crate::frame::{Detection, Frame, SkipReason};
use crate::preprocess::{create_backend, Backend, BackendKind, DType};
use crate::tensor::TensorData;

/// The batch of `frames`' regions (`regions[i]` of frame `i`), each a crop resized to `input`:
/// preprocessing all of them is one backend run (one kernel launch on the GPU, one parallel pass
/// on the CPU). Its buffers come from `pool` and go back to it when the batch is dropped (a
/// 12-tile tensor is tens of MB: a fresh one per call would cost its page faults every time).
pub fn regions_batch(
    pool: &BatchPool,
    frames: Vec<Frame>,
    regions: &[Vec<Rect>],
    input: (u32, u32),
) -> CropBatch {
    let mut batch = pool.batch();
    let per = input.0 * input.1 * 3;
    let mut k = 0;
    for (f, rs) in regions.iter().enumerate() {
        for r in rs {
            batch.crops.push(CropMeta {
                frame: f as u32,
                x: r[0],
                y: r[1],
                w: r[2],
                h: r[3],
                out_w: input.0,
                out_h: input.1,
                out_offset: k * per,
            });
            k += 1;
        }
    }
    batch.frames.extend(frames);
    batch.build_blocks(DEFAULT_TILE_PIXELS, DEFAULT_TILES_PER_BLOCK);
    batch
}

/// [`regions_batch`] of one frame.
pub fn region_batch(
    pool: &BatchPool,
    frame: Frame,
    regions: &[Rect],
    input: (u32, u32),
) -> CropBatch {
    regions_batch(pool, vec![frame], &[regions.to_vec()], input)
}

/// Time per frame in each part of the stage (a call's time shared by its frames; bounded memory
/// however long the run), calls and box counts, for the report.
#[derive(Debug, Default)]
pub(super) struct Split {
    pub preprocess: Series,
    pub infer: Series,
    pub decode: Series,
    pub total: Series,
    /// Regions of the last frame.
    pub regions: usize,
    /// Calls of [`Detector::detect_frames`], frames and regions in them.
    pub collections: u64,
    pub frames: u64,
    pub tiles: u64,
    /// Model runs and the rows they ran (regions and padding).
    pub runs: u64,
    pub rows: u64,
    /// Time in model runs (for tiles per second).
    pub infer_time: Duration,
    pub kept: u64,
    pub other_classes: u64,
    pub non_finite: u64,
    pub over_cap: u64,
}

/// Runtime state of the detect stage.
pub struct Detector {
    pub(super) config: DetectConfig,
    pub(super) model: Model,
    pub(super) backend: Box<dyn Backend>,
    /// Class names after `map`, grown as class ids are met.
    names: Vec<Arc<str>>,
    /// Per class id (as `names`): the class it is merged with in NMS, the first one `map`
    /// renames alike.
    groups: Vec<u32>,
    /// Classes kept (`None`: all).
    keep: Option<Vec<u32>>,
    pub(super) split: Split,
    /// Buffers of the regions' batches, reused call after call.
    pool: BatchPool,
    /// Each region's boxes of the current call, in the model input's pixels.
    found: Vec<Vec<RawBox>>,
    /// One frame's boxes in frame pixels.
    boxes: Vec<RawBox>,
}

impl Detector {
    /// Load the model, read its input and outputs, and make the preprocess backend.
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
            found: Vec::new(),
            boxes: Vec::new(),
        };
        d.warm_up()?;
        Ok(d)
    }

    /// The model input's (width, height).
    pub fn input_size(&self) -> (u32, u32) {
        self.model.io.size
    }

    /// The decoder in use.
    pub fn decoder(&self) -> super::Decoder {
        self.model.io.decoder
    }

    /// The preprocess backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The batch sizes the model runs at (on CUDA; empty where any size runs as it comes).
    pub fn batch_sizes(&self) -> Vec<usize> {
        self.model.sessions.fixed_sizes()
    }

    /// One run on a zero input, so that ONNX Runtime's first-run planning does not land on the
    /// first frame's budget, and a model that cannot run fails at start-up. (Fixed batch sizes
    /// were warmed when they were bound.)
    fn warm_up(&mut self) -> Result<(), DetectError> {
        let n = self.model.io.batch.unwrap_or(1);
        let len = n * self.model.io.size.0 as usize * self.model.io.size.1 as usize * 3;
        let zeros = match self.model.io.dtype {
            DType::F32 => TensorData::F32(vec![0.0; len]),
            DType::F16 => TensorData::F16(vec![0; len]),
        };
        let mut found = vec![Vec::new(); n];
        self.model
            .run(&zeros, 0, n, self.config.score, &mut found)
            .map_err(|reason| DetectError::Model {
                path: self.config.model.display().to_string(),
                reason: format!("does not run on a zero input: {reason}"),
            })?;
        Ok(())
    }

    /// Find the boxes of `frame` and put them in its detections (replacing any there).
    pub fn detect(&mut self, frame: Frame) -> Result<Frame, DetectError> {
        let mut frames = self.detect_frames(vec![frame])?;
        Ok(frames.pop().expect("one frame in, one out"))
    }

    /// Find the boxes of every frame of `frames` (of any streams) and put them in their
    /// detections (replacing any there); the frames come back in the order given.
    pub fn detect_frames(&mut self, frames: Vec<Frame>) -> Result<Vec<Frame>, DetectError> {
        if frames.is_empty() {
            return Ok(frames);
        }
        let regions: Vec<Vec<Rect>> = frames
            .iter()
            .map(|f| self.config.regions(f.layout.width, f.layout.height))
            .collect();
        let total: usize = regions.iter().map(Vec::len).sum();
        let (first_stream, first_seq, count) = (frames[0].stream, frames[0].seq, frames.len());
        let t0 = Instant::now();
        let input = self.model.io.size;
        let mut batch = regions_batch(&self.pool, frames, &regions, input);
        self.backend.run(&mut batch)?;
        if let Some(d) = batch.tensor.device() {
            // The model's CUDA stream waits for the preprocess kernel; the host does not.
            self.model.sessions.after(d.stream)?;
        }
        let t1 = Instant::now();
        let path = self.config.model.display().to_string();
        let run_err = |reason: String| DetectError::Run {
            path: path.clone(),
            stream: first_stream,
            frame: first_seq,
            more: count - 1,
            reason,
        };
        self.found.resize_with(total, Vec::new);
        self.found.iter_mut().for_each(Vec::clear);
        let chunk = self.model.chunk(self.config.max_batch);
        let mut start = 0;
        while start < total {
            let n = chunk.min(total - start);
            let stats = self
                .model
                .run(
                    &batch.tensor.data,
                    start,
                    n,
                    self.config.score,
                    &mut self.found[start..start + n],
                )
                .map_err(&run_err)?;
            self.split.runs += 1;
            self.split.rows += stats.rows as u64;
            self.split.non_finite += stats.non_finite as u64;
            self.split.over_cap += stats.over_cap;
            start += n;
        }
        let t2 = Instant::now();
        let mut frames = std::mem::take(&mut batch.frames);
        drop(batch);
        let mut next = 0;
        for (frame, rs) in frames.iter_mut().zip(&regions) {
            let mut boxes = std::mem::take(&mut self.boxes);
            boxes.clear();
            for (found, region) in self.found[next..next + rs.len()].iter().zip(rs) {
                boxes.extend(found.iter().map(|b| RawBox {
                    b: tiles::to_frame(b.b, *region, input, self.config.fit),
                    ..*b
                }));
            }
            next += rs.len();
            self.place(frame, &mut boxes);
            self.boxes = boxes;
        }
        let t3 = Instant::now();
        let s = &mut self.split;
        let per = |d: Duration| d / count as u32;
        for _ in 0..count {
            s.preprocess.push(per(t1 - t0));
            s.infer.push(per(t2 - t1));
            s.decode.push(per(t3 - t2));
            s.total.push(per(t3 - t0));
        }
        s.regions = regions.last().map_or(0, Vec::len);
        s.collections += 1;
        s.frames += count as u64;
        s.tiles += total as u64;
        s.infer_time += t2 - t1;
        Ok(frames)
    }

    /// Filter, merge and round `boxes` (in `frame`'s pixels) into `frame`'s detections.
    fn place(&mut self, frame: &mut Frame, boxes: &mut Vec<RawBox>) {
        let (w, h) = (frame.layout.width, frame.layout.height);
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
            boxes,
            self.config.suppress,
            self.config.max_detections,
            |c| groups[c as usize],
        );
        frame.detections.clear();
        for b in boxes.iter() {
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

    /// The report line: the stage's time per frame against the frame `budget`, its split, how
    /// frames shared the model's calls, and box counts (the section's text).
    pub fn report_line(&self, budget: Duration) -> Option<String> {
        self.report_section(budget).map(|s| s.to_string())
    }
}

/// A frame box `[x1, y1, x2, y2]` as whole pixels `[x, y, w, h]` inside a `fw`x`fh` frame (edges
/// rounded to the nearest pixel); refused when outside or under 2 px.
pub(super) fn pixel_box(b: [f32; 4], fw: u32, fh: u32) -> Result<[u32; 4], SkipReason> {
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
