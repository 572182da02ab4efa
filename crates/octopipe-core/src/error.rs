//! The crate's error. It names no stage: the description's error, a push's and the runner's
//! are its own variants; any stage's own error (decoding, boxes, the detector, preprocessing, the
//! classifier, a sink, ...) travels boxed in [`Error::Stage`], with its message and `source()`,
//! so a stage added from outside the crate reports its errors as the built-in ones do.
//!
//! Every error says what kind it is ([`Error::kind`], an [`ErrorKind`]), so the runner, the HTTP
//! control plane and the Python module map errors to statuses and exceptions without reading
//! their messages. A layer's error type gives its kind with [`Kind`]; a stage's own error keeps
//! its kind (and its typed cause, through `source()`) when it becomes an [`Error`].

use std::fmt;

pub use crate::description::DescribeError;

/// What kind of failure an error is: what a caller decides by (an HTTP status, a Python
/// exception, whether to retry). New kinds may come.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An input of the run is missing or wrong: a file, a stream, a pushed frame, an annotation.
    Input,
    /// The description or a setting cannot work: a parse error, a property, the wiring.
    Config,
    /// A model cannot be loaded, does not fit its settings, or failed to run.
    Model,
    /// A GPU: no usable CUDA device, a CUDA call that failed, out of device memory.
    Device,
    /// Something the machine lacks: a GStreamer element, a shared library.
    Unavailable,
    /// A network peer: a broker, a listening socket.
    Network,
    /// Reading or writing a file of the run's outputs.
    Io,
    /// No such thing (a stream id).
    NotFound,
    /// It exists already, or cannot be changed (a stream id taken, a stream of the description).
    Conflict,
    /// Closed: the pipeline or source takes no more (it ended, was stopped or closed).
    Closed,
    /// Full: a bounded resource (a queue, the streams a pipeline runs at once, the memory the
    /// process may still take) has no room now.
    Busy,
    /// A stage's own error that says nothing more (the kind of [`Error::stage`]).
    Stage,
    /// A bug in octopipe (a stage's thread panicked, an inconsistent batch): please report it.
    Internal,
}

impl ErrorKind {
    /// The kind's name in lower case (`input`, `not-found`, ...), as the Python module shows it
    /// (`octopipe.Error.kind`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Input => "input",
            ErrorKind::Config => "config",
            ErrorKind::Model => "model",
            ErrorKind::Device => "device",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Network => "network",
            ErrorKind::Io => "io",
            ErrorKind::NotFound => "not-found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Closed => "closed",
            ErrorKind::Busy => "busy",
            ErrorKind::Stage => "stage",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error type that says its [`ErrorKind`]: every layer's error implements it, and
/// [`stage_error!`] reads it when the error becomes an [`Error`].
pub trait Kind {
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;
}

/// Any error octopipe reports. Each layer's message names the input it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The pipeline description.
    #[error(transparent)]
    Describe(#[from] DescribeError),
    /// A frame the application pushed.
    #[error(transparent)]
    Push(#[from] PushError),
    /// The runner (a graph that cannot run as wired).
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// A stage's own error (its layer's error type: `SourceError`, `DetectError`, `SinkError`,
    /// ...), with its kind; [`Error::downcast_ref`] gives it back typed.
    #[error(transparent)]
    Stage(StageError),
}

impl Error {
    /// A stage's own error, of kind [`ErrorKind::Stage`] (a stage from outside the crate that
    /// says nothing more; [`Error::stage_of_kind`] says more).
    pub fn stage(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::stage_of_kind(ErrorKind::Stage, e)
    }

    /// A stage's own error, of kind `kind`.
    pub fn stage_of_kind(
        kind: ErrorKind,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Stage(StageError {
            kind,
            error: Box::new(e),
        })
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Describe(_) => ErrorKind::Config,
            Error::Push(e) => e.kind(),
            Error::Pipeline(e) => e.kind(),
            Error::Stage(e) => e.kind,
        }
    }

    /// The stage's own error, when it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Describe(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Push(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Pipeline(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Stage(e) => e.error.downcast_ref(),
        }
    }
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

