//! The CUDA backend of `tilestats`: the frame's band uploaded once, the tiles and their
//! area-balanced block metadata packed into one buffer, ONE launch of `tilestats.cu` (beside this
//! file: [`TILESTATS_KERNELS`]) for every tile of the frame, the per-tile sums copied back.
//! Buffers grow and are reused.

use std::ops::Range;

use cudarc::driver::{CudaSlice, DeviceRepr, PushKernelArg};
use octopipe_cuda::{grow, launch_config, part, push_aligned, CudaError, Gpu, KernelModule};

use super::blocks::TileBlocks;
use super::sampling::{Band, Sampling, Source};
use crate::batch::CropMeta;
use octopipe_core::frame::PixelSums;

/// Per-tile sums (block metadata by tile area, two-level reduction), and their padded
/// baseline: `tilestats.cu`.
pub const TILESTATS_KERNELS: KernelModule = KernelModule {
    name: "tilestats",
    source: include_str!("tilestats.cu"),
    functions: &[
        "tilestats_gray16",
        "tilestats_gray8",
        "tilestats_packed",
        "tilestats_padded_gray16",
    ],
};

/// Threads per CUDA block (`TS_THREADS` in `tilestats.cu`).
pub const TILESTATS_THREADS: u32 = 256;

// SAFETY: `#[repr(C)]` plain data with the layout of the kernel's `Band`. (`PixelSums`, the
// kernel's `TileSums`, is made device data where it is defined, in the core crate.)
unsafe impl DeviceRepr for Band {}

/// A GPU (context, stream, kernels) and the buffers of the per-tile sums.
#[non_exhaustive]
pub struct GpuSums {
    pub(crate) engine: Gpu,
    /// The band's plane of the last uploaded frame.
    pub(crate) frame: Option<CudaSlice<u8>>,
    /// Tiles, blocks and each tile's first block, packed.
    pub(crate) meta: Option<CudaSlice<u8>>,
    host_meta: Vec<u8>,
    /// Byte ranges of the tiles, blocks and first-block table in `meta`.
    pub(crate) parts: [(usize, usize); 3],
    pub(crate) partials: Option<CudaSlice<PixelSums>>,
    /// One per tile, zero between launches (the last block of a tile resets its own).
    pub(crate) counters: Option<CudaSlice<u32>>,
    pub(crate) out: Option<CudaSlice<PixelSums>>,
    /// The tiles, blocks and first-block table of the last upload (for checks and baselines).
    pub(crate) tiles: Vec<CropMeta>,
    pub(crate) first: Vec<u32>,
    pub(crate) block_pixels: u32,
    pub(crate) dims: (u32, u32),
    /// Kernel launches so far.
    pub launches: u64,
}

impl GpuSums {
    /// Open GPU `device` (its kernels compiled, or taken from the cache).
    pub fn new(device: usize) -> Result<Self, CudaError> {
        Ok(GpuSums {
            engine: Gpu::new(device, &[&TILESTATS_KERNELS])?,
            frame: None,
            meta: None,
            host_meta: Vec::new(),
            parts: [(0, 0); 3],
            partials: None,
            counters: None,
            out: None,
            tiles: Vec::new(),
            first: Vec::new(),
            block_pixels: 0,
            dims: (0, 0),
            launches: 0,
        })
    }

    /// The GPU (context, stream, device name).
    pub fn engine(&self) -> &Gpu {
        &self.engine
    }

    /// Every tile's sums, into `out`: [`Self::upload`], [`Self::launch`], [`Self::download`].
    pub fn sums(
        &mut self,
        data: &[u8],
        sampling: &Sampling,
        tiles: &TileBlocks,
        out: &mut Vec<PixelSums>,
    ) -> Result<(), CudaError> {
        self.upload(data, sampling, tiles)?;
        self.launch(sampling)?;
        self.download(out)
    }

