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
mod window;

use std::time::{Duration, Instant};

use crate::description::DescribeError;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Props, Role, Running, Stage, StageDecl,
};
use crate::Error;

use crate::frame::Frame;

pub use crate::stage::Downstream;
pub use assemble::Assembler;
pub use window::Window;

pub use crate::crops::{
    build_blocks_into, BatchPool, BlockMeta, CropBatch, CropMeta, Origin, DEFAULT_TILE_PIXELS,
    POOL_KEEP,
};

/// The batch stage's property that spreads its streams over GPUs (`describe::expand_devices`).
pub const DEVICES: &str = "devices";
/// Default largest number of crops in one batch.
pub const DEFAULT_MAX_CROPS: usize = 256;
/// Default largest number of frames in one batch.
pub const DEFAULT_MAX_FRAMES: usize = 8;
/// Default tiles per block.
pub const DEFAULT_TILES_PER_BLOCK: u32 = 4;

/// Settings of the batch stage.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConfig {
    /// Close a batch once it holds this many crops. A frame's crops stay in one batch unless the
    /// frame alone has more: then it travels in parts of at most this many crops, a batch each
    /// ([`crate::frame::Part`]).
    pub max_crops: usize,
    /// Close a batch once it holds this many frames.
    pub max_frames: usize,
    /// Longest a frame may wait for others; `None` derives it from the frame's remaining budget.
    pub max_wait: Option<Duration>,
    /// Output pixels per tile.
    pub tile_pixels: u32,
    /// Tiles per block (with `input_per_block`: at most this many).
    pub tiles_per_block: u32,
    /// Blocks sized by the source pixels they read ([`CropBatch::build_blocks_weighted`] with this
    /// budget) instead of by output pixels. The runner sets [`AREA_INPUT_PER_BLOCK`] when the
    /// preprocess stage averages areas (`interpolation=area`), where a heavily downscaled crop's
    /// output pixels each read many source pixels.
    pub input_per_block: Option<u64>,
    /// What to do with a frame that is predicted to miss its budget.
    pub late: LatePolicy,
}

/// What the batch stage does with a frame predicted to finish after its deadline (prediction: the
/// running estimates of the time from batching to the sink, per batch and per crop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatePolicy {
    /// Process it anyway and count it.
    #[default]
    Process,
    /// Drop it (counted, with its boxes, by reason).
    Drop,
    /// Keep only as many crops as fit in the time left, by priority.
    Cap(CapPriority),
}

/// Which crops a capped frame keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapPriority {
    /// The largest boxes first.
    #[default]
    Largest,
    /// The highest detector scores first.
    Confident,
}

/// Source pixels per block of the input-weighted blocks used with `interpolation=area`
/// ([`BatchConfig::input_per_block`]). On an H100, crops1000 resized to 64x64 by area: 0.1833 ms
/// with these blocks against 0.2665 ms with blocks of equal output (BENCHMARKS.md).
pub const AREA_INPUT_PER_BLOCK: u64 = 16 * 1024;

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            max_crops: DEFAULT_MAX_CROPS,
            max_frames: DEFAULT_MAX_FRAMES,
            max_wait: None,
            tile_pixels: DEFAULT_TILE_PIXELS,
            tiles_per_block: DEFAULT_TILES_PER_BLOCK,
            input_per_block: None,
            late: LatePolicy::Process,
        }
    }
}

impl Stage<Frame, CropBatch> for Assembler {
    fn process(&mut self, frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.push(frame, out);
        Ok(())
    }
    fn deadline(&self) -> Option<Instant> {
        Assembler::deadline(self)
    }
    fn timeout(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.flush());
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.flush());
        Ok(())
    }
}

impl Element for BatchConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        if ctx.caps.input_weighted_blocks() {
            config.input_per_block.get_or_insert(AREA_INPUT_PER_BLOCK);
        }
        let assembler = Assembler::new(
            config,
            ctx.caps.crop_size(),
            ctx.budget,
            ctx.downstream.clone(),
            ctx.live_interval,
            ctx.tally.clone(),
        );
        // The classifier (opened before) says whether tracks' labels are reused.
        let assembler = match &ctx.caps.reinfer {
            Some(reinfer) => assembler.reuse_labels(reinfer),
            None => assembler,
        };
        Ok(Running::Batcher(Box::new(assembler)))
    }
}

/// `batch max-crops=256 max-frames=8`: ragged batches of consecutive frames' crops.
pub const BATCH: StageDecl = StageDecl {
    name: "batch",
    role: Role::Batch,
    doc: "collect crops of consecutive frames into ragged batches with block metadata",
    props: &[
        PropSpec::new("max-crops", PropType::POSITIVE, "256", "close a batch at this many crops"),
        PropSpec::new("max-frames", PropType::POSITIVE, "8", "close a batch at this many frames"),
        PropSpec::new(
            "max-wait-ms",
            PropType::Float {
                min: 0.0,
                max: f64::INFINITY,
                open_min: false,
            },
            "auto",
            "longest a frame waits for others (auto: from its remaining budget)",
        ),
        PropSpec::new("tile-pixels", PropType::POSITIVE, "256", "output pixels per tile"),
        PropSpec::new("tiles-per-block", PropType::POSITIVE, "4", "tiles per block of work"),
        PropSpec::new(
            "late",
            PropType::Choice(&["process", "drop", "cap"]),
            "process",
            "a frame predicted to miss its budget: process it anyway, drop it, or keep only the crops that fit",
        ),
        PropSpec::new(
            "cap-priority",
            PropType::Choice(&["largest", "confident"]),
            "largest",
            "with late=cap: which crops a late frame keeps",
        ),
        PropSpec::new(
            DEVICES,
            PropType::List,
            "-",
            "spread the streams over GPUs: all, or ordinals (0,1); each GPU takes a run of \
             consecutive streams and gets its own copy of this stage and the stages after it, with \
             device= set on them and on the streams' stages (leave device= out), meeting in the one sink",
        ),
    ],
    needs: &[],
    provides: &[],
    make: batch_config,
};

fn batch_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let d = BatchConfig::default();
    let priority = match p.str("cap-priority") {
        Some("confident") => CapPriority::Confident,
        _ => CapPriority::Largest,
    };
    let small = |k: &str, d: u32| p.int(k).map_or(d, |v| u32::try_from(v).unwrap_or(u32::MAX));
    Ok(Box::new(BatchConfig {
        late: match p.str("late") {
            Some("drop") => LatePolicy::Drop,
            Some("cap") => LatePolicy::Cap(priority),
            _ => LatePolicy::Process,
        },
        max_crops: p.usize("max-crops").unwrap_or(d.max_crops),
        max_frames: p.usize("max-frames").unwrap_or(d.max_frames),
        max_wait: p
            .float("max-wait-ms")
            .map(|v| Duration::from_secs_f64(v / 1000.0)),
        tile_pixels: small("tile-pixels", d.tile_pixels),
        tiles_per_block: small("tiles-per-block", d.tiles_per_block),
        input_per_block: d.input_per_block,
    }))
}