/// A stage's own error with its kind ([`Error::Stage`]). It shows as the stage's error does, and
/// its `source()` is that error's.
#[derive(Debug)]
pub struct StageError {
    kind: ErrorKind,
    error: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl StageError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The stage's error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl fmt::Display for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for StageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// `impl From<E> for Error` for a layer's error types, as [`Error::Stage`] of the error's
/// [`Kind`] (`?` on them). Written once in the module that defines the error
/// (`crate::error::stage_error!(SourceError);`). Exported, as a macro must be for the facade's
/// stage modules to use it, but not part of the documented API.
#[macro_export]
#[doc(hidden)]
macro_rules! stage_error {
    ($($t:ty),+ $(,)?) => {
        $(impl From<$t> for $crate::Error {
            fn from(e: $t) -> Self {
                $crate::Error::stage_of_kind($crate::error::Kind::kind(&e), e)
            }
        })+
    };
}
// `#[macro_export]` puts the macro at the crate root; the stages name it by this path.
#[doc(hidden)]
pub use crate::stage_error;

/// What can go wrong pushing a frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The application closed the source.
    #[error("app source '{source_name}': pushed after close")]
    Closed {
        /// The source's name.
        source_name: String,
    },
    /// The pipeline is not running any more (it ended, failed or was stopped).
    #[error("app source '{source_name}': the pipeline is not running")]
    Stopped {
        /// The source's name.
        source_name: String,
    },
    /// The pipeline did not take the frame: it is full, and the push was not to wait
    /// (`octopipe::AppSource::try_push`) or stopped waiting (`octopipe::AppSource::push_while`).
    /// The frame takes no number.
    #[error("app source '{source_name}': the pipeline is full (the frame was not pushed)")]
    Full {
        /// The source's name.
        source_name: String,
    },
    /// The frame's planes do not match its layout.
    #[error("app source '{source_name}': frame {seq}: {layout}")]
    Frame {
        /// The source's name.
        source_name: String,
        /// The frame's number in the stream (what it would have been).
        seq: u64,
        /// What is wrong.
        #[source]
        layout: crate::frame::LayoutError,
    },
    /// A box is not inside the frame.
    #[error("app source '{source_name}': frame {seq}: box {index} {bbox:?}: {reason}")]
    Box {
        /// The source's name.
        source_name: String,
        /// The frame's number.
        seq: u64,
        /// The box's index in the frame's boxes.
        index: usize,
        /// The box as given.
        bbox: [f64; 4],
        /// What is wrong.
        reason: BadBox,
    },
}

/// Why a box the application pushed is not a box inside its frame ([`PushError::Box`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadBox {
    /// A coordinate or size is NaN or infinite.
    #[error("not a finite box")]
    NotFinite,
    /// Its width or height is 0 or negative.
    #[error("width and height must be positive")]
    NoArea,
    /// It lies wholly outside the frame.
    #[error("outside the {width}x{height} frame")]
    Outside {
        /// The frame's width.
        width: u32,
        /// The frame's height.
        height: u32,
    },
}

// The data layer's errors (the data names no error type above it).
impl Kind for crate::frame::PageLockedError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Device
    }
}

impl Kind for crate::frame::LayoutError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

impl Kind for PushError {
    fn kind(&self) -> ErrorKind {
        match self {
            PushError::Closed { .. } | PushError::Stopped { .. } => ErrorKind::Closed,
            PushError::Full { .. } => ErrorKind::Busy,
            PushError::Frame { .. } | PushError::Box { .. } => ErrorKind::Input,
        }
    }
}

