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

mod gaps;
mod report;
mod section;
mod series;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::frame::{Frame, StageSlot};

pub use gaps::GapCounter;
pub use report::{Report, RunError, StageSplit, StreamReport};
pub use section::{Section, SectionKind, REPORT_VERSION};
pub use series::{Series, Stats};

/// Default budget: one frame at 30 fps.
pub const DEFAULT_BUDGET: Duration = Duration::from_nanos(33_333_333);

/// Collects per-frame timings and counts while a pipeline runs.
#[derive(Debug, Clone)]
pub struct Budget {
    budget: Duration,
    live: bool,
    classifier: bool,
    start: Instant,
    end: Option<Instant>,
    /// Report rows (stage names), by slot.
    rows: Vec<String>,
    /// Per-row series, by slot.
    stages: Vec<Series>,
    /// Per row, by slot: each frame's wait in the queue before the stage, its time in the stage
    /// after that, and the stage's calls' time (its busy time).
    split: Vec<Split>,
    streams: BTreeMap<u32, StreamAcc>,
    objects: u64,
    non_finite: u64,
    reused: u64,
    reused_unlabelled: u64,
    skipped: BTreeMap<String, u64>,
    actions: BTreeMap<String, u64>,
    sections: Vec<Section>,
    lines: Vec<String>,
}

/// One row's time apart: waiting in the queue before the stage, and working (see [`StageSplit`]).
#[derive(Debug, Default, Clone)]
struct Split {
    wait: Series,
    work: Series,
    busy: Duration,
}

#[derive(Debug, Default, Clone)]
struct StreamAcc {
    source: String,
    frames_in: u64,
    total: Series,
    /// How late each frame left its source: its first mark after its due time (live).
    behind: Series,
    over_budget: u64,
    dropped: BTreeMap<String, u64>,
    /// Frames that never entered: lost by the decoder (gaps in presentation time).
    lost: u64,
    /// What happened to its source (`reconnects`, `went quiet`), how often.
    events: BTreeMap<String, u64>,
    /// Damaged frames its source found (a cut or corrupt image, a frame the decoder concealed
    /// errors in), kept or skipped.
    damaged: u64,
    /// Of those, the ones left out (`on-damaged=skip`): not among the frames in.
    damaged_skipped: u64,
}

