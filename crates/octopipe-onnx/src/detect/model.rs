//! The detector model: loaded (on ONNX Runtime or octopipe's engine), and one run of it on some
//! regions (of one frame or many), decoded into boxes per region. What its input takes and its
//! outputs give is read in `io.rs`.

use ort::memory::Allocator;

use crate::onnx::{mark, Ep, FixedInput, Sessions};
use ort::value::{DynTensor, DynTensorValueType, TensorElementType, TensorRef};

use super::centernet::{self, Peak};
use super::decode::{centernet_maps, Output};
use super::engine::{self, DetectEngine, Engines};
use super::error::{DetectError, RunError};
use super::gpu::GpuPeaks;
use super::io::{model_io, Io};
use super::raw::RawBox;
use super::{Decoder, DetectConfig};
use octopipe_core::tensor::{HostView, TensorData};
use octopipe_stages::preprocess::{f16_to_f32, DType, Layout};

/// A loaded detector model.
pub(super) struct Model {
    /// ONNX Runtime's sessions (with `engine=octopipe`, one on the CPU that read `io`).
    pub sessions: Sessions,
    /// With `engine=octopipe`: the engines that run the model on the GPU, one per batch size.
    engines: Option<Engines>,
    /// Its input and outputs.
    pub io: Io,
    /// CenterNet heads read on the GPU, where the model wrote them (CUDA, fixed batch sizes).
    peaks: Option<GpuPeaks>,
    /// Each image's peaks of the last GPU run.
    found: Vec<Vec<Peak>>,
}

/// What one run (or a call's runs, summed) did, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RunStats {
    /// Model runs (1 for one run).
    pub runs: usize,
    /// Rows the model ran (the regions and, at a fixed batch size, the padding).
    pub rows: usize,
    /// Output rows with a non-finite value, left out.
    pub non_finite: usize,
    /// CenterNet peaks past the GPU's slots, left out.
    pub over_cap: u64,
    /// Time in ONNX Runtime's runs (with fixed sizes: until the outputs are written).
    pub model: std::time::Duration,
    /// Time finding the peaks on the GPU and bringing them back.
    pub peaks: std::time::Duration,
    /// Of ONNX Runtime's time, the GPU's between two events on the model's stream: from when
    /// the stream has its input (the tiles' preprocessing done) to the outputs written. Zero
    /// where not measured (the CPU, or CUDA refused an event).
    pub gpu: std::time::Duration,
}

impl std::ops::AddAssign for RunStats {
    fn add_assign(&mut self, other: RunStats) {
        self.runs += other.runs;
        self.rows += other.rows;
        self.non_finite += other.non_finite;
        self.over_cap += other.over_cap;
        self.model += other.model;
        self.peaks += other.peaks;
        self.gpu += other.gpu;
    }
}

impl Model {
    /// Load `config.model`, read its input and outputs and, on CUDA, bind the fixed batch sizes
    /// (`config.batch_sizes`, or 1 for a model of batch 1), each warmed up now; CenterNet heads
    /// are then read on the GPU.
    pub fn open(config: &DetectConfig) -> Result<Self, DetectError> {
        if config.engine == DetectEngine::Octopipe {
            return Model::open_engine(config);
        }
        let mut sessions =
            Sessions::open_with(&config.model, config.ort_threads, config.ep, config.cuda)?;
        let io = model_io(sessions.first(), config).map_err(|source| DetectError::Io {
            path: config.model.display().to_string(),
            source,
        })?;
        let mut peaks = None;
        if let Some(device) = sessions.cuda() {
            let sizes = match io.batch {
                Some(b) => vec![b],
                None => config.batch_sizes(),
            };
            let on_gpu = io.decoder == Decoder::CenterNet
                && io.outputs.iter().all(|(_, t)| *t == io.outputs[0].1);
            let names: Vec<&str> = io.outputs.iter().map(|(n, _)| n.as_str()).collect();
            // ONNX Runtime captures a CUDA graph at a size's second run: three runs here, at the
            // stage's open, while nothing else of the pipeline runs (a capture fails when other
            // threads use the GPU meanwhile); with `cuda-graph` these and every later run of the
            // sizes happen on one thread of the sessions' own, where ONNX Runtime keeps the
            // graphs, so later calls replay them and never capture.
            sessions.fix_sizes(&sizes, &io.input, &names, !on_gpu, 3)?;
            if on_gpu {
                let gpu =
                    GpuPeaks::new(device.max(0) as usize, config.cuda.priority).map_err(|e| {
                        DetectError::Model {
                            path: config.model.display().to_string(),
                            reason: format!("the CenterNet peak kernel: {e}"),
                        }
                    })?;
                peaks = Some(gpu);
            }
        }
        Ok(Model {
            sessions,
            engines: None,
            io,
            peaks,
            found: Vec::new(),
        })
    }

