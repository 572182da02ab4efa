//! What the engine's parts share: the kernels' module, the errors, the `#[repr(C)]` mirrors of
//! `engine.cu`'s structs, a launch made ready and the buffers.

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig};
use octopipe_cuda::{CudaError, KernelModule};

use crate::model::{Model, ModelError};
use crate::plan::{Plan, PlanError};
use crate::program::{Geom, ProgramError};
use crate::shape::TensorId;

/// The engine's kernels: `engine.cu`.
pub const ENGINE_KERNELS: KernelModule = KernelModule {
    name: "engine",
    source: include_str!("engine.cu"),
    functions: &[
        "engine_conv1x1",
        "engine_conv1x1_tc8",
        "engine_conv1x1_tc16",
        "engine_conv1x1_tc24",
        "engine_conv1x1_tc32",
        "engine_conv1x1_tc40",
        "engine_conv1x1_tc48",
        "engine_conv1x1_tc56",
        "engine_conv1x1_tc64",
        "engine_conv_dw",
        "engine_conv_dw8",
        "engine_conv_dw2",
        "engine_conv_direct8",
        "engine_conv_dw_k3s1",
        "engine_conv_dw_k5s1",
        "engine_conv_dw_k3s2",
        "engine_conv_dw_k5s2",
        "engine_resize_linear8",
        "engine_pointwise8",
        "engine_concat8",
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
    /// The input given is not whole images of the engine's input, or more than its batch.
    #[error("the input holds {got} values: not whole images, or more than the engine's batch of {batch} ({expected} values)")]
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
pub(super) struct EpiOpC {
    pub(super) kind: u32,
    pub(super) count: u32,
    pub(super) a: f32,
    pub(super) b: f32,
    pub(super) ptr: u64,
}

/// An epilogue as `engine.cu`'s `Epi`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(super) struct EpiC {
    pub(super) op: [EpiOpC; crate::program::EPILOGUE_MAX],
    pub(super) n: u32,
    pub(super) nchw: u32,
    pub(super) hw: u32,
    pub(super) channels: u32,
}

// SAFETY: plain `#[repr(C)]` data with the layouts of engine.cu's `Epi` and `Geom`, passed by value.
unsafe impl DeviceRepr for EpiC {}
unsafe impl DeviceRepr for Geom {}

/// Which kernels run the program's convolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernels {
    /// The fastest the GPU has: 1 x 1 convolutions on tensor cores (sm_80 and newer), the other
    /// steps 8 channels a thread where the channels allow (depthwise: 2 otherwise), each
    /// epilogue operation applied to all of a thread's values at once.
    #[default]
    Tuned,
    /// One kind of kernel per step, f32 products on the CUDA cores, one value a thread where the
    /// step is elementwise: the baseline the tuned kernels are checked and timed against.
    Simple,
}

/// A kernel ready to launch: its function, its grid and its arguments (device addresses fixed at
/// build: no buffer moves afterwards), and what it computes and moves (for [`Engine::profile`](super::Engine::profile)).
pub(super) struct Launch {
    pub(super) func: CudaFunction,
    pub(super) config: LaunchConfig,
    pub(super) args: Args,
    pub(super) label: String,
    pub(super) flops: f64,
    pub(super) bytes: f64,
}

/// One kernel's time in [`Engine::profile`](super::Engine::profile).
#[derive(Clone, Debug)]
pub struct KernelTime {
    /// The kernel and its shapes (`conv1x1_tc40 128x128x24>72`).
    pub label: String,
    /// Mean milliseconds per call.
    pub ms: f64,
    /// Floating-point operations per call (a multiply-add counts 2).
    pub flops: f64,
    /// Bytes its inputs and outputs hold (each read or written once).
    pub bytes: f64,
}

pub(super) enum Args {
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
    Conv1x1Tc {
        x: u64,
        w: u64,
        gin: u64,
        out: u64,
        pixels: u64,
        cin: u32,
        cinp: u32,
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
pub(super) enum Buffer {
    Half(CudaSlice<u16>),
    Float(CudaSlice<f32>),
}

/// The model's weights as f32, by tensor.
pub(super) struct Uploader<'a> {
    pub(super) model: &'a Model,
    pub(super) plan: &'a Plan,
}

impl Uploader<'_> {
    pub(super) fn values(&self, t: TensorId) -> Result<Vec<f32>, EngineError> {
        let name = &self.plan.shapes.tensors[t].name;
        match self.model.weights.get(name) {
            Some(w) => Ok(w.data.to_f32()),
            None => Err(self.weight_error(t, "not a weight".into())),
        }
    }

    pub(super) fn weight_error(&self, t: TensorId, reason: String) -> EngineError {
        EngineError::Weight {
            name: self.plan.shapes.tensors[t].name.clone(),
            reason,
        }
    }
}
