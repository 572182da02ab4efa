//! Budget: every frame against 1/fps, per-stage latency percentiles, misses, headroom, accounting.
//!
//! ```text
//! octopipe run pipelines/visdrone-classify.pipe --set root=DIR --set model=M.onnx --budget-ms 33.3
//! ```
//!
//! Each frame carries the instant it arrived and the instant it passed every stage
//! ([`Mark`]). The stage time of a frame is the gap from its previous mark; its end-to-end
//! latency runs from arrival to the sink. A frame whose end-to-end latency exceeds the budget is
//! a miss; the headroom is the budget minus the p99 latency.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::frame::{Frame, Mark, SkipReason};

/// Default budget: one frame at 30 fps.
pub const DEFAULT_BUDGET: Duration = Duration::from_nanos(33_333_333);

/// Collects per-frame timings and counts while a pipeline runs.
#[derive(Debug)]
pub struct Budget {
    budget: Duration,
    start: Instant,
    end: Option<Instant>,
    stages: BTreeMap<Mark, Vec<Duration>>,
    total: Vec<Duration>,
    frames_in: u64,
    dropped: BTreeMap<String, u64>,
    objects: u64,
    skipped: BTreeMap<SkipReason, u64>,
}

impl Budget {
    /// A fresh tracker for `budget` per frame.
    pub fn new(budget: Duration) -> Self {
        Budget {
            budget,
            start: Instant::now(),
            end: None,
            stages: BTreeMap::new(),
            total: Vec::new(),
            frames_in: 0,
            dropped: BTreeMap::new(),
            objects: 0,
            skipped: BTreeMap::new(),
        }
    }

    /// The per-frame budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Count frames that entered the pipeline.
    pub fn add_in(&mut self, n: u64) {
        self.frames_in += n;
    }

    /// Count frames dropped for `reason`.
    pub fn drop_frames(&mut self, reason: &str, n: u64) {
        if n > 0 {
            *self.dropped.entry(reason.to_string()).or_default() += n;
        }
    }

    /// Record a frame that went all the way through.
    pub fn record(&mut self, frame: &Frame) {
        for mark in Mark::ALL {
            if let Some(d) = frame.times.stage(mark) {
                self.stages.entry(mark).or_default().push(d);
            }
        }
        if let Some(t) = frame.times.total() {
            self.total.push(t);
        }
        self.objects += frame.detections.len() as u64;
        for (reason, n) in &frame.skipped {
            *self.skipped.entry(*reason).or_default() += *n as u64;
        }
    }

    /// Frames recorded so far.
    pub fn processed(&self) -> u64 {
        self.total.len() as u64
    }

    /// Stop the clock and summarise.
    pub fn finish(&mut self) -> Report {
        let end = *self.end.get_or_insert_with(Instant::now);
        let wall = end.saturating_duration_since(self.start);
        let processed = self.processed();
        let accounted = processed + self.dropped.values().sum::<u64>();
        if self.frames_in > accounted {
            // Frames in flight when a stage failed: say so rather than lose them silently.
            self.drop_frames("in flight at shutdown", self.frames_in - accounted);
        }
        let total = Stats::of(&mut self.total);
        Report {
            budget: self.budget,
            wall,
            frames_in: self.frames_in,
            processed,
            dropped: self.dropped.clone().into_iter().collect(),
            over_budget: self.total.iter().filter(|t| **t > self.budget).count() as u64,
            stages: self
                .stages
                .iter_mut()
                .map(|(m, v)| (m.name(), Stats::of(v)))
                .collect(),
            total,
            objects: self.objects,
            skipped: self.skipped.iter().map(|(r, n)| (r.name(), *n)).collect(),
        }
    }
}

/// Percentiles of a set of durations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

impl Stats {
    /// Summarise `v` (sorted in place). Percentiles are nearest-rank.
    pub fn of(v: &mut [Duration]) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable();
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Stats {
            count: v.len(),
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// End-of-run summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Budget per frame.
    pub budget: Duration,
    /// Wall time of the run.
    pub wall: Duration,
    /// Frames that entered.
    pub frames_in: u64,
    /// Frames that reached the sink.
    pub processed: u64,
    /// Frames dropped, by reason.
    pub dropped: Vec<(String, u64)>,
    /// Processed frames whose end-to-end latency exceeded the budget.
    pub over_budget: u64,
    /// Per-stage time, in pipeline order.
    pub stages: Vec<(&'static str, Stats)>,
    /// End-to-end latency (arrival to sink).
    pub total: Stats,
    /// Objects classified.
    pub objects: u64,
    /// Boxes not classified, by reason.
    pub skipped: Vec<(&'static str, u64)>,
}

impl Report {
    /// Frames dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }

    /// Budget minus p99 end-to-end latency, in ms (negative: over budget).
    pub fn headroom_ms(&self) -> f64 {
        ms(self.budget) - ms(self.total.p99)
    }

    /// Processed frames per second of wall time.
    pub fn fps(&self) -> f64 {
        self.processed as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "budget {:.1} ms/frame ({:.1} fps)",
            ms(self.budget),
            1.0 / self.budget.as_secs_f64()
        )?;
        writeln!(
            f,
            "{:<12} {:>9} {:>9} {:>9} {:>9}",
            "stage (ms)", "p50", "p95", "p99", "max"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, s: &Stats| {
            writeln!(
                f,
                "{:<12} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                name,
                ms(s.p50),
                ms(s.p95),
                ms(s.p99),
                ms(s.max)
            )
        };
        for (name, s) in &self.stages {
            row(f, name, s)?;
        }
        row(f, "end-to-end", &self.total)?;
        writeln!(
            f,
            "frames: {} in = {} processed + {} dropped{}",
            self.frames_in,
            self.processed,
            self.dropped_total(),
            list(&self.dropped)
        )?;
        writeln!(
            f,
            "over budget: {} of {} frames; headroom at p99: {:+.2} ms; throughput {:.1} fps over {:.2} s",
            self.over_budget,
            self.processed,
            self.headroom_ms(),
            self.fps(),
            self.wall.as_secs_f64()
        )?;
        let skipped: u64 = self.skipped.iter().map(|(_, n)| n).sum();
        write!(
            f,
            "objects: {} in = {} classified + {} skipped{}",
            self.objects + skipped,
            self.objects,
            skipped,
            list(&self.skipped)
        )
    }
}

fn list<S: fmt::Display>(items: &[(S, u64)]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = items.iter().map(|(r, n)| format!("{r}: {n}")).collect();
    format!(" ({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Stats::of(&mut v);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p95, Duration::from_millis(95));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(Stats::of(&mut []).count, 0);
    }

    #[test]
    fn unaccounted_frames_are_reported_as_dropped() {
        let mut b = Budget::new(DEFAULT_BUDGET);
        b.add_in(5);
        b.drop_frames("late", 1);
        let r = b.finish();
        assert_eq!(r.frames_in, 5);
        assert_eq!(r.processed + r.dropped_total(), 5);
        assert!(
            r.to_string()
                .contains("5 in = 0 processed + 5 dropped (in flight at shutdown: 4, late: 1)"),
            "{r}"
        );
    }
}
