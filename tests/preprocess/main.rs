//! Integration tests, one binary: preprocessing on the CPU and the GPU, kernels, device frames, GPU faults.

#[path = "../common/mod.rs"]
mod common;

mod cuda;
mod device_frames;
mod fidelity;
mod gpu_faults;
mod preprocess_cpu;