    /// `engine=octopipe`: the input and outputs read as for ONNX Runtime (a session on the CPU
    /// reads them) and checked against what the engine runs, the model read and planned by the
    /// engine (all of it without a GPU), then one engine per batch size on GPU `device`, each
    /// captured and run once, and the peak kernel.
    fn open_engine(config: &DetectConfig) -> Result<Self, DetectError> {
        let path = config.model.display().to_string();
        let refused = |reason: String| DetectError::Model {
            path: path.clone(),
            reason,
        };
        let sessions = Sessions::open_with(&config.model, 1, Ep::Cpu, config.cuda)?;
        let unfit = |source| DetectError::Io {
            path: path.clone(),
            source,
        };
        let io = model_io(sessions.first(), config).map_err(unfit)?;
        engine::check_io((io.dtype, io.layout), io.decoder, &io.outputs).map_err(unfit)?;
        let sizes = match io.batch {
            Some(b) => vec![b],
            None => config.batch_sizes(),
        };
        let model = Engines::read(&config.model, &sizes)
            .map_err(|e| refused(format!("engine=octopipe: {e}")))?;
        octopipe_cuda::available()
            .map_err(|e| refused(format!("engine=octopipe runs on a CUDA GPU: {e}")))?;
        let heads = [io.outputs[0].0.clone(), io.outputs[1].0.clone()];
        let engines = Engines::open(&model, heads, config.device, &sizes, config.cuda.priority)
            .map_err(|e| refused(format!("engine=octopipe: {e}")))?;
        Ok(Model {
            sessions,
            engines: Some(engines),
            io,
            peaks: None,
            found: Vec::new(),
        })
    }

    /// The GPU the model runs on (`None`: the CPU).
    pub fn cuda(&self) -> Option<i32> {
        match &self.engines {
            Some(e) => i32::try_from(e.device()).ok(),
            None => self.sessions.cuda(),
        }
    }

    /// The batch sizes runs happen at on the GPU (empty where any size runs as it comes).
    pub fn fixed_sizes(&self) -> Vec<usize> {
        match &self.engines {
            Some(e) => e.sizes(),
            None => self.sessions.fixed_sizes(),
        }
    }

    /// Order the next runs after everything queued so far on the raw CUDA stream `producer`
    /// (the tiles' preprocessing; 0: nothing pending): the model's stream waits, the host does
    /// not.
    pub fn after(&self, producer: u64) -> Result<(), RunError> {
        match &self.engines {
            Some(e) => e.after(producer),
            None => Ok(self.sessions.after(producer)?),
        }
    }

    /// Most regions one run takes: the model's fixed batch, the largest fixed size on CUDA, or
    /// `max_batch`.
    pub fn chunk(&self, max_batch: usize) -> usize {
        match (self.io.batch, self.fixed_sizes().last()) {
            (Some(b), _) => b,
            (None, Some(&largest)) => largest,
            (None, None) => max_batch.max(1),
        }
    }

    /// Whether CenterNet's peaks are found on the GPU (a fixed number of slots per image, filled
    /// in no order: a lower threshold could crowd out peaks over the stage's `score`).
    pub fn gpu_peaks(&self) -> bool {
        self.peaks.is_some() || self.engines.is_some()
    }

    /// Whether runs go through fixed batch sizes bound on the device.
    pub fn fixed(&self) -> bool {
        !self.fixed_sizes().is_empty()
    }