    /// Copy the frame's band plane (from `data`, the frame's host bytes) and the tiles and their
    /// blocks to the device. Checks every tile lies inside the frame and the block table lists
    /// each tile's blocks.
    pub fn upload(
        &mut self,
        data: &[u8],
        sampling: &Sampling,
        t: &TileBlocks,
    ) -> Result<(), CudaError> {
        let (tiles, blocks, first) = (&t.tiles, &t.blocks, &t.first);
        let (w, h) = sampling.size;
        for (i, t) in tiles.iter().enumerate() {
            // The kernel counts a tile's pixels in 32 bits, with a block's worth to spare.
            if !t.inside(w, h) || u64::from(t.w) * u64::from(t.h) > 1 << 31 {
                return Err(CudaError::Invalid(format!(
                    "tile {i} [{}, {}, {}, {}] does not fit the {w}x{h} frame",
                    t.x, t.y, t.w, t.h
                )));
            }
        }
        if first.len() != tiles.len() + 1
            || first.last().copied() != Some(blocks.len() as u32)
            || blocks.iter().any(|b| b.crop as usize >= tiles.len())
            || t.block_pixels == 0
            || t.block_pixels > 1 << 24
        {
            return Err(CudaError::Invalid(
                "the block table does not match the tiles".into(),
            ));
        }
        let plane = sampling.plane_bytes();
        let bytes = data
            .get(sampling.offset..sampling.offset + plane)
            .ok_or_else(|| {
                CudaError::Invalid(format!(
                    "the frame holds {} bytes, its band needs {}",
                    data.len(),
                    sampling.offset + plane
                ))
            })?;
        let stream = self.engine.stream().clone();
        grow(&stream, &mut self.frame, plane.max(1))?;
        let frame = self.frame.as_mut().expect("grown above");
        stream.memcpy_htod(bytes, &mut frame.slice_mut(0..plane))?;

        self.host_meta.clear();
        let pack = |bytes: usize, start: usize| (start, start + bytes);
        let tp = pack(
            std::mem::size_of_val(tiles),
            push_aligned(&mut self.host_meta, tiles),
        );
        let bp = pack(
            std::mem::size_of_val(blocks),
            push_aligned(&mut self.host_meta, blocks),
        );
        let fp = pack(
            std::mem::size_of_val(first),
            push_aligned(&mut self.host_meta, first),
        );
        self.parts = [tp, bp, fp];
        let end = self.host_meta.len();
        grow(&stream, &mut self.meta, end.max(16))?;
        let meta = self.meta.as_mut().expect("grown above");
        stream.memcpy_htod(&self.host_meta[..], &mut meta.slice_mut(0..end))?;
        grow(&stream, &mut self.partials, blocks.len().max(1))?;
        grow(&stream, &mut self.counters, tiles.len().max(1))?;
        grow(&stream, &mut self.out, tiles.len().max(1))?;
        self.tiles.clear();
        self.tiles.extend_from_slice(tiles);
        self.first.clear();
        self.first.extend_from_slice(first);
        self.block_pixels = t.block_pixels;
        self.dims = (w, h);
        Ok(())
    }

    /// One launch for every tile of the last upload. Asynchronous on the engine's stream.
    pub fn launch(&mut self, sampling: &Sampling) -> Result<(), CudaError> {
        let blocks = self.first.last().copied().unwrap_or(0);
        self.launch_blocks(sampling, 0..blocks)
    }

