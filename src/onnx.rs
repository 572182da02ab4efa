//! ONNX Runtime, shared by the stages that run models (classify, detect).
//!
//! The library is loaded at run time from `ORT_DYLIB_PATH` (default `libonnxruntime.so`); one
//! environment is shared by the whole process.

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

/// An ONNX Runtime session for the model at `model`, with `threads` intra-op threads (0: ONNX
/// Runtime's default).
pub fn session(model: &Path, threads: usize) -> Result<Session, OnnxError> {
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
    builder
        .commit_from_file(model)
        .map_err(|e| model_err(format!("not a loadable ONNX model: {e}")))
}
