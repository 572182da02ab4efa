//! Tiles stage: cuts each frame into tiles, each tile a crop of a ragged batch (one frame per
//! batch), for a per-tile reduction (`tilestats`) or any other batch stage.
//!
//! ```text
//! images location=scene/ ! tiles min=128 max=512 seed=1 ! tilestats keep="mean>0.535" ! tilesink location=out/
//! images location=${root}/images ! tiles size=512x512 overlap=0 ! tilestats band=luma ! jsonl location=tiles.jsonl
//! ```
//!
//! Two grids:
//! - **regular** (`size=WxH overlap=F`): tiles step by `size - floor(overlap * size)` from the top
//!   left corner, and the last row and column are clipped to the frame ([`Edge::Clip`]: unlike the
//!   detector's tiles, which move back inside the frame, a clipped grid sends no pixel twice);
//! - **random variable** (`min=128 max=512 seed=1`, the default when `size` is not given): rows of
//!   random height cut into tiles of random width, covering the frame once, the same for the same
//!   seed on every machine ([`random`] documents the algorithm). Tiles on the right and bottom
//!   edges are clipped to the frame.
//!
//! Every frame of one size gets the same grid. Each tile is a box of the frame (its
//! [`Detection`], replacing boxes an earlier stage gave) and a crop of the batch at its own size
//! (`out_w = w`, `out_h = h`: no resize, no padding), with the batch's block metadata built as the
//! batch stage builds it; `tilestats` then cuts its own blocks by tile area.

mod grid;
pub mod scene;

use crate::batch::{
    BatchPool, CropBatch, CropMeta, Origin, DEFAULT_TILES_PER_BLOCK, DEFAULT_TILE_PIXELS,
};
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::frame::{Detection, Frame};
use octopipe_core::stage::{
    Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl,
};

pub use grid::{random, regular, regular_count, Edge, Rect};

/// How a frame is cut.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Grid {
    /// Tiles of `size` stepping by `size - floor(overlap * size)`, edge tiles clipped.
    Regular {
        /// (width, height) of a tile.
        size: (u32, u32),
        /// Fraction of a tile shared with its neighbours.
        overlap: f64,
    },
    /// The random variable grid ([`random`]).
    Random {
        /// Smallest side (edge tiles may be smaller: clipped).
        min: u32,
        /// Largest side.
        max: u32,
        /// Seed.
        seed: u64,
    },
}

impl Grid {
    /// The tiles of a `w`x`h` frame.
    pub fn tiles(&self, w: u32, h: u32) -> Vec<Rect> {
        match *self {
            Grid::Regular { size, overlap } => regular(w, h, size.0, size.1, overlap, Edge::Clip),
            Grid::Random { min, max, seed } => random(w, h, min, max, seed),
        }
    }
}

impl Default for Grid {
    /// The random grid with the declared defaults ([`TilesProps`]).
    fn default() -> Self {
        TilesProps::default().random()
    }
}

/// The tiles stage's properties, declared once ([`TILES`]).
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct TilesProps {
    /// tile size of a regular grid (edge tiles clipped to the frame); without it, the random grid
    #[prop(range = ..=octopipe_core::stage::limits::MAX_SIDE)]
    pub size: Option<(u32, u32)>,
    /// regular grid: fraction of a tile shared with its neighbours
    #[prop(default = 0, range = 0.0..=0.9)]
    pub overlap: f64,
    /// random grid: smallest tile side (edge tiles clipped)
    #[prop(default = 128, range = 1..=octopipe_core::stage::limits::MAX_SIDE)]
    pub min: usize,
    /// random grid: largest tile side
    #[prop(default = 512, range = 1..=octopipe_core::stage::limits::MAX_SIDE)]
    pub max: usize,
    /// random grid: the seed (the same grid for the same seed and frame size)
    #[prop(default = 1, unbounded)]
    pub seed: u64,
}

impl TilesProps {
    /// The random grid of `min`, `max` and `seed`.
    fn random(&self) -> Grid {
        let small = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Grid::Random {
            min: small(self.min),
            max: small(self.max),
            seed: self.seed,
        }
    }
}

