//! The crop batch: crops of consecutive frames (each with its own size and output offset), their
//! block metadata and, once preprocessed, the tensor. The data every batch stage passes on; the
//! batch stage (`octopipe::batch`, which re-exports it) makes it.

use std::sync::{Arc, Mutex};

use crate::alloc::AllocError;
use crate::frame::Frame;
use crate::tensor::{Layout, Tensor};

/// Default output pixels per tile.
pub const DEFAULT_TILE_PIXELS: u32 = 256;

/// One crop: where it is in which frame, and where its output goes. `#[repr(C)]`: uploaded as is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CropMeta {
    /// Index into [`CropBatch::frames`].
    pub frame: u32,
    /// Box left edge in frame pixels (already clipped to the frame).
    pub x: u32,
    /// Box top edge.
    pub y: u32,
    /// Box width (>= 1).
    pub w: u32,
    /// Box height (>= 1).
    pub h: u32,
    /// Output width.
    pub out_w: u32,
    /// Output height.
    pub out_h: u32,
    /// First element of this crop's output in the batch tensor.
    pub out_offset: u32,
}

impl CropMeta {
    /// Output pixels of the crop.
    pub fn out_pixels(&self) -> u32 {
        self.out_w * self.out_h
    }

    /// Whether the box is non-empty and lies inside a `width` x `height` frame.
    pub fn inside(&self, width: u32, height: u32) -> bool {
        self.w > 0
            && self.h > 0
            && self.x.saturating_add(self.w) <= width
            && self.y.saturating_add(self.h) <= height
    }
}

/// One block of work: tiles `tile_begin..tile_end` of crop `crop`. `#[repr(C)]`: uploaded as is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockMeta {
    /// Index into [`CropBatch::crops`].
    pub crop: u32,
    /// First tile.
    pub tile_begin: u32,
    /// One past the last tile.
    pub tile_end: u32,
}

/// Which detection of which frame a crop came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// Index into [`CropBatch::frames`].
    pub frame: u32,
    /// Index into that frame's `detections`.
    pub detection: u32,
}

/// The reusable buffers of a batch.
#[derive(Default)]
struct Parts {
    frames: Vec<Frame>,
    crops: Vec<CropMeta>,
    origins: Vec<Origin>,
    blocks: Vec<BlockMeta>,
    tensor: Tensor,
}

/// Batch buffers a [`BatchPool`] keeps for reuse; more come back only after a burst (a frame in
/// hundreds of parts puts hundreds of batches in flight at once), and those are freed, so the pool
/// never holds more than this many tensors.
pub const POOL_KEEP: usize = 16;

/// A free list of batch buffers: a dropped [`CropBatch`] gives its vectors back for the next one
/// (at most [`POOL_KEEP`] are kept).
#[derive(Clone, Default)]
pub struct BatchPool {
    free: Arc<Mutex<Vec<Parts>>>,
}

impl BatchPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch whose buffers come from (and go back to) this pool.
    pub fn batch(&self) -> CropBatch {
        let parts = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop())
            .unwrap_or_default();
        CropBatch::from_parts(parts, Some(self.clone()))
    }
}

/// Crops from one or more frames, their block metadata, and (after preprocessing) the tensor.
pub struct CropBatch {
    /// The frames the crops come from, in arrival order.
    pub frames: Vec<Frame>,
    /// One entry per crop.
    pub crops: Vec<CropMeta>,
    /// Where each crop came from (parallel to `crops`).
    pub origins: Vec<Origin>,
    /// Octopus block metadata.
    pub blocks: Vec<BlockMeta>,
    /// Output pixels per tile used to build `blocks`.
    pub tile_pixels: u32,
    /// Preprocessed values of all crops, packed without padding (`crops[i].out_offset` onwards),
    /// host or device, f32 or f16.
    pub tensor: Tensor,
    pool: Option<BatchPool>,
}

impl Default for CropBatch {
    fn default() -> Self {
        CropBatch::from_parts(Parts::default(), None)
    }
}

/// The blocks of [`CropBatch::build_blocks`] for `crops`, into `out` (cleared first): each crop's
/// output pixels cut into tiles of `tile_pixels`, every `tiles_per_block` consecutive tiles of a
/// crop one block. Panics where the system refuses the memory ([`try_build_blocks_into`] does not).
pub fn build_blocks_into(
    crops: &[CropMeta],
    tile_pixels: u32,
    tiles_per_block: u32,
    out: &mut Vec<BlockMeta>,
) {
    try_build_blocks_into(crops, tile_pixels, tiles_per_block, out)
        .unwrap_or_else(|e| panic!("the blocks of a batch of {} crops {e}", crops.len()));
}

