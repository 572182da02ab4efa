//! Live progress: fps, frames, objects, p99 end-to-end latency against the budget, drops.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget};

use super::{ms, GapCounter};
use crate::batch::CropBatch;
use crate::budget::Report;
use crate::pipeline::Observer;

/// Frames over which the live p99 and fps are computed.
const WINDOW: usize = 300;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressStyle {
    /// An indicatif spinner line on stderr, redrawn in place (for a terminal).
    Bar,
    /// A plain line on stderr every `interval` (for logs and pipes).
    Lines(Duration),
}

/// Shows a run's progress on stderr.
pub struct Progress {
    style: ProgressStyle,
    bar: Option<ProgressBar>,
    start: Instant,
    last_line: Instant,
    frames: u64,
    objects: u64,
    over: u64,
    gaps: GapCounter,
    /// (emitted, end-to-end) of the last [`WINDOW`] frames.
    recent: VecDeque<(Instant, Duration)>,
    budget: Duration,
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
            ProgressStyle::Lines(_) => None,
        };
        let now = Instant::now();
        Progress {
            style,
            bar,
            start: now,
            last_line: now,
            frames: 0,
            objects: 0,
            over: 0,
            gaps: GapCounter::default(),
            recent: VecDeque::with_capacity(WINDOW),
            budget: Duration::ZERO,
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
    /// `frames 300 (30.0 fps) | objects 10421 | p99 12.31 ms / 33.33 ms | over 0 | drops 0`.
    pub fn status(&self) -> String {
        let mut totals: Vec<Duration> = self.recent.iter().map(|(_, t)| *t).collect();
        let p99 = crate::budget::Stats::of(&mut totals).p99;
        let fps = match (self.recent.front(), self.recent.back()) {
            (Some(a), Some(b)) if self.recent.len() > 1 && b.0 > a.0 => {
                (self.recent.len() - 1) as f64 / (b.0 - a.0).as_secs_f64()
            }
            _ => 0.0,
        };
        format!(
            "frames {} ({:.1} fps) | objects {} | p99 {:.2} ms / {:.2} ms | over {} | drops {}",
            self.frames,
            fps,
            self.objects,
            ms(p99),
            ms(self.budget),
            self.over,
            self.gaps.total()
        )
    }
}

impl Observer for Progress {
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
                    bar.set_message(self.status());
                }
            }
            ProgressStyle::Lines(every) => {
                if now.duration_since(self.last_line) >= every {
                    self.last_line = now;
                    let t = now.duration_since(self.start).as_secs_f64();
                    let _ = writeln!(std::io::stderr(), "progress {t:6.1} s: {}", self.status());
                }
            }
        }
    }

    fn finish(&mut self, _report: &mut Report) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
