//! Watching a source while it waits for frames: a live or network source that goes quiet
//! (`timeout`, `timeout-action`), a file whose decoder does not start or stalls (`start-timeout`,
//! `stall-timeout`), and reconnecting a network source (`retry`, `retry-interval`).
//!
//! ```text
//! udpsrc port=5000 caps=... ! rtph264depay ! avdec_h264 ! head timeout=2 timeout-action=fail ! ...
//! rtspsrc location=rtsp://cam/stream ! rtph264depay ! avdec_h264 ! head retry=10 retry-interval=0.5 ! ...
//! media location=flight.mp4 start-timeout=120 ! ...
//! ```
//!
//! Time is measured while the source waits for its next frame only: a source held back because
//! the stages after it are busy (its edge full) is not waiting, so it is neither quiet nor
//! stalled.
//!
//! An NVDEC source (`decoder=nvdec`) is starting for `start-timeout` after its pipeline started:
//! during that time a wait longer than `stall-timeout` is a slow start (said once), not a stall,
//! even after its first frame. Many hardware decoders starting at once (32-64 NVDEC sessions in
//! one CUDA context) take seconds each to create, and a stream that gave its first frame can wait
//! for the next while the others start. A software decoder's stall counts from its first frame.

use std::time::{Duration, Instant};

use octopipe_core::stage::{PropChoice, Properties};

/// Default `timeout` of live and network sources.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `start-timeout` of files: how long a file's decoder may take to give its first frame
/// (many hardware decoders starting at once can take tens of seconds).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `start-timeout` of live and network sources: how long after it was opened a source
/// that receives from a sender may go without a first frame, reconnects included (an RTSP
/// server that accepts the connection and never answers, a camera that never sends).
pub const DEFAULT_STREAM_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Default `stall-timeout`: a file input that gives no frame, no end of stream and no error for
/// this long after its first frame has stalled (a truncated MP4 can leave a demuxer waiting for
/// data that never comes).
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `retry` of live and network sources.
pub const DEFAULT_NETWORK_RETRY: u32 = 3;
/// Default `retry-interval`.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// The longest wait between two reconnects, however many failed in a row.
pub const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// What a source does when it has delivered nothing for its `timeout` (`timeout-action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum TimeoutAction {
    /// Say so (a warning, and a count in the report) and keep waiting.
    #[default]
    Wait,
    /// Fail, naming the source: the run ends with the frames received so far accounted for.
    Fail,
}

/// How a source watches its input: silence, a decoder that does not start or stalls, and
/// reconnects. Properties `timeout`, `timeout-action`, `start-timeout`, `stall-timeout`,
/// `retry`, `retry-interval`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Watch {
    /// Time without a frame after which the source says so. `None`: [`DEFAULT_TIMEOUT`] for live
    /// and network sources, never for files; `Some(Duration::ZERO)`: never.
    pub timeout: Option<Duration>,
    /// What happens then.
    pub timeout_action: TimeoutAction,
    /// The longest wait for the first frame: for files, the decoder's (default
    /// [`DEFAULT_START_TIMEOUT`]); for live and network sources, from opening, reconnects
    /// included (default [`DEFAULT_STREAM_START_TIMEOUT`]). `None`: the default;
    /// `Some(Duration::ZERO)`: never.
    pub start_timeout: Option<Duration>,
    /// Files: the longest wait for a frame after the first (not counting time held back by
    /// downstream) before decoding counts as stalled.
    pub stall_timeout: Duration,
    /// Reconnects in a row (with no frame between them) after an error or end of stream.
    /// `None`: [`DEFAULT_NETWORK_RETRY`] for live and network sources, 0 for files.
    pub retry: Option<u32>,
    /// Wait before a reconnect; it doubles with each reconnect in a row, up to
    /// [`MAX_RETRY_INTERVAL`].
    pub retry_interval: Duration,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            timeout: None,
            timeout_action: TimeoutAction::Wait,
            start_timeout: None,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            retry: None,
            retry_interval: DEFAULT_RETRY_INTERVAL,
        }
    }
}

