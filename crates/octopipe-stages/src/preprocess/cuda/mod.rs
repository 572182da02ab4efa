//! The CUDA backend: the same crop + resize + colour conversion + normalization as the CPU backend
//! (its reference semantics), as NVRTC-compiled kernels driven by the batch's Octopus block metadata.
//!
//! ```text
//! ... ! preprocess backend=cuda size=64x64 ! classify ...
//! ```
//!
//! Per batch: the frames are uploaded once (whole, only the rows their crops touch, or only each
//! crop's rectangle: gathered on the host and copied, or pulled by the GPU from page-locked frames)
//! into a device frame arena; the frame descriptors, crops and blocks are packed into one
//! host buffer and uploaded with one copy through pinned memory; one kernel launch writes every crop;
//! the result stays on the device ([`Engine::output_f32`]) or is copied back for ONNX Runtime on the
//! CPU. All buffers grow and are reused: no allocation per batch in steady state.
//!
//! The parts, by job:
//! - [`Engine`]: a [`Gpu`](octopipe_cuda::Gpu) (the CUDA context, its stream, the compiled kernels) and the buffers
//!   it owns;
//! - frame and metadata uploads ([`Engine::upload_frames`], [`Engine::upload_meta`], [`HostFrame`],
//!   [`UploadMode`]);
//! - the strategy C launchers ([`Engine::launch`] for the bilinear fast path,
//!   [`Engine::launch_resample`] for area and letterbox);
//! - the device output and its copies back ([`OutType`], [`Engine::download`], ...);
//! - [`CudaBackend`], the preprocess [`Backend`](super::Backend) over one or two engines.
//!
//! The baseline strategies A, B, D and E that `octopipe bench preprocess` compares strategy C with
//! are part of the benchmarks (the `bench` module, cargo feature `bench`), not of this backend.
//!
//! Each launcher declares its kernel module beside its `.cu` file ([`OCTOPUS_KERNELS`],
//! [`RESAMPLE_KERNELS`], [`GATHER_KERNELS`]); the CUDA layer under it (devices, stream ordering,
//! the NVRTC compile and cache of kernel modules by name, the launch helpers, [`CudaError`]) is
//! the `octopipe-cuda` crate, which `tilestats`, the detector,
//! ONNX Runtime's sessions and NVDEC use too; its public items are re-exported here under the
//! paths they had before.

pub mod meta;

// The strategies the Octopus kernel is measured against (`octopipe bench preprocess`): beside the
// engine whose uploads and buffers they use, built only for the benchmarks.
mod backend;
#[cfg(feature = "bench")]
pub mod baselines;
pub(crate) mod engine;
mod gather;
pub(crate) mod launch;
mod output;
mod upload;

pub use backend::CudaBackend;
pub use engine::{Engine, OCTOPUS_GRID_PER_SM};
pub use gather::GATHER_KERNELS;
pub use launch::{octopus_threads, OCTOPUS_KERNELS, OCTOPUS_MAX_THREADS, RESAMPLE_KERNELS};
pub use output::OutType;
pub use upload::{HostFrame, TransferStats, UploadMode};
// The CUDA layer itself (devices, streams, the kernel modules' compile, the error) is the
// octopipe-cuda crate; here under the paths it had before it moved there.
pub use octopipe_cuda::{
    available, device_count, kernels, order_after, order_streams, sync_stream, CudaError, NoGpu,
};
