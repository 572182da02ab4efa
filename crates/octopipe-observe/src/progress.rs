//! Live progress: fps, frames (of the total and the percentage done, when the sources know their
//! length), objects, p99 end-to-end latency against the budget, drops.
//!
//! ```text
//! progress    2.0 s: frames 60/90 (66%) at 30.0 fps | objects 360 | p99 3.21 ms / 33.33 ms | over 0 | drops 0
//! ```

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget};

use super::GapCounter;
use crate::units::ms;
use octopipe_core::budget::Report;
use octopipe_core::observer::Observer;
use octopipe_stages::batch::CropBatch;

/// Frames over which the live p99 and fps are computed.
const WINDOW: usize = 300;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressStyle {
    /// An indicatif spinner line on stderr, redrawn in place (for a terminal).
    Bar,
    /// A plain line on stderr every `interval` (for logs and pipes), and one at the end.
    Lines(Duration),
    /// A plain line on stderr every `interval`, and one at the end of a run that printed one
    /// (what `--progress auto` gives a log: a short run adds no line).
    Log(Duration),
}

/// Shows a run's progress on stderr.
pub struct Progress {
    style: ProgressStyle,
    bar: Option<ProgressBar>,
    start: Instant,
    last_line: Instant,
    /// Whether a plain line was printed.
    printed: bool,
    frames: u64,
    objects: u64,
    over: u64,
    gaps: GapCounter,
    /// (emitted, end-to-end) of the last [`WINDOW`] frames.
    recent: VecDeque<(Instant, Duration)>,
    budget: Duration,
    /// Frames the sources will give in all, when they know.
    total: Option<u64>,
}

impl Progress {
    /// Progress in `style`; [`ProgressStyle::Bar`] when stderr is a terminal, plain lines every
    /// 2 s otherwise, is what [`Progress::auto`] picks.
    pub fn new(style: ProgressStyle) -> Self {
        let bar = match style {
            ProgressStyle::Bar => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                bar.set_style(
                    indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                bar.enable_steady_tick(Duration::from_millis(200));
                Some(bar)
            }
            ProgressStyle::Lines(_) | ProgressStyle::Log(_) => None,
        };
        let now = Instant::now();
        Progress {
            style,
            bar,
            start: now,
            last_line: now,
            printed: false,
            frames: 0,
            objects: 0,
            over: 0,
            gaps: GapCounter::default(),
            recent: VecDeque::with_capacity(WINDOW),
            budget: Duration::ZERO,
            total: None,
        }
    }

    /// A bar when stderr is a terminal, otherwise a plain line every 2 s.
    pub fn auto() -> Self {
        use std::io::IsTerminal;
        Progress::new(if std::io::stderr().is_terminal() {
            ProgressStyle::Bar
        } else {
            ProgressStyle::Lines(Duration::from_secs(2))
        })
    }

    /// The current status, e.g.
    /// `frames 300 (30.0 fps) | objects 10421 | p99 12.31 ms / 33.33 ms | over 0 | drops 0`, or
    /// with the sources' length known `frames 120/340 (35%) at 30.0 fps | objects ...`. The
    /// percentage counts frames done, processed or dropped upstream, of the total.
    pub fn status(&self) -> String {
        let mut totals: Vec<Duration> = self.recent.iter().map(|(_, t)| *t).collect();
        let p99 = octopipe_core::budget::Stats::of(&mut totals).p99;
        let fps = match (self.recent.front(), self.recent.back()) {
            (Some(a), Some(b)) if self.recent.len() > 1 && b.0 > a.0 => {
                (self.recent.len() - 1) as f64 / (b.0 - a.0).as_secs_f64()
            }
            _ => 0.0,
        };
        let frames = match self.total {
            Some(total) => format!(
                "frames {}/{total} ({}%) at {fps:.1} fps",
                self.frames,
                self.done() * 100 / total.max(1)
            ),
            None => format!("frames {} ({fps:.1} fps)", self.frames),
        };
        format!(
            "{frames} | objects {} | p99 {:.2} ms / {:.2} ms | over {} | drops {}",
            self.objects,
            ms(p99),
            ms(self.budget),
            self.over,
            self.gaps.total()
        )
    }
}

impl Progress {
    /// Frames done: processed, or missing below the highest frame number seen (dropped
    /// upstream); at most the total.
    fn done(&self) -> u64 {
        let done = self.frames + self.gaps.total();
        self.total.map_or(done, |t| done.min(t))
    }

    /// The plain line, with the time since the start.
    fn line(&mut self, now: Instant) {
        self.printed = true;
        let t = now.duration_since(self.start).as_secs_f64();
        let _ = writeln!(std::io::stderr(), "progress {t:6.1} s: {}", self.status());
    }
}

impl Observer for Progress {
    fn expected_frames(&mut self, total: u64) {
        self.total = Some(total);
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {elapsed} [{bar:24}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
        }
    }

    fn batch(&mut self, batch: &CropBatch, budget: Duration) {
        self.budget = budget;
        let now = Instant::now();
        self.gaps.add(batch);
        for f in &batch.frames {
            self.objects += f.detections.len() as u64;
            // A frame in parts counts once, with its last part.
            if !f.part.is_last() {
                continue;
            }
            self.frames += 1;
            if let Some(t) = f.times.total() {
                self.over += u64::from(t > budget);
                if self.recent.len() == WINDOW {
                    self.recent.pop_front();
                }
                self.recent.push_back((now, t));
            }
        }
        match self.style {
            ProgressStyle::Bar => {
                if let Some(bar) = &self.bar {
                    bar.set_position(self.done());
                    bar.set_message(self.status());
                }
            }
            ProgressStyle::Lines(every) | ProgressStyle::Log(every) => {
                if now.duration_since(self.last_line) >= every {
                    self.last_line = now;
                    self.line(now);
                }
            }
        }
    }

    fn finish(&mut self, _report: &mut Report) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        // A log ends with where the run got to.
        let last = match self.style {
            ProgressStyle::Lines(_) => true,
            ProgressStyle::Log(_) => self.printed,
            ProgressStyle::Bar => false,
        };
        if last {
            self.line(Instant::now());
        }
    }
}
