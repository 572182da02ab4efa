//! octopipe's budget report for a GStreamer pipeline: each octopipe element marks on the frame
//! meta when the frame came to the first of them and when each one was done with it; the
//! element that writes the objects out (`octojsonl`) records every frame's marks in octopipe's
//! own [`Budget`] and, at end of stream, posts its report (what `octopipe run` prints: a row
//! per element with p50/p95/p99/max, frames over budget, objects) as an element message,
//! `octopipe-report`, one field per number ([`message`]), and logs its text.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use gstreamer as gst;
use octopipe_core::budget::{Budget, Report, Stats, DEFAULT_BUDGET};
use octopipe_core::frame::{Frame, FrameTimes};

/// The name of the end-of-stream report message.
pub(crate) const REPORT: &str = "octopipe-report";

/// The instant the marks count from (nanoseconds, in the frame meta), in this process.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `at` as nanoseconds since the epoch.
pub(crate) fn ns(at: Instant) -> u64 {
    at.saturating_duration_since(*EPOCH).as_nanos() as u64
}

/// The instant `ns` nanoseconds after the epoch.
pub(crate) fn instant(ns: u64) -> Instant {
    *EPOCH + Duration::from_nanos(ns)
}

/// When a frame came to the first octopipe element, and when each element was done with it.
#[derive(Debug, Clone)]
pub(crate) struct Marks {
    pub(crate) arrival: Instant,
    pub(crate) done: Vec<(String, Instant)>,
}

impl Marks {
    /// The marks as the frame meta holds them: `name=ns;name=ns`.
    pub(crate) fn text(&self) -> String {
        let marks: Vec<String> = self
            .done
            .iter()
            .map(|(n, at)| format!("{n}={}", ns(*at)))
            .collect();
        marks.join(";")
    }

    /// Marks read back from [`Marks::text`] (unreadable ones left out).
    pub(crate) fn parse(arrival: Instant, text: &str) -> Marks {
        let done = text
            .split(';')
            .filter_map(|m| m.split_once('='))
            .filter_map(|(n, v)| Some((n.to_string(), instant(v.parse().ok()?))))
            .collect();
        Marks { arrival, done }
    }
}

/// The report of the frames that passed the element: octopipe's budget, its rows the elements
/// the first frame passed.
#[derive(Default)]
pub(crate) struct Reporter {
    budget: Option<Budget>,
    rows: Vec<String>,
}

impl Reporter {
    /// Record `frame` (its objects, its stream) with its `marks`.
    pub(crate) fn record(&mut self, frame: &Frame, marks: &Marks) {
        let budget = self.budget.get_or_insert_with(|| {
            self.rows = marks.done.iter().map(|(n, _)| n.clone()).collect();
            Budget::new(DEFAULT_BUDGET, self.rows.clone())
        });
        let mut times = FrameTimes::new(marks.arrival);
        for (name, at) in &marks.done {
            if let Some(slot) = self.rows.iter().position(|r| r == name) {
                times.mark(slot as u16, *at);
            }
        }
        // The report reads the frame's objects and times, not its pixels or metadata.
        let mut counted = Frame::new(
            frame.stream,
            frame.seq,
            &frame.source,
            frame.layout,
            frame.colorimetry,
            octopipe_core::frame::PooledBuf::unpooled(Vec::new()),
        );
        counted.release_pixels();
        counted.detections = frame.detections.clone();
        counted.non_finite = frame.non_finite.clone();
        counted.reused = frame.reused.clone();
        counted.skipped = frame.skipped.clone();
        counted.times = times;
        if frame.detections.iter().any(|d| d.classification.is_some()) {
            budget.set_classifier();
        }
        budget.add_in(frame.stream);
        budget.record(&counted);
    }

    /// The report of the frames recorded (`None` when none came).
    pub(crate) fn finish(&mut self) -> Option<Report> {
        Some(self.budget.as_mut()?.finish())
    }
}

/// A list of `items` as a GStreamer array (`< a, b >` in `gst-launch-1.0 -m`'s output).
fn array<T: Into<gst::glib::Value> + Send>(items: impl IntoIterator<Item = T>) -> gst::Array {
    gst::Array::new(items)
}

/// The report as the fields of the `octopipe-report` message: one field per number (the
/// plugin's report has no queues, drops or sources of its own, so their columns are left out):
///
/// - `budget-ms`, `wall-ms`, `fps` (doubles); `frames-in`, `processed`, `over-budget` (uint64);
/// - `stages` (an array of the rows' names: each octopipe element, then `end-to-end`) and, in
///   the same order, `p50-ms`, `p95-ms`, `p99-ms`, `max-ms` (arrays of doubles);
/// - `objects-in`, `objects` (uint64), `classified` (boolean: a classifier ran), `skipped`
///   (uint64) and, when some were, `skipped-reasons` and `skipped-counts` (arrays);
///   `non-finite` and `reused` (uint64) when not zero;
/// - `notes` (an array of strings), the stages' own lines (the tracker's), when there are any.
pub(crate) fn message(report: &Report) -> gst::Structure {
    let rows: Vec<(&str, &Stats)> = report
        .stages
        .iter()
        .map(|(n, s)| (n.as_str(), s))
        .chain([("end-to-end", &report.total)])
        .collect();
    let column = |of: fn(&Stats) -> Duration| array(rows.iter().map(|(_, s)| ms(of(s))));
    let skipped: u64 = report.skipped.iter().map(|(_, n)| n).sum();
    let mut s = gst::Structure::builder(REPORT)
        .field("budget-ms", ms(report.budget))
        .field("wall-ms", ms(report.wall))
        .field("fps", report.fps())
        .field("frames-in", report.frames_in)
        .field("processed", report.processed)
        .field("over-budget", report.over_budget)
        .field("stages", array(rows.iter().map(|(n, _)| n.to_string())))
        .field("p50-ms", column(|s| s.p50))
        .field("p95-ms", column(|s| s.p95))
        .field("p99-ms", column(|s| s.p99))
        .field("max-ms", column(|s| s.max))
        .field(
            "objects-in",
            report.objects + report.reused + report.non_finite + skipped,
        )
        .field("objects", report.objects)
        .field("classified", report.classifier)
        .field("skipped", skipped);
    if !report.skipped.is_empty() {
        s = s
            .field(
                "skipped-reasons",
                array(report.skipped.iter().map(|(r, _)| r.clone())),
            )
            .field(
                "skipped-counts",
                array(report.skipped.iter().map(|(_, n)| *n)),
            );
    }
    for (name, n) in [("non-finite", report.non_finite), ("reused", report.reused)] {
        if n > 0 {
            s = s.field(name, n);
        }
    }
    let notes: Vec<String> = report.lines().map(str::to_string).collect();
    if !notes.is_empty() {
        s = s.field("notes", array(notes));
    }
    s.build()
}

/// `d` in milliseconds.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
