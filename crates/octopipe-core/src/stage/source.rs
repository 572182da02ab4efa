//! The source stage's contract with the runner: [`FrameSource`] (a producer of decoded frames),
//! its error ([`SourceError`]) and the [`StartGate`] the paced sources of a run share. The
//! sources themselves live in `octopipe::source`, which re-exports these.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::frame::Frame;

/// Longest a paced source with its first frame waits for the others' first frames.
#[doc(hidden)]
pub const START_WAIT: Duration = Duration::from_secs(30);

/// The common start of the paced sources of one run, as a GStreamer pipeline prerolls every
/// source before its clock runs: each source waits, with its first frame decoded, until every
/// one has its first frame, and all clocks start at that instant. Without it the first streams'
/// frames are due while the decoders of the others are still starting, and starting a GPU
/// decoder stalls the GPU for everyone (measured on an H100: 15-150 ms calls of the preprocess
/// and classify stages while 32 NVDEC sessions started).
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
    /// When the clocks started.
    start: Option<Instant>,
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

    /// A member that will never bring a first frame (it ended or failed first).
    #[doc(hidden)]
    pub fn leave(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.members = g.members.saturating_sub(1);
            self.open_if_all_ready(&mut g);
        }
    }

    fn open_if_all_ready(&self, g: &mut Gate) {
        if g.start.is_none() && g.ready >= g.members {
            g.start = Some(Instant::now());
            self.opened.notify_all();
        }
    }

    /// A member has its first frame: wait for the others (at most [`START_WAIT`]) and return
    /// the common start; a member that waited in vain starts on its own clock.
    #[doc(hidden)]
    pub fn arrive(&self) -> Instant {
        let Ok(mut g) = self.state.lock() else {
            return Instant::now();
        };
        g.ready += 1;
        self.open_if_all_ready(&mut g);
        let deadline = Instant::now() + START_WAIT;
        while g.start.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    "live start: {} of {} paced sources had a frame after {} s; starting without the others",
                    g.ready,
                    g.members,
                    START_WAIT.as_secs()
                );
                return Instant::now();
            }
            g = match self.opened.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(_) => return Instant::now(),
            };
        }
        g.start.unwrap_or_else(Instant::now)
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
