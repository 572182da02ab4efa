//! A frame's tiles as the backends take them, cut into blocks of work.

use crate::batch::{build_blocks_into, BlockMeta, CropMeta};

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