/// Errors of the tiles stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TilesError {
    /// The tiles' crops do not fit one batch's 32-bit output offsets.
    #[error("tiles: frame {seq} of stream {stream} ({w}x{h}) is too large for one batch: its tiles' {values} output values pass the 32-bit offsets of a crop batch (at most 1.4 gigapixels per frame)")]
    TooLarge {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
        /// Frame width.
        w: u32,
        /// Frame height.
        h: u32,
        /// Output values its tiles would take (3 per pixel).
        values: u64,
    },
    /// The grid cuts a frame into more tiles than a frame may have
    /// ([`MAX_TILES`](octopipe_core::stage::limits::MAX_TILES)).
    #[error("tiles: {setting} cuts frame {seq} of stream {stream} ({w}x{h}) into {count} tiles; a frame may be cut into at most {max}: make the tiles larger")]
    TooMany {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
        /// Frame width.
        w: u32,
        /// Frame height.
        h: u32,
        /// The setting that makes the grid (`size=1x1`, `min=1`).
        setting: String,
        /// Tiles the grid would have (`more than N` where counting stopped).
        count: String,
        /// The most a frame may have.
        max: u64,
    },
}

impl octopipe_core::error::Kind for TilesError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        match self {
            TilesError::TooLarge { .. } => octopipe_core::error::ErrorKind::Input,
            TilesError::TooMany { .. } => octopipe_core::error::ErrorKind::Config,
        }
    }
}

octopipe_core::error::stage_error!(TilesError);

/// Settings of the tiles stage.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TilesConfig {
    /// The grid.
    pub grid: Grid,
}

/// The tiles stage at run time: the grid of the last frame size, and the batch buffers.
pub struct Tiler {
    config: TilesConfig,
    pool: BatchPool,
    /// (width, height) of the frames `tiles` is the grid of.
    grid_of: Option<(u32, u32)>,
    tiles: Vec<Rect>,
}

impl Tiler {
    /// A tiler for `config`.
    pub fn new(config: TilesConfig) -> Self {
        Tiler {
            config,
            pool: BatchPool::new(),
            grid_of: None,
            tiles: Vec::new(),
        }
    }

    /// `frame` cut into its tiles: one batch, each tile a box of the frame and a crop at its own
    /// size.
    pub fn cut(&mut self, mut frame: Frame) -> Result<CropBatch, TilesError> {
        let size = (frame.layout.width, frame.layout.height);
        if self.grid_of != Some(size) {
            // Counted before the tiles are made: a grid of tiny tiles on a large frame would be
            // millions of them.
            let max = octopipe_core::stage::limits::MAX_TILES;
            let (n, count, setting) = match self.config.grid {
                Grid::Regular {
                    size: (tw, th),
                    overlap,
                } => {
                    let n = grid::regular_count(size.0, size.1, tw, th, overlap);
                    (n, n.to_string(), format!("size={tw}x{th}"))
                }
                Grid::Random {
                    min,
                    max: top,
                    seed,
                } => {
                    let n = grid::random_count(size.0, size.1, min, top, seed, max);
                    (
                        n,
                        format!("more than {max}"),
                        format!("min={min} max={top}"),
                    )
                }
            };
            if n > max {
                return Err(TilesError::TooMany {
                    stream: frame.stream,
                    seq: frame.seq,
                    w: size.0,
                    h: size.1,
                    setting,
                    count,
                    max,
                });
            }
            self.tiles = self.config.grid.tiles(size.0, size.1);
            self.grid_of = Some(size);
        }
        let tiles = &self.tiles;
        let values: u64 = tiles
            .iter()
            .map(|r| u64::from(r[2]) * u64::from(r[3]) * 3)
            .sum();
        if values > u64::from(u32::MAX) {
            return Err(TilesError::TooLarge {
                stream: frame.stream,
                seq: frame.seq,
                w: size.0,
                h: size.1,
                values,
            });
        }
        let mut batch = self.pool.batch();
        let mut offset = 0;
        for (i, &[x, y, w, h]) in tiles.iter().enumerate() {
            batch.crops.push(CropMeta {
                frame: 0,
                x,
                y,
                w,
                h,
                out_w: w,
                out_h: h,
                out_offset: offset,
            });
            batch.origins.push(Origin {
                frame: 0,
                detection: i as u32,
            });
            offset += w * h * 3;
        }
        frame.detections = tiles.iter().map(|&r| Detection::new(r)).collect();
        frame.reused.clear();
        batch.frames.push(frame);
        batch.build_blocks(DEFAULT_TILE_PIXELS, DEFAULT_TILES_PER_BLOCK);
        Ok(batch)
    }
}