impl Budget {
    /// A fresh tracker for `budget` per frame, with a row per stage name in `rows` (a frame's
    /// marks name rows by their index).
    pub fn new(budget: Duration, rows: Vec<String>) -> Self {
        Budget {
            budget,
            live: false,
            classifier: false,
            start: Instant::now(),
            end: None,
            stages: vec![Series::default(); rows.len()],
            split: vec![Split::default(); rows.len()],
            rows,
            streams: BTreeMap::new(),
            objects: 0,
            non_finite: 0,
            reused: 0,
            reused_unlabelled: 0,
            skipped: BTreeMap::new(),
            actions: BTreeMap::new(),
            sections: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// Say whether a source is live (frames due at their time); from files and image folders
    /// the report shows latency over the budget as queueing, not as lateness.
    pub fn set_live(&mut self, live: bool) {
        self.live = live;
    }

    /// Say that the pipeline has a classifier (its stage does when it opens): the report then
    /// counts objects as classified.
    pub fn set_classifier(&mut self) {
        self.classifier = true;
    }

    /// Add a stage's typed section (its line in the text report, its fields in the JSON one).
    pub fn add_section<T: SectionKind>(&mut self, section: &T) {
        self.sections.push(Section::of(section));
    }

    /// The per-frame budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Set the report rows before the run records anything (a pipeline that takes streams while
    /// running has rows for the stages its streams may hold).
    pub fn set_rows(&mut self, rows: Vec<String>) {
        self.stages = vec![Series::default(); rows.len()];
        self.split = vec![Split::default(); rows.len()];
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

    /// Count a damaged frame of `stream` (a cut or corrupt image, a frame the decoder concealed
    /// errors in): passed on (it enters as any frame) or, with `skipped`, left out by its
    /// source (it never enters: not among the frames in, and not lost).
    pub fn damaged_frame(&mut self, stream: u32, skipped: bool) {
        let s = self.streams.entry(stream).or_default();
        s.damaged += 1;
        s.damaged_skipped += u64::from(skipped);
    }

    /// Whether `stream`'s source failed (the `failed` event).
    pub fn stream_failed(&self, stream: u32) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|s| s.events.contains_key("failed"))
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

    /// Add a free-text line to the report (a stage's results with fields of their own go in a
    /// typed section: [`Budget::add_section`]).
    pub fn add_line(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Add `d` to the busy time of the stage of row `slot` (the runner, after each call of a
    /// stage; a stage of several workers adds each call's share).
    pub fn add_busy(&mut self, slot: StageSlot, d: Duration) {
        if let Some(split) = self.split.get_mut(slot as usize) {
            split.busy += d;
        }
    }

    /// Count something a policy did (e.g. `predicted late, processed anyway`).
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
        let queued = frame.times.queued();
        for (slot, d) in frame.times.stages() {
            if let Some(series) = self.stages.get_mut(slot as usize) {
                series.push(d);
            }
            // A stage that took the frame from a queue: its wait there, and the rest of its
            // gap as its own (a source has no queue before it).
            let wait = queued.iter().find(|(s, _)| *s == slot).map(|(_, w)| *w);
            if let (Some(wait), Some(split)) = (wait, self.split.get_mut(slot as usize)) {
                split.wait.push(wait);
                split.work.push(d.saturating_sub(wait));
            }
        }
        if let Some(t) = frame.times.total() {
            let s = self.streams.entry(frame.stream).or_default();
            if let Some((_, late)) = frame.times.stages().next() {
                s.behind.push(late);
            }
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
                damaged: s.damaged,
                damaged_skipped: s.damaged_skipped,
                over_budget: s.over_budget,
                total: s.total.stats(),
                behind: self.live.then(|| s.behind.stats()),
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
            live: self.live,
            wall,
            frames_in: streams.iter().map(|s| s.frames_in).sum(),
            processed: all.count(),
            dropped: dropped.into_iter().collect(),
            lost: streams.iter().map(|s| s.lost).sum(),
            damaged: streams.iter().map(|s| s.damaged).sum(),
            damaged_skipped: streams.iter().map(|s| s.damaged_skipped).sum(),
            over_budget,
            stages: self
                .rows
                .iter()
                .zip(&mut self.stages)
                .filter(|(_, v)| v.count() > 0)
                .map(|(name, v)| (name.clone(), v.stats()))
                .collect(),
            split: self
                .rows
                .iter()
                .zip(&self.stages)
                .zip(&self.split)
                .filter(|((_, v), _)| v.count() > 0)
                .map(|((name, _), sp)| StageSplit {
                    stage: name.clone(),
                    queued: (sp.wait.count() > 0).then(|| sp.wait.stats()),
                    work: (sp.wait.count() > 0).then(|| sp.work.stats()),
                    busy: (sp.wait.count() > 0).then_some(sp.busy),
                })
                .collect(),
            error: None,
            not_written: Vec::new(),
            total: all.stats(),
            classifier: self.classifier,
            objects: self.objects,
            non_finite: self.non_finite,
            reused: self.reused,
            reused_unlabelled: self.reused_unlabelled,
            skipped: self.skipped.clone().into_iter().collect(),
            actions: self.actions.clone().into_iter().collect(),
            streams,
            sections: self.sections.clone(),
            extra: self.lines.clone(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// From files, latency over the budget is queueing (shown, not a failure); live, it is
    /// frames over budget and headroom. Without a classifier, objects are passed on, not
    /// classified. A prediction of lateness is worded as one.
    #[test]
    fn the_report_says_what_was_measured_and_nothing_else() {
        let mut b = Budget::new(DEFAULT_BUDGET, Vec::new());
        b.note("predicted late, processed anyway", 1);
        let mut r = b.finish();
        r.processed = 34;
        r.frames_in = 34;
        r.over_budget = 34;
        r.total.p99 = Duration::from_millis(1658);
        r.wall = Duration::from_secs(2);
        let text = r.to_string();
        assert!(!text.contains("over budget:"), "{text}");
        assert!(!text.contains("headroom"), "{text}");
        assert!(
            text.contains("throughput 17.0 fps over 2.00 s (0.57x the budget's 30.0 fps); end-to-end p99 1658.00 ms, 34 of 34 frames over 33.3 ms (queueing: not a failure from files)"),
            "{text}"
        );
        assert!(
            text.contains("objects: 0 in = 0 passed on (no classifier) + 0 skipped"),
            "{text}"
        );
        assert!(
            !text.contains("late-frame policy"),
            "from files a prediction that changed nothing is no line: {text}"
        );
        r.live = true;
        r.classifier = true;
        let text = r.to_string();
        assert!(
            text.contains("late-frame policy: predicted late, processed anyway: 1"),
            "{text}"
        );
        assert!(
            text.contains("over budget: 34 of 34 frames; headroom at p99: -1624.67 ms"),
            "{text}"
        );
        assert!(
            text.contains("objects: 0 in = 0 classified + 0 skipped"),
            "{text}"
        );
    }

    /// Issue 39: the report says where the time went: each stage's wait in its queue apart
    /// from its work, its busy share, the stage that bounds the run; live, how far a source
    /// fell behind its schedule; and no headroom when no frame was processed.
    #[test]
    fn the_report_names_the_bottleneck_and_the_time_apart() {
        use crate::frame::{Colorimetry, FrameLayout, PixelFormat, PooledBuf};
        let rows = vec!["decode".to_string(), "classify".to_string()];
        let mut b = Budget::new(DEFAULT_BUDGET, rows);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        for seq in 0..10u64 {
            let layout = FrameLayout::packed(PixelFormat::Rgb, 8, 8);
            let pixels = PooledBuf::unpooled(vec![0; layout.size()]);
            let mut f = Frame::new(0, seq, "t", layout, Colorimetry::default(), pixels);
            let due = t0 + ms(33 * seq);
            f.times = crate::frame::FrameTimes::new(due);
            f.times.mark(0, due + ms(2 * seq));
            f.times.took(1, due + ms(2 * seq + 310));
            f.times.mark(1, due + ms(2 * seq + 340));
            b.add_in(0);
            b.record(&f);
            b.add_busy(1, ms(30));
        }
        let mut r = b.finish();
        r.wall = ms(306);
        let text = r.to_string();
        assert!(
            text.contains("bottleneck: classify: 98% busy; frames waited 310 ms in its queue (p99; p50 310 ms)"),
            "{text}"
        );
        let row = text.lines().find(|l| l.starts_with("classify")).unwrap();
        assert!(
            row.ends_with("    30.00    310.00    310.00   98%"),
            "{row}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["version"], 3);
        assert_eq!(json["stages"][1]["queued"]["p50_ms"], 310.0, "{json}");
        assert_eq!(json["stages"][1]["work"]["p50_ms"], 30.0, "{json}");
        assert!(json["stages"][0]["busy_percent"].is_null(), "{json}");
        assert!(!text.contains("behind schedule"), "files: {text}");
        // Live: the source's lateness, the worst 18 ms.
        let mut live = Budget::new(DEFAULT_BUDGET, Vec::new());
        live.set_live(true);
        let r = {
            let mut b = b.clone();
            b.set_live(true);
            b.finish()
        };
        assert!(
            r.to_string()
                .contains("behind schedule: up to 18.0 ms (stream 0, p99 18.0 ms)"),
            "{r}"
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap()["streams"][0]["behind_schedule"]["max_ms"],
            18.0
        );
        // Nothing processed: no headroom (not the budget itself).
        live.add_in(0);
        let json = serde_json::to_value(live.finish()).unwrap();
        assert!(json["headroom_ms"].is_null(), "{json}");
        assert!(json["error"].is_null(), "{json}");
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
