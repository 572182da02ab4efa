//! Errors of the tilestats stage.

use super::config::BandName;
use octopipe_core::frame::PixelFormat;

/// Errors of the tilestats stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TileStatsError {
    /// The band asked for is not one the frame has.
    #[error("tilestats: band={} needs a packed RGB frame; frame {seq} of stream {stream} is {format} (band=luma reads its one band)", band.name())]
    Band {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
        /// Its pixel format.
        format: PixelFormat,
        /// The band asked for.
        band: BandName,
    },
    /// The frame's pixels are not in host memory (released, or on a GPU).
    #[error("tilestats: frame {seq} of stream {stream} has no host pixels (tilestats reads host frames: put it before preprocess, and decode on the CPU)")]
    NoPixels {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
    },
    /// Settings that cannot work together or on this machine.
    #[error("tilestats: {0}")]
    Setting(String),
    /// The GPU backend failed.
    #[error("tilestats: CUDA: {0}")]
    Cuda(#[from] octopipe_cuda::CudaError),
}

impl octopipe_core::error::Kind for TileStatsError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            TileStatsError::Band { .. } | TileStatsError::Setting(_) => ErrorKind::Config,
            TileStatsError::NoPixels { .. } => ErrorKind::Config,
            TileStatsError::Cuda(e) => octopipe_core::error::Kind::kind(e),
        }
    }
}

octopipe_core::error::stage_error!(TileStatsError);
