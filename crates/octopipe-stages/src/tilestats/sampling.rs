//! How a frame's samples are read and normalized, and the statistics derived from a tile's exact
//! sums.

use super::config::{BandName, TileStatsConfig};
use super::error::TileStatsError;
use octopipe_core::frame::{Frame, PixelFormat, PixelSums, TileStats};

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
