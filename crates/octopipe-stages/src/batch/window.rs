//! When a collection waiting for one call closes: by count, or by time. The batch stage collects
//! frames' crops for the preprocess and inference calls after it; the detect stage collects
//! frames' tiles (of every stream it serves) for one inference call. Both close the same way.

use std::time::{Duration, Instant};

/// The closing rule of a collection of items (frames), each of some weight (crops, tiles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Close once the items weigh this much; an item that would pass it starts the next
    /// collection (an item alone may weigh more).
    pub max_weight: usize,
    /// Close once it holds this many items.
    pub max_items: usize,
    /// Longest the first item may wait; `None`: half of what its budget leaves after the time
    /// the rest of the pipeline is expected to take.
    pub max_wait: Option<Duration>,
    /// The per-frame budget.
    pub budget: Duration,
    /// For a live source, the time between its frames: a collection is not held for a frame
    /// that cannot arrive before its deadline.
    pub interval: Option<Duration>,
}

impl Window {
    /// Whether an item of `weight` joins a collection of `items` items weighing `held`, rather
    /// than closing it first.
    pub fn fits(&self, items: usize, held: usize, weight: usize) -> bool {
        items == 0 || held + weight <= self.max_weight
    }

    /// Whether a collection of `items` items weighing `held` is full.
    pub fn full(&self, items: usize, held: usize) -> bool {
        held >= self.max_weight || items >= self.max_items
    }

    /// When a collection whose first item arrived at `oldest` and last at `newest` must close,
    /// given that the rest of the pipeline is expected to take `after`.
    pub fn deadline(&self, oldest: Instant, newest: Instant, after: Duration) -> Instant {
        let wait = self
            .max_wait
            .unwrap_or_else(|| self.budget.saturating_sub(after) / 2);
        let deadline = oldest + wait;
        match self.interval {
            // The next live frame comes too late to join: close now.
            Some(iv) if newest + iv > deadline => oldest,
            _ => deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_by_weight_count_and_time() {
        let w = Window {
            max_weight: 64,
            max_items: 8,
            max_wait: None,
            budget: Duration::from_millis(40),
            interval: None,
        };
        assert!(w.fits(0, 0, 100), "an item alone always fits");
        assert!(w.fits(5, 60, 4));
        assert!(!w.fits(5, 60, 5));
        assert!(w.full(1, 64) && w.full(8, 0) && !w.full(7, 63));
        let t = Instant::now();
        // Half of the 40 ms budget left after 10 ms downstream.
        assert_eq!(
            w.deadline(t, t, Duration::from_millis(10)),
            t + Duration::from_millis(15)
        );
        let live = Window {
            interval: Some(Duration::from_millis(33)),
            ..w
        };
        assert_eq!(
            live.deadline(t, t, Duration::ZERO),
            t,
            "no frame can join in time"
        );
        let fixed = Window {
            max_wait: Some(Duration::from_millis(5)),
            ..w
        };
        assert_eq!(
            fixed.deadline(t, t, Duration::ZERO),
            t + Duration::from_millis(5)
        );
    }
}