    /// Launch the kernel on blocks `range` of the last upload only (one launch per tile is
    /// `first[t]..first[t + 1]` for each tile: the per-tile baseline of `octopipe bench tiles`).
    /// The range must hold whole tiles.
    pub fn launch_blocks(
        &mut self,
        sampling: &Sampling,
        range: Range<u32>,
    ) -> Result<(), CudaError> {
        if range.is_empty() {
            return Ok(());
        }
        let whole = |b: u32| self.first.binary_search(&b).is_ok();
        if range.end > self.first.last().copied().unwrap_or(0)
            || !whole(range.start)
            || !whole(range.end)
            || sampling.size != self.dims
        {
            return Err(CudaError::Invalid(format!(
                "blocks {range:?} are not whole tiles of the last upload"
            )));
        }
        let kernel = match sampling.source {
            Source::Gray16 => "tilestats_gray16",
            Source::Gray8 => "tilestats_gray8",
            Source::Packed => "tilestats_packed",
        };
        let f = self.engine.func(&TILESTATS_KERNELS, kernel)?;
        let stream = self.engine.stream().clone();
        let (frame, meta) = (
            self.frame.as_ref().expect("uploaded"),
            self.meta.as_ref().expect("uploaded"),
        );
        let (tiles, blocks, first) = (
            part(meta, self.parts[0]),
            part(meta, self.parts[1]),
            part(meta, self.parts[2]),
        );
        let band = sampling.band;
        let base = range.start;
        let block_pixels = self.block_pixels;
        let cfg = launch_config((range.end - range.start, 1), TILESTATS_THREADS);
        let mut b = stream.launch_builder(&f);
        b.arg(frame)
            .arg(&band)
            .arg(&tiles)
            .arg(&blocks)
            .arg(&first)
            .arg(&block_pixels)
            .arg(&base)
            .arg(self.partials.as_mut().expect("grown"))
            .arg(self.counters.as_mut().expect("grown"))
            .arg(self.out.as_mut().expect("grown"));
        // SAFETY: the arguments match `tilestats_*`'s signature; every tile lies inside the
        // uploaded frame, every block names a tile and the range holds whole tiles (checked in
        // `upload` and above), so reads stay in the frame and writes in `partials`, `counters` and
        // `out`, which hold a slot per block and per tile.
        unsafe { b.launch(cfg) }?;
        self.launches += 1;
        Ok(())
    }

    /// Copy the per-tile sums of the last launch back into `out` (waits for the stream).
    pub fn download(&mut self, out: &mut Vec<PixelSums>) -> Result<(), CudaError> {
        let n = self.tiles.len();
        out.clear();
        out.resize(n, PixelSums::EMPTY);
        if n > 0 {
            let stream = self.engine.stream().clone();
            let dev = self.out.as_ref().expect("uploaded");
            stream.memcpy_dtoh(&dev.slice(0..n), &mut out[..])?;
            stream.synchronize()?;
        }
        Ok(())
    }

    // The padded baseline of `octopipe bench tiles`, built only for the benchmarks.
    #[cfg(feature = "bench")]
    /// The padded baseline: `tilestats_padded_gray16` over the tiles of the last upload, every tile
    /// padded to `pad` (none may be larger), ceil(pad pixels / `block_pixels`) blocks each.
    pub fn launch_padded(
        &mut self,
        sampling: &Sampling,
        pad: (u32, u32),
        block_pixels: u32,
    ) -> Result<(), CudaError> {
        if sampling.source != Source::Gray16 {
            return Err(CudaError::Invalid(
                "the padded baseline reads 16-bit grey frames".into(),
            ));
        }
        if self.tiles.iter().any(|t| t.w > pad.0 || t.h > pad.1) {
            return Err(CudaError::Invalid(format!(
                "a tile is larger than the {}x{} pad",
                pad.0, pad.1
            )));
        }
        let per_tile = (pad.0 * pad.1).div_ceil(block_pixels);
        let ntiles = self.tiles.len() as u32;
        let f = self
            .engine
            .func(&TILESTATS_KERNELS, "tilestats_padded_gray16")?;
        let stream = self.engine().stream().clone();
        grow(&stream, &mut self.partials, (per_tile * ntiles) as usize)?;
        let (frame, meta) = (
            self.frame.as_ref().expect("uploaded"),
            self.meta.as_ref().expect("uploaded"),
        );
        let tiles = part(meta, self.parts[0]);
        let cfg = launch_config((per_tile * ntiles, 1), TILESTATS_THREADS);
        let mut b = stream.launch_builder(&f);
        b.arg(frame)
            .arg(&sampling.band)
            .arg(&tiles)
            .arg(&pad.0)
            .arg(&pad.1)
            .arg(&block_pixels)
            .arg(&per_tile)
            .arg(self.partials.as_mut().expect("grown"))
            .arg(self.counters.as_mut().expect("uploaded"))
            .arg(self.out.as_mut().expect("uploaded"));
        // SAFETY: the arguments match `tilestats_padded_gray16`; every tile lies in the uploaded frame
        // (checked by the upload) and fits the pad (checked above), so reads stay in the frame;
        // `partials` holds per_tile * ntiles slots, `counters` and `out` one per tile.
        unsafe { b.launch(cfg) }?;
        self.launches += 1;
        Ok(())
    }
}
