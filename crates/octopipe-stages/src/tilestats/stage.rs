//! The tilestats stage at run time: each frame's tiles measured, kept or dropped, the report's
//! totals.

use std::time::{Duration, Instant};

use super::blocks::TileBlocks;
use super::config::TileStatsConfig;
use super::error::TileStatsError;
use super::keep::select;
use super::props::tilestats_config;
use super::props::TileStatsProps;
use super::sampling::Sampling;
use super::sums::Sums;
use crate::batch::CropBatch;
use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::frame::{PixelSums, TileStats};
use octopipe_core::stage::{Element, OpenContext, Properties, Role, Running, Stage, StageDecl};

/// Running totals for the report.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) frames: u64,
    pub(super) tiles: u64,
    pub(super) kept: u64,
    pub(super) bytes: u64,
    pub(super) kept_bytes: u64,
    pub(super) time: Duration,
}

/// The tilestats stage at run time.
pub struct TileFilter {
    pub(super) config: TileStatsConfig,
    pub(super) sums: Sums,
    pub(super) tally: Tally,
    pub(super) totals: Totals,
    // Scratch, reused per frame.
    pub(super) tiles: TileBlocks,
    pub(super) values: Vec<PixelSums>,
    pub(super) stats: Vec<TileStats>,
    pub(super) sizes: Vec<(u32, u32)>,
    pub(super) crops: Vec<usize>,
}

impl TileFilter {
    /// A filter with its backend.
    pub fn new(config: TileStatsConfig, tally: Tally) -> Result<Self, TileStatsError> {
        Ok(TileFilter {
            sums: Sums::new(&config)?,
            config,
            tally,
            totals: Totals::default(),
            tiles: TileBlocks::default(),
            values: Vec::new(),
            stats: Vec::new(),
            sizes: Vec::new(),
            crops: Vec::new(),
        })
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.sums.name()
    }

    /// Measure and select every crop of `batch`, frame by frame, writing the result on each
    /// crop's box.
    pub fn run(&mut self, batch: &mut CropBatch) -> Result<(), TileStatsError> {
        let start = Instant::now();
        for f in 0..batch.frames.len() {
            self.crops.clear();
            self.crops
                .extend((0..batch.crops.len()).filter(|&i| batch.crops[i].frame as usize == f));
            let frame = &batch.frames[f];
            if frame.part.is_last() {
                self.totals.frames += 1;
            }
            if self.crops.is_empty() {
                continue;
            }
            let sampling = Sampling::of(frame, &self.config)?;
            let data = frame.data().ok_or(TileStatsError::NoPixels {
                stream: frame.stream,
                seq: frame.seq,
            })?;
            let crops = &batch.crops;
            self.tiles.set(
                self.crops.iter().map(|&i| {
                    let c = &crops[i];
                    [c.x, c.y, c.w, c.h]
                }),
                self.config.block_pixels,
            );
            self.sums
                .sums(data, &sampling, &self.tiles, &mut self.values)?;
            self.sizes.clear();
            self.sizes
                .extend(self.tiles.tiles.iter().map(|t| (t.w, t.h)));
            self.stats.clear();
            self.stats.extend(
                self.values
                    .iter()
                    .zip(&self.sizes)
                    .map(|(s, &(w, h))| sampling.stats(*s, u64::from(w) * u64::from(h))),
            );
            let c = &self.config;
            select(
                &mut self.stats,
                &self.sizes,
                c.keep.as_ref(),
                c.top_k,
                c.score,
            );
            for (k, &i) in self.crops.iter().enumerate() {
                let s = self.stats[k];
                let bytes = s.pixels * sampling.tile_bytes_per_pixel;
                self.totals.tiles += 1;
                self.totals.bytes += bytes;
                if s.kept {
                    self.totals.kept += 1;
                    self.totals.kept_bytes += bytes;
                }
                let box_of = batch.origins.get(i).and_then(|o| {
                    let frame = batch.frames.get_mut(o.frame as usize)?;
                    frame.detections.get_mut(o.detection as usize)
                });
                let Some(d) = box_of else {
                    return Err(TileStatsError::Setting(format!(
                        "crop {i} of the batch names no box of its frame: the batch is not one a batch or tiles stage made"
                    )));
                };
                d.stats = Some(s);
            }
        }
        self.totals.time += start.elapsed();
        Ok(())
    }

    /// The report's line: tiles and bytes kept, the downlink time before and after, time per
    /// frame.
    pub fn report_line(&self) -> String {
        self.report_section().to_string()
    }
}

impl Stage<CropBatch, CropBatch> for TileFilter {
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.run(&mut batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        let section = self.report_section();
        self.tally.with(|t| t.add_section(&section));
        Ok(())
    }
}

impl Element for TileStatsConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let filter = TileFilter::new(*self, ctx.tally.clone())?;
        tracing::info!("tilestats backend: {}", filter.backend());
        Ok(Running::stage(Box::new(filter)))
    }
}

/// `tilestats scale=... offset=... level=0.5 keep="mean>0.535" top-k=N score=mean`.
pub const TILESTATS: StageDecl = StageDecl {
    name: "tilestats",
    role: Role::Filter(octopipe_core::stage::Item::BATCHES),
    doc: "per tile: mean, std, min, max, fraction above a level; keep rule and top-k (one GPU launch per frame)",
    props: TileStatsProps::PROPS,
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: tilestats_config,
};
