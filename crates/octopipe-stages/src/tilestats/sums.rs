//! Where a frame's tile sums are computed: the CPU or the CUDA backend.

use super::blocks::TileBlocks;
use super::config::TileStatsConfig;
use super::cpu::CpuSums;
use super::cuda::GpuSums;
use super::error::TileStatsError;
use super::sampling::Sampling;
use crate::preprocess::BackendKind;
use octopipe_core::frame::PixelSums;

/// Where the sums are computed.
pub(crate) enum Sums {
    /// The CPU backend.
    Cpu(CpuSums),
    /// The CUDA backend.
    Cuda(Box<GpuSums>),
}

impl Sums {
    /// The backend `config` asks for; `auto` takes CUDA when a GPU is usable, else the CPU (one
    /// log line says why).
    pub fn new(config: &TileStatsConfig) -> Result<Sums, TileStatsError> {
        let gpu = || GpuSums::new(config.device).map(|g| Sums::Cuda(Box::new(g)));
        match config.backend {
            BackendKind::Cpu => Ok(Sums::Cpu(CpuSums::new(config.threads)?)),
            BackendKind::Cuda => Ok(gpu()?),
            BackendKind::Auto => gpu().or_else(|e| {
                tracing::info!("tilestats on CPU: {e}");
                Ok(Sums::Cpu(CpuSums::new(config.threads)?))
            }),
        }
    }

    /// `cpu` or `cuda`.
    pub fn name(&self) -> &'static str {
        match self {
            Sums::Cpu(_) => "cpu",
            Sums::Cuda(_) => "cuda",
        }
    }

    /// Every tile's sums ([`CpuSums::sums`], [`GpuSums::sums`]).
    pub fn sums(
        &mut self,
        data: &[u8],
        sampling: &Sampling,
        tiles: &TileBlocks,
        out: &mut Vec<PixelSums>,
    ) -> Result<(), TileStatsError> {
        match self {
            Sums::Cpu(c) => {
                c.sums(data, sampling, tiles, out);
                Ok(())
            }
            Sums::Cuda(g) => Ok(g.sums(data, sampling, tiles, out)?),
        }
    }
}
