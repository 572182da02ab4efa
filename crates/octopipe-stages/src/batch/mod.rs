//! Batch stage: ragged crop batches with Octopus block metadata.
//!
//! ```text
//! ... ! boxes format=det location=${root}/annotations ! batch max-crops=256 max-frames=4 ! preprocess ...
//! ```
//!
//! Crops of many sizes from consecutive frames go into one [`CropBatch`] with no padding. The work is
//! cut into *tiles* (a fixed number of consecutive output pixels of one crop) and *blocks* (a short
//! range of tiles of one crop). Each block is described by one [`BlockMeta`] entry, built on the
//! host in O(blocks): a CUDA block (or a CPU task) reads its entry and knows which crop and which
//! output pixels are its own, with no per-pixel lookup table and no padding to the largest crop.

mod assemble;
mod config;
mod stage;
mod window;

pub use assemble::{Assembler, BatchError};
pub use config::{
    BatchConfig, BatchProps, CapPriority, Late, LatePolicy, AREA_INPUT_PER_BLOCK, BATCH,
    DEFAULT_TILES_PER_BLOCK, DEVICES,
};
pub use octopipe_core::stage::Downstream;
pub use window::Window;

pub use octopipe_core::crops::{
    build_blocks_into, BatchPool, BlockMeta, CropBatch, CropMeta, Origin, DEFAULT_TILE_PIXELS,
    POOL_KEEP,
};
