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
//! count of samples at or above the raw threshold that `level` maps to, min, max: [`PixelSums`]),
//! so the CPU and CUDA backends give the same sums and, computed from them by the same code, the
//! same statistics and the same kept tiles.
//!
//! **Keep.** `keep` is a rule over the statistics ([`rule`]: `mean>0.535 and std<0.05 or
//! above>=0.9`; every tile is kept without one); `top-k=N` then keeps at most N of a frame's
//! passing tiles, the highest `score` first (ties: the earlier tile). The result is on each box
//! ([`Detection::stats`](crate::frame::Detection::stats)): the `jsonl` and `tilesink` sinks write it.
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

pub mod cpu;
pub mod cuda;
mod props;
pub mod rule;
mod section;
mod stage;

use crate::batch::{build_blocks_into, BlockMeta, CropMeta};
use crate::frame::{Frame, PixelFormat, PixelSums, TileStats};
use crate::preprocess::BackendKind;
use crate::stage::PropChoice;

pub use cpu::CpuSums;
pub use cuda::{GpuSums, TILESTATS_KERNELS};
pub use props::{Score, TileStatsProps};
pub use rule::{Property, Rule, RuleError};
pub use section::TilesSection;
pub use stage::{TileFilter, TILESTATS};

/// Default pixels per block of work.
pub const DEFAULT_BLOCK_PIXELS: u32 = 16 * 1024;

/// Which band of a colour frame is summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum BandName {
    /// Grey for a grey frame, the Y plane of a YUV frame, 77 R + 150 G + 29 B (/ 256) of RGB.
    #[default]
    Luma,
    /// Red of a packed RGB frame.
    Red,
    /// Green of a packed RGB frame.
    Green,
    /// Blue of a packed RGB frame.
    Blue,
}

impl BandName {
    /// Its name in descriptions.
    pub fn name(self) -> &'static str {
        self.as_str()
    }
}

/// How one sample is read from a frame: `Band` of `tilestats.cu`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Band {
    /// Bytes per row of the plane.
    pub stride: u32,
    /// Packed: bytes per pixel.
    pub bpp: u32,
    /// Packed: byte index of R, G, B in a pixel.
    pub idx: [u32; 3],
    /// Packed: the weights of R, G, B (sum 256).
    pub weight: [u32; 3],
    /// Samples at or above this count as above the level.
    pub above_from: u32,
}

/// What kind of samples a frame gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// 16-bit little-endian grey.
    Gray16,
    /// 8-bit, one byte per pixel (a YUV frame's luma plane).
    Gray8,
    /// A weighted sum of a packed RGB pixel's channels.
    Packed,
}

/// How a frame's samples are read and normalized.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Sampling {
    /// The kind of samples.
    pub source: Source,
    /// Byte offset of the band's plane in the frame's bytes.
    pub offset: usize,
    /// Frame (width, height).
    pub size: (u32, u32),
    /// The reading parameters.
    pub band: Band,
    /// Largest raw sample (65535 or 255).
    pub max_raw: u32,
    /// `value = sample * scale + offset`.
    pub scale: f64,
    /// See `scale`.
    pub value_offset: f64,
    /// Bytes per pixel of a raw tile of this frame (2 for 16-bit grey, 3 for RGB colour).
    pub tile_bytes_per_pixel: u64,
}

impl Sampling {
    /// How `frame`'s samples are read for `config`; an error names the frame when the band does
    /// not fit its format.
    pub fn of(frame: &Frame, config: &TileStatsConfig) -> Result<Sampling, TileStatsError> {
        let l = &frame.layout;
        let weights = match config.band {
            BandName::Luma => [77, 150, 29],
            BandName::Red => [256, 0, 0],
            BandName::Green => [0, 256, 0],
            BandName::Blue => [0, 0, 256],
        };
        let (source, max_raw, bytes) = match l.format {
            PixelFormat::Gray16 => (Source::Gray16, 65535, 2),
            PixelFormat::I420 | PixelFormat::Nv12 => (Source::Gray8, 255, 3),
            // A grey frame's one band, read as a YUV frame's Y plane.
            PixelFormat::Gray8 => (Source::Gray8, 255, 1),
            _ => (Source::Packed, 255, 3),
        };
        if source != Source::Packed && config.band != BandName::Luma {
            return Err(TileStatsError::Band {
                stream: frame.stream,
                seq: frame.seq,
                format: l.format,
                band: config.band,
            });
        }
        let scale = config.scale.unwrap_or(1.0 / f64::from(max_raw));
        Ok(Sampling {
            source,
            offset: l.offsets[0],
            size: (l.width, l.height),
            band: Band {
                stride: u32::try_from(l.strides[0]).unwrap_or(u32::MAX),
                bpp: l.format.packed_bytes() as u32,
                idx: match l.format {
                    PixelFormat::Bgr | PixelFormat::Bgra => [2, 1, 0],
                    _ => [0, 1, 2],
                },
                weight: weights,
                above_from: above_from(config.level, scale, config.offset, max_raw),
            },
            max_raw,
            scale,
            value_offset: config.offset,
            tile_bytes_per_pixel: bytes,
        })
    }