impl Watch {
    /// The settings of a source's property blocks; a stage that does not declare a block
    /// passes its `Default` (the settings it leaves at their defaults).
    pub(super) fn of(wait: &WaitProps, stall: &StallProps, retry: &RetryProps) -> Watch {
        let seconds = Duration::from_secs_f64;
        Watch {
            timeout: wait.timeout.map(seconds),
            timeout_action: wait.timeout_action,
            start_timeout: wait.start_timeout.map(seconds),
            stall_timeout: seconds(stall.stall_timeout),
            retry: retry.retry.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            retry_interval: seconds(retry.retry_interval),
        }
    }

    /// The settings in force for a source that receives from a sender (`stream`: a network or
    /// live source) or reads a file.
    pub(super) fn limits(&self, stream: bool) -> Limits {
        let timeout = match self.timeout {
            None if stream => Some(DEFAULT_TIMEOUT),
            None => None,
            Some(t) => Some(t).filter(|t| !t.is_zero()),
        };
        let start = match self.start_timeout {
            Some(t) if t.is_zero() => Duration::MAX,
            Some(t) => t,
            None if stream => DEFAULT_STREAM_START_TIMEOUT,
            None => DEFAULT_START_TIMEOUT,
        };
        Limits {
            stream,
            timeout,
            action: self.timeout_action,
            start,
            stall: self.stall_timeout,
            retry: self
                .retry
                .unwrap_or(if stream { DEFAULT_NETWORK_RETRY } else { 0 }),
            interval: self.retry_interval,
            slow_start: false,
        }
    }
}

/// [`Watch`] resolved for one source.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Frames come from a sender: silence is reported (`timeout`), never a stall.
    pub(super) stream: bool,
    pub(super) timeout: Option<Duration>,
    pub(super) action: TimeoutAction,
    pub(super) start: Duration,
    pub(super) stall: Duration,
    pub(super) retry: u32,
    pub(super) interval: Duration,
    /// The decoder may be slow to start after its first frame too (NVDEC sessions starting):
    /// no stall is counted within `start` of the pipeline's start.
    pub(super) slow_start: bool,
}

/// What a wait for a frame has come to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Verdict {
    /// Nothing to say yet.
    Fine,
    /// Silent for `waited` (the timeout, then twice as long, ...): warn, keep waiting. `first`
    /// on the first warning of this wait (counted in the report).
    Quiet { waited: Duration, first: bool },
    /// Silent for the timeout with `timeout-action=fail`.
    TimedOut,
    /// A file's decoder has given no first frame (or, with `slow_start`, no next frame) for as
    /// long as a stall would take, but is still within `start-timeout`: say so once.
    Starting,
    /// A file's decoder gave no first frame within `start-timeout`.
    NoStart,
    /// A file's decoder gave no frame for `stall-timeout` after its first (with `slow_start`, once
    /// past its start).
    Stalled,
}

/// One wait for a frame (one call of `next_frame`).
pub(super) struct Wait {
    asked: Instant,
    /// The silence after which the next warning is due.
    next_warning: Option<Duration>,
    /// Whether a warning (or the start-up note) was given in this wait.
    pub(super) warned: bool,
}

impl Wait {
    pub(super) fn new(limits: &Limits) -> Wait {
        Wait {
            asked: Instant::now(),
            next_warning: limits.timeout,
            warned: false,
        }
    }

    /// When the frame was asked for.
    pub(super) fn asked(&self) -> Instant {
        self.asked
    }

    /// How long this wait has lasted.
    pub(super) fn waited(&self) -> Duration {
        self.asked.elapsed()
    }

