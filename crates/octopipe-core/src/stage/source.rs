//! The source stage's contract with the runner: [`FrameSource`] (a producer of decoded frames),
//! its error ([`SourceError`]) and the [`StartGate`] the paced sources of a run share. The
//! sources themselves live in `octopipe::source`, which re-exports these.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::frame::Frame;

/// Longest a paced source with its first frame waits for the others' first frames.
#[doc(hidden)]
pub const START_WAIT: Duration = Duration::from_secs(30);

/// Longest the clocks wait, once the first frames are released, for every one of them to reach
/// the end of the pipeline (a first frame that never does: a stream that failed after it).
#[doc(hidden)]
pub const PREROLL_WAIT: Duration = Duration::from_secs(10);

/// The common start of the paced sources of one run, as a GStreamer pipeline prerolls every
/// source before its clock runs: each source waits, with its first frame decoded, until every
/// one has its first frame. Without it the first streams' frames are due while the decoders of
/// the others are still starting, and starting a GPU decoder stalls the GPU for everyone
/// (measured on an H100: 15-150 ms calls of the preprocess and classify stages while 32 NVDEC
/// sessions started).
///
/// Where the runner takes the first frames at the end of the pipeline
/// ([`Self::expect_preroll`]), the first frames then go through the whole pipeline at once
/// (their arrival is that instant), and the clocks start, due the second frames, once every
/// first frame has reached the end ([`Self::reached_end`]): whatever the stages do on their
/// first frames (buffers grown to the run's batch sizes, kernels loaded, the decoders' pools
/// filled) is done before any frame is due. Measured on 4 x H100 with 64 streams: without it,
/// 1,193 of the first second's 1,920 frames were over 100 ms (BENCHMARKS.md, "Live streams
/// over four GPUs").
#[derive(Debug, Default)]
pub struct StartGate {
    state: Mutex<Gate>,
    opened: Condvar,
}

#[derive(Debug, Default)]
struct Gate {
    /// Paced sources of the run that have not given up their place.
    members: usize,
    /// Of which, those with their first frame.
    ready: usize,
    /// Whether the first frames are prerolled (the runner reports their ends).
    preroll: bool,
    /// When the first frames were released (preroll), and how many have not reached the end.
    released: Option<(Instant, usize)>,
    /// When the clocks started.
    start: Option<Instant>,
}

/// What a paced source's first frame learns at the gate ([`StartGate::arrive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum Arrival {
    /// The clocks start now: the first frame is due at this instant.
    Start(Instant),
    /// The first frames are released at this instant, ahead of the clocks
    /// ([`StartGate::started`] gives their start).
    Preroll(Instant),
}

