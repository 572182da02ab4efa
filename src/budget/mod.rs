//! Budget: every frame against 1/fps, per-stage latency percentiles, misses, headroom, accounting.
//!
//! ```text
//! octopipe run pipelines/visdrone-classify.pipe --set root=DIR --set model=M.onnx --budget-ms 33.3
//! ```
//!
//! Each frame carries the instant it arrived and the instant it passed every stage
//! ([`FrameTimes`](crate::frame::FrameTimes)), by the stage's row in the report. The stage time of a frame is the gap from its previous mark; its end-to-end
//! latency runs from arrival to the sink. A frame whose end-to-end latency exceeds the budget is
//! a miss; the headroom is the budget minus the p99 latency.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::frame::Frame;

/// Default budget: one frame at 30 fps.
pub const DEFAULT_BUDGET: Duration = Duration::from_nanos(33_333_333);

/// Collects per-frame timings and counts while a pipeline runs.
#[derive(Debug, Clone)]
pub struct Budget {
    budget: Duration,
    start: Instant,
    end: Option<Instant>,
    /// Report rows (stage names), by slot.
    rows: Vec<String>,
    /// Per-row series, by slot.
    stages: Vec<Series>,
    streams: BTreeMap<u32, StreamAcc>,
    objects: u64,
    non_finite: u64,
    reused: u64,
    reused_unlabelled: u64,
    skipped: BTreeMap<String, u64>,
    actions: BTreeMap<String, u64>,
    lines: Vec<String>,
}

#[derive(Debug, Default, Clone)]
struct StreamAcc {
    source: String,
    frames_in: u64,
    total: Series,
    over_budget: u64,
    dropped: BTreeMap<String, u64>,
    /// Frames that never entered: lost by the decoder (gaps in presentation time).
    lost: u64,
    /// What happened to its source (`reconnects`, `went quiet`), how often.
    events: BTreeMap<String, u64>,
}

impl Budget {
    /// A fresh tracker for `budget` per frame, with a row per stage name in `rows` (a frame's
    /// marks name rows by their index).
    pub fn new(budget: Duration, rows: Vec<String>) -> Self {
        Budget {
            budget,
            start: Instant::now(),
            end: None,
            stages: vec![Series::default(); rows.len()],
            rows,
            streams: BTreeMap::new(),
            objects: 0,
            non_finite: 0,
            reused: 0,
            reused_unlabelled: 0,
            skipped: BTreeMap::new(),
            actions: BTreeMap::new(),
            lines: Vec::new(),
        }
    }

    /// The per-frame budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Set the report rows before the run records anything (a pipeline that takes streams while
    /// running has rows for the stages its streams may hold).
    pub fn set_rows(&mut self, rows: Vec<String>) {
        self.stages = vec![Series::default(); rows.len()];
        self.rows = rows;
    }

    /// Stream `stream`'s frames so far: in, processed, dropped.
    pub fn stream_counts(&self, stream: u32) -> (u64, u64, u64) {
        self.streams.get(&stream).map_or((0, 0, 0), |s| {
            (s.frames_in, s.total.count(), s.dropped.values().sum())
        })
    }

    /// Restart the wall clock: the run starts now (the stages opened before it).
    pub fn start_now(&mut self) {
        self.start = Instant::now();
    }

    /// Name stream `stream` (its source) for the report.
    pub fn name_stream(&mut self, stream: u32, source: &str) {
        self.streams.entry(stream).or_default().source = source.to_string();
    }

    /// Count a frame that entered the pipeline on `stream`.
    pub fn add_in(&mut self, stream: u32) {
        self.streams.entry(stream).or_default().frames_in += 1;
    }

    /// Count a frame of `stream` dropped for `reason`; its `objects` boxes count as skipped.
    pub fn drop_frame(&mut self, stream: u32, reason: &str, objects: u64) {
        *self
            .streams
            .entry(stream)
            .or_default()
            .dropped
            .entry(reason.to_string())
            .or_default() += 1;
        self.drop_boxes(reason, objects);
    }

    /// Count `objects` boxes skipped because the frame (or the part of a frame) that carried them
    /// was dropped for `reason`; the frame itself is counted by [`Budget::drop_frame`].
    pub fn drop_boxes(&mut self, reason: &str, objects: u64) {
        if objects > 0 {
            *self
                .skipped
                .entry(format!("frame dropped ({reason})"))
                .or_default() += objects;
        }
    }