/// [`build_blocks_into`], its growth fallible: the blocks of a batch (one per `tiles_per_block`
/// tiles of `tile_pixels`: billions for 4096 crops of 4096x4096 in tiles of one pixel) that the
/// system refuses are an [`AllocError`], the batch's error.
pub fn try_build_blocks_into(
    crops: &[CropMeta],
    tile_pixels: u32,
    tiles_per_block: u32,
    out: &mut Vec<BlockMeta>,
) -> Result<(), AllocError> {
    let per = tiles_per_block.max(1);
    cut_blocks(crops, tile_pixels.max(1), out, |_| per)
}

/// Cut each crop's output into tiles of `tile_pixels` and blocks of `per(crop)` tiles, into `out`
/// (its growth fallible: the blocks are counted first).
fn cut_blocks(
    crops: &[CropMeta],
    tile_pixels: u32,
    out: &mut Vec<BlockMeta>,
    per: impl Fn(&CropMeta) -> u32,
) -> Result<(), AllocError> {
    out.clear();
    let count = crops.iter().fold(0usize, |n, c| {
        let tiles = c.out_pixels().div_ceil(tile_pixels);
        n.saturating_add(tiles.div_ceil(per(c).max(1)) as usize)
    });
    out.try_reserve_exact(count)
        .map_err(|_| AllocError::of::<BlockMeta>(count))?;
    for (i, c) in crops.iter().enumerate() {
        let per = per(c).max(1);
        let tiles = c.out_pixels().div_ceil(tile_pixels);
        let mut t = 0;
        while t < tiles {
            let end = (t + per).min(tiles);
            out.push(BlockMeta {
                crop: i as u32,
                tile_begin: t,
                tile_end: end,
            });
            t = end;
        }
    }
    Ok(())
}

impl CropBatch {
    fn from_parts(p: Parts, pool: Option<BatchPool>) -> Self {
        CropBatch {
            frames: p.frames,
            crops: p.crops,
            origins: p.origins,
            blocks: p.blocks,
            tile_pixels: DEFAULT_TILE_PIXELS,
            tensor: p.tensor,
            pool,
        }
    }

    /// Append crops for `frame`'s detections, each resized to `out_w`x`out_h` with `channels`
    /// values per pixel, packed after the crops already present. Detections listed in
    /// `frame.reused` (their track's label is reused) get no crop.
    pub fn push_frame(&mut self, frame: Frame, out_w: u32, out_h: u32, channels: u32) {
        let f = self.frames.len() as u32;
        let mut offset = self
            .crops
            .last()
            .map(|c| c.out_offset + c.out_pixels() * channels)
            .unwrap_or(0);
        for (i, d) in frame.detections.iter().enumerate() {
            if frame.reused.binary_search(&(i as u32)).is_ok() {
                continue;
            }
            let [x, y, w, h] = d.bbox;
            self.crops.push(CropMeta {
                frame: f,
                x,
                y,
                w,
                h,
                out_w,
                out_h,
                out_offset: offset,
            });
            self.origins.push(Origin {
                frame: f,
                detection: i as u32,
            });
            offset += out_w * out_h * channels;
        }
        self.frames.push(frame);
    }

    /// Number of output elements of all crops.
    pub fn tensor_len(&self, channels: u32) -> usize {
        self.crops
            .last()
            .map(|c| (c.out_offset + c.out_pixels() * channels) as usize)
            .unwrap_or(0)
    }

    /// The tensor's shape for `layout`: `[n, 3, h, w]` or `[n, h, w, 3]` when every crop has the
    /// same output size, `[elements]` for a ragged batch.
    pub fn tensor_shape(&self, layout: Layout) -> Vec<usize> {
        let Some(first) = self.crops.first() else {
            return vec![0];
        };
        let (w, h) = (first.out_w as usize, first.out_h as usize);
        if self
            .crops
            .iter()
            .any(|c| (c.out_w, c.out_h) != (first.out_w, first.out_h))
        {
            return vec![self.tensor_len(3)];
        }
        let n = self.crops.len();
        match layout {
            Layout::Nchw => vec![n, 3, h, w],
            Layout::Nhwc => vec![n, h, w, 3],
        }
    }

