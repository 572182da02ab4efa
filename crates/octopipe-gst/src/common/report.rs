//! octopipe's budget report for a GStreamer pipeline: each octopipe element marks on the frame
//! meta when the frame came to the first of them and when each one was done with it; the
//! element that writes the objects out (`octojsonl`) records every frame's marks in octopipe's
//! own [`Budget`] and, at end of stream, posts its report (the one `octopipe run` prints: a row
//! per element with p50/p95/p99/max, frames over budget, objects) as an element message,
//! `octopipe-report`, whose `text` field holds it.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use octopipe_core::budget::{Budget, DEFAULT_BUDGET};
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
    pub(crate) fn finish(&mut self) -> Option<String> {
        let report = self.budget.as_mut()?.finish();
        Some(report.to_string())
    }
}
