//! The running control plane: its server on a thread of its own, the streams it serves, and
//! the metrics it feeds.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::config::ControlConfig;
use super::error::ControlError;
use super::metrics::Metrics;
use super::{routes, server};
use octopipe_core::observer::Observer;
use octopipe_core::stage::Registry;
use octopipe_pipeline::describe::Builtin;
use octopipe_pipeline::pipeline::Streams;

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
            reason: e.to_string() + &hint(addr),
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
        streams.set_memory_budget(self.shared.config.memory_budget);
        tracing::info!(
            "streams added over HTTP: at most {} at once, --memory-budget {} bytes",
            self.shared.config.max_streams,
            self.shared.config.memory_budget
        );
        let metrics = self.shared.metrics.clone();
        streams.on_end(move |id| metrics.ended(id));
        self.shared.metrics.watch(streams.clone());
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

/// What to write instead of `addr` when it is a port alone (`9185`) or lacks its host
/// (`:9185`): the loopback address with that port.
fn hint(addr: &str) -> String {
    let port = addr.strip_prefix(':').unwrap_or(addr);
    match port.parse::<u16>() {
        Ok(port) => format!(
            " (an address is HOST:PORT: did you mean 127.0.0.1:{port}? 0.0.0.0:{port} listens on every interface)"
        ),
        Err(_) => String::new(),
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