/// Errors of the runner itself (a graph that cannot run as wired).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// A declaration that is not a stage (`queue`) was asked to open.
    #[error("'{0}' is not a stage: it sets the edge it stands on")]
    NotAStage(&'static str),
    /// A stage opened as something other than its role says.
    #[error("stage '{stage}' takes {takes} but is fed {fed}")]
    Wiring {
        /// The stage kind.
        stage: String,
        /// What it takes.
        takes: String,
        /// What its upstream gives.
        fed: String,
    },
    /// An output that would overwrite or write into an input of the run, or another output.
    #[error("{output} {what}: choose another path (nothing was written)")]
    OutputOnInput {
        /// The output, as given (`jsonl location=o.jsonl`, `--plot p.svg`).
        output: String,
        /// What it meets and how (`would overwrite classify model=m.onnx, an input of this run`).
        what: String,
    },
    /// An output whose folder does not exist: one rule for every output of a run (a sink's
    /// file or folder, the command line's plot, annotated frames, mosaic and report file), which
    /// is refused before anything starts rather than failing when it is written.
    #[error("{output}: its folder {folder} does not exist: create it, or choose another path (nothing was written)")]
    OutputFolderMissing {
        /// The output, as given (`jsonl location=o.jsonl`, `--plot p.svg`).
        output: String,
        /// The folder it would go in.
        folder: String,
    },
    /// A stage's thread panicked (a bug: please report it).
    #[error("stage '{0}' panicked")]
    Panic(String),
    /// A stage's thread could not be started.
    #[error("cannot start the thread of stage '{stage}': {source}")]
    Spawn {
        /// The stage kind.
        stage: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// Streams join the stage a pipeline's description starts with, else its batch stage: this
    /// one has none, or several.
    #[error("streams added while running join the stage the description starts with (a shared detect), else the batch stage: this pipeline has {0}")]
    NoBatchToJoin(&'static str),
    /// No stream has this id.
    #[error("no stream {0}")]
    UnknownStream(u32),
    /// The id of a stream of this run (a stream's report row stays its own).
    #[error("stream {0} exists already in this run (ids are not used twice)")]
    StreamTaken(u32),
    /// A stream of the pipeline's description, not one added while running.
    #[error("stream {0} is part of the pipeline's description: only streams added while running can be removed")]
    StaticStream(u32),
    /// A UDP port another stream receives on: two streams on one port would share its packets
    /// (results under the wrong stream).
    #[error("UDP port {port} is taken by stream {stream}: two streams on one port would share its packets; remove stream {stream} first or use another port")]
    PortTaken {
        /// The port.
        port: u16,
        /// The stream that receives on it.
        stream: u32,
    },
    /// The pipeline takes no more streams (it ended, was stopped, failed, or was closed to them).
    #[error("the pipeline takes no more streams (it ended, stopped, or was closed to them)")]
    NotTakingStreams,
    /// As many streams added while running run as the pipeline takes at once.
    #[error(
        "this pipeline runs at most {0} streams added while running at once: remove one first"
    )]
    TooManyStreams(usize),
    /// A stream's stage that has no place before the stage streams join (or a kind twice in
    /// one stream).
    #[error("stage '{stage}' cannot be in a stream added while running: streams join this pipeline's '{joins}' stage and hold only stages that come before it, each kind once")]
    StreamStage {
        /// The stream's stage.
        stage: String,
        /// The stage streams join.
        joins: &'static str,
    },
    /// A stream whose frames could take more memory than a stream may use on this station.
    #[error("this stream may hold {estimate} bytes ({}) of frames: {frames} frames of at most {frame} bytes (its source's queue, one in each stage and each edge's queue full), more than the {} a stream may use on this station (--max-stream-memory {}): shorten its queues or give the station more", gib(*estimate), gib(*budget), gib(*budget))]
    StreamMemory {
        /// The estimate, in bytes.
        estimate: u64,
        /// Frames it may hold at once.
        frames: u64,
        /// The most bytes of one frame.
        frame: u64,
        /// The budget, in bytes.
        budget: u64,
    },
    /// A stream whose memory estimate does not fit in what is left of the station's memory
    /// budget: the streams added while running (until each has truly stopped) hold the rest.
    #[error("this stream may hold {estimate} bytes ({}): the station's memory budget (--memory-budget {}) has {} left ({} held by {streams} streams added while running, until each has stopped): remove a stream or raise --memory-budget", gib(*estimate), gib(*budget), gib(budget.saturating_sub(*held)), gib(*held))]
    MemoryBudget {
        /// The stream's estimate, in bytes.
        estimate: u64,
        /// What the streams added before it hold, in bytes.
        held: u64,
        /// How many streams hold it.
        streams: usize,
        /// The station's budget, in bytes.
        budget: u64,
    },
}

