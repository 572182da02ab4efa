//! Frames that went missing upstream, counted from the end of the pipeline ([`GapCounter`]):
//! the progress line and the metrics show them.

use std::collections::HashMap;

use crate::crops::CropBatch;

/// Frames that went missing upstream, seen from the end of the pipeline: per stream, the gaps in
/// frame numbers (`seq`) of the frames that arrived. Frames dropped by a live source or by the
/// late-frame policy leave such gaps; drops after the last frame seen are not visible until the
/// report.
#[derive(Debug, Default, Clone)]
pub struct GapCounter {
    streams: HashMap<u32, (u64, u64)>,
}

impl GapCounter {
    /// Account for the frames of `batch`.
    pub fn add(&mut self, batch: &CropBatch) {
        // A frame in parts is seen once, with its last part.
        for f in batch.frames.iter().filter(|f| f.part.is_last()) {
            let (next, seen) = self.streams.entry(f.stream).or_default();
            *next = (*next).max(f.seq + 1);
            *seen += 1;
        }
    }

    /// Frames of `stream` not seen below the highest frame number seen.
    pub fn missing(&self, stream: u32) -> u64 {
        self.streams
            .get(&stream)
            .map(|(next, seen)| next.saturating_sub(*seen))
            .unwrap_or(0)
    }

    /// All streams' missing frames.
    pub fn total(&self) -> u64 {
        self.streams.keys().map(|s| self.missing(*s)).sum()
    }
}