impl StartGate {
    /// A gate with no members yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One more source starts with the others.
    #[doc(hidden)]
    pub fn join(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.members += 1;
        }
    }

    /// The runner reports each frame reaching the end ([`Self::reached_end`]): the first frames
    /// preroll before the clocks start. Called before any source arrives.
    #[doc(hidden)]
    pub fn expect_preroll(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.preroll = true;
        }
    }

    /// A member that will never bring a first frame (it ended or failed first).
    #[doc(hidden)]
    pub fn leave(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.members = g.members.saturating_sub(1);
            self.open_if_all_ready(&mut g);
        }
    }

    fn open_if_all_ready(&self, g: &mut Gate) {
        if g.start.is_some() || g.released.is_some() || g.ready < g.members {
            return;
        }
        let now = Instant::now();
        match g.preroll && g.ready > 0 {
            true => g.released = Some((now, g.ready)),
            false => g.start = Some(now),
        }
        tracing::debug!(
            target: "octopipe::live",
            "live start: {} first frame(s) ready; {}",
            g.ready,
            if g.released.is_some() { "released ahead of the clocks (preroll)" } else { "the clocks start" }
        );
        self.opened.notify_all();
    }

    /// A member has its first frame: wait for the others (at most [`START_WAIT`]); then either
    /// the clocks start, or the first frames are released ahead of them. A member that waited
    /// in vain starts on its own clock.
    #[doc(hidden)]
    pub fn arrive(&self) -> Arrival {
        let Ok(mut g) = self.state.lock() else {
            return Arrival::Start(Instant::now());
        };
        g.ready += 1;
        self.open_if_all_ready(&mut g);
        let deadline = Instant::now() + START_WAIT;
        loop {
            if let Some(start) = g.start {
                return Arrival::Start(start);
            }
            if let Some((at, _)) = g.released {
                return Arrival::Preroll(at);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    "live start: {} of {} paced sources had a frame after {} s; starting without the others",
                    g.ready,
                    g.members,
                    START_WAIT.as_secs()
                );
                return Arrival::Start(Instant::now());
            }
            g = match self.opened.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(_) => return Arrival::Start(Instant::now()),
            };
        }
    }

    /// When the clocks start, after a preroll: once every released first frame reached the end,
    /// or [`PREROLL_WAIT`] after their release.
    #[doc(hidden)]
    pub fn started(&self) -> Instant {
        let Ok(mut g) = self.state.lock() else {
            return Instant::now();
        };
        let deadline = g
            .released
            .map_or_else(Instant::now, |(at, _)| at + PREROLL_WAIT);
        loop {
            if let Some(start) = g.start {
                return start;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing = g.released.map_or(0, |(_, n)| n);
                tracing::warn!(
                    "live start: {missing} first frame(s) had not reached the end of the pipeline {} s after their release; the clocks start",
                    PREROLL_WAIT.as_secs()
                );
                let now = Instant::now();
                g.start = Some(now);
                self.opened.notify_all();
                return now;
            }
            g = match self.opened.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(_) => return Instant::now(),
            };
        }
    }

    /// The run stops: whoever waits at the gate goes on (the clocks start now if they had not).
    #[doc(hidden)]
    pub fn interrupt(&self) {
        if let Ok(mut g) = self.state.lock() {
            if g.start.is_none() {
                g.start = Some(Instant::now());
                self.opened.notify_all();
            }
        }
    }

    /// Whether any paced source joined (a gate no source joined never starts its clocks).
    #[doc(hidden)]
    pub fn has_members(&self) -> bool {
        self.state.lock().is_ok_and(|g| g.members > 0)
    }

    /// Whether the clocks have started.
    #[doc(hidden)]
    pub fn has_started(&self) -> bool {
        self.state.lock().is_ok_and(|g| g.start.is_some())
    }

    /// Whether first frames are out ahead of the clocks (the runner then reports each frame
    /// that reaches the end with [`Self::reached_end`]).
    #[doc(hidden)]
    pub fn prerolling(&self) -> bool {
        self.state
            .lock()
            .is_ok_and(|g| g.start.is_none() && g.released.is_some())
    }

    /// A frame that arrived at `arrival` reached the end of the pipeline: a released first
    /// frame (its arrival is the release) counts towards the clocks' start.
    #[doc(hidden)]
    pub fn reached_end(&self, arrival: Instant) {
        let Ok(mut g) = self.state.lock() else { return };
        if g.start.is_some() {
            return;
        }
        if let Some((at, left)) = g.released.as_mut() {
            if *at == arrival {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    tracing::debug!(
                        target: "octopipe::live",
                        "live start: every first frame reached the end {:.1} ms after its release; the clocks start",
                        at.elapsed().as_secs_f64() * 1e3
                    );
                    g.start = Some(Instant::now());
                    self.opened.notify_all();
                }
            }
        }
    }
}