    /// Judge the wait so far, after `frames` frames delivered, `running` after the pipeline
    /// started.
    pub(super) fn check(&mut self, limits: &Limits, frames: u64, running: Duration) -> Verdict {
        let waited = self.waited();
        if let Some(due) = self.next_warning.filter(|due| waited >= *due) {
            if limits.action == TimeoutAction::Fail {
                return Verdict::TimedOut;
            }
            let first = !self.warned;
            self.warned = true;
            // Warn again after twice the silence, and so on: a long outage stays visible without
            // flooding the log.
            self.next_warning = Some(due * 2);
            return Verdict::Quiet { waited: due, first };
        }
        if limits.stream {
            return Verdict::Fine;
        }
        let starting = limits.slow_start && running.max(waited) <= limits.start;
        match frames {
            0 if waited > limits.start => Verdict::NoStart,
            _ if waited <= limits.stall => Verdict::Fine,
            f if f > 0 && !starting => Verdict::Stalled,
            _ if limits.start > limits.stall && !self.warned => {
                self.warned = true;
                Verdict::Starting
            }
            _ => Verdict::Fine,
        }
    }
}

/// The wait before reconnect number `attempt` in a row (1, 2, ...): the interval, doubled for
/// each earlier attempt, at most [`MAX_RETRY_INTERVAL`].
pub(super) fn backoff(interval: Duration, attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    interval
        .saturating_mul(1 << doublings)
        .min(MAX_RETRY_INTERVAL.max(interval))
}

pub(crate) use octopipe_core::stage::source::secs;

/// How long a source may wait for a frame, and what then: `timeout`, `timeout-action`,
/// `start-timeout` (every GStreamer source declares them).
#[derive(Debug, Clone, Copy, PartialEq, Properties)]
pub(crate) struct WaitProps {
    /// seconds without a frame before the source says so (auto: 10 live/network, off for files; 0: off)
    #[prop(default = "auto", range = 0.0..)]
    pub timeout: Option<f64>,
    /// after timeout: warn and keep waiting, or fail naming the source
    #[prop(default = "wait")]
    pub timeout_action: TimeoutAction,
    /// seconds to the first frame: files, for the decoder (auto: 60; decoder=nvdec: to start, no
    /// stall before); live and network sources, from opening, reconnects included (auto: 20); 0: off
    #[prop(default = "auto", range = 0.0..)]
    pub start_timeout: Option<f64>,
}

/// When a file's decoder has stalled: `stall-timeout` (the sources that read files).
#[derive(Debug, Clone, Copy, PartialEq, Properties)]
pub(crate) struct StallProps {
    /// files: seconds without a frame after the first (not held back by downstream) = stalled
    #[prop(default = DEFAULT_STALL_TIMEOUT, positive)]
    pub stall_timeout: f64,
}

/// Reconnecting a network source: `retry`, `retry-interval` (the sources that can reconnect).
#[derive(Debug, Clone, Copy, PartialEq, Properties)]
pub(crate) struct RetryProps {
    /// reconnects in a row after an error or end of stream (auto: 3 live/network, 0 files)
    #[prop(default = "auto", range = ..=1_000_000)]
    pub retry: Option<u64>,
    /// seconds before a reconnect; doubles with each one in a row (at most 30)
    #[prop(default = DEFAULT_RETRY_INTERVAL, positive)]
    pub retry_interval: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(stream: bool, watch: Watch) -> Limits {
        watch.limits(stream)
    }

