//! Collecting frames into batches, against the frames' remaining budget.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{BatchConfig, CapPriority, LatePolicy};
use super::{BatchPool, CropBatch, Window};
use octopipe_core::budget::Tally;
use octopipe_core::frame::{Frame, SkipReason};
use octopipe_core::stage::{CropPlan, Downstream, Reinfer};

/// Errors of the batch stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The blocks of a batch (the preprocess work's units) that the system refused memory for.
    #[error("batch: the blocks of a batch of {crops} crops in tiles of {tile_pixels} pixels {error}: raise tile-pixels or tiles-per-block, or lower max-crops or the output size")]
    Blocks {
        /// Crops in the batch.
        crops: usize,
        /// Its `tile-pixels`.
        tile_pixels: u32,
        /// The bytes they needed.
        error: octopipe_core::alloc::AllocError,
    },
}

impl octopipe_core::error::Kind for BatchError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        octopipe_core::error::ErrorKind::Busy
    }
}

octopipe_core::error::stage_error!(BatchError);

/// Runtime state of the batch stage.
pub struct Assembler {
    config: BatchConfig,
    out_size: (u32, u32),
    pool: BatchPool,
    current: Option<CropBatch>,
    budget: Duration,
    downstream: Arc<Downstream>,
    interval: Option<Duration>,
    tally: Tally,
    /// Which tracked boxes get a crop, when the classifier reuses tracks' labels.
    plan: Option<CropPlan>,
}

impl Assembler {
    /// An assembler making `out_size` crops. `downstream` holds the running estimates of the time
    /// from batching to the sink, which the runner keeps up to date; a frame waits for others only
    /// while `budget` minus that estimate allows, and a frame predicted to miss its budget is
    /// handled by `config.late` (counted in `tally`). For a live source, `interval` is the time
    /// between frames: a batch is not held for a frame that cannot arrive before its deadline.
    pub fn new(
        config: BatchConfig,
        out_size: (u32, u32),
        budget: Duration,
        downstream: Arc<Downstream>,
        interval: Option<Duration>,
        tally: Tally,
    ) -> Self {
        Assembler {
            config,
            out_size,
            pool: BatchPool::new(),
            current: None,
            budget,
            downstream,
            interval,
            tally,
            plan: None,
        }
    }

    /// Make no crop of a tracked box whose track was cropped fewer than `reinfer`'s interval
    /// frames before (`classify reinfer-interval`): the classifier gives it its track's label.
    pub(crate) fn reuse_labels(mut self, reinfer: &Reinfer) -> Self {
        self.plan = (reinfer.interval() > 1).then(|| reinfer.plan());
        self
    }

    /// Apply the late-frame policy; `None` when the frame is dropped.
    fn admit(&mut self, mut frame: Frame) -> Option<Frame> {
        let crops = frame.detections.len();
        // No estimate before the first batch reaches the sink: nothing to predict yet.
        let Some(predicted) = self.downstream.predict(crops) else {
            return Some(frame);
        };
        let deadline = frame.times.arrival + self.budget;
        let now = Instant::now();
        if now + predicted <= deadline {
            return Some(frame);
        }
        match self.config.late {
            LatePolicy::Process => {
                self.tally
                    .with(|b| b.note("predicted late, processed anyway", 1));
                Some(frame)
            }
            LatePolicy::Drop => {
                self.tally
                    .with(|b| b.drop_frame(frame.stream, "late (policy drop)", crops as u64));
                None
            }
            LatePolicy::Cap(priority) => {
                let per_crop = predicted.as_nanos() as u64 / crops.max(1) as u64;
                let left = deadline.saturating_duration_since(now).as_nanos() as u64;
                let keep = (left / per_crop.max(1)) as usize;
                let d = &mut frame.detections;
                match priority {
                    CapPriority::Largest => {
                        d.sort_by_key(|x| std::cmp::Reverse(x.bbox[2] as u64 * x.bbox[3] as u64))
                    }
                    CapPriority::Confident => d.sort_by(|a, b| b.score.total_cmp(&a.score)),
                }
                let cut = d.len().saturating_sub(keep);
                d.truncate(keep);
                for _ in 0..cut {
                    frame.skip(SkipReason::Capped);
                }
                self.tally
                    .with(|b| b.note("predicted late, crops capped", 1));
                Some(frame)
            }
        }
    }

    /// Add a frame; full batches are appended to `out`. A frame with more boxes than
    /// `max_crops` is cut into parts ([`Frame::into_parts`]) that fill a batch each, the last one
    /// staying open for the frames that follow: no batch ever holds more than `max_crops` crops,
    /// so the memory of a batch's tensor is bounded whatever one frame brings.
    pub fn push(&mut self, frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), BatchError> {
        let Some(frame) = self.admit(frame) else {
            return Ok(());
        };
        for part in frame.into_parts(self.config.max_crops) {
            self.push_part(part, out)?;
        }
        Ok(())
    }

    /// Add a frame (or a part of one) of at most `max_crops` boxes.
    fn push_part(&mut self, mut frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), BatchError> {
        // Decided here, where crops are made: a reused label needs no crop.
        if let Some(plan) = &mut self.plan {
            plan.plan(&mut frame);
        }
        let crops = frame.detections.len() - frame.reused.len();
        let window = self.window();
        if let Some(cur) = &self.current {
            if !cur.crops.is_empty() && !window.fits(cur.frames.len(), cur.crops.len(), crops) {
                out.extend(self.flush()?);
            }
        }
        let (w, h) = self.out_size;
        let cur = self.current.get_or_insert_with(|| self.pool.batch());
        cur.push_frame(frame, w, h, 3);
        if window.full(cur.frames.len(), cur.crops.len()) {
            out.extend(self.flush()?);
        }
        Ok(())
    }

    /// The closing rule of the open batch.
    fn window(&self) -> Window {
        Window {
            max_weight: self.config.max_crops,
            max_items: self.config.max_frames,
            max_wait: self.config.max_wait,
            budget: self.budget,
            interval: self.interval,
        }
    }

    /// When the open batch must be closed so its oldest frame can still make its budget.
    pub fn deadline(&self) -> Option<Instant> {
        let cur = self.current.as_ref()?;
        let oldest = cur.frames.first()?.times.arrival;
        let newest = cur.frames.last()?.times.arrival;
        let downstream = Duration::from_nanos(self.downstream.batch_ns.load(Ordering::Relaxed));
        Some(self.window().deadline(oldest, newest, downstream))
    }

    /// Close the open batch, if any, building its block metadata; blocks the system refuses
    /// memory for are the batch's error (its frames are dropped with it).
    pub fn flush(&mut self) -> Result<Option<CropBatch>, BatchError> {
        let Some(mut batch) = self.current.take() else {
            return Ok(None);
        };
        let (tile, per) = (self.config.tile_pixels, self.config.tiles_per_block);
        match self.config.input_per_block {
            Some(input) => batch.try_build_blocks_weighted(tile, per, input),
            None => batch.try_build_blocks(tile, per),
        }
        .map_err(|error| BatchError::Blocks {
            crops: batch.crops.len(),
            tile_pixels: tile,
            error,
        })?;
        Ok(Some(batch))
    }
}
