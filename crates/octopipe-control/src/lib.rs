//! octopipe's control plane (`octopipe::control`), over the runner (crates/octopipe-pipeline):
//! one HTTP address (`--metrics-addr`) that serves a run's Prometheus metrics and health to
//! anyone, and, for a run that takes streams while running (`octopipe run --streams`), adds,
//! lists and removes streams for whoever holds its token.
//! Anything that reaches it over the network is taken as hostile (docs/security.md: the threat
//! model, the defaults, each finding and how it is closed):
//!
//! ```text
//! export OCTOPIPE_API_TOKEN=$(openssl rand -hex 24)
//! octopipe run "batch max-frames=8 ! classify model=m.onnx ! mqtt" --streams \
//!     --metrics-addr 127.0.0.1:9184 --allow-dir /data/flights --max-streams 32
//! curl -s -X POST 127.0.0.1:9184/streams -H "Authorization: Bearer $OCTOPIPE_API_TOKEN" \
//!     -H 'Content-Type: application/json' \
//!     -d '{"id": 7, "source": "media location=rtsp://cam-7/stream ! boxes format=synthetic"}'
//! ```
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /metrics` | the metrics ([`Metrics`]), open to anyone |
//! | `GET /health` | `200 {"status":"running","streams":N}` (N: streams running, when it takes streams); `503 {"status":"finished"}` once the run is over; open to anyone |
//! | `GET /streams?after=ID&limit=N` | `200 [{"id","source","state","added","frames_in","processed","dropped","error"}, ...]`, at most `limit` (default 100, at most 1000) with an id after `after`; `X-Next-After: ID` when there are more |
//! | `POST /streams` with `{"source":"testsrc live=true ! boxes format=synthetic","id":7}` or `{"stages":[{"stage":"rtp","port":5004},{"stage":"boxes","format":"synthetic"}]}` | `201 {"id":7}`; `400` a bad description or input, `403` an element or file not allowed, `409` an id used in this run or a UDP port another stream receives on, `413` a body over 64 KiB, `415` not JSON, `429` `--max-streams` reached, `503` no more streams taken |
//! | `DELETE /streams/7?mode=drain` (or `mode=drop`) | `200 {"id":7,"mode":"drain"}`; `404` no such stream, `409` a stream of the description |
//!
//! Every `/streams` request must name this station in `Host` (an IP address, `localhost`, or a
//! name given with `--allow-host`) and, from a browser, come from its own `Origin` (403
//! otherwise: DNS rebinding, cross-site requests), and carry `Authorization: Bearer TOKEN` when
//! the station has a token (401 otherwise). A station refuses to take streams on an address
//! that is not loopback without a token ([`ControlConfig::check_exposure`]). What a stream may
//! be is [`Policy`]'s: octopipe's stages (`media`, `images`, `rtp`, `testsrc`, `boxes`,
//! `detect`, `track`, `head`), GStreamer elements only as listed with `--allow-element`, files
//! only under `--allow-dir`. Errors are JSON, `{"error":"..."}`, with credentials in URIs
//! (user information, secret query parameters) hidden.
//!
//! Nothing a client does starves `/health`: connections are capped in all and per client
//! address, and one over a cap still gets `/health` and `/metrics` answered (the server's probe
//! lane); a stream's description is parsed, checked and opened off the server's thread, without
//! the book of streams locked across the open.

#![warn(missing_docs)]

mod guard;
mod metrics;
mod policy;
mod routes;
mod server;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub use guard::{Token, MIN_TOKEN_LEN, NEED_TOKEN, TOKEN_ENV};
pub use metrics::{Metrics, KEPT_ENDED, LATENCY_BUCKETS};
pub use policy::{Policy, Refusal, URI_SCHEMES};

use octopipe_core::observer::Observer;
use octopipe_core::stage::Registry;
use octopipe_pipeline::describe::Builtin;
use octopipe_pipeline::pipeline::Streams;

/// Default most connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default most streams added over HTTP that run at once.
pub const DEFAULT_MAX_STREAMS: usize = 64;
/// A request's line and headers must arrive within this.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// A connection's whole exchange (head, body, answer) must be over within this.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// The most bytes of a request's line and headers (431 beyond).
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers of a request (431 beyond).
pub(crate) const MAX_HEADERS: usize = 64;
/// The largest request body taken (a stream's description; 413 beyond).
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// The most connections one client address holds at once: a quarter of `max_connections`, at
/// least 1; beyond, its connections are answered `/health` and `/metrics` only (the server's
/// probe lane).
pub(crate) fn per_client(max_connections: usize) -> usize {
    (max_connections / 4).max(1)
}

/// Streams in a page of `GET /streams` by default.
pub const DEFAULT_LIST: usize = 100;
/// The most streams in a page of `GET /streams`.
pub const MAX_LIST: usize = 1000;

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
        }
    }
}

impl ControlConfig {
    /// A configuration from a station's options: the tokens of [`TOKEN_ENV`] and of
    /// `token_file` (either is taken), the directories and elements streams may use, the host
    /// names `Host` may give, and the caps (each at least 1).
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

/// A running control plane: it serves until dropped.
pub struct ControlPlane {
    addr: SocketAddr,
    shared: Arc<routes::Shared>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// Listen on `addr` (port 0 picks a free one: [`ControlPlane::local_addr`]) with the
    /// default configuration: metrics and health, and streams (with
    /// [`ControlPlane::serve_streams`]) on loopback only.
    pub fn serve(addr: impl ToSocketAddrs) -> Result<ControlPlane, ControlError> {
        let addr = addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ControlError::Listen {
                addr: "?".into(),
                reason: "no address".into(),
                source: None,
            })?;
        ControlPlane::start(&addr.to_string(), ControlConfig::default())
    }

    /// Listen on `addr` with `config` and serve on a thread of its own.
    pub fn start(addr: &str, config: ControlConfig) -> Result<ControlPlane, ControlError> {
        let listen_error = |e: std::io::Error| ControlError::Listen {
            addr: addr.to_string(),
            reason: e.to_string(),
            source: Some(e),
        };
        let listener = std::net::TcpListener::bind(addr).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let local = listener.local_addr().map_err(listen_error)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(8)
            .thread_name("octopipe-control")
            .build()
            .map_err(ControlError::Start)?;
        let shared = Arc::new(routes::Shared {
            config,
            metrics: Metrics::new(),
            scrapes: AtomicU64::new(0),
            streams: Mutex::new(None),
            registry: Registry::builtin(),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let serving = shared.clone();
        let thread = thread::Builder::new()
            .name("octopipe-control".into())
            .spawn(move || {
                runtime.block_on(server::serve(listener, serving, stopped));
                // A stream being added on a blocking thread is not waited for long.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(ControlError::Start)?;
        Ok(ControlPlane {
            addr: local,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Serve `streams` too: `GET`, `POST /streams`, `DELETE /streams/{id}`, at most
    /// `max_streams` of them running at once. Refused on an address that is not loopback
    /// without a token.
    pub fn serve_streams(&self, streams: Streams) -> Result<(), ControlError> {
        self.shared.config.check_exposure(&self.addr.to_string())?;
        streams.set_max_streams(self.shared.config.max_streams);
        streams.set_max_stream_memory(self.shared.config.max_stream_memory);
        let metrics = self.shared.metrics.clone();
        streams.on_end(move |id| metrics.ended(id));
        if let Ok(mut slot) = self.shared.streams.lock() {
            *slot = Some(streams);
        }
        Ok(())
    }

    /// The address bound (with the port picked when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `GET /metrics` requests answered so far.
    pub fn scrapes(&self) -> u64 {
        self.shared
            .scrapes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The metrics' exposition text as a scrape would get it now.
    pub fn render(&self) -> String {
        self.shared.metrics.render()
    }

    /// The observer that feeds the metrics (add it with
    /// [`Pipeline::observe`](octopipe_pipeline::pipeline::Pipeline::observe)).
    pub fn observer(&self) -> Box<dyn Observer> {
        self.shared
            .metrics
            .observer(format!("http://{}/metrics", self.addr))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