    /// Count `n` frames of `stream` that never entered the pipeline: the decoder lost or
    /// concealed them (a gap in presentation time). They are not among the frames in, processed
    /// or dropped; the report gives them a line of their own.
    pub fn lose_frames(&mut self, stream: u32, n: u64) {
        self.streams.entry(stream).or_default().lost += n;
    }

    /// Count an event of stream `stream`'s source (`reconnects`, `went quiet`): the report shows
    /// each stream's events on a `source N:` line.
    pub fn source_event(&mut self, stream: u32, event: &str) {
        *self
            .streams
            .entry(stream)
            .or_default()
            .events
            .entry(event.to_string())
            .or_default() += 1;
    }

    /// Count every frame that entered but was neither recorded nor dropped yet as dropped for
    /// `reason` (a run that stopped waiting for the work in flight: `in flight at stop`).
    pub fn drop_in_flight(&mut self, reason: &str) {
        for s in self.streams.values_mut() {
            let accounted = s.total.count() + s.dropped.values().sum::<u64>();
            if s.frames_in > accounted {
                *s.dropped.entry(reason.to_string()).or_default() += s.frames_in - accounted;
            }
        }
    }

    /// Add a line to the report.
    pub fn add_line(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Count something a policy did (e.g. `late frames processed`).
    pub fn note(&mut self, action: &str, n: u64) {
        *self.actions.entry(action.to_string()).or_default() += n;
    }

    /// Record a frame that went all the way through: its objects, and (at its last part, for a
    /// frame whose boxes travelled in several batches) the frame itself with its latency.
    pub fn record(&mut self, frame: &Frame) {
        let non_finite = frame.non_finite.len() as u64;
        let reused = frame.reused.len() as u64;
        let unlabelled = frame
            .reused
            .iter()
            .filter(|&&i| {
                frame
                    .detections
                    .get(i as usize)
                    .is_some_and(|d| d.classification.is_none())
            })
            .count() as u64;
        self.objects += (frame.detections.len() as u64).saturating_sub(non_finite + reused);
        self.non_finite += non_finite;
        self.reused += reused;
        self.reused_unlabelled += unlabelled;
        for (reason, n) in &frame.skipped {
            *self.skipped.entry(reason.name().to_string()).or_default() += *n as u64;
        }
        if !frame.part.is_last() {
            return;
        }
        for (slot, d) in frame.times.stages() {
            if let Some(series) = self.stages.get_mut(slot as usize) {
                series.push(d);
            }
        }
        if let Some(t) = frame.times.total() {
            let s = self.streams.entry(frame.stream).or_default();
            s.total.push(t);
            s.over_budget += u64::from(t > self.budget);
        }
    }

    /// Frames recorded so far.
    pub fn processed(&self) -> u64 {
        self.streams.values().map(|s| s.total.count()).sum()
    }

    /// Stop the clock and summarise.
    pub fn finish(&mut self) -> Report {
        let end = *self.end.get_or_insert_with(Instant::now);
        let wall = end.saturating_duration_since(self.start);
        let budget = self.budget;
        let mut all = Series::default();
        let mut streams = Vec::new();
        for (id, s) in &mut self.streams {
            let accounted = s.total.count() + s.dropped.values().sum::<u64>();
            if s.frames_in > accounted {
                // Frames in flight when a stage failed: say so rather than lose them silently.
                *s.dropped.entry("in flight at shutdown".into()).or_default() +=
                    s.frames_in - accounted;
            }
            all.merge(&s.total);
            streams.push(StreamReport {
                stream: *id,
                source: s.source.clone(),
                frames_in: s.frames_in,
                processed: s.total.count(),
                dropped: s.dropped.clone().into_iter().collect(),
                lost: s.lost,
                over_budget: s.over_budget,
                total: s.total.stats(),
                events: s.events.clone().into_iter().collect(),
            });
        }
        let over_budget = streams.iter().map(|s| s.over_budget).sum();
        let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
        for s in &streams {
            for (r, n) in &s.dropped {
                *dropped.entry(r.clone()).or_default() += n;
            }
        }
        Report {
            budget,
            wall,
            frames_in: streams.iter().map(|s| s.frames_in).sum(),
            processed: all.count(),
            dropped: dropped.into_iter().collect(),
            lost: streams.iter().map(|s| s.lost).sum(),
            over_budget,
            stages: self
                .rows
                .iter()
                .zip(&mut self.stages)
                .filter(|(_, v)| v.count() > 0)
                .map(|(name, v)| (name.clone(), v.stats()))
                .collect(),
            total: all.stats(),
            objects: self.objects,
            non_finite: self.non_finite,
            reused: self.reused,
            reused_unlabelled: self.reused_unlabelled,
            skipped: self.skipped.clone().into_iter().collect(),
            actions: self.actions.clone().into_iter().collect(),
            streams,
            extra: self.lines.clone(),
        }
    }
}

/// Durations kept exactly up to [`Series::EXACT`] samples, then in a log histogram (128 buckets
/// per octave: percentiles within 0.8%), so a run of any length holds bounded memory.
#[derive(Debug, Clone, Default)]
pub struct Series {
    exact: Vec<Duration>,
    /// Counts per bucket once the exact samples were folded in.
    hist: Vec<u64>,
    count: u64,
    max: Duration,
}

impl Series {
    /// Samples kept exactly.
    pub const EXACT: usize = 10_000;
    const SUB: u32 = 7;

