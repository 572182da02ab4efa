//! How the control plane serves: its tokens, its policy, the host names it answers to and its
//! caps, made from a station's options.

use std::net::{SocketAddr, ToSocketAddrs};

use super::consts::{DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_STREAMS};
use super::error::ControlError;
use super::guard::{self, Token};
use super::policy::Policy;

/// How the control plane serves.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// Bearer tokens taken on `/streams` (none: no token asked, loopback only).
    pub tokens: Vec<Token>,
    /// What streams from the network may be.
    pub policy: Policy,
    /// Host names (besides IP addresses and `localhost`) a request's `Host` may name.
    pub allow_hosts: Vec<String>,
    /// The most connections served at once; beyond, a 503 at once.
    pub max_connections: usize,
    /// The most streams added over HTTP that run at once; beyond, a 429.
    pub max_streams: usize,
    /// The most bytes of frames one stream added over HTTP may hold (its estimate, checked
    /// before it opens: [`octopipe_pipeline::pipeline::Streams::set_max_stream_memory`]).
    pub max_stream_memory: u64,
    /// The most bytes the streams added over HTTP may hold together, each from its admission
    /// until it has truly stopped
    /// ([`octopipe_pipeline::pipeline::Streams::set_memory_budget`]); beyond, a 429.
    pub memory_budget: u64,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            tokens: Vec::new(),
            policy: Policy::new(),
            allow_hosts: Vec::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_streams: DEFAULT_MAX_STREAMS,
            max_stream_memory: octopipe_pipeline::pipeline::DEFAULT_MAX_STREAM_MEMORY,
            memory_budget: octopipe_pipeline::pipeline::default_memory_budget(),
        }
    }
}

impl ControlConfig {
    /// A configuration from a station's options: the tokens of [`TOKEN_ENV`](crate::TOKEN_ENV)
    /// and of `token_file` (either is taken), the directories and elements streams may use, the
    /// host names `Host` may give, and the caps (each at least 1).
    pub fn from_options(
        token_file: Option<&std::path::Path>,
        dirs: &[std::path::PathBuf],
        elements: &[String],
        hosts: &[String],
        max_streams: usize,
        max_connections: usize,
    ) -> Result<ControlConfig, ControlError> {
        let mut config = ControlConfig {
            max_streams: max_streams.max(1),
            max_connections: max_connections.max(1),
            allow_hosts: hosts.to_vec(),
            ..ControlConfig::default()
        };
        config.tokens.extend(Token::from_env()?);
        if let Some(file) = token_file {
            config.tokens.push(Token::from_file(file)?);
        }
        for dir in dirs {
            config
                .policy
                .allow_dir(dir)
                .map_err(|source| ControlError::AllowDir {
                    dir: dir.display().to_string(),
                    source,
                })?;
        }
        for element in elements.iter().filter(|e| !e.is_empty()) {
            config.policy.allow_element(element);
        }
        Ok(config)
    }

    /// Whether streams may be taken on `addr`: every address it names is loopback, or the
    /// station has a token. Call it before listening.
    pub fn check_exposure(&self, addr: &str) -> Result<(), ControlError> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| ControlError::Listen {
                addr: addr.to_string(),
                reason: e.to_string(),
                source: Some(e),
            })?
            .collect();
        match self.tokens.is_empty() && !guard::loopback_only(&addrs) {
            true => Err(ControlError::Exposed(addr.to_string())),
            false => Ok(()),
        }
    }
}