    /// Run regions `start..start + n` of `tensor` (each one model input) through the model and
    /// append each region's boxes (in input pixels, at or over `score`) to `boxes[i]`.
    pub fn run(
        &mut self,
        tensor: &TensorData,
        start: usize,
        n: usize,
        score: f32,
        boxes: &mut [Vec<RawBox>],
    ) -> Result<RunStats, RunError> {
        let io = &self.io;
        let (w, h) = (io.size.0 as usize, io.size.1 as usize);
        let per = w * h * 3;
        let range = start * per..(start + n) * per;
        let mut stats = RunStats {
            runs: 1,
            ..RunStats::default()
        };
        if let Some(engines) = &mut self.engines {
            let t = std::time::Instant::now();
            let mut marks = None;
            let (heads, gpu) = engines.run(tensor, (start, n, per), &mut marks)?;
            if let Some((b, e)) = &marks {
                let ms = b.elapsed_ms(e).unwrap_or(0.0).max(0.0);
                stats.gpu = std::time::Duration::from_secs_f64(f64::from(ms) / 1e3);
            }
            stats.model = t.elapsed();
            stats.rows = heads.shape.first().copied().unwrap_or(n);
            let maps = centernet_maps(&heads.shape, io.size);
            let call = (n, &maps, score, heads.stream);
            let found = &mut self.found;
            return read_peaks(
                gpu,
                found,
                io,
                (heads.heat, heads.wh, true),
                call,
                boxes,
                stats,
            );
        }
        if self.fixed() {
            let input = match tensor {
                TensorData::Host(host) => match (io.dtype, host.values()) {
                    (DType::F32, HostView::F32(v)) => FixedInput::Host(&v[range]),
                    (DType::F16, HostView::F16(v)) => FixedInput::Halves(&v[range]),
                    _ => return Err(RunError::TileType(io.dtype)),
                },
                TensorData::Device(d) if d.len() >= range.end => FixedInput::Device {
                    ptr: d.ptr() + (range.start * io.dtype.size()) as u64,
                    len: n * per,
                },
                TensorData::Device(d) => {
                    return Err(RunError::TileRange {
                        have: d.len(),
                        start,
                        end: start + n,
                        input: "",
                    })
                }
            };
            let producer = self.sessions.cu_stream();
            let t = std::time::Instant::now();
            let timing = self.sessions.stream();
            let begin = timing.as_deref().and_then(mark);
            let outputs = self.sessions.run_fixed(n, input)?;
            let end = timing.as_deref().and_then(mark);
            if let (Some(b), Some(e)) = (&begin, &end) {
                // Waits for the model's work (the peaks below wait for it anyway), so that the
                // time in ONNX Runtime runs to the outputs written.
                let ms = b.elapsed_ms(e).unwrap_or(0.0).max(0.0);
                stats.gpu = std::time::Duration::from_secs_f64(f64::from(ms) / 1e3);
            }
            stats.model = t.elapsed();
            stats.rows = outputs[0].shape[0];
            if let Some(gpu) = &mut self.peaks {
                let maps = centernet_maps(outputs[0].shape, io.size);
                let heads = (outputs[0].device, outputs[1].device, outputs[0].f16);
                let call = (n, &maps, score, producer);
                return read_peaks(gpu, &mut self.found, io, heads, call, boxes, stats);
            }
            let outs: Vec<Output<'_>> = outputs
                .iter()
                .map(|o| Output {
                    shape: o.shape,
                    data: o.data,
                })
                .collect();
            for (i, out) in boxes.iter_mut().enumerate().take(n) {
                stats.non_finite += io.decoder.decode(&outs, io.size, io.scores, i, score, out);
            }
            return Ok(stats);
        }
        let shape = match io.layout {
            Layout::Nchw => [n, 3, h, w],
            Layout::Nhwc => [n, h, w, 3],
        };
        let name = io.input.as_str();
        // Batches of one size per session: on CUDA a new size would plan every convolution anew.
        let session = self.sessions.get(n)?;
        let outputs = match tensor {
            TensorData::Host(host) => match host.values() {
                HostView::F32(v) => {
                    let t = TensorRef::from_array_view((shape, &v[range]))?;
                    session.run(ort::inputs![name => t])
                }
                HostView::F16(v) => {
                    let mut t =
                        DynTensor::new(&Allocator::default(), TensorElementType::Float16, shape)?;
                    let src = &v[range];
                    // SAFETY: the tensor was just allocated in CPU memory with `src.len()` f16 elements.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            src.as_ptr(),
                            t.data_ptr_mut().cast::<u16>(),
                            src.len(),
                        )
                    };
                    session.run(ort::inputs![name => t])
                }
            },
            TensorData::Device(d) if io.dtype == DType::F32 && d.len() >= range.end => {
                // SAFETY: the tensor holds `range.end` f32 elements on `d.device`, alive (in
                // the caller's batch) for the run.
                let t = unsafe {
                    crate::onnx::cuda_input(d.ptr() + range.start as u64 * 4, d.device(), &shape)
                }?;
                session.run(ort::inputs![name => t])
            }
            TensorData::Device(d) => {
                return Err(RunError::TileRange {
                    have: d.len(),
                    start,
                    end: start + n,
                    input: "f32 ",
                })
            }
        }?;
        let mut read: Vec<(Vec<usize>, std::borrow::Cow<[f32]>)> = Vec::new();
        for (name, dtype) in &io.outputs {
            read.push(host_f32(&outputs[name.as_str()], *dtype)?);
        }
        let images = match (io.decoder, read[0].0.len()) {
            (Decoder::End2End, 2) => 1,
            _ => read[0].0[0],
        };
        if images != n {
            return Err(RunError::OutputShape {
                name: io.outputs[0].0.clone(),
                shape: read[0].0.clone(),
                images,
                n,
            });
        }
        stats.rows = n;
        let outs: Vec<Output<'_>> = read
            .iter()
            .map(|(shape, data)| Output { shape, data })
            .collect();
        for (i, out) in boxes.iter_mut().enumerate().take(n) {
            stats.non_finite += io.decoder.decode(&outs, io.size, io.scores, i, score, out);
        }
        Ok(stats)
    }
}

