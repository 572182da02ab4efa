//! The control plane's errors, before it serves.

use super::consts::TOKEN_ENV;

/// Errors of the control plane, before it serves.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The address cannot be listened on.
    #[error("--metrics-addr {addr}: cannot listen: {reason}")]
    Listen {
        /// The address, as given.
        addr: String,
        /// Why not.
        reason: String,
        /// The system's error, where it said why.
        #[source]
        source: Option<std::io::Error>,
    },
    /// Streams on an address that is not loopback, with no token.
    #[error(
        "--metrics-addr {0} is not a loopback address: a station that takes streams there needs \
         an API token (set {TOKEN_ENV} or give --api-token-file FILE), or listen on 127.0.0.1"
    )]
    Exposed(String),
    /// A token that cannot be used.
    #[error("{what}: {reason}")]
    Token {
        /// Where it came from.
        what: String,
        /// What is wrong with it.
        reason: String,
        /// The system's error, where reading the token's file failed.
        #[source]
        source: Option<std::io::Error>,
    },
    /// A directory given with `--allow-dir` that cannot be used.
    #[error("--allow-dir {dir}: {source}")]
    AllowDir {
        /// The directory.
        dir: String,
        /// What is wrong (`NotADirectory`, or the system's error resolving it).
        source: std::io::Error,
    },
    /// The server's thread or runtime could not start.
    #[error("the control plane cannot start: {0}")]
    Start(#[source] std::io::Error),
}

impl octopipe_core::error::Kind for ControlError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            ControlError::Listen { .. } => ErrorKind::Network,
            ControlError::Exposed(_)
            | ControlError::Token { .. }
            | ControlError::AllowDir { .. } => ErrorKind::Config,
            ControlError::Start(_) => ErrorKind::Internal,
        }
    }
}