impl Stage<Frame, CropBatch> for Tiler {
    fn process(&mut self, frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.push(self.cut(frame)?);
        Ok(())
    }
}

impl Element for TilesConfig {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(Tiler::new(*self))))
    }
}

/// `tiles size=WxH overlap=F` or `tiles min=128 max=512 seed=1`.
pub const TILES: StageDecl = StageDecl {
    name: "tiles",
    role: Role::Batch,
    doc: "cut each frame into tiles (a regular or a random variable grid), each a crop of one ragged batch",
    props: TilesProps::PROPS,
    needs: &[],
    provides: &[Role::Boxes],
    make: tiles_config,
};

/// [`TilesProps`], then the checks across them: one grid's settings, not both.
fn tiles_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let t = TilesProps::from_props(p)?;
    let grid = match t.size {
        Some(size) => {
            if let Some(k) = ["min", "max", "seed"]
                .into_iter()
                .find(|k| p.given(k).is_some())
            {
                return Err(p.error(
                    k,
                    format!("tiles: {k} is a setting of the random grid, and size=WxH makes a regular one: give one or the other"),
                ));
            }
            Grid::Regular {
                size,
                overlap: t.overlap,
            }
        }
        None => {
            if p.given("overlap").is_some() {
                return Err(p.error(
                    "overlap",
                    "tiles: overlap is a setting of the regular grid: set size=WxH too",
                ));
            }
            let grid = t.random();
            if let Grid::Random { min, max, .. } = grid {
                if min > max {
                    return Err(
                        p.error("min", format!("tiles: min={min} is larger than max={max}"))
                    );
                }
            }
            grid
        }
    };
    Ok(Box::new(TilesConfig { grid }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::frame::{Colorimetry, FrameLayout, PixelFormat, PooledBuf};

    #[test]
    fn the_default_grid_is_the_declared_one() {
        let (min, max, seed) = (128, 512, 1);
        assert_eq!(Grid::default(), Grid::Random { min, max, seed });
    }

    #[test]
    fn a_frame_past_the_batch_offsets_is_an_error_naming_it() {
        // The check comes before any pixel is read: the frame needs no bytes.
        let layout = FrameLayout::packed(PixelFormat::Gray16, 40_000, 40_000);
        let frame = Frame::new(
            0,
            5,
            "big",
            layout,
            Colorimetry::default(),
            PooledBuf::unpooled(Vec::new()),
        );
        let mut tiler = Tiler::new(TilesConfig {
            grid: Grid::Regular {
                size: (4096, 4096),
                overlap: 0.0,
            },
        });
        let e = tiler.cut(frame).err().unwrap().to_string();
        assert!(
            e.starts_with("tiles: frame 5 of stream 0 (40000x40000) is too large for one batch: its tiles' 4800000000 output values"),
            "{e}"
        );
    }

    #[test]
    fn a_grid_finer_than_a_frame_may_have_is_an_error_naming_its_setting() {
        let frame = || {
            let layout = FrameLayout::packed(PixelFormat::Gray16, 2500, 2500);
            Frame::new(
                0,
                5,
                "fine",
                layout,
                Colorimetry::default(),
                PooledBuf::unpooled(Vec::new()),
            )
        };
        let regular = Grid::Regular {
            size: (1, 1),
            overlap: 0.0,
        };
        let random = Grid::Random {
            min: 1,
            max: 2,
            seed: 1,
        };
        for (grid, words) in [
            (regular, "tiles: size=1x1 cuts frame 5 of stream 0 (2500x2500) into 6250000 tiles; a frame may be cut into at most 4096"),
            (random, "tiles: min=1 max=2 cuts frame 5 of stream 0 (2500x2500) into more than 4096 tiles"),
        ] {
            let e = Tiler::new(TilesConfig { grid }).cut(frame()).err().unwrap().to_string();
            assert!(e.starts_with(words), "{e}");
        }
    }
}
