//! The engine on a GPU: the [`Program`] of a model's plan launched with octopipe's own kernels
//! (`engine.cu`, beside this file: [`ENGINE_KERNELS`]) on FP16 NHWC activations, each
//! convolution with its fused epilogue, optionally replayed as one CUDA graph.
//!
//! The weights are uploaded once in the layouts the kernels read (a 1 x 1 filter as [cin, cout]
//! f16, a depthwise one as [kh * kw, c] f32, a dense one as [kh, kw, cin, cout] f32; biases,
//! scales and shifts f32); every activation has its own buffer, sized for the batch.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaFunction, CudaGraph, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use octopipe_cuda::{CudaError, Gpu, KernelModule};

use crate::model::{Model, ModelError};
use crate::plan::{Plan, PlanError};
use crate::program::{Geom, Kernel, Program, ProgramError};
use crate::shape::{Source, TensorId};

mod prepare;
use prepare::Uploader;

/// The engine's kernels: `engine.cu`.
pub const ENGINE_KERNELS: KernelModule = KernelModule {
    name: "engine",
    source: include_str!("engine.cu"),
    functions: &[
        "engine_conv1x1",
        "engine_conv_dw",
        "engine_conv_direct",
        "engine_gap",
        "engine_resize_linear",
        "engine_concat2",
        "engine_pointwise",
    ],
};

/// Why the engine could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model could not be read.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model could not be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A step has no kernel.
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// CUDA failed (no GPU, no NVRTC, out of memory, a launch).
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// A weight the kernels cannot take.
    #[error("weight {name:?}: {reason}")]
    Weight {
        /// The weight.
        name: String,
        /// Why.
        reason: String,
    },
    /// The input given is not the size of the batch's input.
    #[error("the input holds {got} values; the engine's batch of {batch} takes {expected}")]
    Input {
        /// Values given.
        got: usize,
        /// Values expected.
        expected: usize,
        /// The batch.
        batch: usize,
    },
}

impl From<cudarc::driver::DriverError> for EngineError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        EngineError::Cuda(e.into())
    }
}

/// One epilogue operation as `engine.cu`'s `EpiOp`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct EpiOpC {
    kind: u32,
    count: u32,
    a: f32,
    b: f32,
    ptr: u64,
}

/// An epilogue as `engine.cu`'s `Epi`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct EpiC {
    op: [EpiOpC; crate::program::EPILOGUE_MAX],
    n: u32,
    nchw: u32,
    hw: u32,
    channels: u32,
}

// SAFETY: plain `#[repr(C)]` data with the layouts of engine.cu's `Epi` and `Geom`, passed by value.
unsafe impl DeviceRepr for EpiC {}
unsafe impl DeviceRepr for Geom {}

/// A kernel ready to launch: its function, its grid and its arguments (device addresses fixed at
/// build: no buffer moves afterwards).
struct Launch {
    func: CudaFunction,
    config: LaunchConfig,
    args: Args,
}

enum Args {
    Conv1x1 {
        x: u64,
        w: u64,
        gin: u64,
        out: u64,
        pixels: u64,
        cin: u32,
        cout: u32,
        epi: EpiC,
    },
    Conv {
        x: u64,
        w: u64,
        gin: u64,
        out: u64,
        geom: Geom,
        epi: EpiC,
    },
    Gap {
        x: u64,
        out: u64,
        hw: u32,
        c: u32,
    },
    Resize {
        x: u64,
        out: u64,
        geom: Geom,
        sy: f32,
        sx: f32,
        epi: EpiC,
    },
    Concat {
        a: u64,
        b: u64,
        out: u64,
        pixels: u64,
        ca: u32,
        cb: u32,
        epi: EpiC,
    },
    Pointwise {
        x: u64,
        out: u64,
        pixels: u64,
        c: u32,
        epi: EpiC,
    },
}

/// A device buffer of f16 (bits) or f32 values.
enum Buffer {
    Half(CudaSlice<u16>),
    Float(CudaSlice<f32>),
}

/// A model's plan for one batch, on one GPU.
pub struct Engine {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    batch: usize,
    program: Program,
    input: TensorId,
    input_len: usize,
    outputs: Vec<(TensorId, usize)>,
    /// Every buffer, by tensor (aliases share their source's).
    buffers: HashMap<TensorId, Buffer>,
    alias: HashMap<TensorId, TensorId>,
    /// The weights in the kernels' layouts.
    consts: Vec<Buffer>,
    launches: Vec<Launch>,
    graph: Option<CudaGraph>,
}

impl Engine {
    /// Reads, plans and uploads `model` for `batch` images a call on GPU `device`.
    pub fn new(model: &Model, batch: usize, device: usize) -> Result<Engine, EngineError> {
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
        }
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

#[cfg(test)]
mod tests {
    use octopipe_cuda::kernels::check_modules;

    use super::ENGINE_KERNELS;

    /// engine.cu compiles under NVRTC for the checked architectures and defines every entry
    /// point: no GPU needed.
    #[test]
    fn the_engine_kernels_compile_under_nvrtc() {
        match check_modules(&[&ENGINE_KERNELS]) {
            None => eprintln!("SKIPPED: libnvrtc not found; engine.cu not compile-checked"),
            Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
            Some(Err(failures)) => panic!("{failures}"),
        }
    }
}
