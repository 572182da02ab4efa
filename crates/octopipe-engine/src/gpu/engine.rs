//! The engine: its buffers, its launches, the CUDA graph, the calls.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream, PushKernelArg};
use octopipe_cuda::{CudaError, Gpu};

use super::types::{
    Args, Buffer, EngineError, KernelTime, Kernels, Launch, Uploader, ENGINE_KERNELS,
};
use crate::model::Model;
use crate::plan::Plan;
use crate::program::{Kernel, Program};
use crate::shape::{Source, TensorId};

/// A model's plan for one batch, on one GPU.
pub struct Engine {
    pub(super) gpu: Gpu,
    pub(super) stream: Arc<CudaStream>,
    pub(super) batch: usize,
    pub(super) program: Program,
    pub(super) input: TensorId,
    pub(super) input_len: usize,
    pub(super) outputs: Vec<(TensorId, usize)>,
    /// Every buffer, by tensor (aliases share their source's).
    pub(super) buffers: HashMap<TensorId, Buffer>,
    pub(super) alias: HashMap<TensorId, TensorId>,
    /// The weights in the kernels' layouts.
    pub(super) consts: Vec<Buffer>,
    pub(super) launches: Vec<Launch>,
    pub(super) graph: Option<CudaGraph>,
    pub(super) kernels: Kernels,
}

impl Engine {
    /// Reads, plans and uploads `model` for `batch` images a call on GPU `device`, with the
    /// tuned kernels.
    pub fn new(model: &Model, batch: usize, device: usize) -> Result<Engine, EngineError> {
        Engine::with_kernels(model, batch, device, Kernels::Tuned)
    }

    /// [`Engine::new`] with the convolutions run by `kernels`.
    pub fn with_kernels(
        model: &Model,
        batch: usize,
        device: usize,
        kernels: Kernels,
    ) -> Result<Engine, EngineError> {
        let plan = Plan::new(model, batch as u64)?;
        let program = Program::new(model, &plan)?;
        let gpu = Gpu::new(device, &[&ENGINE_KERNELS])?;
        let stream = gpu.stream().clone();
        let shapes = &plan.shapes;
        let numel = |t: TensorId| shapes.tensors[t].shape.iter().product::<u64>() as usize;
        let input = shapes
            .tensors
            .iter()
            .position(|t| t.source == Source::Input)
            .ok_or_else(|| EngineError::Weight {
                name: "input".into(),
                reason: "the model has no input".into(),
            })?;
        let mut e = Engine {
            gpu,
            stream: stream.clone(),
            batch,
            input,
            input_len: numel(input),
            outputs: shapes.outputs.iter().map(|&t| (t, numel(t))).collect(),
            buffers: HashMap::new(),
            alias: HashMap::new(),
            consts: Vec::new(),
            launches: Vec::new(),
            graph: None,
            kernels,
            program: Program {
                kernels: Vec::new(),
            },
        };
        e.buffers
            .insert(input, Buffer::Half(stream.alloc_zeros::<u16>(e.input_len)?));
        for k in &program.kernels {
            match k {
                Kernel::Alias { from, to } => {
                    e.alias.insert(*to, *from);
                }
                other => {
                    let out = other.output();
                    let buf = stream.alloc_zeros::<u16>(numel(out))?;
                    e.buffers.insert(out, Buffer::Half(buf));
                }
            }
        }
        let up = Uploader { model, plan: &plan };
        for k in &program.kernels {
            if let Some(l) = e.prepare(k, &up)? {
                e.launches.push(l);
            }
        }
        e.program = program;
        Ok(e)
    }

    /// Images per call.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Values (f16 bits) of one call's input: the batch's NHWC images.
    pub fn input_len(&self) -> usize {
        self.input_len
    }

    /// The GPU's name.
    pub fn device_name(&self) -> String {
        self.gpu.device_name()
    }

    /// The stream the engine runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Captures the program into one CUDA graph, replayed by [`Engine::launch`] from then on.
    pub fn capture(&mut self) -> Result<(), EngineError> {
        self.graph = None;
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let launched = self.launch_each();
        let graph = self.stream.end_capture(CUgraphInstantiate_flags(0))?;
        launched?;
        if let Some(g) = &graph {
            g.upload()?;
        }
        self.graph = graph;
        Ok(())
    }

    /// Queues one call on the engine's stream over what the input buffer holds (the graph if
    /// captured).
    pub fn launch(&mut self) -> Result<(), EngineError> {
        match &self.graph {
            Some(g) => Ok(g.launch()?),
            None => self.launch_each(),
        }
    }

    fn launch_each(&self) -> Result<(), EngineError> {
        for l in &self.launches {
            self.launch_one(l)?;
        }
        Ok(())
    }

