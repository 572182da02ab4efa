//! The crate's error. It names no stage: the description's error, a push's and the runner's
//! are its own variants; any stage's own error (decoding, boxes, the detector, preprocessing, the
//! classifier, a sink, ...) travels boxed in [`Error::Stage`], with its message and `source()`,
//! so a stage added from outside the crate reports its errors as the built-in ones do.

pub use crate::description::DescribeError;

/// Any error octopipe reports. Each layer's message names the input it is about.
#[derive(Debug, thiserror::Error)]
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
    /// ...); [`Error::downcast_ref`] gives it back typed.
    #[error(transparent)]
    Stage(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// A stage's own error.
    pub fn stage(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Stage(Box::new(e))
    }

    /// The stage's own error, when it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Describe(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Push(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Pipeline(e) => (e as &dyn std::error::Error).downcast_ref(),
            Error::Stage(e) => e.downcast_ref(),
        }
    }
}

/// `impl From<E> for Error` for a layer's error types, as [`Error::Stage`] (`?` on them). Written
/// once in the module that defines the error (`crate::error::stage_error!(SourceError);`).
/// Exported, as a macro must be for the facade's stage modules to use it, but not part of the
/// documented API.
#[macro_export]
#[doc(hidden)]
macro_rules! stage_error {
    ($($t:ty),+ $(,)?) => {
        $(impl From<$t> for $crate::Error {
            fn from(e: $t) -> Self {
                $crate::Error::Stage(Box::new(e))
            }
        })+
    };
}
// `#[macro_export]` puts the macro at the crate root; the stages name it by this path.
#[doc(hidden)]
pub use crate::stage_error;

/// What can go wrong pushing a frame.
#[derive(Debug, thiserror::Error)]
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
    #[error("app source '{source_name}': frame {seq}: {reason}")]
    Frame {
        /// The source's name.
        source_name: String,
        /// The frame's number in the stream (what it would have been).
        seq: u64,
        /// What is wrong.
        reason: String,
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
        reason: String,
    },
}

/// Errors of the runner itself (a graph that cannot run as wired).
#[derive(Debug, thiserror::Error)]
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
    /// A stage's thread panicked (a bug: please report it).
    #[error("stage '{0}' panicked")]
    Panic(String),
    /// A stage's thread could not be started.
    #[error("cannot start the thread of stage '{stage}': {reason}")]
    Spawn {
        /// The stage kind.
        stage: String,
        /// The system's reason.
        reason: String,
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
}