    /// Rebuild [`Self::blocks`]: each crop's output pixels cut into tiles of `tile_pixels`, and
    /// every `tiles_per_block` consecutive tiles of a crop made one block ([`build_blocks_into`]).
    /// O(blocks), no allocation once the vector has grown. Panics where the system refuses the
    /// memory ([`CropBatch::try_build_blocks`] does not).
    pub fn build_blocks(&mut self, tile_pixels: u32, tiles_per_block: u32) {
        self.try_build_blocks(tile_pixels, tiles_per_block)
            .unwrap_or_else(|e| panic!("the blocks of a batch of {} crops {e}", self.crops.len()));
    }

    /// [`CropBatch::build_blocks`], its growth fallible ([`try_build_blocks_into`]).
    pub fn try_build_blocks(
        &mut self,
        tile_pixels: u32,
        tiles_per_block: u32,
    ) -> Result<(), AllocError> {
        self.tile_pixels = tile_pixels.max(1);
        try_build_blocks_into(&self.crops, tile_pixels, tiles_per_block, &mut self.blocks)
    }

    /// Rebuild [`Self::blocks`] with block sizes weighted by the input each block reads: a crop
    /// whose output pixels each read `r = max(1, (w * h) / (out_w * out_h))` source pixels (the
    /// area-weighted filter reads every covered source pixel; an upscaled crop reads about one per
    /// output) gets `clamp(input_pixels_per_block / (tile_pixels * r), 1, max_tiles_per_block)`
    /// tiles per block, so heavily downscaled crops are cut into more, smaller blocks and every
    /// block reads about `input_pixels_per_block` source pixels (or, for light crops, writes
    /// `max_tiles_per_block` tiles). O(blocks), no allocation once the vector has grown. Panics
    /// where the system refuses the memory ([`CropBatch::try_build_blocks_weighted`] does not).
    pub fn build_blocks_weighted(
        &mut self,
        tile_pixels: u32,
        max_tiles_per_block: u32,
        input_pixels_per_block: u64,
    ) {
        self.try_build_blocks_weighted(tile_pixels, max_tiles_per_block, input_pixels_per_block)
            .unwrap_or_else(|e| panic!("the blocks of a batch of {} crops {e}", self.crops.len()));
    }

    /// [`CropBatch::build_blocks_weighted`], its growth fallible ([`try_build_blocks_into`]).
    pub fn try_build_blocks_weighted(
        &mut self,
        tile_pixels: u32,
        max_tiles_per_block: u32,
        input_pixels_per_block: u64,
    ) -> Result<(), AllocError> {
        let tile_pixels = tile_pixels.max(1);
        let max_tiles = max_tiles_per_block.max(1) as u64;
        self.tile_pixels = tile_pixels;
        cut_blocks(&self.crops, tile_pixels, &mut self.blocks, |c| {
            let out = c.out_pixels().max(1) as u64;
            let input = (c.w as u64 * c.h as u64).max(out);
            // Tiles per block = budget / (tile_pixels * input / out), in integers.
            (input_pixels_per_block * out / (tile_pixels as u64 * input)).clamp(1, max_tiles) as u32
        })
    }

    /// Output pixel range `begin..end` (in the crop's raster order) of a block.
    pub fn block_pixels(&self, b: &BlockMeta) -> (u32, u32) {
        let c = &self.crops[b.crop as usize];
        let begin = b.tile_begin * self.tile_pixels;
        let end = (b.tile_end * self.tile_pixels).min(c.out_pixels());
        (begin, end)
    }

    /// Whether the batch holds no frames.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Drop all frames' pixel buffers (back to their pool) once the tensor is made.
    pub fn release_pixels(&mut self) {
        for f in &mut self.frames {
            f.release_pixels();
        }
    }
}

impl Drop for CropBatch {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let mut parts = Parts {
                frames: std::mem::take(&mut self.frames),
                crops: std::mem::take(&mut self.crops),
                origins: std::mem::take(&mut self.origins),
                blocks: std::mem::take(&mut self.blocks),
                tensor: std::mem::take(&mut self.tensor),
            };
            parts.frames.clear();
            parts.crops.clear();
            parts.origins.clear();
            parts.blocks.clear();
            parts.tensor.clear();
            if let Ok(mut free) = pool.free.lock() {
                if free.len() < POOL_KEEP {
                    free.push(parts);
                }
            }
        }
    }
}
