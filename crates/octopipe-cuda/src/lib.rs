//! # octopipe-cuda
//!
//! octopipe's CUDA layer, shared by every part that runs work on a GPU (the preprocess backend,
//! `tilestats`, the detector's peaks, ONNX Runtime's stream ordering, NVDEC, the benchmarks and
//! the Python module). It holds no stage: the preprocess backend (the Octopus launch, its
//! metadata, uploads and outputs) stays with the preprocess stage and builds on this crate.
//!
//! | part | what it is |
//! | --- | --- |
//! | [devices](device_count) | whether libcuda loads and how many GPUs the driver reports ([`available`], [`NoGpu`]) |
//! | [`Gpu`] | one device's context, a stream, and the kernel modules its owner loaded for its architecture |
//! | [streams](order_after) | ordering work between streams of different components without a host wait ([`order_after`], [`order_streams`], [`sync_stream`]); a stream at a [`StreamPriority`] ([`new_stream`]) |
//! | [kernel modules](kernels) | an open list: each crate declares its `.cu` files beside their launchers ([`KernelModule`]: name, source, entry points); compiled here by name once per process with NVRTC (and cached on disk), with the shared header `common.cuh` |
//! | [launch helpers](launch) | the launch configuration, metadata packing and growing buffers every launcher shares |
//! | [how hosts wait](set_host_wait) | every GPU's primary context spinning, yielding or sleeping while a thread waits on it ([`HostWait`]) |
//! | [`CudaError`] | the layer's error, its out-of-memory case a variant of its own |
//!
//! libcuda and libnvrtc are loaded at run time: the crate builds, and its callers run their CPU
//! paths, on machines without CUDA.
//!
//! ```no_run
//! use octopipe_cuda::{available, Gpu, KernelModule};
//!
//! /// A launcher's kernels, declared beside it (there: `source: include_str!("fill.cu")`).
//! const FILL_KERNELS: KernelModule = KernelModule {
//!     name: "fill",
//!     source: "#include \"common.cuh\"\n\
//!              extern \"C\" __global__ void fill_u32(u32* v, u32 n, u32 x) {\n\
//!                  u32 i = blockIdx.x * blockDim.x + threadIdx.x;\n\
//!                  if (i < n) v[i] = x;\n\
//!              }\n",
//!     functions: &["fill_u32"],
//! };
//!
//! # fn main() -> Result<(), octopipe_cuda::CudaError> {
//! available()?; // NoGpu: fall back to the CPU
//! let mut gpu = Gpu::new(0, &[&FILL_KERNELS])?; // compiled by name (or taken from the cache)
//! let f = gpu.func(&FILL_KERNELS, "fill_u32")?;
//! println!("{} ({}): {} registers", gpu.device_name(), gpu.arch(), f.num_regs()?);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod device;
mod error;
mod gpu;
pub mod kernels;
#[cfg(test)]
mod kernels_tests;
pub mod launch;
mod nvrtc;
mod stream;
mod wait;

pub use device::{available, device_count};
pub use error::{CudaError, NoGpu};
pub use gpu::Gpu;
pub use kernels::{KernelError, KernelModule};
pub use launch::{grow, grow_pinned, launch_config, part, push_aligned, Pod};
pub use nvrtc::find_nvrtc;
pub use stream::{
    new_stream, order_after, order_streams, stream_priority, sync_stream, StreamPriority,
};
pub use wait::{host_wait, set_host_wait, HostWait};