/// The boxes of the first `n` images of the CenterNet heads at device addresses `heat` and `wh`
/// (f16 with `half`), written on the raw stream `producer`: the peaks found on the GPU (into
/// `found`, reused), then selected on the host into `boxes`.
fn read_peaks(
    gpu: &mut GpuPeaks,
    found: &mut Vec<Vec<Peak>>,
    io: &Io,
    (heat, wh, half): (u64, u64, bool),
    (n, maps, score, producer): (usize, &centernet::Maps, f32, u64),
    boxes: &mut [Vec<RawBox>],
    mut stats: RunStats,
) -> Result<RunStats, RunError> {
    let min = io.scores.threshold(score);
    found.resize_with(n, Vec::new);
    found.iter_mut().for_each(Vec::clear);
    let t = std::time::Instant::now();
    stats.over_cap = gpu.find(heat, wh, half, n, maps, min, producer, found)?;
    stats.peaks = t.elapsed();
    for (found, out) in found.iter_mut().zip(boxes.iter_mut()) {
        io.scores.to_probabilities(found);
        stats.non_finite += centernet::select(found, maps, out);
    }
    Ok(stats)
}

/// An output in host memory as f32 values, with its shape.
fn host_f32(
    value: &ort::value::DynValue,
    dtype: DType,
) -> Result<(Vec<usize>, std::borrow::Cow<'_, [f32]>), ort::Error> {
    match dtype {
        DType::F32 => {
            let (s, d) = value.try_extract_tensor::<f32>()?;
            Ok((s.iter().map(|&x| x as usize).collect(), d.into()))
        }
        DType::F16 => {
            let t = value.view().downcast::<DynTensorValueType>()?;
            let s: Vec<usize> = t.shape().iter().map(|&x| x as usize).collect();
            let len: usize = s.iter().product();
            // SAFETY: an f16 CPU tensor of `len` elements, read while `value` lives.
            let halves = unsafe { std::slice::from_raw_parts(t.data_ptr().cast::<u16>(), len) };
            Ok((
                s,
                halves
                    .iter()
                    .map(|&x| f16_to_f32(x))
                    .collect::<Vec<f32>>()
                    .into(),
            ))
        }
    }
}