    /// Bytes of the band's plane from its offset: rows of `stride`, the last one only as wide as
    /// the frame.
    pub fn plane_bytes(&self) -> usize {
        let (w, h) = (self.size.0 as usize, self.size.1 as usize);
        let row = match self.source {
            Source::Gray16 => w * 2,
            Source::Gray8 => w,
            Source::Packed => w * self.band.bpp as usize,
        };
        (h.max(1) - 1) * self.band.stride as usize + row
    }

    /// The statistics of a tile of `pixels` samples with `sums`.
    pub fn stats(&self, sums: PixelSums, pixels: u64) -> TileStats {
        derive(sums, pixels, self.scale, self.value_offset)
    }
}

/// The smallest raw sample (0..=`max_raw`, or `max_raw + 1` when none) whose value
/// `sample * scale + offset` is above `level`: the samples counted by `above` are those at or
/// above it (`scale > 0`).
pub fn above_from(level: f64, scale: f64, offset: f64, max_raw: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, max_raw + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if f64::from(mid) * scale + offset > level {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The statistics of `pixels` samples with `sums`, after `value = sample * scale + offset`:
/// computed in `f64` from the exact sums (the variance from `n * sum_sq - sum^2` in 128-bit
/// integers), so equal sums give bit-identical statistics.
pub fn derive(sums: PixelSums, pixels: u64, scale: f64, offset: f64) -> TileStats {
    let n = pixels.max(1);
    let (nf, s) = (n as f64, sums.sum as f64);
    let spread =
        (u128::from(n) * u128::from(sums.sum_sq)).saturating_sub(u128::from(sums.sum).pow(2));
    let var = spread as f64 / (nf * nf);
    TileStats {
        pixels,
        sums,
        mean: s / nf * scale + offset,
        std: var.sqrt() * scale,
        min: f64::from(sums.min) * scale + offset,
        max: f64::from(sums.max) * scale + offset,
        above: sums.above as f64 / nf,
        kept: false,
    }
}

/// Which of a frame's tiles are kept: those `keep` passes (all without a rule), and of them at
/// most `top_k`, the highest `score` first (ties: the earlier tile). `tiles[i]` is tile i's
/// rectangle `(w, h)`; sets `kept` on each stats.
pub fn select(
    stats: &mut [TileStats],
    sizes: &[(u32, u32)],
    keep: Option<&Rule>,
    top_k: Option<usize>,
    score: Property,
) {
    for (s, &(w, h)) in stats.iter_mut().zip(sizes) {
        s.kept = keep.is_none_or(|r| r.keeps(s, w, h));
    }
    let Some(k) = top_k else { return };
    let mut passing: Vec<usize> = (0..stats.len()).filter(|&i| stats[i].kept).collect();
    if passing.len() <= k {
        return;
    }
    let value = |i: usize| score.of(&stats[i], sizes[i].0, sizes[i].1);
    passing.sort_by(|&a, &b| value(b).total_cmp(&value(a)).then(a.cmp(&b)));
    for &i in &passing[k..] {
        stats[i].kept = false;
    }
}

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

impl crate::error::Kind for TileStatsError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            TileStatsError::Band { .. } | TileStatsError::Setting(_) => ErrorKind::Config,
            TileStatsError::NoPixels { .. } => ErrorKind::Config,
            TileStatsError::Cuda(e) => crate::error::Kind::kind(e),
        }
    }
}

crate::error::stage_error!(TileStatsError);

/// Settings of the tilestats stage.
#[derive(Debug, Clone, PartialEq)]
pub struct TileStatsConfig {
    /// `value = sample * scale + offset`; `None`: 1 / the largest sample (65535 or 255).
    pub scale: Option<f64>,
    /// See `scale`.
    pub offset: f64,
    /// The level `above` counts values above.
    pub level: f64,
    /// The keep rule (`None`: every tile passes).
    pub keep: Option<Rule>,
    /// Keep at most this many passing tiles per frame.
    pub top_k: Option<usize>,
    /// What top-k ranks by.
    pub score: Property,
    /// Which band of colour frames.
    pub band: BandName,
    /// Backend.
    pub backend: BackendKind,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
    /// The GPU of the CUDA backend.
    pub device: usize,
    /// Pixels per block of work.
    pub block_pixels: u32,
    /// Downlink rate for the report, megabits per second.
    pub downlink_mbps: f64,
}

impl Default for TileStatsConfig {
    /// Each property's declared default ([`TileStatsProps`]).
    fn default() -> Self {
        TileStatsConfig::from_props(TileStatsProps::default(), None)
    }
}

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