    fn bucket(ns: u64) -> usize {
        let ns = ns.max(1);
        let octave = 63 - ns.leading_zeros();
        let mask = (1u64 << Self::SUB) - 1;
        let sub = if octave >= Self::SUB {
            (ns >> (octave - Self::SUB)) & mask
        } else {
            (ns << (Self::SUB - octave)) & mask
        };
        ((octave as usize) << Self::SUB) | sub as usize
    }

    /// The smallest duration of bucket `b`.
    fn floor(b: usize) -> Duration {
        let octave = (b >> Self::SUB) as u32;
        let mantissa = (1u64 << Self::SUB) | (b as u64 & ((1 << Self::SUB) - 1));
        let ns = if octave >= Self::SUB {
            mantissa << (octave - Self::SUB)
        } else {
            mantissa >> (Self::SUB - octave)
        };
        Duration::from_nanos(ns)
    }

    fn fold(&mut self, d: Duration) {
        let b = Self::bucket(d.as_nanos().min(u64::MAX as u128) as u64);
        if self.hist.len() <= b {
            self.hist.resize(b + 1, 0);
        }
        self.hist[b] += 1;
    }

    /// Add a sample.
    pub fn push(&mut self, d: Duration) {
        self.count += 1;
        self.max = self.max.max(d);
        if self.hist.is_empty() && self.exact.len() < Self::EXACT {
            self.exact.push(d);
            return;
        }
        for e in std::mem::take(&mut self.exact) {
            self.fold(e);
        }
        self.fold(d);
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &Series) {
        for d in &other.exact {
            self.push(*d);
        }
        if !other.hist.is_empty() {
            for e in std::mem::take(&mut self.exact) {
                self.fold(e);
            }
            if self.hist.len() < other.hist.len() {
                self.hist.resize(other.hist.len(), 0);
            }
            for (a, b) in self.hist.iter_mut().zip(&other.hist) {
                *a += b;
            }
            self.count += other.hist.iter().sum::<u64>();
            self.max = self.max.max(other.max);
        }
    }

