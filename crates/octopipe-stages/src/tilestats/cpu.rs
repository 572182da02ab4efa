//! The CPU backend of `tilestats`, the reference: one rayon pass over the blocks of a frame's tiles
//! (each block's run of pixels summed by one task), then each tile's blocks merged in order.

use rayon::prelude::*;

use super::blocks::TileBlocks;
use super::error::TileStatsError;
use super::sampling::{Sampling, Source};
use crate::batch::{BlockMeta, CropMeta};
use octopipe_core::frame::PixelSums;

/// Multi-threaded per-tile sums.
pub struct CpuSums {
    pool: rayon::ThreadPool,
    partials: Vec<PixelSums>,
}

impl CpuSums {
    /// A backend with `threads` workers (0: one per core).
    pub fn new(threads: usize) -> Result<Self, TileStatsError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("octopipe-tilestats-{i}"))
            .build()
            .map_err(|e| TileStatsError::Setting(format!("cannot start CPU workers: {e}")))?;
        Ok(CpuSums {
            pool,
            partials: Vec::new(),
        })
    }

    /// The sums of every tile of `t` (rectangles of the frame whose host bytes are `data`), into
    /// `out` (one per tile): each block in parallel, then each tile's blocks merged in order.
    pub fn sums(
        &mut self,
        data: &[u8],
        sampling: &Sampling,
        t: &TileBlocks,
        out: &mut Vec<PixelSums>,
    ) {
        let partials = &mut self.partials;
        partials.clear();
        self.pool.install(|| {
            t.blocks
                .par_iter()
                .map(|b| block_sums(data, sampling, &t.tiles[b.crop as usize], b, t.block_pixels))
                .collect_into_vec(partials)
        });
        out.clear();
        out.extend(t.first.windows(2).map(|w| {
            partials[w[0] as usize..w[1] as usize]
                .iter()
                .fold(PixelSums::EMPTY, |a, b| a.merge(*b))
        }));
    }
}

/// The sums of block `b`'s pixels of tile `t`: its run of the tile's raster, row segment by row
/// segment. On x86-64 CPUs with AVX2 the same code compiled for AVX2 (3.4 times faster on this
/// loop: baseline x86-64 has no unsigned 32-bit min/max or compare in vectors); the integer sums
/// are the same either way.
pub fn block_sums(
    data: &[u8],
    s: &Sampling,
    t: &CropMeta,
    b: &BlockMeta,
    block_pixels: u32,
) -> PixelSums {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: this CPU has AVX2 (checked just above).
        return unsafe { block_sums_avx2(data, s, t, b, block_pixels) };
    }
    block_sums_portable(data, s, t, b, block_pixels)
}

/// [`block_sums`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_sums_avx2(
    data: &[u8],
    s: &Sampling,
    t: &CropMeta,
    b: &BlockMeta,
    block_pixels: u32,
) -> PixelSums {
    block_sums_portable(data, s, t, b, block_pixels)
}

/// [`block_sums`] for any CPU (inlined into the AVX2 copy).
#[inline(always)]
fn block_sums_portable(
    data: &[u8],
    s: &Sampling,
    t: &CropMeta,
    b: &BlockMeta,
    block_pixels: u32,
) -> PixelSums {
    let n = u64::from(t.w) * u64::from(t.h);
    let mut p = u64::from(b.tile_begin) * u64::from(block_pixels);
    let end = (u64::from(b.tile_end) * u64::from(block_pixels)).min(n);
    let mut sums = PixelSums::EMPTY;
    while p < end {
        let (row, col) = ((p / u64::from(t.w)) as u32, (p % u64::from(t.w)) as u32);
        let len = (u64::from(t.w - col)).min(end - p) as u32;
        sums = sums.merge(run_sums(data, s, t.x + col, t.y + row, len));
        p += u64::from(len);
    }
    sums
}

/// The sums of `len` pixels of row `y` from column `x`.
#[inline(always)]
fn run_sums(data: &[u8], s: &Sampling, x: u32, y: u32, len: u32) -> PixelSums {
    let band = &s.band;
    let row = &data[s.offset + y as usize * band.stride as usize..];
    let (x, len) = (x as usize, len as usize);
    match s.source {
        Source::Gray16 => fold(
            row[x * 2..(x + len) * 2]
                .chunks_exact(2)
                .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]]))),
            band.above_from,
        ),
        Source::Gray8 => fold(
            row[x..x + len].iter().map(|&v| u32::from(v)),
            band.above_from,
        ),
        Source::Packed => {
            let bpp = band.bpp as usize;
            let [i0, i1, i2] = band.idx.map(|i| i as usize);
            let [w0, w1, w2] = band.weight;
            fold(
                row[x * bpp..(x + len) * bpp].chunks_exact(bpp).map(|p| {
                    (w0 * u32::from(p[i0]) + w1 * u32::from(p[i1]) + w2 * u32::from(p[i2]) + 128)
                        >> 8
                }),
                band.above_from,
            )
        }
    }
}

/// The sums of `samples` (each under 2^16, so a square fits 32 bits), in plain local
/// accumulators the compiler vectorizes.
#[inline(always)]
fn fold(samples: impl Iterator<Item = u32>, above_from: u32) -> PixelSums {
    let (mut sum, mut sum_sq, mut above, mut min, mut max) = (0u64, 0u64, 0u64, u32::MAX, 0u32);
    for v in samples {
        sum += u64::from(v);
        sum_sq += u64::from(v * v);
        above += u64::from(v >= above_from);
        min = min.min(v);
        max = max.max(v);
    }
    PixelSums {
        sum,
        sum_sq,
        above,
        min,
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tilestats::{TileBlocks, TileStatsConfig};
    use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};

    #[test]
    fn the_portable_and_the_dispatched_sums_are_the_same() {
        for format in [PixelFormat::Gray16, PixelFormat::I420, PixelFormat::Bgra] {
            let layout = FrameLayout::packed(format, 301, 203);
            let mut rng = octopipe_core::rng::Rng::new(7);
            let data: Vec<u8> = (0..layout.size())
                .map(|_| (rng.next_u64() >> 24) as u8)
                .collect();
            let frame = Frame::new(
                0,
                0,
                "t",
                layout,
                Colorimetry::JPEG,
                PooledBuf::unpooled(data),
            );
            let s = Sampling::of(&frame, &TileStatsConfig::default()).unwrap();
            let t = TileBlocks::new(crate::tiles::random(301, 203, 1, 90, 3), 100);
            for b in &t.blocks {
                let tile = &t.tiles[b.crop as usize];
                let d = frame.data().unwrap();
                assert_eq!(
                    block_sums(d, &s, tile, b, 100),
                    block_sums_portable(d, &s, tile, b, 100),
                    "{format}"
                );
            }
        }
    }
}