    #[test]
    fn defaults_depend_on_the_kind_of_source() {
        let live = limits(true, Watch::default());
        assert_eq!(
            (live.timeout, live.retry),
            (Some(DEFAULT_TIMEOUT), DEFAULT_NETWORK_RETRY)
        );
        assert_eq!(live.start, DEFAULT_STREAM_START_TIMEOUT);
        let file = limits(false, Watch::default());
        assert_eq!((file.timeout, file.retry), (None, 0));
        assert_eq!(file.start, DEFAULT_START_TIMEOUT);
        let never = Watch {
            start_timeout: Some(Duration::ZERO),
            ..Watch::default()
        };
        assert_eq!(limits(true, never).start, Duration::MAX);
        let off = limits(
            true,
            Watch {
                timeout: Some(Duration::ZERO),
                ..Watch::default()
            },
        );
        assert_eq!(off.timeout, None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(1), 1), s(1));
        assert_eq!(backoff(s(1), 2), s(2));
        assert_eq!(backoff(s(1), 4), s(8));
        assert_eq!(backoff(s(1), 40), MAX_RETRY_INTERVAL);
        assert_eq!(
            backoff(s(60), 3),
            s(60),
            "an interval above the cap is kept"
        );
    }

    #[test]
    fn a_file_is_starting_before_it_is_stalled() {
        let l = limits(
            false,
            Watch {
                start_timeout: Some(Duration::from_millis(400)),
                stall_timeout: Duration::from_millis(20),
                ..Watch::default()
            },
        );
        let mut w = Wait::new(&l);
        std::thread::sleep(Duration::from_millis(30));
        let run = w.waited();
        assert_eq!(w.check(&l, 0, run), Verdict::Starting);
        assert_eq!(w.check(&l, 0, run), Verdict::Fine, "said once");
        let past_start = Duration::from_millis(500);
        assert_eq!(
            w.check(&l, 1, past_start),
            Verdict::Stalled,
            "after a first frame, once started"
        );
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(w.check(&l, 0, w.waited()), Verdict::NoStart);
    }

    #[test]
    fn an_nvdec_wait_after_the_first_frame_is_no_stall_while_the_decoders_start() {
        // 64 NVDEC sessions starting in one context: stream 1 gave its first frame, then waits
        // longer than stall-timeout for its second while the others start.
        let software = limits(
            false,
            Watch {
                start_timeout: Some(Duration::from_millis(400)),
                stall_timeout: Duration::from_millis(20),
                ..Watch::default()
            },
        );
        let l = Limits {
            slow_start: true,
            ..software
        };
        let mut w = Wait::new(&l);
        std::thread::sleep(Duration::from_millis(30));
        let early = Duration::from_millis(100);
        assert_eq!(
            w.check(&l, 1, early),
            Verdict::Starting,
            "a slow start, said once"
        );
        assert_eq!(w.check(&l, 1, early), Verdict::Fine);
        assert_eq!(
            Wait::new(&software).check(&software, 1, early),
            Verdict::Fine,
            "not yet waited"
        );
        let mut sw = Wait::new(&software);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            sw.check(&software, 1, early),
            Verdict::Stalled,
            "a software decoder's stall counts from its first frame"
        );
        assert_eq!(
            w.check(&l, 1, Duration::from_millis(401)),
            Verdict::Stalled,
            "past start-timeout, a stall again"
        );
    }

    #[test]
    fn a_quiet_stream_warns_at_growing_intervals() {
        let l = limits(
            true,
            Watch {
                timeout: Some(Duration::from_millis(100)),
                ..Watch::default()
            },
        );
        let mut w = Wait::new(&l);
        assert_eq!(w.check(&l, 0, Duration::ZERO), Verdict::Fine);
        std::thread::sleep(Duration::from_millis(110));
        let first = w.check(&l, 0, Duration::ZERO);
        assert_eq!(
            first,
            Verdict::Quiet {
                waited: Duration::from_millis(100),
                first: true
            }
        );
        assert_eq!(
            w.check(&l, 0, Duration::ZERO),
            Verdict::Fine,
            "next one at 200 ms"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(matches!(
            w.check(&l, 0, Duration::ZERO),
            Verdict::Quiet { first: false, .. }
        ));
        let fail = Limits {
            action: TimeoutAction::Fail,
            ..l
        };
        let mut w = Wait::new(&fail);
        std::thread::sleep(Duration::from_millis(110));
        assert_eq!(w.check(&fail, 3, Duration::ZERO), Verdict::TimedOut);
    }
}