    /// Samples added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Percentiles: exact while the samples are kept, else to the histogram's precision.
    pub fn stats(&self) -> Stats {
        if self.hist.is_empty() {
            return Stats::of(&mut self.exact.clone());
        }
        let rank = |p: f64| {
            let want = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
            let mut seen = 0;
            for (b, n) in self.hist.iter().enumerate() {
                seen += n;
                if seen >= want {
                    return Self::floor(b).min(self.max);
                }
            }
            self.max
        };
        Stats {
            count: self.count as usize,
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            max: self.max,
        }
    }
}

/// Percentiles of a set of durations (serialized in milliseconds: `p50_ms`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Samples.
    pub count: usize,
    /// Median.
    #[serde(rename = "p50_ms", serialize_with = "ser_ms")]
    pub p50: Duration,
    /// 95th percentile.
    #[serde(rename = "p95_ms", serialize_with = "ser_ms")]
    pub p95: Duration,
    /// 99th percentile.
    #[serde(rename = "p99_ms", serialize_with = "ser_ms")]
    pub p99: Duration,
    /// Largest.
    #[serde(rename = "max_ms", serialize_with = "ser_ms")]
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
    /// Frames lost by the decoder (gaps in presentation time): they never entered, so they are
    /// not among `frames_in`.
    pub lost: u64,
    /// Processed frames whose end-to-end latency exceeded the budget.
    pub over_budget: u64,
    /// Per-stage time, in pipeline order.
    pub stages: Vec<(String, Stats)>,
    /// End-to-end latency (arrival to sink).
    pub total: Stats,
    /// Objects classified (a crop of each went through the classifier).
    pub objects: u64,
    /// Objects the classifier ran on whose output was not finite (NaN or infinite logits),
    /// written flagged with no label (`classify non-finite=flag`).
    pub non_finite: u64,
    /// Objects that took their track's last label with no crop made (`classify
    /// reinfer-interval`).
    pub reused: u64,
    /// Of those, the ones whose track had no label to give (its crop's logits were not finite,
    /// or the batch carrying it was dropped): written with no label.
    pub reused_unlabelled: u64,
    /// Boxes not classified, by reason.
    pub skipped: Vec<(String, u64)>,
    /// What the late-frame policy did, and how often.
    pub actions: Vec<(String, u64)>,
    /// Per-stream accounting and latency.
    pub streams: Vec<StreamReport>,
    /// Further lines from observers (energy, files written, ...).
    pub extra: Vec<String>,
}

/// One stream's part of a [`Report`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StreamReport {
    /// Stream id.
    pub stream: u32,
    /// Its source, as named in frames.
    pub source: String,
    /// Frames that entered.
    pub frames_in: u64,
    /// Frames that reached the sink.
    pub processed: u64,
    /// Frames dropped, by reason.
    #[serde(serialize_with = "ser_counts")]
    pub dropped: Vec<(String, u64)>,
    /// Frames lost by the decoder (gaps in presentation time), not among `frames_in`.
    pub lost: u64,
    /// Processed frames over budget.
    pub over_budget: u64,
    /// End-to-end latency.
    pub total: Stats,
    /// What happened to its source, how often (`reconnects`, `went quiet`).
    #[serde(serialize_with = "ser_counts")]
    pub events: Vec<(String, u64)>,
}

impl StreamReport {
    /// Frames dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }
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

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms(*d))
}

/// `[(name, n)]` as a JSON object, in order.
fn ser_counts<S: serde::Serializer, K: AsRef<str>>(
    v: &[(K, u64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, n)| (k.as_ref(), n)))
}

/// The report as one JSON object (`octopipe run --report json`): durations in milliseconds
/// (`budget_ms`, `wall_ms`, `p50_ms`, ...), counts by reason as objects, stages in pipeline
/// order, plus the derived `dropped_total`, `headroom_ms` and `fps`.
impl serde::Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Counts<'a, K>(&'a [(K, u64)]);
        impl<K: AsRef<str>> serde::Serialize for Counts<'_, K> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                ser_counts(self.0, s)
            }
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("budget_ms", &ms(self.budget))?;
        m.serialize_entry("wall_ms", &ms(self.wall))?;
        m.serialize_entry("frames_in", &self.frames_in)?;
        m.serialize_entry("processed", &self.processed)?;
        m.serialize_entry("dropped_total", &self.dropped_total())?;
        m.serialize_entry("dropped", &Counts(&self.dropped))?;
        m.serialize_entry("lost", &self.lost)?;
        m.serialize_entry("over_budget", &self.over_budget)?;
        m.serialize_entry("headroom_ms", &self.headroom_ms())?;
        m.serialize_entry("fps", &self.fps())?;
        let stages: Vec<_> = self
            .stages
            .iter()
            .map(|(name, st)| StageRow {
                stage: name,
                stats: st,
            })
            .collect();
        m.serialize_entry("stages", &stages)?;
        m.serialize_entry("total", &self.total)?;
        m.serialize_entry("objects", &self.objects)?;
        m.serialize_entry("non_finite", &self.non_finite)?;
        m.serialize_entry("reused", &self.reused)?;
        m.serialize_entry("reused_unlabelled", &self.reused_unlabelled)?;
        m.serialize_entry("skipped", &Counts(&self.skipped))?;
        m.serialize_entry("actions", &Counts(&self.actions))?;
        m.serialize_entry("streams", &self.streams)?;
        m.serialize_entry("extra", &self.extra)?;
        m.end()
    }
}

