//! `detect engine=octopipe`: the model run by octopipe's own engine (`octopipe-engine`: FP16
//! NHWC kernels with fused epilogues, docs/engine.md) instead of ONNX Runtime. One engine per
//! batch size, each captured as a CUDA graph when the stage opens; a call copies its regions
//! from the tiles' tensor into the engine's input on the GPU and the peak kernel reads the heads
//! where the engine wrote them.

use std::path::Path;

use octopipe_core::tensor::{HostView, TensorData};
use octopipe_cuda::{order_after, StreamPriority};
use octopipe_engine::gpu::{Engine, EngineError, Kernels};
use octopipe_stages::preprocess::{DType, Layout};

use super::error::{IoError, RunError, Unfit};
use super::gpu::GpuPeaks;
use super::Decoder;

/// Which runtime runs the detector's model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, octopipe_core::stage::PropChoice)]
#[non_exhaustive]
pub enum DetectEngine {
    /// ONNX Runtime, on the execution provider `ep` picks.
    Ort,
    /// octopipe's own CUDA engine, for models of its op set (the shared CenterNet's) with an
    /// f16 NHWC input and CenterNet heads; a CUDA GPU only.
    Octopipe,
}

/// The model's engines, one per batch size (ascending), and the peak kernel that reads their
/// heads.
pub(super) struct Engines {
    engines: Vec<Engine>,
    /// The heads' names: scores, distances (as the stage's `Io` reads them).
    heads: [String; 2],
    peaks: GpuPeaks,
    device: usize,
}

/// Where one run's heads are: device addresses (f16, NCHW) and the raw stream that writes them.
pub(super) struct Heads {
    pub heat: u64,
    pub wh: u64,
    pub stream: u64,
    /// The scores head's shape (`[rows, classes, h, w]`): the rows the engine ran are its batch
    /// (the regions and the padding).
    pub shape: Vec<usize>,
}

/// Why the model cannot run on the engine as the stage reads it (its input's element type and
/// layout, its decoder, the outputs read), before anything is built.
pub(super) fn check_io(
    (dtype, layout): (DType, Layout),
    decoder: Decoder,
    outputs: &[(String, DType)],
) -> Result<(), IoError> {
    let mut unfit = Vec::new();
    if dtype != DType::F16 {
        unfit.push(Unfit::InputType(dtype));
    }
    if layout != Layout::Nhwc {
        unfit.push(Unfit::Nchw);
    }
    if decoder != Decoder::CenterNet || outputs.len() != 2 {
        unfit.push(Unfit::Outputs(decoder));
    }
    if let Some((n, t)) = outputs.iter().find(|(_, t)| *t != DType::F16) {
        unfit.push(Unfit::OutputType {
            name: n.clone(),
            dtype: *t,
        });
    }
    match unfit.is_empty() {
        true => Ok(()),
        false => Err(IoError::NotForEngine(unfit)),
    }
}

impl Engines {
    /// Read `path` with the engine's own reader and plan it for each batch size of `sizes`
    /// (no GPU needed): an op outside the engine's set, a shape it cannot infer or a step
    /// without a kernel is the error, naming it.
    pub fn read(path: &Path, sizes: &[usize]) -> Result<octopipe_engine::Model, EngineError> {
        let model = octopipe_engine::Model::read(path)?;
        for &batch in sizes {
            let plan = octopipe_engine::Plan::new(&model, batch as u64)?;
            octopipe_engine::program::Program::new(&model, &plan)?;
        }
        Ok(model)
    }

    /// Build one engine per size of `sizes` of `model` ([`Engines::read`]) on GPU `device`
    /// (streams at `priority`), capture each as a CUDA graph and run it once, and load the peak
    /// kernel that reads their `heads` (scores, distances).
    pub fn open(
        model: &octopipe_engine::Model,
        heads: [String; 2],
        device: usize,
        sizes: &[usize],
        priority: StreamPriority,
    ) -> Result<Engines, EngineError> {
        let mut engines = Vec::with_capacity(sizes.len());
        for &batch in sizes {
            let mut e = Engine::with_options(model, batch, device, Kernels::Tuned, priority)?;
            e.capture()?;
            e.launch()?;
            e.synchronize()?;
            engines.push(e);
        }
        engines.sort_by_key(Engine::batch);
        if let Some(e) = engines.first() {
            if let Some(name) = heads.iter().find(|n| e.output_ptr(n).is_none()) {
                return Err(EngineError::Weight {
                    name: name.clone(),
                    reason: "the engine's graph has no output of that name".into(),
                });
            }
        }
        let peaks = GpuPeaks::new(device, priority)?;
        Ok(Engines {
            engines,
            heads,
            peaks,
            device,
        })
    }

    /// The GPU they run on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The batch sizes, ascending.
    pub fn sizes(&self) -> Vec<usize> {
        self.engines.iter().map(Engine::batch).collect()
    }

    /// Order the next runs after everything queued so far on the raw stream `producer` (0:
    /// nothing pending).
    pub fn after(&self, producer: u64) -> Result<(), RunError> {
        for e in &self.engines {
            order_after(e.stream().context(), e.stream(), producer)?;
        }
        Ok(())
    }

    /// Queue regions `start..start + n` of `tensor` (each `per` f16 values) through the
    /// smallest engine that takes `n`, timed between `marks` (events recorded before the input's
    /// copy and after the graph). The heads are written when the returned stream gets there;
    /// the peak kernel is given back with them, to read them.
    pub fn run(
        &mut self,
        tensor: &TensorData,
        (start, n, per): (usize, usize, usize),
        marks: &mut Option<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
    ) -> Result<(Heads, &mut GpuPeaks), RunError> {
        let range = start * per..(start + n) * per;
        // The largest takes any call (the stage's calls are at most its batch); past it, the
        // input's check below refuses the run.
        let at = self.engines.iter().position(|e| e.batch() >= n);
        let e = match at {
            Some(i) => &mut self.engines[i],
            None => self.engines.last_mut().ok_or(RunError::NoEngine)?,
        };
        let begin = crate::onnx::mark(e.stream());
        match tensor {
            TensorData::Host(host) => match host.values() {
                HostView::F16(v) => e.load_host(&v[range])?,
                HostView::F32(_) => return Err(RunError::TileType(DType::F16)),
            },
            TensorData::Device(d) if d.len() >= range.end => {
                // SAFETY: the tiles' tensor holds `range.end` f16 values on the engine's GPU
                // (the stage makes it for the model's f16 input on `device`), alive in the
                // caller's batch until the call completes, which waits for the heads (and so
                // for the copy before them).
                unsafe { e.load_device(d.ptr() + (range.start * 2) as u64, n * per) }?
            }
            TensorData::Device(d) => {
                return Err(RunError::TileRange {
                    have: d.len(),
                    start,
                    end: start + n,
                    input: "",
                })
            }
        }
        e.launch()?;
        let end = crate::onnx::mark(e.stream());
        *marks = begin.zip(end);
        let heads = Heads {
            heat: e.output_ptr(&self.heads[0]).unwrap_or_default(),
            wh: e.output_ptr(&self.heads[1]).unwrap_or_default(),
            stream: e.stream().cu_stream() as u64,
            shape: e.output_shape(&self.heads[0]).unwrap_or_default().to_vec(),
        };
        Ok((heads, &mut self.peaks))
    }
}
