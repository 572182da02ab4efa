//! GPU faults as the pipeline sees them: out of memory falls back to the CPU backend for that
//! batch; any other GPU error is a clear error. The GPU is stood in for by a backend that fails the
//! way cudarc reports it, so this runs everywhere.

use octopipe::batch::CropBatch;
use octopipe::frame::Detection;
use octopipe::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::cuda::CudaError;
use octopipe::preprocess::{Backend, GpuWithFallback, PreprocessConfig, PreprocessError};

/// Fails every batch with the error it makes.
struct FailingGpu(fn() -> PreprocessError);

impl Backend for FailingGpu {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn run(&mut self, _batch: &mut CropBatch) -> Result<(), PreprocessError> {
        Err((self.0)())
    }
}

fn batch() -> CropBatch {
    let layout = FrameLayout::packed(PixelFormat::I420, 64, 48);
    let pixels: Vec<u8> = (0..layout.size()).map(|i| (i * 7 % 251) as u8).collect();
    let mut frame = Frame::new(
        0,
        0,
        "t",
        layout,
        Colorimetry::JPEG,
        PooledBuf::unpooled(pixels),
    );
    frame.detections = [[0, 0, 20, 10], [30, 20, 34, 28]]
        .map(Detection::new)
        .to_vec();
    let mut b = CropBatch::default();
    b.push_frame(frame, 16, 16, 3);
    b.build_blocks(64, 2);
    b
}

#[test]
fn out_of_memory_falls_back_to_the_cpu_with_the_same_values() {
    let config = PreprocessConfig {
        size: Some((16, 16)),
        ..PreprocessConfig::default()
    };
    // What the CUDA backend returns when cudarc reports `CUDA_ERROR_OUT_OF_MEMORY`.
    let oom = || {
        // (Its words: a DriverError is not formatted without a driver to name it.)
        PreprocessError::OutOfMemory(CudaError::Invalid(
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".into(),
        ))
    };
    let mut gpu = GpuWithFallback::new(Box::new(FailingGpu(oom)), config.clone());
    let mut b = batch();
    gpu.run(&mut b).unwrap();
    let mut reference = batch();
    CpuBackend::new(config)
        .unwrap()
        .run(&mut reference)
        .unwrap();
    assert_eq!(b.tensor.as_f32(), reference.tensor.as_f32());
    assert_eq!(gpu.fallbacks(), 1);
    assert_eq!(gpu.name(), "cuda");
}

#[test]
fn other_gpu_errors_are_clear_errors() {
    let lost = || {
        PreprocessError::Cuda(CudaError::Invalid(
            "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access was encountered\")"
                .into(),
        ))
    };
    let mut gpu = GpuWithFallback::new(Box::new(FailingGpu(lost)), PreprocessConfig::default());
    let e = gpu.run(&mut batch()).unwrap_err().to_string();
    assert!(
        e.contains("GPU preprocessing failed") && e.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{e}"
    );
    assert_eq!(gpu.fallbacks(), 0);
}