    /// Each kernel's mean time over `runs` calls, timed with CUDA events between the launches
    /// (each kernel launched on its own: no graph).
    pub fn profile(&self, runs: usize) -> Result<Vec<KernelTime>, EngineError> {
        use cudarc::driver::sys::CUevent_flags;
        let ctx = self.gpu.context();
        let events = (0..=self.launches.len())
            .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut ms = vec![0f64; self.launches.len()];
        for _ in 0..runs.max(1) {
            events[0].record(&self.stream)?;
            for (i, l) in self.launches.iter().enumerate() {
                self.launch_one(l)?;
                events[i + 1].record(&self.stream)?;
            }
            self.stream.synchronize()?;
            for (i, t) in ms.iter_mut().enumerate() {
                *t += events[i].elapsed_ms(&events[i + 1])? as f64;
            }
        }
        Ok(self
            .launches
            .iter()
            .zip(ms)
            .map(|(l, t)| KernelTime {
                label: l.label.clone(),
                ms: t / runs.max(1) as f64,
                flops: l.flops,
                bytes: l.bytes,
            })
            .collect())
    }

    fn launch_one(&self, l: &Launch) -> Result<(), EngineError> {
        let mut b = self.stream.launch_builder(&l.func);
        match &l.args {
            Args::Conv1x1 {
                x,
                w,
                gin,
                out,
                pixels,
                cin,
                cout,
                epi,
            } => {
                b.arg(x)
                    .arg(w)
                    .arg(gin)
                    .arg(out)
                    .arg(pixels)
                    .arg(cin)
                    .arg(cout)
                    .arg(epi);
            }
            Args::Conv1x1Tc {
                x,
                w,
                gin,
                out,
                pixels,
                cin,
                cinp,
                cout,
                epi,
            } => {
                b.arg(x).arg(w).arg(gin).arg(out).arg(pixels);
                b.arg(cin).arg(cinp).arg(cout).arg(epi);
            }
            Args::Conv {
                x,
                w,
                gin,
                out,
                geom,
                epi,
            } => {
                b.arg(x).arg(w).arg(gin).arg(out).arg(geom).arg(epi);
            }
            Args::Gap { x, out, hw, c } => {
                b.arg(x).arg(out).arg(hw).arg(c);
            }
            Args::Resize {
                x,
                out,
                geom,
                sy,
                sx,
                epi,
            } => {
                b.arg(x)
                    .arg(out)
                    .arg(&geom.n)
                    .arg(&geom.ih)
                    .arg(&geom.iw)
                    .arg(&geom.oh);
                b.arg(&geom.ow).arg(&geom.cin).arg(sy).arg(sx).arg(epi);
            }
            Args::Concat {
                a,
                b: bb,
                out,
                pixels,
                ca,
                cb,
                epi,
            } => {
                b.arg(a)
                    .arg(bb)
                    .arg(out)
                    .arg(pixels)
                    .arg(ca)
                    .arg(cb)
                    .arg(epi);
            }
            Args::Pointwise {
                x,
                out,
                pixels,
                c,
                epi,
            } => {
                b.arg(x).arg(out).arg(pixels).arg(c).arg(epi);
            }
        }
        // SAFETY: each argument list matches its kernel's signature in engine.cu (checked
        // by the order above); every address is a buffer of this engine, sized at build
        // for the batch's tensors, alive while the engine is.
        unsafe { b.launch(l.config) }.map_err(CudaError::from)?;
        Ok(())
    }

    /// One call from the host: `input` (f16 bits, NHWC) uploaded, the program run, each graph
    /// output (f16 bits, NCHW as the model declares it) brought back.
    pub fn run_host(&mut self, input: &[u16]) -> Result<Vec<Vec<u16>>, EngineError> {
        if input.len() != self.input_len {
            return Err(EngineError::Input {
                got: input.len(),
                expected: self.input_len,
                batch: self.batch,
            });
        }
        if let Some(Buffer::Half(buf)) = self.buffers.get_mut(&self.input) {
            self.stream.memcpy_htod(input, buf)?;
        }
        self.launch()?;
        let mut outs = Vec::with_capacity(self.outputs.len());
        for &(t, n) in &self.outputs {
            let mut host = vec![0u16; n];
            if let Some(Buffer::Half(buf)) = self.buffers.get(&t) {
                self.stream.memcpy_dtoh(buf, &mut host[..])?;
            }
            outs.push(host);
        }
        self.stream.synchronize()?;
        Ok(outs)
    }

    /// Waits for what was queued.
    pub fn synchronize(&self) -> Result<(), EngineError> {
        Ok(self.stream.synchronize()?)
    }
}