/// `bytes` for messages: `2.0 GiB` from 1 GiB up, else `64.0 MiB`.
fn gib(bytes: u64) -> String {
    match bytes >= 1 << 30 {
        true => format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30)),
        false => format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20)),
    }
}

impl Kind for PipelineError {
    fn kind(&self) -> ErrorKind {
        match self {
            PipelineError::NotAStage(_)
            | PipelineError::Wiring { .. }
            | PipelineError::OutputOnInput { .. }
            | PipelineError::NoBatchToJoin(_)
            | PipelineError::StreamStage { .. }
            | PipelineError::StreamMemory { .. } => ErrorKind::Config,
            PipelineError::Panic(_) | PipelineError::Spawn { .. } => ErrorKind::Internal,
            PipelineError::UnknownStream(_) | PipelineError::OutputFolderMissing { .. } => {
                ErrorKind::NotFound
            }
            PipelineError::StreamTaken(_)
            | PipelineError::StaticStream(_)
            | PipelineError::PortTaken { .. } => ErrorKind::Conflict,
            PipelineError::NotTakingStreams => ErrorKind::Closed,
            PipelineError::TooManyStreams(_) | PipelineError::MemoryBudget { .. } => {
                ErrorKind::Busy
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A stage's own error from outside the crate, with a typed cause.
    #[derive(Debug, thiserror::Error)]
    #[error("tracker: cannot read {path}: {source}")]
    struct TrackerError {
        path: String,
        source: std::io::Error,
    }

    fn missing_file() -> TrackerError {
        let path = "/nonexistent/octopipe/tracker.cfg";
        let source = std::fs::read(path).unwrap_err();
        TrackerError {
            path: path.into(),
            source,
        }
    }

    #[test]
    fn a_stage_error_from_outside_keeps_its_words_cause_and_type() {
        let e = Error::stage(missing_file());
        assert_eq!(e.kind(), ErrorKind::Stage);
        assert!(e
            .to_string()
            .starts_with("tracker: cannot read /nonexistent/octopipe/tracker.cfg: "));
        // The stage's error is transparent: its source is the error's.
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
        assert!(e.downcast_ref::<TrackerError>().is_some());
        let e = Error::stage_of_kind(ErrorKind::Input, missing_file());
        assert_eq!(e.kind(), ErrorKind::Input);
    }

    impl Kind for TrackerError {
        fn kind(&self) -> ErrorKind {
            ErrorKind::Io
        }
    }
    crate::stage_error!(TrackerError);

    #[test]
    fn the_macro_converts_with_the_layers_kind() {
        let e: Error = missing_file().into();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
    }

    #[test]
    fn kinds_of_the_runner_and_pushes() {
        let k = |e: PipelineError| Error::from(e).kind();
        assert_eq!(k(PipelineError::UnknownStream(3)), ErrorKind::NotFound);
        assert_eq!(k(PipelineError::StreamTaken(3)), ErrorKind::Conflict);
        assert_eq!(k(PipelineError::StaticStream(3)), ErrorKind::Conflict);
        assert_eq!(k(PipelineError::NotTakingStreams), ErrorKind::Closed);
        assert_eq!(k(PipelineError::TooManyStreams(2)), ErrorKind::Busy);
        assert_eq!(
            k(PipelineError::Panic("detect".into())),
            ErrorKind::Internal
        );
        let full = PushError::Full {
            source_name: "cam".into(),
        };
        assert_eq!(Error::from(full).kind(), ErrorKind::Busy);
        let closed = PushError::Closed {
            source_name: "cam".into(),
        };
        assert_eq!(closed.kind(), ErrorKind::Closed);
        assert_eq!(ErrorKind::NotFound.to_string(), "not-found");
    }
}
