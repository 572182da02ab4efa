//! The batch stage's settings ([`BatchConfig`]), its properties declared once ([`BatchProps`])
//! and its declaration ([`BATCH`]).

use std::time::Duration;

use octopipe_core::crops::DEFAULT_TILE_PIXELS;
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{Element, PropChoice, Properties, Props, Role, StageDecl};

/// The batch stage's property that spreads its streams over GPUs (`describe::expand_devices`).
pub const DEVICES: &str = "devices";
/// Default tiles per block.
pub const DEFAULT_TILES_PER_BLOCK: u32 = 4;

/// Settings of the batch stage.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConfig {
    /// Close a batch once it holds this many crops. A frame's crops stay in one batch unless the
    /// frame alone has more: then it travels in parts of at most this many crops, a batch each
    /// ([`octopipe_core::frame::Part`]).
    pub max_crops: usize,
    /// Close a batch once it holds this many frames.
    pub max_frames: usize,
    /// Longest a frame may wait for others; `None` derives it from the frame's remaining budget.
    pub max_wait: Option<Duration>,
    /// Output pixels per tile.
    pub tile_pixels: u32,
    /// Tiles per block (with `input_per_block`: at most this many).
    pub tiles_per_block: u32,
    /// Blocks sized by the source pixels they read
    /// ([`CropBatch::build_blocks_weighted`](octopipe_core::crops::CropBatch::build_blocks_weighted) with
    /// this budget) instead of by output pixels. The runner sets [`AREA_INPUT_PER_BLOCK`] when the
    /// preprocess stage averages areas (`interpolation=area`), where a heavily downscaled crop's
    /// output pixels each read many source pixels.
    pub input_per_block: Option<u64>,
    /// What to do with a frame that is predicted to miss its budget.
    pub late: LatePolicy,
}

/// What the batch stage does with a frame predicted to finish after its deadline (prediction: the
/// running estimates of the time from batching to the sink, per batch and per crop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
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
    /// Each property's declared default ([`BatchProps`]).
    fn default() -> Self {
        BatchConfig::from(BatchProps::default())
    }
}

/// The `late` property; with `cap-priority`, a [`LatePolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
#[non_exhaustive]
pub enum Late {
    /// [`LatePolicy::Process`].
    Process,
    /// [`LatePolicy::Drop`].
    Drop,
    /// [`LatePolicy::Cap`].
    Cap,
}

/// The batch stage's properties, declared once ([`BATCH`]); [`BatchConfig`] is made from them.
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct BatchProps {
    /// close a batch at this many crops
    #[prop(default = 256, range = 1..=octopipe_core::stage::limits::MAX_BATCH)]
    pub max_crops: usize,
    /// close a batch at this many frames
    #[prop(default = 8, range = 1..=octopipe_core::stage::limits::MAX_QUEUE)]
    pub max_frames: usize,
    /// longest a frame waits for others (auto: from its remaining budget)
    #[prop(default = "auto", range = 0.0..)]
    pub max_wait_ms: Option<f64>,
    /// output pixels per tile
    #[prop(default = DEFAULT_TILE_PIXELS, range = 1..=65536)]
    pub tile_pixels: usize,
    /// tiles per block of work
    #[prop(default = DEFAULT_TILES_PER_BLOCK, range = 1..=1024)]
    pub tiles_per_block: usize,
    /// a frame predicted to miss its budget: process it anyway, drop it, or keep only the crops
    /// that fit
    #[prop(default = "process")]
    pub late: Late,
    /// with late=cap: which crops a late frame keeps
    #[prop(default = "largest")]
    pub cap_priority: CapPriority,
    /// spread the streams over GPUs: all, or ordinals (0,1); each GPU takes a run of consecutive
    /// streams and gets its own copy of this stage and the stages after it, with device= set on
    /// them and on the streams' stages (leave device= out), meeting in the one sink
    #[prop(value = Vec::new())]
    pub devices: Vec<String>,
}

impl From<BatchProps> for BatchConfig {
    /// The settings (`devices` is the description's: written out before the stage is made).
    fn from(b: BatchProps) -> Self {
        let small = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        BatchConfig {
            max_crops: b.max_crops,
            max_frames: b.max_frames,
            max_wait: b.max_wait_ms.map(|v| Duration::from_secs_f64(v / 1000.0)),
            tile_pixels: small(b.tile_pixels),
            tiles_per_block: small(b.tiles_per_block),
            input_per_block: None,
            late: match b.late {
                Late::Process => LatePolicy::Process,
                Late::Drop => LatePolicy::Drop,
                Late::Cap => LatePolicy::Cap(b.cap_priority),
            },
        }
    }
}

/// `batch max-crops=256 max-frames=8`: ragged batches of consecutive frames' crops.
pub const BATCH: StageDecl = StageDecl {
    name: "batch",
    role: Role::Batch,
    doc: "collect crops of consecutive frames into ragged batches with block metadata",
    props: BatchProps::PROPS,
    needs: &[],
    provides: &[],
    make: batch_config,
};

fn batch_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    Ok(Box::new(BatchConfig::from(BatchProps::from_props(p)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_defaults_are_the_constants() {
        let d = BatchConfig::default();
        assert_eq!(d.max_crops, 256);
        assert_eq!(d.max_frames, 8);
        assert_eq!(d.tile_pixels, DEFAULT_TILE_PIXELS);
        assert_eq!(d.tiles_per_block, DEFAULT_TILES_PER_BLOCK);
        assert_eq!(d.late, LatePolicy::Process);
        assert_eq!(d.max_wait, None);
        // describe::expand_devices finds the property by this name.
        assert!(BatchProps::PROPS.iter().any(|p| p.name == DEVICES));
    }
}
