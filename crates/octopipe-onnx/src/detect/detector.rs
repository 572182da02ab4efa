//! The detector at run time: the model, the tiles' preprocessing, and boxes back to frames
//! (placed in them by `place.rs`). Any number of frames (of any streams) go through one call
//! ([`Detector::detect_frames`], or [`Detector::start`] and [`Detector::complete`]): their
//! regions are one ragged batch (one preprocess run: one kernel launch on the GPU), the model
//! runs them in runs of up to `max-batch` regions, and each frame gets its own boxes. With
//! `overlap-calls` the model's runs happen on a thread of the model's own: a call started runs
//! there while the caller collects and preprocesses the next call's frames and places the boxes
//! of the call before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::blind::Blind;
use super::error::{DetectError, RunError};
use super::io::Io;
use super::model::{Model, RunStats};
use super::raw::RawBox;
use super::{tiles, DetectConfig, Rect};
use crate::onnx::{Ticket, Worker};
use octopipe_core::alloc::AllocError;
use octopipe_core::budget::Series;
use octopipe_core::frame::Frame;
use octopipe_core::tensor::{HostData, TensorData};
use octopipe_stages::batch::{
    BatchPool, CropBatch, CropMeta, DEFAULT_TILES_PER_BLOCK, DEFAULT_TILE_PIXELS,
};
use octopipe_stages::preprocess::{create_backend, Backend, BackendKind, DType};

/// The batch of `frames`' regions (`regions[i]` of frame `i`), each a crop resized to `input`:
/// preprocessing all of them is one backend run (one kernel launch on the GPU, one parallel pass
/// on the CPU). Its buffers come from `pool` and go back to it when the batch is dropped (a
/// 12-tile tensor is tens of MB: a fresh one per call would cost its page faults every time).
/// Blocks the system refuses memory for are an error (4096 tiles of a 4096x4096 input are 67
/// million blocks).
pub fn regions_batch(
    pool: &BatchPool,
    frames: Vec<Frame>,
    regions: &[Vec<Rect>],
    input: (u32, u32),
) -> Result<CropBatch, AllocError> {
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
    batch.try_build_blocks(DEFAULT_TILE_PIXELS, DEFAULT_TILES_PER_BLOCK)?;
    Ok(batch)
}

/// [`regions_batch`] of one frame; panics where the system refuses the memory.
pub fn region_batch(
    pool: &BatchPool,
    frame: Frame,
    regions: &[Rect],
    input: (u32, u32),
) -> CropBatch {
    regions_batch(pool, vec![frame], &[regions.to_vec()], input)
        .unwrap_or_else(|e| panic!("the blocks of {} regions {e}", regions.len()))
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
    /// Of it, in ONNX Runtime's runs (fixed batch sizes) and in the GPU's peaks.
    pub model_time: Duration,
    pub peaks_time: Duration,
    /// Of ONNX Runtime's, the GPU's from the input ready to the outputs written.
    pub gpu_time: Duration,
    pub kept: u64,
    pub other_classes: u64,
    pub non_finite: u64,
    pub over_cap: u64,
}

/// Runtime state of the detect stage.
pub struct Detector {
    pub(super) config: DetectConfig,
    /// Where the model is and runs.
    runner: Runner,
    /// The model's input and outputs (the model's own, copied: the model may be on its thread).
    pub(super) io: Io,
    /// The model's fixed batch sizes on CUDA (empty where any size runs).
    sizes: Vec<usize>,
    /// Most regions one model run takes.
    chunk: usize,
    pub(super) backend: Box<dyn Backend>,
    /// Class names after `map`, grown as class ids are met.
    pub(super) names: Vec<Arc<str>>,
    /// Per class id (as `names`): the class it is merged with in NMS, the first one `map`
    /// renames alike.
    pub(super) groups: Vec<u32>,
    /// Classes kept (`None`: all).
    pub(super) keep: Option<Vec<u32>>,
    pub(super) split: Split,
    /// Buffers of the regions' batches, reused call after call.
    pool: BatchPool,
    /// Each region's boxes of a call, in the model input's pixels: buffers of calls completed,
    /// reused by the next (one per call in flight at once).
    found: Vec<Vec<Vec<RawBox>>>,
    /// One frame's boxes in frame pixels.
    boxes: Vec<RawBox>,
    /// The last call completed: its preprocessing, model runs and placing, one after the other.
    last_call: Duration,
    /// Until the first box is kept: the frames with none and the best candidate's score.
    pub(super) blind: Option<Blind>,
    /// Whether `scale` came from the model's metadata (`octopipe.input_range`).
    pub(super) scale_source: bool,
}

