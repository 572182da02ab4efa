//! The sink stages' error: an output file or a broker that failed.

use octopipe_core::error::ErrorKind;

/// Errors of the sink stages: an output file ([`ErrorKind::Io`]) or a broker
/// ([`ErrorKind::Network`]) that failed, with the typed cause (an `io::Error`, the broker
/// client's error) as `source()` where there is one.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
#[non_exhaustive]
pub struct SinkError {
    /// The output: a file, or a broker (`mqtt HOST:PORT`).
    pub path: String,
    /// What went wrong (with the cause's words).
    pub reason: String,
    kind: ErrorKind,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl SinkError {
    /// An output file (or folder, or stdout) that failed.
    pub fn io(path: impl Into<String>, reason: String) -> Self {
        SinkError {
            path: path.into(),
            reason,
            kind: ErrorKind::Io,
            source: None,
        }
    }

    /// A broker (or its connection, or its sending thread) that failed.
    pub fn network(path: impl Into<String>, reason: String) -> Self {
        SinkError {
            kind: ErrorKind::Network,
            ..Self::io(path, reason)
        }
    }

    /// The same error, with `cause` as its `source()` (its words are in the reason already).
    pub(crate) fn caused_by(
        mut self,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Box::new(cause));
        self
    }
}

impl octopipe_core::error::Kind for SinkError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

octopipe_core::error::stage_error!(SinkError);
