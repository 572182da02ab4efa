//! Which preprocess backend runs: CPU, CUDA, or CUDA falling back to the CPU when out of memory.

use octopipe_core::crops::CropBatch;

use super::backend::Backend;
use super::config::{BackendKind, PreprocessConfig};
use super::error::PreprocessError;
use super::{cpu, cuda};

/// The backend `config.backend` asks for. `Auto` takes CUDA when a GPU is usable and otherwise
/// falls back to the CPU with one log line saying why.
pub fn create_backend(config: &PreprocessConfig) -> Result<Box<dyn Backend>, PreprocessError> {
    if config.device_output {
        // Device memory only a GPU gives: no CPU backend, no falling back to one.
        if config.backend == BackendKind::Cpu {
            return Err(PreprocessError::Setting(
                "memory=device needs backend=cuda (or auto with a GPU)".into(),
            ));
        }
        return match cuda::CudaBackend::new(config.clone()) {
            Ok(gpu) => Ok(Box::new(gpu)),
            Err(e) => Err(PreprocessError::Setting(format!(
                "memory=device needs a CUDA GPU: {e}"
            ))),
        };
    }
    match config.backend {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new(config.clone())?)),
        BackendKind::Cuda => Ok(Box::new(GpuWithFallback::new(
            Box::new(cuda::CudaBackend::new(config.clone())?),
            config.clone(),
        ))),
        BackendKind::Auto => match cuda::CudaBackend::new(config.clone()) {
            Ok(gpu) => Ok(Box::new(GpuWithFallback::new(
                Box::new(gpu),
                config.clone(),
            ))),
            Err(e) => {
                tracing::info!("preprocess on CPU: {e}");
                Ok(Box::new(cpu::CpuBackend::new(config.clone())?))
            }
        },
    }
}

/// A GPU backend whose batches fall back to the CPU backend when the device runs out of memory
/// (one warning logged the first time; the report counts them). Any other GPU error (a lost device, a
/// failed launch) stops the pipeline with that error.
pub struct GpuWithFallback {
    gpu: Box<dyn Backend>,
    cpu: Option<cpu::CpuBackend>,
    config: PreprocessConfig,
    fallbacks: u64,
}

impl GpuWithFallback {
    /// Wrap `gpu`; the CPU backend is made from `config` when first needed.
    pub fn new(gpu: Box<dyn Backend>, config: PreprocessConfig) -> Self {
        GpuWithFallback {
            gpu,
            cpu: None,
            config,
            fallbacks: 0,
        }
    }

    /// Batches that were preprocessed on the CPU after the GPU ran out of memory.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }
}

impl Backend for GpuWithFallback {
    fn name(&self) -> &'static str {
        self.gpu.name()
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        match self.gpu.run(batch) {
            Err(e @ PreprocessError::OutOfMemory(_)) => {
                if self.fallbacks == 0 {
                    tracing::warn!(
                        "GPU out of memory on a batch of {} crops: preprocessing such batches on the CPU ({e})",
                        batch.crops.len()
                    );
                }
                self.fallbacks += 1;
                let cpu = match &mut self.cpu {
                    Some(cpu) => cpu,
                    None => self.cpu.insert(cpu::CpuBackend::new(self.config.clone())?),
                };
                cpu.run(batch)
            }
            Err(PreprocessError::Cuda(e)) => Err(PreprocessError::GpuFailed(e)),
            other => other,
        }
    }

    fn summary(&self) -> Option<String> {
        self.gpu.summary()
    }
}