/// Where the model is and its runs happen.
enum Runner {
    /// On the caller's thread: a call's runs happen when it starts.
    Here(Box<Model>),
    /// On a thread of the model's own (`overlap-calls`): a call's runs happen there while the
    /// caller goes on, and the call's completion waits for them.
    Thread(Worker<Model>),
}

/// What the model's runs of one call give back: the regions' batch (its frames, and its tensor,
/// freed only once no run reads it), each region's boxes in the model input's pixels, what the
/// runs did, and how long they took.
struct Ran {
    batch: CropBatch,
    found: Vec<Vec<RawBox>>,
    result: Result<RunStats, RunError>,
    time: Duration,
}

/// A call of the detector on some frames, started by [`Detector::start`]: its model runs done
/// (without `overlap-calls`) or under way on the model's thread; [`Detector::complete`] gives the
/// frames back with their boxes.
pub struct Call {
    runs: Runs,
    /// Each frame's regions.
    regions: Vec<Vec<Rect>>,
    /// The first frame's stream and number, and the frames in the call (for its error).
    first: (u32, u64, usize),
    /// Time spent preprocessing its regions.
    preprocess: Duration,
    /// The least score its runs kept ([`Detector::run_score`] when it started).
    score: f32,
    /// When it started.
    began: Instant,
}

/// A call's model runs.
enum Runs {
    Done(Ran),
    Running(Ticket<Ran>),
}

impl Call {
    /// Whether its model runs are over ([`Detector::complete`] would not wait for them).
    pub fn done(&mut self) -> bool {
        match &mut self.runs {
            Runs::Done(_) => true,
            Runs::Running(t) => t.done(),
        }
    }

    /// The frames in the call.
    pub fn frames(&self) -> usize {
        self.first.2
    }
}

/// Run `tensor`'s `total` regions through `model` in runs of at most `chunk`, each region's boxes
/// (at or over `score`) into `found`, after the work queued on the CUDA stream `producer` (the
/// preprocessing that wrote them; 0: none).
fn run_regions(
    model: &mut Model,
    tensor: &TensorData,
    (total, chunk, score): (usize, usize, f32),
    producer: u64,
    found: &mut [Vec<RawBox>],
) -> Result<RunStats, RunError> {
    // The model's CUDA stream waits for the preprocess kernel; the host does not.
    model.after(producer)?;
    let mut sum = RunStats::default();
    let mut start = 0;
    while start < total {
        let n = chunk.min(total - start);
        sum += model.run(tensor, start, n, score, &mut found[start..start + n])?;
        start += n;
    }
    Ok(sum)
}

impl Detector {
    /// Load the model, read its input and outputs, make the preprocess backend, warm the model up
    /// and, with `overlap-calls`, move it to a thread of its own.
    pub fn new(mut config: DetectConfig) -> Result<Self, DetectError> {
        let mut model = Model::open(&config)?;
        // The input range the model's metadata states is the default of `scale`.
        let scale_source = config.scale_from_model && model.io.input_scale.is_some();
        if let Some(scale) = model.io.input_scale.filter(|_| config.scale_from_model) {
            config.scale = scale;
        }
        let keep = class_filter(&config).map_err(|reason| DetectError::Model {
            path: config.model.display().to_string(),
            reason,
        })?;
        let io = model.io.clone();
        let mut pre = config.preprocess_config(io.size, io.layout, io.dtype);
        // On CUDA's execution provider the tiles' tensor stays on the GPU it runs on (f16 only
        // into the fixed sizes' bound inputs).
        pre.device_output = model.cuda() == i32::try_from(pre.device).ok()
            && (io.dtype == DType::F32 || model.fixed())
            && config.backend != BackendKind::Cpu;
        let backend = create_backend(&pre)?;
        warm_up(&mut model, &config)?;
        let sizes = model.fixed_sizes();
        let blind = Blind::new(config.score, model.gpu_peaks());
        let chunk = model.chunk(config.max_batch);
        // By default only on CUDA: on the CPU the stage's own work takes its cores from the
        // model's runs (BENCHMARKS.md, "The detector's calls overlapped").
        let overlap = config.overlap_calls.unwrap_or(model.cuda().is_some());
        let runner = if overlap {
            let name = format!(
                "detect-{}",
                config
                    .model
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
            );
            // Linux keeps 15 bytes of a thread's name.
            let name: String = name.chars().take(15).collect();
            Runner::Thread(
                Worker::spawn(name, move || model).map_err(|e| DetectError::Model {
                    path: config.model.display().to_string(),
                    reason: format!("a thread for the model's runs: {e}"),
                })?,
            )
        } else {
            Runner::Here(Box::new(model))
        };
        Ok(Detector {
            config,
            runner,
            io,
            sizes,
            chunk,
            backend,
            names: Vec::new(),
            groups: Vec::new(),
            keep,
            split: Split::default(),
            pool: BatchPool::new(),
            found: Vec::new(),
            boxes: Vec::new(),
            last_call: Duration::ZERO,
            blind: Some(blind),
            scale_source,
        })
    }