/// A frame's tiles as the backends take them: rectangles of one frame as crops of frame 0 at
/// their own size, cut into blocks of `block_pixels` pixels by area (a tile gets
/// ceil(pixels / block_pixels) blocks), and each tile's first block: `first[t]..first[t + 1]`
/// are tile t's blocks.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TileBlocks {
    /// The tiles.
    pub tiles: Vec<CropMeta>,
    /// Their blocks, tile by tile, in order.
    pub blocks: Vec<BlockMeta>,
    /// Each tile's first block, and the block count last.
    pub first: Vec<u32>,
    /// Pixels per block.
    pub block_pixels: u32,
}

impl TileBlocks {
    /// The tiles and blocks of `boxes` (`[x, y, w, h]`).
    pub fn new(boxes: impl IntoIterator<Item = [u32; 4]>, block_pixels: u32) -> Self {
        let mut t = TileBlocks::default();
        t.set(boxes, block_pixels);
        t
    }

    /// Make these the tiles and blocks of `boxes`, reusing the buffers.
    pub fn set(&mut self, boxes: impl IntoIterator<Item = [u32; 4]>, block_pixels: u32) {
        self.tiles.clear();
        self.tiles
            .extend(boxes.into_iter().map(|[x, y, w, h]| CropMeta {
                frame: 0,
                x,
                y,
                w,
                h,
                out_w: w,
                out_h: h,
                out_offset: 0,
            }));
        self.block_pixels = block_pixels;
        build_blocks_into(&self.tiles, block_pixels, 1, &mut self.blocks);
        self.first.clear();
        self.first.resize(self.tiles.len() + 1, 0);
        // Blocks come tile by tile, in order: count them, then take running sums.
        for b in &self.blocks {
            self.first[b.crop as usize + 1] += 1;
        }
        for t in 0..self.tiles.len() {
            self.first[t + 1] += self.first[t];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_defaults_are_the_constants() {
        let d = TileStatsConfig::default();
        assert_eq!((d.level, d.block_pixels), (0.5, DEFAULT_BLOCK_PIXELS));
        assert_eq!((d.downlink_mbps, d.offset, d.scale), (2.0, 0.0, None));
        assert_eq!(
            (d.score, d.band, d.top_k),
            (Property::Mean, BandName::Luma, None)
        );
        for s in Score::WORDS {
            let props = TileStatsProps {
                score: s.parse().unwrap(),
                ..TileStatsProps::default()
            };
            assert_eq!(
                Property::parse(s),
                Some(TileStatsConfig::from_props(props, None).score)
            );
        }
    }

    #[test]
    fn the_level_maps_to_the_first_raw_sample_above_it() {
        // 0.5 * 65535 = 32767.5: 32768 is the first sample whose value is above 0.5.
        assert_eq!(above_from(0.5, 1.0 / 65535.0, 0.0, 65535), 32768);
        assert_eq!(above_from(-1.0, 1.0 / 255.0, 0.0, 255), 0);
        assert_eq!(
            above_from(1.0, 1.0 / 255.0, 0.0, 255),
            256,
            "none is above 1"
        );
        // Reflectance: 1e-4 per count, offset -0.1: above 0.2 means 3001 and up.
        assert_eq!(above_from(0.2, 1e-4, -0.1, 65535), 3001);
    }

    #[test]
    fn statistics_come_from_the_exact_sums() {
        // Samples 1, 2, 3, 4: mean 2.5, population std sqrt(1.25).
        let sums = PixelSums {
            sum: 10,
            sum_sq: 30,
            above: 2,
            min: 1,
            max: 4,
        };
        let s = derive(sums, 4, 2.0, 1.0);
        assert_eq!((s.mean, s.min, s.max, s.above), (6.0, 3.0, 9.0, 0.5));
        assert!((s.std - 2.0 * 1.25f64.sqrt()).abs() < 1e-12);
        // A constant tile has no spread, exactly.
        let flat = PixelSums {
            sum: 65535 * 262_144,
            sum_sq: 65535 * 65535 * 262_144,
            above: 0,
            min: 65535,
            max: 65535,
        };
        assert_eq!(derive(flat, 262_144, 1.0, 0.0).std, 0.0);
    }

    #[test]
    fn top_k_keeps_the_best_passing_tiles_and_ties_go_to_the_earlier() {
        let mut stats: Vec<TileStats> = [0.9, 0.2, 0.7, 0.7, 0.95]
            .iter()
            .map(|&m| derive(PixelSums::EMPTY, 1, 1.0, m))
            .collect();
        let sizes = vec![(1, 1); 5];
        let rule = Rule::parse("mean > 0.5").unwrap();
        select(&mut stats, &sizes, Some(&rule), Some(3), Property::Mean);
        let kept: Vec<bool> = stats.iter().map(|s| s.kept).collect();
        assert_eq!(kept, [true, false, true, false, true]);
        select(&mut stats, &sizes, None, None, Property::Mean);
        assert!(stats.iter().all(|s| s.kept));
    }
}
