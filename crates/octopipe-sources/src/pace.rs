//! Playing files at live rate (`live=true`): frames released at their presentation times, the
//! clocks of all of a run's paced sources started together, or a source's clock set by a
//! timeline that started at a UNIX time (`testsrc epoch=`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{FrameSource, SourceError, StartGate};
use octopipe_core::frame::Frame;
use octopipe_core::stage::source::Arrival;

/// Where a live source joins a timeline that started at a UNIX time (`testsrc epoch=`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Joined {
    /// The first frame due now or later.
    pub(crate) first: u64,
    /// When it is due.
    due: Instant,
}

impl Joined {
    /// How long from now until the first frame is due.
    pub(crate) fn wait(&self) -> Duration {
        self.due.saturating_duration_since(Instant::now())
    }

    /// Join, now, the timeline of frames every `interval` from `epoch` (UNIX seconds).
    pub(crate) fn now(epoch: f64, interval: Duration) -> Joined {
        let (now, wall) = (Instant::now(), std::time::SystemTime::now());
        let epoch = std::time::UNIX_EPOCH + Duration::from_secs_f64(epoch.max(0.0));
        let Ok(since) = wall.duration_since(epoch) else {
            // The timeline starts later: frame 0 is due then.
            let wait = epoch.duration_since(wall).unwrap_or_default();
            return Joined {
                first: 0,
                due: now + wait,
            };
        };
        let first = since.as_nanos().div_ceil(interval.as_nanos().max(1));
        let first = u64::try_from(first).unwrap_or(u64::MAX);
        let ahead = (interval * u32::try_from(first).unwrap_or(u32::MAX)).saturating_sub(since);
        Joined {
            first,
            due: now + ahead,
        }
    }
}

/// Releases a file source's frames at their presentation times (`live=true`): frame k is due at
/// the run's start (the [`StartGate`]) plus `pts_k - pts_0`, and its budget starts then. Where the
/// run prerolls (the gate says so), the first frame goes at once, ahead of the clock, and the
/// clock starts with the second frame (due at the gate's start). A source that joined a
/// timeline ([`Joined`]) keeps out of the gate: its first frame is due when that frame of the
/// timeline is, and it numbers its frames (and their pts) from it.
pub(crate) struct Paced {
    inner: Box<dyn FrameSource>,
    interval: Duration,
    gate: Arc<StartGate>,
    start: Option<(Instant, Duration)>,
    /// The first frame went ahead of the clock (a preroll); the next one starts it.
    prerolled: bool,
    n: u32,
    /// The number of the first frame (0 unless it joined a timeline late).
    first: u64,
}

impl Paced {
    pub(crate) fn new(
        inner: Box<dyn FrameSource>,
        interval: Duration,
        gate: Arc<StartGate>,
        joined: Option<Joined>,
    ) -> Self {
        if joined.is_none() {
            gate.join();
        }
        Paced {
            inner,
            interval,
            gate,
            start: joined.map(|j| (j.due, Duration::ZERO)),
            prerolled: false,
            n: 0,
            first: joined.map_or(0, |j| j.first),
        }
    }
}

impl FrameSource for Paced {
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        let Some(mut frame) = self.inner.next_frame()? else {
            return Ok(None);
        };
        let pts = frame.pts.unwrap_or(self.interval * self.n);
        self.n += 1;
        let (t0, pts0) = match self.start {
            Some(s) => s,
            None if self.prerolled => *self.start.insert((self.gate.started(), pts)),
            None => match self.gate.arrive() {
                Arrival::Start(t0) => *self.start.insert((t0, pts)),
                Arrival::Preroll(at) => {
                    self.prerolled = true;
                    (at, pts)
                }
            },
        };
        let due = t0 + pts.saturating_sub(pts0);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        frame.times.arrival = due;
        if self.first > 0 {
            frame.seq += self.first;
            let shift = self.interval.as_secs_f64() * self.first as f64;
            frame.pts = Some(pts + Duration::from_secs_f64(shift));
        }
        Ok(Some(frame))
    }
    fn first_frame(&self) -> u64 {
        self.first
    }
    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }
    fn stop(&mut self) {
        self.inner.stop();
    }
    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync> {
        // A stop also ends a wait at the gate (a first frame held up downstream).
        let inner = self.inner.interrupter();
        let gate = self.gate.clone();
        Box::new(move || {
            gate.interrupt();
            inner();
        })
    }
    fn expected_frames(&self) -> Option<u64> {
        self.inner.expected_frames()
    }
}

impl Drop for Paced {
    fn drop(&mut self) {
        if self.start.is_none() && !self.prerolled {
            self.gate.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_start_together_and_a_leaver_does_not_hold_them() {
        let gate = Arc::new(StartGate::new());
        for _ in 0..3 {
            gate.join();
        }
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let g = gate.clone();
                std::thread::spawn(move || g.arrive())
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let before = Instant::now();
        gate.leave();
        let starts: Vec<Instant> = waiters
            .into_iter()
            .map(|w| match w.join().unwrap() {
                Arrival::Start(at) => at,
                Arrival::Preroll(_) => panic!("no preroll was asked for"),
            })
            .collect();
        assert_eq!(starts[0], starts[1]);
        assert!(
            starts[0] >= before,
            "the clocks started before the last member left"
        );
    }
}
