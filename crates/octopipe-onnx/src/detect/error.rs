//! The detect stage's errors: the stage's ([`DetectError`]), the model's input and outputs'
//! ([`IoError`]) and a call's model runs' ([`RunError`]).

use super::decode::ShapeError;
use super::Decoder;
use crate::onnx::OnnxError;
use octopipe_stages::preprocess::{DType, PreprocessError};

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
        source: IoError,
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

/// Why the model's input or outputs do not fit the detect stage as configured
/// ([`DetectError::Io`] names the model).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The model has no input.
    #[error("has no inputs")]
    NoInput,
    /// The input is not a tensor.
    #[error("input '{0}' is not a tensor")]
    NotTensor(String),
    /// The input's element type is not f32 or f16.
    #[error("input '{name}' is {ty}: a float32 or float16 image is needed")]
    InputType {
        /// The input.
        name: String,
        /// Its element type, as ONNX Runtime names it.
        ty: String,
    },
    /// The input is not an image of 3 channels.
    #[error("input '{name}' is {shape:?}: an image [batch, 3, height, width] or [batch, height, width, 3] is needed")]
    NotImage {
        /// The input.
        name: String,
        /// Its shape.
        shape: Vec<i64>,
    },
    /// The input is larger than a model input may be.
    #[error("input '{name}' is {w}x{h}: larger than the {side}x{side} a model input may be")]
    TooLarge {
        /// The input.
        name: String,
        /// Its width.
        w: i64,
        /// Its height.
        h: i64,
        /// The largest side.
        side: i64,
    },
    /// `size=` differs from the model's fixed input size.
    #[error("input '{name}' is {}x{}, but size={}x{} was given (leave size unset)", .model.0, .model.1, .given.0, .given.1)]
    SizeGiven {
        /// The input.
        name: String,
        /// Its (width, height).
        model: (u32, u32),
        /// `size=`.
        given: (u32, u32),
    },
    /// A dynamic input size and no `size=`.
    #[error("input '{name}' has a dynamic size {shape:?}: set detect size=WxH")]
    DynamicSize {
        /// The input.
        name: String,
        /// Its shape.
        shape: Vec<i64>,
    },
    /// `output=` names an output the model does not have.
    #[error("has no output '{want}' (outputs: {outputs})")]
    NoOutput {
        /// The name given.
        want: String,
        /// The model's outputs with their shapes.
        outputs: String,
    },
    /// `decoder=centernet` and no pair of outputs reads as its heads.
    #[error("no CenterNet heads among its outputs ({outputs}): scores [batch, classes, h, w] and distances [batch, 4, h, w]; or name them, output=SCORES,DISTANCES")]
    NoHeads {
        /// The model's outputs with their shapes.
        outputs: String,
    },
    /// `decoder=centernet` with `output=` naming other than two outputs.
    #[error("decoder=centernet reads two outputs: output=SCORES,DISTANCES")]
    TwoHeads,
    /// The output named fits no decoder.
    #[error(
        "output '{name}' {shape:?} fits no decoder: set decoder=end2end|yolov8|yolov5|centernet"
    )]
    NoDecoder {
        /// The output.
        name: String,
        /// Its shape.
        shape: Vec<i64>,
    },
    /// No output reads as detections with the decoder.
    #[error("no output reads as detections with decoder={decoder} (outputs: {outputs}); set decoder= and output=")]
    NoDetections {
        /// The decoder (`auto` when none was set).
        decoder: &'static str,
        /// The model's outputs with their shapes.
        outputs: String,
    },
    /// `output=` names more outputs than a one-output decoder reads.
    #[error("output names {count} outputs; decoder={decoder} reads one")]
    OutputCount {
        /// Outputs named.
        count: usize,
        /// The decoder (`auto` when none was set).
        decoder: &'static str,
    },
    /// A metadata value octopipe reads is none of those it knows.
    #[error("its metadata {key} is '{value}': {allowed}")]
    Metadata {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
        /// The values it may have.
        allowed: &'static str,
    },
    /// `labels=` names another number of classes than the scores have.
    #[error("{}", labels_message(.labels, *.classes, .hint))]
    Labels {
        /// The scores' classes.
        classes: usize,
        /// `labels=`.
        labels: Vec<String>,
        /// How to keep only some classes, where fewer labels than classes were given (or
        /// empty).
        hint: String,
    },
    /// An output read has a shape its decoder does not read.
    #[error("output '{name}' is {shape:?}: {source}")]
    OutputShape {
        /// The output.
        name: String,
        /// Its shape.
        shape: Vec<i64>,
        /// Why the decoder does not read it.
        source: ShapeError,
    },
    /// An output read is not f32 or f16.
    #[error("output '{0}' is not a float32 or float16 tensor")]
    OutputType(String),
    /// `engine=octopipe` and the model's input or outputs are not what the engine runs.
    #[error("engine=octopipe runs a CenterNet with an f16 NHWC input and f16 heads (the shared CenterNet's heads model, docs/engine.md); {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotForEngine(Vec<Unfit>),
}

/// What of the model's input and outputs, as the stage reads them, `engine=octopipe` does not
/// run ([`IoError::NotForEngine`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unfit {
    /// The input's element type (not f16).
    #[error("its input is {}, not f16", dtype_name(*.0))]
    InputType(DType),
    /// The input is NCHW.
    #[error("its input is NCHW, not NHWC")]
    Nchw,
    /// The outputs are not CenterNet's two heads (read by this decoder).
    #[error("its outputs are read as {0:?}, not as CenterNet's two heads")]
    Outputs(Decoder),
    /// An output's element type (not f16).
    #[error("output '{name}' is {}, not f16", dtype_name(*.dtype))]
    OutputType {
        /// The output.
        name: String,
        /// Its element type.
        dtype: DType,
    },
}

/// An element type as the messages write it.
fn dtype_name(t: DType) -> &'static str {
    match t {
        DType::F32 => "f32",
        DType::F16 => "f16",
    }
}

/// [`IoError::Labels`] in words: the first labels, then `hint`.
fn labels_message(labels: &[String], classes: usize, hint: &str) -> String {
    let more = if labels.len() > 3 { ",..." } else { "" };
    format!(
        "its scores have {classes} classes but the labels name {} ({}{more}): give one name per class, in class-index order{hint}",
        labels.len(),
        labels[..labels.len().min(3)].join(","),
    )
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