/// Errors of the source stage. Each names the input it is about.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// GStreamer could not be initialised.
    #[error("GStreamer could not be initialised: {0}")]
    Init(String),
    /// A file or folder does not exist or cannot be read.
    #[error("{path}: {reason}")]
    Input {
        /// The offending path.
        path: String,
        /// What is wrong (with the system's words where it said why).
        reason: String,
        /// The system's error, where reading failed.
        #[source]
        source: Option<std::io::Error>,
    },
    /// A GStreamer element is not installed.
    #[error("GStreamer element '{element}' is missing: install {package}")]
    MissingElement {
        /// Element factory name.
        element: String,
        /// Debian package that provides it.
        package: String,
    },
    /// An error posted on the GStreamer bus. Its message is GStreamer's in plain words (a
    /// text file is "not a video (GStreamer found plain text)"); GStreamer's debug detail (the
    /// element and the source line that posted it) is kept apart ([`SourceError::detail`]), for
    /// `octopipe run -v`.
    #[error("{source_name}: {message}")]
    Stream {
        /// The input (file, URI or element) the error is about.
        source_name: String,
        /// GStreamer's message, in plain words.
        message: String,
        /// GStreamer's debug detail.
        debug: Option<String>,
    },
    /// A setting the source cannot use (an unknown test pattern, a framerate of 0, ...).
    #[error("invalid {setting} '{value}': expected {expected}")]
    Setting {
        /// Property name, as in the pipeline text.
        setting: String,
        /// The value given.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A source delivered nothing for its `timeout`, with `timeout-action=fail`.
    #[error("{source_name}: {}", quiet_message(*timeout, *frames))]
    Quiet {
        /// The input.
        source_name: String,
        /// Its `timeout`.
        timeout: Duration,
        /// Frames it delivered before it went quiet.
        frames: u64,
    },
    /// A file's decoder gave no first frame within `start-timeout`, or no frame for
    /// `stall-timeout` after its first (not counting time held back by downstream).
    #[error("{source_name}: {message}")]
    Stalled {
        /// The input.
        source_name: String,
        /// What happened, with the setting that decided it.
        message: String,
    },
    /// `decoder=nvdec` cannot run: no GPU, no NVDEC decoder for the input, no `libgstcuda-1.0`.
    #[error("{source_name}: decoder=nvdec: {reason}")]
    Nvdec {
        /// The input.
        source_name: String,
        /// What is missing.
        reason: String,
        /// Why, typed (the source's `NvdecError`), where it is known.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// `images decoder=nvjpeg` cannot run: no `libnvjpeg`, no GPU, PNG files.
    #[error("{source_name}: decoder=nvjpeg: {reason}")]
    Nvjpeg {
        /// The input.
        source_name: String,
        /// What is missing.
        reason: String,
        /// Why, typed (the source's `NvjpegError`), where it is known.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// Memory for a frame (its copy out of the decoder, a picture decoded on the CPU) that the
    /// system refused: `SOURCE: frame 3 (8192x8192 I420) needs 100663296 bytes, more than the
    /// memory this process may still take`. The stream's error, not an abort of the process.
    #[error("{source_name}: {what} {error}")]
    OutOfMemory {
        /// The input.
        source_name: String,
        /// What was being allocated (`frame 3 (8192x8192 I420)`).
        what: String,
        /// How many bytes it needed.
        error: crate::alloc::AllocError,
    },
    /// The decoder produced a format octopipe cannot read.
    #[error("{source_name}: unsupported decoded format {format}")]
    Format {
        /// The input.
        source_name: String,
        /// The caps or format name.
        format: String,
    },
}

impl SourceError {
    /// [`SourceError::Input`]: `path` is not what the source reads, for `reason`.
    pub fn input(path: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        SourceError::Input {
            path: path.to_string(),
            reason: reason.into(),
            source: None,
        }
    }

    /// The input the error is about (a path, a URI, a GStreamer head), where it names one.
    pub fn input_name(&self) -> Option<&str> {
        match self {
            SourceError::Input { path, .. } => Some(path),
            SourceError::Stream { source_name, .. }
            | SourceError::Quiet { source_name, .. }
            | SourceError::Stalled { source_name, .. }
            | SourceError::Nvdec { source_name, .. }
            | SourceError::OutOfMemory { source_name, .. }
            | SourceError::Format { source_name, .. } => Some(source_name),
            _ => None,
        }
    }

    /// GStreamer's debug detail of an error from its bus (which element, which line of its
    /// source), kept out of the message.
    pub fn detail(&self) -> Option<&str> {
        match self {
            SourceError::Stream { debug, .. } => debug.as_deref(),
            _ => None,
        }
    }

    /// [`SourceError::Input`]: reading `path` failed with `e` (its words, and `e` as the source).
    pub fn io(path: impl std::fmt::Display, e: std::io::Error) -> Self {
        SourceError::Input {
            path: path.to_string(),
            reason: e.to_string(),
            source: Some(e),
        }
    }
}

impl crate::error::Kind for SourceError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            SourceError::Init(_) | SourceError::MissingElement { .. } => ErrorKind::Unavailable,
            SourceError::Setting { .. } => ErrorKind::Config,
            SourceError::Nvdec { .. } | SourceError::Nvjpeg { .. } => ErrorKind::Device,
            SourceError::OutOfMemory { .. } => ErrorKind::Busy,
            SourceError::Input { .. }
            | SourceError::Stream { .. }
            | SourceError::Quiet { .. }
            | SourceError::Stalled { .. }
            | SourceError::Format { .. } => ErrorKind::Input,
        }
    }
}

