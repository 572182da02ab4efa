//! The detect stage's errors: the stage's ([`DetectError`]) and a call's model runs' ([`RunError`]).

use crate::onnx::OnnxError;
use octopipe_stages::preprocess::PreprocessError;

/// Errors of the detect stage; each names the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// ONNX Runtime or the model file could not be loaded.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The model is not usable as configured.
    #[error("detect: model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What does not fit.
        reason: String,
    },
    /// The model's input or outputs do not fit the stage as configured.
    #[error("detect: model {path}: {source}")]
    Io {
        /// The model file.
        path: String,
        /// What does not fit.
        source: super::IoError,
    },
    /// Preprocessing the tiles failed.
    #[error("detect: {0}")]
    Preprocess(#[from] PreprocessError),
    /// Inference failed.
    #[error("detect: model {path}: inference failed on stream {stream} frame {frame}{}: {source}", if *more > 0 { format!(" and {more} more frames run with it") } else { String::new() })]
    Run {
        /// The (first) frame's stream.
        path: String,
        /// The (first) frame's stream.
        stream: u32,
        /// The (first) frame's number.
        frame: u64,
        /// Frames run in the same call besides it.
        more: usize,
        /// Why the runs failed.
        source: Box<RunError>,
    },
    /// `tiles=` cuts a frame into more tiles than a frame may have
    /// ([`MAX_TILES`](octopipe_core::stage::limits::MAX_TILES)).
    #[error("detect: tiles={tw}x{th} cuts frame {frame} of stream {stream} ({w}x{h}) into {count} tiles; a frame may be cut into at most {max}: make the tiles larger")]
    Tiles {
        /// The frame's stream.
        stream: u32,
        /// The frame's number.
        frame: u64,
        /// Frame width.
        w: u32,
        /// Frame height.
        h: u32,
        /// Tile width.
        tw: u32,
        /// Tile height.
        th: u32,
        /// Tiles the grid would have.
        count: u64,
        /// The most a frame may have.
        max: u64,
    },
    /// The preprocess blocks of a call's tiles that the system refused memory for.
    #[error("detect: the preprocess blocks of {regions} tiles of frame {frame} of stream {stream} {error}")]
    OutOfMemory {
        /// The (first) frame's stream.
        stream: u32,
        /// The (first) frame's number.
        frame: u64,
        /// Tiles (regions) in the call.
        regions: usize,
        /// The bytes they needed.
        error: octopipe_core::alloc::AllocError,
    },
}

/// Why a detector call's model runs failed ([`DetectError::Run`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The sessions failed: a fixed batch size's run, or ordering after the tiles' stream.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// ONNX Runtime failed a run (or making its input, or reading its outputs).
    #[error("{0}")]
    Ort(#[from] ort::Error),
    /// Finding the peaks on the GPU failed.
    #[error("{0}")]
    Cuda(#[from] octopipe_cuda::CudaError),
    /// The tiles' tensor is of another element type than the model's input.
    #[error("tiles of the wrong element type for the model's {0:?} input")]
    TileType(octopipe_core::tensor::DType),
    /// The tiles' tensor in device memory is too short for the regions run.
    #[error("the tiles' tensor ({have} elements in device memory) does not hold regions {start}..{end} as the model's {input}input")]
    TileRange {
        /// Elements it holds.
        have: usize,
        /// First region.
        start: usize,
        /// One past the last region.
        end: usize,
        /// The input's element type as the message names it (`"f32 "`, or empty).
        input: &'static str,
    },
    /// An output does not hold one result per region.
    #[error("output '{name}' has shape {shape:?}: {images} images for a batch of {n}")]
    OutputShape {
        /// The output.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
        /// The images it holds.
        images: usize,
        /// The regions run.
        n: usize,
    },
    /// octopipe's engine failed a run (`engine=octopipe`).
    #[error("octopipe's engine: {0}")]
    Engine(#[from] octopipe_engine::gpu::EngineError),
    /// `engine=octopipe` with no engine built (no batch size).
    #[error("octopipe's engine has no batch size to run")]
    NoEngine,
    /// The model's thread ended (it panicked) before the call's runs were done.
    #[error("the model's thread: {0}")]
    Thread(String),
    /// The call was started by another detector (one without a thread of its own).
    #[error("a call of another detector")]
    OtherDetector,
}

impl octopipe_core::error::Kind for DetectError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            DetectError::Onnx(e) => octopipe_core::error::Kind::kind(e),
            DetectError::Preprocess(e) => octopipe_core::error::Kind::kind(e),
            DetectError::Model { .. } | DetectError::Io { .. } | DetectError::Run { .. } => {
                ErrorKind::Model
            }
            DetectError::Tiles { .. } => ErrorKind::Config,
            DetectError::OutOfMemory { .. } => ErrorKind::Busy,
        }
    }
}

octopipe_core::error::stage_error!(DetectError);
