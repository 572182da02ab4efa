//! What the runner tells the batch stage about the time after it ([`Downstream`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Running estimates of the time from batching to the sink, kept by the runner (nanoseconds):
/// per batch (fixed part) and per crop.
#[derive(Debug)]
pub struct Downstream {
    /// Time from batching to the sink of a whole batch.
    pub batch_ns: AtomicU64,
    /// Of which, per crop.
    pub crop_ns: AtomicU64,
    /// When the last batch was observed (ns since `epoch`).
    seen_ns: AtomicU64,
    epoch: Instant,
    /// Estimates older than this are not trusted (a policy that drops every frame would
    /// otherwise never see the pipeline recover).
    stale_after: Duration,
}

impl Downstream {
    /// No estimates yet; estimates are trusted for `stale_after` after the batch they come from.
    pub fn new(stale_after: Duration) -> Self {
        Downstream {
            batch_ns: AtomicU64::new(0),
            crop_ns: AtomicU64::new(0),
            seen_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            stale_after,
        }
    }

    /// Fold in one batch of `crops` crops that took `took` from batching to the sink.
    pub fn observe(&self, took: Duration, crops: usize) {
        self.seen_ns
            .store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let ema = |a: &AtomicU64, now: u64| {
            let old = a.load(Ordering::Relaxed);
            a.store(
                if old == 0 { now } else { (old * 7 + now) / 8 },
                Ordering::Relaxed,
            );
        };
        let ns = took.as_nanos() as u64;
        ema(&self.batch_ns, ns);
        if crops > 0 {
            ema(&self.crop_ns, ns / crops as u64);
        }
    }

    /// Predicted batch-to-sink time of a batch of `crops` crops, from recent observations only.
    pub fn predict(&self, crops: usize) -> Option<Duration> {
        let seen = Duration::from_nanos(self.seen_ns.load(Ordering::Relaxed));
        let fresh = self.batch_ns.load(Ordering::Relaxed) > 0
            && self.epoch.elapsed() < seen + self.stale_after;
        let per_crop = self.crop_ns.load(Ordering::Relaxed);
        fresh.then(|| Duration::from_nanos(per_crop * crops.max(1) as u64))
    }
}
