//! A relay's listener, its connections' sockets (closed with it) and what its threads share;
//! the protocol's own reading is [`super::rtsp`]'s or [`super::http`]'s.

use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most bytes of one message head (status or request line and headers).
pub(in crate::gst) const MAX_HEAD: usize = 64 << 10;
/// The most header lines of one message.
pub(in crate::gst) const MAX_HEADERS: usize = 128;
/// The longest a message head (and an RTSP message, or an HTTP document, whole) may take from
/// its first byte to its last.
pub(in crate::gst) const MESSAGE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a blocked read or accept waits before looking whether the relay closed.
pub(super) const POLL: Duration = Duration::from_millis(100);
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the relay calls with why it closed a connection (the stream's error).
pub(in crate::gst) type OnRefuse = Box<dyn Fn(String) + Send + Sync>;

/// How one connection of a source element is relayed (the protocol's own reading).
pub(super) type Serve = fn(TcpStream, &Arc<Shared>);

/// The protocol a relay speaks, and so how it reads the server's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protocol {
    /// RTSP, `rtspsrc` connecting to the relay as to its proxy.
    Rtsp,
    /// HTTP, `souphttpsrc` reading from the relay's address.
    Http,
}

impl Protocol {
    pub(super) fn name(self) -> &'static str {
        match self {
            Protocol::Rtsp => "RTSP",
            Protocol::Http => "HTTP",
        }
    }

    /// The most connections taken: in all for RTSP (a reconnect opens a new relay), at once
    /// for HTTP (an HLS stream fetches each playlist and segment on its own connection).
    fn max_connections(self) -> usize {
        match self {
            Protocol::Rtsp => 4,
            Protocol::Http => 8,
        }
    }
}

/// A relay for one source element: listening on 127.0.0.1, closed when dropped. Made by
/// [`super::rtsp::start`] or [`super::http::start`].
pub(in crate::gst) struct Relay {
    port: u16,
    shared: Arc<Shared>,
}

/// What a relay's threads share.
pub(super) struct Shared {
    pub(super) closed: AtomicBool,
    /// Every socket of the relay (clones, with an id), shut down when it closes.
    pub(super) sockets: Mutex<Vec<(u64, TcpStream)>>,
    /// The id of the next socket kept.
    pub(super) next: AtomicU64,
    pub(super) on_refuse: OnRefuse,
    pub(super) protocol: Protocol,
    /// The server's host (without brackets) and port.
    pub(super) host: String,
    pub(super) port: u16,
    /// The server, as `host:port`, for messages.
    pub(super) server: String,
    /// The relay's own port on 127.0.0.1.
    pub(super) local: u16,
    /// Connections being relayed now (HTTP).
    pub(super) active: AtomicUsize,
}

impl Shared {
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, s) in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub(super) fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Keep a clone of `socket` to shut it down at close (at once when closed already); its
    /// id, to [`forget`](Shared::forget) it once its connection is over.
    pub(super) fn keep(&self, socket: &TcpStream) -> u64 {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let Ok(clone) = socket.try_clone() else {
            let _ = socket.shutdown(Shutdown::Both);
            return id;
        };
        let mut sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed() {
            let _ = clone.shutdown(Shutdown::Both);
            return id;
        }
        sockets.push((id, clone));
        id
    }

    /// Let the socket kept as `id` go (its connection is over: HTTP opens one per request).
    pub(super) fn forget(&self, id: u64) {
        let mut sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        sockets.retain(|(i, _)| *i != id);
    }

    /// Close the relay for `why`, telling the stream (once).
    pub(super) fn refuse(&self, why: String) {
        if !self.closed() {
            (self.on_refuse)(format!(
                "the {} server {} answered past a bound of the station: {why}; the stream stops",
                self.protocol.name(),
                self.server
            ));
        }
        self.close();
    }

    pub(super) fn close_pair(&self, a: &TcpStream, b: &TcpStream) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    }
}

impl Relay {
    /// A relay of `protocol` to the server at `host`:`port`, listening on a free port of
    /// 127.0.0.1, each connection relayed by `serve`; `on_refuse` is told why it closed a
    /// connection.
    pub(super) fn start(
        protocol: Protocol,
        serve: Serve,
        host: &str,
        port: u16,
        on_refuse: OnRefuse,
    ) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            closed: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            on_refuse,
            protocol,
            host: host.to_string(),
            port,
            server: match host.contains(':') {
                true => format!("[{host}]:{port}"),
                false => format!("{host}:{port}"),
            },
            local,
            active: AtomicUsize::new(0),
        });
        let accepting = shared.clone();
        std::thread::Builder::new()
            .name("octopipe-relay".into())
            .spawn(move || accept(listener, &accepting, serve))?;
        Ok(Relay {
            port: local,
            shared,
        })
    }

    /// The port the source element connects to on 127.0.0.1.
    pub(in crate::gst) fn port(&self) -> u16 {
        self.port
    }

    /// Close every connection: an element reading through the relay gets the end of its
    /// stream.
    pub(in crate::gst) fn close(&self) {
        self.shared.close();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.close();
    }
}

/// Take the element's connections (from loopback, within the protocol's count) until the relay
/// closes; each gets its own connection to the server.
fn accept(listener: TcpListener, shared: &Arc<Shared>, serve: Serve) {
    let max = shared.protocol.max_connections();
    let mut taken = 0;
    while !shared.closed() {
        match listener.accept() {
            Ok((client, peer)) if peer.ip().is_loopback() => {
                let full = match shared.protocol {
                    Protocol::Rtsp => taken >= max,
                    Protocol::Http => shared.active.load(Ordering::SeqCst) >= max,
                };
                if full {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                taken += 1;
                shared.active.fetch_add(1, Ordering::SeqCst);
                let conn = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("octopipe-relay".into())
                    .spawn(move || {
                        let _ = client.set_nonblocking(false);
                        let id = conn.keep(&client);
                        serve(client, &conn);
                        conn.forget(id);
                        conn.active.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Connect to `host`:`port` (each address it resolves to, within [`CONNECT_TIMEOUT`]).
pub(super) fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("the host resolves to no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Write `bytes` to `w`, for the tests' servers.
#[cfg(test)]
pub(super) fn send(w: &mut impl std::io::Write, bytes: &[u8]) {
    let _ = w.write_all(bytes);
}

/// The shared state of an HTTP relay to `host`:`port` listening on port 7, for unit tests and
/// the fuzz targets.
#[cfg(any(test, fuzzing))]
pub(super) fn test_shared(host: &str, port: u16) -> Shared {
    Shared {
        closed: Default::default(),
        sockets: Default::default(),
        next: Default::default(),
        on_refuse: Box::new(|_| {}),
        protocol: Protocol::Http,
        host: host.into(),
        port,
        server: format!("{host}:{port}"),
        local: 7,
        active: Default::default(),
    }
}