#[derive(serde::Serialize)]
struct StageRow<'a> {
    stage: &'a str,
    #[serde(flatten)]
    stats: &'a Stats,
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
        if self.lost > 0 {
            writeln!(
                f,
                "lost by the decoder: {} frame{} (gaps in presentation time; not among the frames in)",
                self.lost,
                if self.lost == 1 { "" } else { "s" }
            )?;
        }
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
        // Objects whose classifier output was not finite are neither classified nor skipped.
        let non_finite = match self.non_finite {
            0 => String::new(),
            n => format!(" + {n} non-finite"),
        };
        // Objects that took their track's label with no crop made (reinfer-interval).
        let reused = match (self.reused, self.reused_unlabelled) {
            (0, _) => String::new(),
            (r, 0) => format!(" + {r} reused"),
            (r, u) => format!(
                " + {r} reused ({u} with no label: their track's last crop was not classified)"
            ),
        };
        write!(
            f,
            "objects: {} in = {} classified{reused}{non_finite} + {} skipped{}",
            self.objects + self.reused + self.non_finite + skipped,
            self.objects,
            skipped,
            list(&self.skipped)
        )?;
        for (action, n) in &self.actions {
            write!(f, "\nlate-frame policy: {action}: {n}")?;
        }
        if self.streams.len() > 1 {
            write!(
                f,
                "\n{:<6} {:>6} {:>9} {:>8} {:>6} {:>9} {:>9}  source",
                "stream", "in", "processed", "dropped", "over", "p50 ms", "p99 ms"
            )?;
            for s in &self.streams {
                write!(
                    f,
                    "\n{:<6} {:>6} {:>9} {:>8} {:>6} {:>9.2} {:>9.2}  {}",
                    s.stream,
                    s.frames_in,
                    s.processed,
                    s.dropped_total(),
                    s.over_budget,
                    ms(s.total.p50),
                    ms(s.total.p99),
                    s.source
                )?;
            }
        }
        for s in self.streams.iter().filter(|s| !s.events.is_empty()) {
            let events: Vec<String> = s.events.iter().map(|(e, n)| format!("{e}: {n}")).collect();
            write!(f, "\nsource {}: {}", s.stream, events.join(", "))?;
        }
        for line in &self.extra {
            write!(f, "\n{line}")?;
        }
        Ok(())
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
    fn long_series_keep_bounded_memory_and_close_percentiles() {
        let mut s = Series::default();
        for i in 1..=100_000u64 {
            s.push(Duration::from_micros(i));
        }
        assert!(
            s.exact.is_empty() && s.hist.len() < 4096,
            "{}",
            s.hist.len()
        );
        let st = s.stats();
        assert_eq!(
            (st.count, st.max),
            (100_000, Duration::from_micros(100_000))
        );
        for (got, want) in [(st.p50, 50_000.0), (st.p95, 95_000.0), (st.p99, 99_000.0)] {
            let got = got.as_secs_f64() * 1e6;
            assert!((got - want).abs() / want < 0.01, "{got} vs {want}");
        }
        let mut short = Series::default();
        (1..=100).for_each(|i| short.push(Duration::from_millis(i)));
        let mut merged = Series::default();
        merged.merge(&short);
        merged.merge(&s);
        assert_eq!(merged.count(), 100_100);
        assert_eq!(
            short.stats().p50,
            Duration::from_millis(50),
            "exact while small"
        );
    }

    #[test]
    fn unaccounted_frames_are_reported_as_dropped() {
        let mut b = Budget::new(DEFAULT_BUDGET, Vec::new());
        for _ in 0..5 {
            b.add_in(0);
        }
        b.drop_frame(0, "late", 0);
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

/// A [`Budget`] shared by the threads of a run: sources count frames in, stages count drops and
/// policy actions, the collector records finished frames.
#[derive(Clone)]
pub struct Tally(std::sync::Arc<std::sync::Mutex<Budget>>);

impl Tally {
    /// Share `budget`.
    pub fn new(budget: Budget) -> Self {
        Tally(std::sync::Arc::new(std::sync::Mutex::new(budget)))
    }

    /// Run `f` on the budget (nothing if a thread panicked while holding it).
    pub fn with<R>(&self, f: impl FnOnce(&mut Budget) -> R) -> Option<R> {
        self.0.lock().ok().map(|mut b| f(&mut b))
    }
}
