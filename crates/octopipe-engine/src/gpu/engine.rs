//! The engine: its buffers, its launches, the CUDA graph, the calls.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream, DevicePtr, PushKernelArg};
use octopipe_cuda::{CudaError, Gpu, StreamPriority};

use super::types::{
    Args, Buffer, EngineError, KernelTime, Kernels, Launch, Uploader, ENGINE_KERNELS,
};
use crate::model::Model;
use crate::plan::Plan;
use crate::program::{Kernel, Program};
use crate::shape::{Source, TensorId};

/// The captured program. CUDA's graph objects must not be used from two threads at once; the
/// engine owns its graph and uses it through `&mut self` or its own `&self` launches, so moving
/// the engine to another thread (the detect stage's model thread) is sound.
pub(super) struct Graph(CudaGraph);

// SAFETY: see above: one owner, accesses serialized by it; the context is bound on every call
// (cudarc's `launch` and `upload` bind it).
unsafe impl Send for Graph {}

/// A model's plan for one batch, on one GPU.
pub struct Engine {
    pub(super) gpu: Gpu,
    pub(super) stream: Arc<CudaStream>,
    pub(super) batch: usize,
    pub(super) program: Program,
    pub(super) input: TensorId,
    pub(super) input_len: usize,
    pub(super) outputs: Vec<(TensorId, usize)>,
    /// The graph outputs' names and shapes, as `outputs`.
    pub(super) output_info: Vec<(String, Vec<usize>)>,
    /// Every buffer, by tensor (aliases share their source's).
    pub(super) buffers: HashMap<TensorId, Buffer>,
    pub(super) alias: HashMap<TensorId, TensorId>,
    /// The weights in the kernels' layouts.
    pub(super) consts: Vec<Buffer>,
    pub(super) launches: Vec<Launch>,
    pub(super) graph: Option<Graph>,
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
        Engine::with_options(model, batch, device, kernels, StreamPriority::Normal)
    }

    /// [`Engine::with_kernels`] with the engine's stream at `priority` (the detect stage's
    /// `gpu-priority`).
    pub fn with_options(
        model: &Model,
        batch: usize,
        device: usize,
        kernels: Kernels,
        priority: StreamPriority,
    ) -> Result<Engine, EngineError> {
        let plan = Plan::new(model, batch as u64)?;
        let program = Program::new(model, &plan)?;
        let gpu = Gpu::with_priority(device, &[&ENGINE_KERNELS], priority)?;
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
            output_info: shapes
                .outputs
                .iter()
                .map(|&t| {
                    let info = &shapes.tensors[t];
                    let shape = info.shape.iter().map(|&d| d as usize).collect();
                    (info.name.clone(), shape)
                })
                .collect(),
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
        self.graph = graph.map(Graph);
        Ok(())
    }

    /// Queues one call on the engine's stream over what the input buffer holds (the graph if
    /// captured).
    pub fn launch(&mut self) -> Result<(), EngineError> {
        match &self.graph {
            Some(g) => Ok(g.0.launch()?),
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

    /// The device address of graph output `name` (f16, NCHW as the model declares it; every
    /// call writes it there), or `None` where the model has no such output.
    pub fn output_ptr(&self, name: &str) -> Option<u64> {
        let i = self.output_info.iter().position(|(n, _)| n == name)?;
        let t = self.outputs[i].0;
        let t = self.alias.get(&t).copied().unwrap_or(t);
        match self.buffers.get(&t)? {
            Buffer::Half(buf) => Some(buf.device_ptr(&self.stream).0),
            Buffer::Float(buf) => Some(buf.device_ptr(&self.stream).0),
        }
    }

    /// The shape of graph output `name` at the engine's batch.
    pub fn output_shape(&self, name: &str) -> Option<&[usize]> {
        let (_, shape) = self.output_info.iter().find(|(n, _)| n == name)?;
        Some(shape)
    }

    /// Queues, on the engine's stream, the upload of `input` (f16 bits, NHWC: the first
    /// `input.len() / image` images of a call; the rest of the batch keeps what it held).
    pub fn load_host(&mut self, input: &[u16]) -> Result<(), EngineError> {
        self.check_input(input.len())?;
        if let Some(Buffer::Half(buf)) = self.buffers.get_mut(&self.input) {
            let mut head = buf.slice_mut(..input.len());
            self.stream.memcpy_htod(input, &mut head)?;
        }
        Ok(())
    }

    /// Queues, on the engine's stream, a copy of `values` f16 values (NHWC images) from device
    /// address `src` into the input (the rest of the batch keeps what it held). The stream must
    /// already be ordered after the work that writes `src` ([`octopipe_cuda::order_after`]).
    ///
    /// # Safety
    /// `src` must hold `values` f16 values in the memory of the engine's GPU, alive until the
    /// copy has run.
    pub unsafe fn load_device(&mut self, src: u64, values: usize) -> Result<(), EngineError> {
        self.check_input(values)?;
        self.stream.context().bind_to_thread()?;
        if let Some(Buffer::Half(buf)) = self.buffers.get(&self.input) {
            let (dst, _sync) = buf.device_ptr(&self.stream);
            // SAFETY: the input buffer holds `input_len >= values` f16 values; `src` holds
            // `values` (the caller's contract); the copy is queued on the engine's stream,
            // before the calls that read the input.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst,
                    src,
                    values * 2,
                    self.stream.cu_stream(),
                )
            }
            .map_err(CudaError::from)?;
        }
        Ok(())
    }

    /// `values` fits the input and is whole images.
    fn check_input(&self, values: usize) -> Result<(), EngineError> {
        let image = self.input_len / self.batch.max(1);
        match values <= self.input_len && values.is_multiple_of(image.max(1)) {
            true => Ok(()),
            false => Err(EngineError::Input {
                got: values,
                expected: self.input_len,
                batch: self.batch,
            }),
        }
    }

    /// Waits for what was queued.
    pub fn synchronize(&self) -> Result<(), EngineError> {
        Ok(self.stream.synchronize()?)
    }
}
