//! ONNX Runtime, shared by the stages that run models (classify, detect).
//!
//! The library is loaded at run time from `ORT_DYLIB_PATH` (default `libonnxruntime.so`); one
//! environment is shared by the whole process. A session runs on the CPU execution provider or on
//! CUDA's ([`Ep`]): the CUDA one needs an ONNX Runtime build with it (pip `onnxruntime-gpu`) and
//! a GPU; `Ep::Auto` takes it when both are there and otherwise says why in one log line.

use std::path::Path;
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;

/// Environment variable naming the ONNX Runtime library.
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";
/// The ONNX Runtime version octopipe is built against.
pub const ORT_VERSION: &str = "1.31.1";

/// ONNX Runtime or a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The ONNX Runtime library could not be loaded.
    #[error("ONNX Runtime library {path}: {reason}\n  hint: pip install onnxruntime=={ORT_VERSION} and set {ORT_DYLIB_ENV} to its onnxruntime/capi/libonnxruntime.so.{ORT_VERSION} (scripts/setup.sh does both)")]
    Runtime {
        /// The library path tried.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The model file could not be loaded.
    #[error("model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// A model's class names from a labels file: one per line, trimmed, blank lines skipped.
pub fn read_labels(path: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// The process-wide ONNX Runtime environment, loaded on first use.
pub fn environment() -> Result<&'static Environment, OnnxError> {
    static ENV: OnceLock<Result<Environment, (String, String)>> = OnceLock::new();
    let path = std::env::var(ORT_DYLIB_ENV).unwrap_or_else(|_| "libonnxruntime.so".into());
    ENV.get_or_init(|| {
        let fail = |e: &dyn std::fmt::Display| (path.clone(), e.to_string());
        ort::init_from(&path)
            .map_err(|e| fail(&e))?
            .with_name("octopipe")
            .build()
            .map_err(|e| fail(&e))
    })
    .as_ref()
    .map_err(|(path, reason)| OnnxError::Runtime {
        path: path.clone(),
        reason: reason.clone(),
    })
}

/// Which ONNX Runtime execution provider runs a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ep {
    /// CUDA's when the ONNX Runtime build has it and a GPU is present, else the CPU's.
    #[default]
    Auto,
    /// The CPU execution provider.
    Cpu,
    /// CUDA's, on this device ordinal; an error when it cannot be had.
    Cuda(i32),
}

/// An ONNX Runtime session for the model at `model`, with `threads` intra-op threads (0: ONNX
/// Runtime's default), on `ep`. Returns whether it runs on CUDA.
pub fn session_on(model: &Path, threads: usize, ep: Ep) -> Result<(Session, bool), OnnxError> {
    let device = match ep {
        Ep::Cpu => return Ok((session(model, threads)?, false)),
        Ep::Cuda(d) => d,
        Ep::Auto => match crate::preprocess::cuda::available() {
            Ok(()) => 0,
            Err(why) => {
                tracing::info!("{}: ONNX Runtime on the CPU ({why})", model.display());
                return Ok((session(model, threads)?, false));
            }
        },
    };
    // Batches come in every size: an exhaustive cuDNN search would run anew for each new one.
    let cuda = ort::ep::CUDA::default()
        .with_device_id(device)
        .with_conv_algorithm_search(ort::ep::cuda::ConvAlgorithmSearch::Heuristic)
        .build()
        .error_on_failure();
    match build(model, threads, Some(cuda)) {
        Ok(s) => Ok((s, true)),
        Err(OnnxError::Model { reason, .. }) if ep == Ep::Auto => {
            tracing::info!("{}: ONNX Runtime on the CPU ({reason})", model.display());
            Ok((session(model, threads)?, false))
        }
        Err(e) => Err(e),
    }
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
    if let Some(ep) = ep {
        builder = builder
            .with_execution_providers([ep])
            .map_err(|e| model_err(format!("CUDA execution provider: {e}")))?;
    }
    builder
        .commit_from_file(model)
        .map_err(|e| model_err(format!("not a loadable ONNX model: {e}")))
}
