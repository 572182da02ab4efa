//! The CPU backend itself: its worker pool, the batch's checks, and the blocks run in parallel.

use rayon::prelude::*;

use super::general::run_pixels_general;
use super::linear::run_pixels;
use super::out::OutPtr;
use super::sampler::Sampler;
use crate::preprocess::backend::Backend;
use crate::preprocess::config::PreprocessConfig;
use crate::preprocess::error::PreprocessError;
use crate::preprocess::half::f32_to_f16;
use crate::preprocess::validate::validate;
use octopipe_core::crops::CropBatch;
use octopipe_core::tensor::{DType, TensorData};

/// Output pixels a CPU task handles at least (consecutive blocks of a crop are merged up to this).
const CPU_TASK_PIXELS: u32 = 16 * 1024;

/// Multi-threaded CPU preprocessing.
pub struct CpuBackend {
    config: PreprocessConfig,
    pool: rayon::ThreadPool,
    /// f32 values before rounding to f16 (`dtype=f16` only).
    scratch: Vec<f32>,
}

impl CpuBackend {
    /// A backend with `config.threads` workers (0: one per core).
    pub fn new(config: PreprocessConfig) -> Result<Self, PreprocessError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("octopipe-cpu-{i}"))
            .build()
            .map_err(|e| PreprocessError::InvalidBatch(format!("cannot start CPU workers: {e}")))?;
        Ok(CpuBackend {
            config,
            pool,
            scratch: Vec::new(),
        })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        validate(batch)?;
        if let Some(f) = batch.frames.iter().find(|f| f.data().is_none()) {
            return Err(PreprocessError::NotOnHost {
                stream: f.stream,
                seq: f.seq,
            });
        }
        let len = batch.tensor_len(3);
        let shape = batch.tensor_shape(self.config.layout);
        // The batch's tensor is the largest allocation its sizes reach: one the system refuses is
        // this batch's error (the stream's), never an abort of the process.
        let crops = batch.crops.len();
        let refused = |bytes: usize| PreprocessError::TooLarge {
            crops,
            bytes: len.saturating_mul(bytes) as u64,
        };
        match self.config.dtype {
            DType::F32 => {
                batch.tensor.try_host_f32(len).map_err(|_| refused(4))?;
                // Filled while out of the batch, which the fill reads.
                let mut host = std::mem::take(&mut batch.tensor.data);
                if let TensorData::Host(out) = &mut host {
                    self.fill(batch, out.view_mut().unwrap_or_default());
                }
                batch.tensor.data = host;
            }
            DType::F16 => {
                // The f16 value is the f32 value rounded to nearest even, as the kernels store it.
                let mut values = std::mem::take(&mut self.scratch);
                octopipe_core::alloc::try_resize(&mut values, len, 0.0).map_err(|_| refused(4))?;
                self.fill(batch, &mut values);
                let out = batch.tensor.try_host_f16(len).map_err(|_| refused(2))?;
                for (o, v) in out.iter_mut().zip(&values) {
                    *o = f32_to_f16(*v);
                }
                self.scratch = values;
            }
        }
        batch.tensor.layout = self.config.layout;
        batch.tensor.shape = shape;
        Ok(())
    }
}

impl CpuBackend {
    /// Every crop's f32 values into `out` (`batch.tensor_len(3)` long), blocks in parallel.
    fn fill(&mut self, batch: &CropBatch, out: &mut [f32]) {
        let samplers: Vec<Sampler> = batch.frames.iter().map(Sampler::new).collect();
        let out = OutPtr(out.as_mut_ptr());
        let cfg = &self.config;
        // Merge runs of a crop's blocks into tasks big enough to amortise the row set-up.
        let mut tasks: Vec<(u32, u32, u32)> = Vec::with_capacity(batch.crops.len());
        for b in &batch.blocks {
            let (p0, p1) = batch.block_pixels(b);
            match tasks.last_mut() {
                Some((c, t0, t1)) if *c == b.crop && *t1 == p0 && *t1 - *t0 < CPU_TASK_PIXELS => {
                    *t1 = p1
                }
                _ => tasks.push((b.crop, p0, p1)),
            }
        }
        let plain = cfg.is_plain_bilinear();
        self.pool.install(|| {
            tasks.par_iter().for_each(|&(c, p0, p1)| {
                let crop = &batch.crops[c as usize];
                let s = &samplers[crop.frame as usize];
                // SAFETY: `validate` checked that every crop's output lies inside the tensor and that
                // blocks never overlap, so each output element is written by exactly one task.
                unsafe {
                    if plain {
                        run_pixels(s, crop, p0, p1, cfg, out)
                    } else {
                        run_pixels_general(s, crop, p0, p1, cfg, out)
                    }
                };
            });
        });
    }
}