    /// The decoder in use.
    pub fn decoder(&self) -> super::Decoder {
        self.io.decoder
    }

    /// The batch sizes the model runs at (on CUDA; empty where any size runs as it comes).
    pub fn batch_sizes(&self) -> Vec<usize> {
        self.sizes.clone()
    }

    /// Whether the model's runs happen on a thread of its own (`overlap-calls`): a call started
    /// runs while its caller goes on.
    pub fn overlaps(&self) -> bool {
        matches!(self.runner, Runner::Thread(_))
    }

    /// How long the last call completed took: its preprocessing, model runs and placing, one
    /// after the other (what a call costs the frames in it, whatever ran beside it).
    pub(crate) fn last_call(&self) -> Duration {
        self.last_call
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
        let call = self.start(frames)?;
        self.complete(call)
    }

    /// Start a call on `frames` (at least one, of any streams): preprocess their regions and
    /// hand them to the model, which runs them now (without `overlap-calls`) or on its thread after
    /// the calls started before (with it: this returns without waiting for them).
    pub fn start(&mut self, frames: Vec<Frame>) -> Result<Call, DetectError> {
        for f in &frames {
            self.config.check_tiles(f)?;
        }
        let regions: Vec<Vec<Rect>> = frames
            .iter()
            .map(|f| self.config.regions(f.layout.width, f.layout.height))
            .collect();
        let total: usize = regions.iter().map(Vec::len).sum();
        let first = (
            frames.first().map_or(0, |f| f.stream),
            frames.first().map_or(0, |f| f.seq),
            frames.len(),
        );
        let t0 = Instant::now();
        let mut batch =
            regions_batch(&self.pool, frames, &regions, self.io.size).map_err(|error| {
                DetectError::OutOfMemory {
                    stream: first.0,
                    frame: first.1,
                    regions: total,
                    error,
                }
            })?;
        self.backend.run(&mut batch)?;
        let producer = batch.tensor.device().map_or(0, |d| d.stream());
        let preprocess = t0.elapsed();
        let mut found = self.found.pop().unwrap_or_default();
        found.resize_with(total, Vec::new);
        found.iter_mut().for_each(Vec::clear);
        let score = self.run_score();
        let plan = (total, self.chunk, score);
        let job = move |model: &mut Model| {
            let t = Instant::now();
            let result = run_regions(model, &batch.tensor.data, plan, producer, &mut found);
            Ran {
                batch,
                found,
                result,
                time: t.elapsed(),
            }
        };
        let runs = match &mut self.runner {
            Runner::Here(model) => Runs::Done(job(model)),
            Runner::Thread(worker) => Runs::Running(worker.submit(job)),
        };
        Ok(Call {
            runs,
            regions,
            first,
            preprocess,
            score,
            began: t0,
        })
    }

