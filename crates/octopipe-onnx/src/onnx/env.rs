//! The process-wide ONNX Runtime environment, and its log lines through `tracing` like every
//! other log of octopipe: ONNX Runtime never writes to stderr itself (its default logger does,
//! which put a line such as a CUDA failure at teardown after a Python program's
//! `KeyboardInterrupt`). What a user sees is the front end's choice: the command line's log
//! filter; nothing in Python.

use std::sync::{Arc, OnceLock};

use ort::environment::{Environment, EnvironmentBuilder};
use ort::logging::LogLevel;

use super::error::{OnnxError, ORT_DYLIB_ENV};

/// The process-wide ONNX Runtime environment, loaded on first use.
pub fn environment() -> Result<&'static Environment, OnnxError> {
    static ENV: OnceLock<Result<Environment, (String, String)>> = OnceLock::new();
    let path = std::env::var(ORT_DYLIB_ENV).unwrap_or_else(|_| "libonnxruntime.so".into());
    ENV.get_or_init(|| {
        let fail = |e: &dyn std::fmt::Display| (path.clone(), e.to_string());
        let env = to_tracing(ort::init_from(&path).map_err(|e| fail(&e))?)
            .with_name("octopipe")
            .build()
            .map_err(|e| fail(&e))?;
        errors_only(&env);
        Ok(env)
    })
    .as_ref()
    .map_err(|(path, reason)| OnnxError::Runtime {
        path: path.clone(),
        reason: reason.clone(),
    })
}

/// `builder` with ONNX Runtime's log lines sent to `tracing` (target `onnxruntime`). An error
/// of a call also comes back as the call's status, which octopipe reports naming the model
/// (`inference failed: ...`): its log line is a note (`octopipe run -v`), not a second error.
fn to_tracing(builder: EnvironmentBuilder) -> EnvironmentBuilder {
    builder.with_logger(Arc::new(
        |level: LogLevel, _category: &str, _id: &str, location: &str, message: &str| match level {
            LogLevel::Verbose => tracing::trace!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Info => tracing::debug!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Warning => tracing::warn!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Error => tracing::info!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Fatal => tracing::error!(target: "onnxruntime", "{message} ({location})"),
        },
    ))
}

/// Log only errors, as ONNX Runtime's default logger does: a logger of its own is handed every
/// level, and formatting each verbose line would cost every session and run.
fn errors_only(env: &Environment) {
    env.set_log_level(LogLevel::Error);
}
