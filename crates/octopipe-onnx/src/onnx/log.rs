//! ONNX Runtime's own log lines, through `tracing` like every other log of octopipe: ONNX
//! Runtime never writes to stderr itself (its default logger does, which put a line such as a
//! CUDA failure at teardown after a Python program's `KeyboardInterrupt`). What a user sees is
//! the front end's choice: the command line's log filter; nothing in Python.

use std::sync::Arc;

use ort::environment::{Environment, EnvironmentBuilder};
use ort::logging::LogLevel;

/// `builder` with ONNX Runtime's log lines sent to `tracing` (target `onnxruntime`).
pub(super) fn to_tracing(builder: EnvironmentBuilder) -> EnvironmentBuilder {
    builder.with_logger(Arc::new(
        |level: LogLevel, _category: &str, _id: &str, location: &str, message: &str| match level {
            LogLevel::Verbose => tracing::trace!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Info => tracing::debug!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Warning => tracing::warn!(target: "onnxruntime", "{message} ({location})"),
            LogLevel::Error | LogLevel::Fatal => {
                tracing::error!(target: "onnxruntime", "{message} ({location})")
            }
        },
    ))
}

/// Log only errors, as ONNX Runtime's default logger does: a logger of its own is handed every
/// level, and formatting each verbose line would cost every session and run.
pub(super) fn errors_only(env: &Environment) {
    env.set_log_level(LogLevel::Error);
}