    /// Complete `call`: wait for its model runs if they are not over, place each region's boxes
    /// in its frame, and give the frames back in the order they were given. A run that failed,
    /// or the model's thread gone, is the call's error (naming its first frame).
    pub fn complete(&mut self, call: Call) -> Result<Vec<Frame>, DetectError> {
        let Call {
            runs,
            regions,
            first: (stream, frame, count),
            preprocess,
            score,
            began,
        } = call;
        let path = self.config.model.display().to_string();
        let run_err = |source: RunError| DetectError::Run {
            path: path.clone(),
            stream,
            frame,
            more: count.saturating_sub(1),
            source: Box::new(source),
        };
        let ran = match (runs, &mut self.runner) {
            (Runs::Done(ran), _) => ran,
            (Runs::Running(ticket), Runner::Thread(worker)) => worker
                .wait(ticket)
                .map_err(|g| run_err(RunError::Thread(g.0)))?,
            (Runs::Running(_), Runner::Here(_)) => return Err(run_err(RunError::OtherDetector)),
        };
        let Ran {
            mut batch,
            mut found,
            result,
            time: infer,
        } = ran;
        let stats = result.map_err(run_err)?;
        self.watch_found(&mut found[..], count, score);
        let t2 = Instant::now();
        let mut frames = std::mem::take(&mut batch.frames);
        // The runs are over: the regions' tensor goes back to its pool.
        drop(batch);
        let input = self.io.size;
        let mut next = 0;
        for (frame, rs) in frames.iter_mut().zip(&regions) {
            let mut boxes = std::mem::take(&mut self.boxes);
            boxes.clear();
            for (found, region) in found[next..next + rs.len()].iter().zip(rs) {
                boxes.extend(found.iter().map(|b| RawBox {
                    b: tiles::to_frame(b.b, *region, input, self.config.fit),
                    ..*b
                }));
            }
            next += rs.len();
            let placed = self.place(frame, &mut boxes);
            self.boxes = boxes;
            placed?;
        }
        self.found.push(found);
        let decode = t2.elapsed();
        let total = next;
        self.last_call = preprocess + infer + decode;
        // Each call, for a run's timeline (`RUST_LOG=octopipe::detect::calls=debug`): its own
        // parts, and its span from start to completion (the model's queue and the stage's
        // other work included).
        tracing::debug!(
            target: "octopipe::detect::calls",
            "call of {count} frame(s), {total} region(s): preprocess {:.1} ms, model {:.1} ms, place {:.1} ms, span {:.1} ms",
            preprocess.as_secs_f64() * 1e3,
            infer.as_secs_f64() * 1e3,
            decode.as_secs_f64() * 1e3,
            began.elapsed().as_secs_f64() * 1e3
        );
        let s = &mut self.split;
        let per = |d: Duration| d / count.max(1) as u32;
        for _ in 0..count {
            s.preprocess.push(per(preprocess));
            s.infer.push(per(infer));
            s.decode.push(per(decode));
            s.total.push(per(preprocess + infer + decode));
        }
        s.regions = regions.last().map_or(0, Vec::len);
        s.collections += 1;
        s.frames += count as u64;
        s.tiles += total as u64;
        s.runs += stats.runs as u64;
        s.rows += stats.rows as u64;
        s.non_finite += stats.non_finite as u64;
        s.over_cap += stats.over_cap;
        s.infer_time += infer;
        s.model_time += stats.model;
        s.peaks_time += stats.peaks;
        s.gpu_time += stats.gpu;
        Ok(frames)
    }

    /// The report line: the stage's time per frame against the frame `budget`, its split, how
    /// frames shared the model's calls, and box counts (the section's text).
    pub fn report_line(&self, budget: Duration) -> Option<String> {
        self.report_section(budget).map(|s| s.to_string())
    }
}

/// One run of `model` on a zero input, so that ONNX Runtime's first-run planning does not land on
/// the first frame's budget, and a model that cannot run fails at start-up. (Fixed batch sizes
/// were warmed when they were bound.)
fn warm_up(model: &mut Model, config: &DetectConfig) -> Result<(), DetectError> {
    let n = model.io.batch.unwrap_or(1);
    let (w, h) = (model.io.size.0 as usize, model.io.size.1 as usize);
    let refused = |e: AllocError| DetectError::Model {
        path: config.model.display().to_string(),
        reason: format!("the zero input of its first run ({n}x3x{h}x{w}) {e}"),
    };
    let len = octopipe_core::alloc::bytes(&[n, 3, h, w]).map_err(refused)?;
    let zeros = TensorData::Host(HostData::try_zeroed(model.io.dtype, len).map_err(refused)?);
    let mut found = vec![Vec::new(); n];
    model
        .run(&zeros, 0, n, config.score, &mut found)
        .map_err(|reason| DetectError::Model {
            path: config.model.display().to_string(),
            reason: format!("does not run on a zero input: {reason}"),
        })?;
    Ok(())
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