crate::error::stage_error!(SourceError);

/// The message of [`SourceError::Quiet`].
fn quiet_message(timeout: Duration, frames: u64) -> String {
    let t = secs(timeout);
    if frames == 0 {
        format!("no frame in {t} s (timeout={t}, timeout-action=fail): nothing was received; is the sender running?")
    } else {
        format!("no frame for {t} s after {frames} frames (timeout={t}, timeout-action=fail)")
    }
}

/// A producer of decoded frames.
pub trait FrameSource: Send {
    /// The next frame, `Ok(None)` at end of stream.
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError>;
    /// Stop producing (end of stream comes next) and release what the source holds (its
    /// decoder); idempotent. The runner calls it at once on a stop request, and when the run is
    /// over for a source that reached its end.
    fn stop(&mut self);
    /// A function another thread may call to end the stream while [`FrameSource::next_frame`]
    /// is blocked waiting for a frame (e.g. a live source that has gone quiet).
    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync>;
    /// How many frames the stream holds, when the source knows: an image sequence (images x
    /// loops), the test source (`num-buffers`), a media file that declares its duration (x its
    /// frame rate, known once the first frame decoded). `None` for live and application streams.
    fn expected_frames(&self) -> Option<u64> {
        None
    }
    /// The number of the stream's first frame when none is lost before it: 0, unless the stream
    /// joins its timeline late (`testsrc live=true epoch=...` started after its epoch).
    fn first_frame(&self) -> u64 {
        0
    }
    /// Frames the source left out so far because their data was damaged (`on-damaged=skip`):
    /// their places in the stream are gaps that are not losses. The runner takes them from
    /// the gaps it counts as lost by the decoder.
    fn skipped(&self) -> u64 {
        0
    }
}

/// Seconds as a short number (`1`, `0.5`, `12.3`), for messages.
#[doc(hidden)]
pub fn secs(d: Duration) -> String {
    let s = (d.as_secs_f64() * 10.0).round() / 10.0;
    format!("{s}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn without_a_preroll_the_clocks_start_when_every_member_has_its_first_frame() {
        let gate = Arc::new(StartGate::new());
        assert!(!gate.has_members());
        gate.join();
        assert!(gate.has_members());
        gate.join();
        let other = {
            let g = gate.clone();
            std::thread::spawn(move || g.arrive())
        };
        let mine = gate.arrive();
        assert_eq!(mine, other.join().unwrap());
        assert!(matches!(mine, Arrival::Start(_)));
        assert!(gate.has_started() && !gate.prerolling());
    }

    #[test]
    fn with_a_preroll_the_clocks_start_once_every_first_frame_reached_the_end() {
        let gate = Arc::new(StartGate::new());
        gate.expect_preroll();
        gate.join();
        gate.join();
        let other = {
            let g = gate.clone();
            std::thread::spawn(move || g.arrive())
        };
        let Arrival::Preroll(released) = gate.arrive() else {
            panic!("the first frames go ahead of the clocks");
        };
        assert_eq!(other.join().unwrap(), Arrival::Preroll(released));
        assert!(gate.prerolling() && !gate.has_started());
        let waiter = {
            let g = gate.clone();
            std::thread::spawn(move || g.started())
        };
        // Another frame's end does not count; one first frame is not all of them.
        gate.reached_end(released + Duration::from_millis(1));
        gate.reached_end(released);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!gate.has_started() && !waiter.is_finished());
        let before = Instant::now();
        gate.reached_end(released);
        let start = waiter.join().unwrap();
        assert!(start >= before && gate.has_started() && !gate.prerolling());
        assert_eq!(gate.started(), start);
    }

    #[test]
    fn a_stop_ends_the_wait_for_the_first_frames() {
        let gate = Arc::new(StartGate::new());
        gate.expect_preroll();
        gate.join();
        assert!(matches!(gate.arrive(), Arrival::Preroll(_)));
        let waiter = {
            let g = gate.clone();
            std::thread::spawn(move || g.started())
        };
        std::thread::sleep(Duration::from_millis(20));
        let before = Instant::now();
        gate.interrupt();
        assert!(waiter.join().unwrap() >= before);
        assert!(before.elapsed() < PREROLL_WAIT);
    }
}
