//! One ONNX Runtime session of a model, on the CPU execution provider or on CUDA's ([`Ep`],
//! [`CudaOptions`]).

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use octopipe_cuda::StreamPriority;
use ort::session::Session;

use super::env::environment;
use super::error::OnnxError;

/// Environment variable: when set, every session writes ONNX Runtime's profile (a Chrome trace
/// of each run and node) to a JSON file whose name starts with its value.
pub(crate) const ORT_PROFILE_ENV: &str = "OCTOPIPE_ORT_PROFILE";

/// Which ONNX Runtime execution provider runs a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ep {
    /// CUDA's on this device ordinal when the ONNX Runtime build has it and the GPU is present,
    /// else the CPU's.
    Auto(i32),
    /// The CPU execution provider.
    Cpu,
    /// CUDA's, on this device ordinal; an error when it cannot be had.
    Cuda(i32),
}

impl Default for Ep {
    /// `Auto` on GPU 0.
    fn default() -> Self {
        Ep::Auto(0)
    }
}

/// How a model's sessions are built on CUDA's execution provider. The defaults are what every
/// model runs with; [`CudaOptions::graph`] needs fixed batch sizes
/// ([`Sessions::fix_sizes`](super::Sessions::fix_sizes)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CudaOptions {
    /// Capture each batch size's run once as a CUDA graph and replay it: one launch per run
    /// instead of one per node. Inputs and outputs are then bound to device buffers of their own,
    /// and every run of the fixed sizes happens on one thread of the sessions' own, where ONNX
    /// Runtime keeps the graphs: each is captured when the sizes are fixed
    /// ([`Sessions::fix_sizes`](super::Sessions::fix_sizes)) and only replayed after.
    pub graph: bool,
    /// Let ONNX Runtime run convolutions in NHWC (`prefer_nhwc`), which cuDNN's tensor-core
    /// kernels read directly.
    pub nhwc: bool,
    /// Search every cuDNN convolution algorithm once per shape (seconds at start-up) instead of
    /// taking cuDNN's heuristic choice.
    pub exhaustive: bool,
    /// Add each convolution's bias inside the cuDNN call (`fuse_conv_bias`) instead of in a
    /// pass of its own over the output.
    pub fuse_bias: bool,
    /// The priority of the sessions' CUDA stream.
    pub priority: StreamPriority,
}

/// The CUDA device and stream sessions run on: ONNX Runtime's CUDA execution provider queues its
/// work on `stream`, which [`Sessions::after`](super::Sessions::after) orders after a producer's
/// stream.
#[derive(Clone)]
pub(super) struct Cuda {
    pub(super) device: i32,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
}

/// A session on CUDA's execution provider, queuing its work on `cuda`'s stream.
pub(super) fn cuda_session(
    model: &Path,
    threads: usize,
    cuda: &Cuda,
    options: CudaOptions,
) -> Result<Session, OnnxError> {
    use ort::ep::cuda::ConvAlgorithmSearch;
    // SAFETY: the stream outlives the session: both belong to the same `Sessions`, whose
    // sessions are dropped before its `cuda` (field order).
    let ep = unsafe {
        ort::ep::CUDA::default()
            .with_device_id(cuda.device)
            .with_compute_stream(cuda.stream.cu_stream() as *mut ())
    }
    // By default the heuristic algorithm choice: an exhaustive search costs seconds per shape.
    .with_conv_algorithm_search(if options.exhaustive {
        ConvAlgorithmSearch::Exhaustive
    } else {
        ConvAlgorithmSearch::Heuristic
    })
    .with_cuda_graph(options.graph)
    .with_prefer_nhwc(options.nhwc)
    .with_fuse_conv_bias(options.fuse_bias)
    .build()
    .error_on_failure();
    build(model, threads, Some(ep))
}

/// An ONNX Runtime session for the model at `model` on the CPU execution provider, with `threads`
/// intra-op threads (0: ONNX Runtime's default).
pub fn session(model: &Path, threads: usize) -> Result<Session, OnnxError> {
    build(model, threads, None)
}

fn build(
    model: &Path,
    threads: usize,
    ep: Option<ort::ep::ExecutionProviderDispatch>,
) -> Result<Session, OnnxError> {
    let model_err = |reason: String| OnnxError::Model {
        path: model.display().to_string(),
        reason,
    };
    if !model.is_file() {
        return Err(model_err("no such file".into()));
    }
    let env = environment()?;
    // ONNX Runtime's worker threads spin between runs by default; with a pipeline of busy
    // stage threads on few cores that steals time from the other stages.
    let mut builder = Session::builder(env)
        .and_then(|b| Ok(b.with_config_entry("session.intra_op.allow_spinning", "0")?))
        .map_err(|e| model_err(e.to_string()))?;
    if threads > 0 {
        builder = builder
            .with_intra_threads(threads)
            .map_err(|e| model_err(e.to_string()))?;
    }
    if let Some(prefix) = std::env::var_os(ORT_PROFILE_ENV) {
        builder = builder
            .with_profiling(prefix)
            .map_err(|e| model_err(e.to_string()))?;
    }
    if let Some(ep) = ep {
        builder = builder
            .with_execution_providers([ep])
            .map_err(|e| model_err(format!("CUDA execution provider: {e}")))?;
    }
    builder
        .commit_from_file(model)
        .map_err(|e| model_err(format!("not a loadable ONNX model: {e}")))
}
