//! Collecting frames into batches, against the frames' remaining budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{BatchConfig, BatchPool, CropBatch};
use crate::frame::Frame;

/// Runtime state of the batch stage.
pub struct Assembler {
    config: BatchConfig,
    out_size: (u32, u32),
    pool: BatchPool,
    current: Option<CropBatch>,
    budget: Duration,
    downstream: Arc<AtomicU64>,
    interval: Option<Duration>,
}

impl Assembler {
    /// An assembler making `out_size` crops. `downstream` holds the current estimate (ns) of the
    /// time from batching to the sink, which the runner keeps up to date; a frame waits for others
    /// only while `budget` minus that estimate allows. For a live source, `interval` is the time
    /// between frames: a batch is not held for a frame that cannot arrive before its deadline.
    pub fn new(
        config: BatchConfig,
        out_size: (u32, u32),
        budget: Duration,
        downstream: Arc<AtomicU64>,
        interval: Option<Duration>,
    ) -> Self {
        Assembler {
            config,
            out_size,
            pool: BatchPool::new(),
            current: None,
            budget,
            downstream,
            interval,
        }
    }

    /// Add a frame; full batches are appended to `out`.
    pub fn push(&mut self, frame: Frame, out: &mut Vec<CropBatch>) {
        let crops = frame.detections.len();
        if let Some(cur) = &self.current {
            if !cur.crops.is_empty() && cur.crops.len() + crops > self.config.max_crops {
                out.extend(self.flush());
            }
        }
        let (w, h) = self.out_size;
        let cur = self.current.get_or_insert_with(|| self.pool.batch());
        cur.push_frame(frame, w, h, 3);
        if cur.crops.len() >= self.config.max_crops || cur.frames.len() >= self.config.max_frames {
            out.extend(self.flush());
        }
    }

    /// When the open batch must be closed so its oldest frame can still make its budget.
    pub fn deadline(&self) -> Option<Instant> {
        let cur = self.current.as_ref()?;
        let oldest = cur.frames.first()?.times.arrival;
        let wait = self.config.max_wait.unwrap_or_else(|| {
            let downstream = Duration::from_nanos(self.downstream.load(Ordering::Relaxed));
            self.budget.saturating_sub(downstream) / 2
        });
        let deadline = oldest + wait;
        match (self.interval, cur.frames.last()) {
            // The next live frame comes too late to join: close now.
            (Some(iv), Some(newest)) if newest.times.arrival + iv > deadline => Some(oldest),
            _ => Some(deadline),
        }
    }

    /// Close the open batch, if any, building its block metadata.
    pub fn flush(&mut self) -> Option<CropBatch> {
        let mut batch = self.current.take()?;
        batch.build_blocks(self.config.tile_pixels, self.config.tiles_per_block);
        Some(batch)
    }
}
