//! Tilestats stage: per tile (each crop of a batch: the `tiles` stage's tiles, or any boxes), the
//! mean, standard deviation, min, max and the fraction of samples above a level, after a
//! normalization; a keep rule and an optional top-k decide which tiles are kept (to downlink).
//!
//! ```text
//! images location=scene/ ! tiles min=128 max=512 seed=1 ! tilestats keep="mean>0.535" downlink-mbps=2 ! tilesink location=out/
//! images location=${root}/images ! tiles size=512x512 ! tilestats band=luma keep="std>0.12" top-k=8 score=std ! jsonl location=t.jsonl
//! ```
//!
//! **Samples.** One band per pixel: a 16-bit grey frame's sample (`GRAY16`), the luma plane of a
//! YUV frame (the decoder's Y: JPEG and video frames), or for packed RGB frames
//! `(w_r * R + w_g * G + w_b * B + 128) >> 8` with `band=luma` (77, 150, 29: BT.601 in 8-bit fixed
//! point), `red`, `green` or `blue`. **Normalization**: `value = sample * scale + offset`, `scale`
//! by default 1/65535 for 16-bit samples and 1/255 for 8-bit ones (values 0..1).
//!
//! **Statistics** of each tile (a box's pixels, not its resized crop): `mean`, `std` (population),
//! `min`, `max` of the values and `above`, the fraction of samples whose value is above `level`.
//! They come from exact integer sums of the raw samples (sum and sum of squares in 64 bits, the
//! count of samples at or above the raw threshold that `level` maps to, min, max: [`PixelSums`](octopipe_core::frame::PixelSums)),
//! so the CPU and CUDA backends give the same sums and, computed from them by the same code, the
//! same statistics and the same kept tiles.
//!
//! **Keep.** `keep` is a rule over the statistics ([`rule`]: `mean>0.535 and std<0.05 or
//! above>=0.9`; every tile is kept without one); `top-k=N` then keeps at most N of a frame's
//! passing tiles, the highest `score` first (ties: the earlier tile). The result is on each box
//! ([`Detection::stats`](octopipe_core::frame::Detection::stats)): the `jsonl` and `tilesink` sinks write it.
//!
//! **Backends** (`backend=cpu|cuda|auto`): the CPU one is one rayon pass over the tiles' blocks;
//! the CUDA one is one kernel launch per frame for all its tiles (`tilestats.cu`). Both cut
//! each tile into blocks of `block-pixels` pixels (by area: a 512x512 tile gets 16 blocks of the
//! default 16384, a 128x128 one gets 1), reduce each block, then each tile's blocks.
//!
//! **Report**: tiles kept of all, their bytes (2 per 16-bit sample, 3 per pixel of colour frames:
//! the raw tiles a satellite would send) of all tiles' bytes, the downlink time at
//! `downlink-mbps` before and after (MiB and megabits per second, as the seed scenario counts them),
//! and the stage's own time per frame.

mod blocks;
mod config;
pub mod cpu;
pub mod cuda;
mod error;
mod keep;
mod props;
pub mod rule;
mod sampling;
mod section;
mod stage;
mod sums;

pub use blocks::TileBlocks;
pub use config::{BandName, TileStatsConfig, DEFAULT_BLOCK_PIXELS};
pub use cpu::CpuSums;
pub use cuda::{GpuSums, TILESTATS_KERNELS};
pub use error::TileStatsError;
pub use keep::select;
pub use props::{Score, TileStatsProps};
pub use rule::{Property, Rule, RuleError};
pub use sampling::{above_from, derive, Band, Sampling, Source};
pub use section::TilesSection;
pub use stage::{TileFilter, TILESTATS};

#[cfg(test)]
mod tests;
