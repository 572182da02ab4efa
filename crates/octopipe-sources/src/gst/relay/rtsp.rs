//! A relay of the station's own between `rtspsrc` and an RTSP server, set as the element's
//! `proxy` (GStreamer 1.22's RTSP connection then opens its TCP connection to the relay and
//! sends its requests there unchanged): every message of the server is read here, whole and
//! within caps, before `rtspsrc` parses a byte of it, and the relay's sockets are closed when
//! the stream stops, so an `rtspsrc` blocked reading a server's answer returns.
//!
//! `rtspsrc` has no property that bounds an answer (headers, `Content-Length`, media
//! sections), and a check on a connection of our own before it would read another answer than
//! the one `rtspsrc` gets; the relay checks the very bytes it is handed:
//!
//! - a message head (status line and headers) of at most [`MAX_HEAD`] bytes and
//!   [`MAX_HEADERS`] lines;
//! - a body (`Content-Length`) of at most [`MAX_BODY`] bytes, an SDP of at most [`MAX_MEDIA`]
//!   media sections (`m=` lines);
//! - each message (and each interleaved RTP/RTCP packet, `$`-framed) whole within
//!   [`MESSAGE_DEADLINE`] of its first byte: a server that drips an answer cannot hold a
//!   stream.
//!
//! A message past a cap closes both connections; the stream fails with the cap named. The
//! requests `rtspsrc` sends go to the server as they are.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most bytes of one message head (status or request line and headers) of the server.
pub(super) const MAX_HEAD: usize = 64 << 10;
/// The most header lines of one message of the server.
pub(super) const MAX_HEADERS: usize = 128;
/// The most bytes of one message body of the server (`Content-Length`): an SDP is a few KiB.
pub(super) const MAX_BODY: usize = 64 << 10;
/// The most media sections (`m=` lines) of one SDP.
pub(super) const MAX_MEDIA: usize = 16;
/// The longest a message of the server may take from its first byte to its last.
pub(super) const MESSAGE_DEADLINE: Duration = Duration::from_secs(10);
/// The most connections `rtspsrc` opens through one relay (a reconnect opens a new relay).
const MAX_CONNECTIONS: usize = 4;
/// How long a blocked read or accept waits before looking whether the relay closed.
const POLL: Duration = Duration::from_millis(100);
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the relay calls with why it closed a connection (the stream's error).
pub(super) type OnRefuse = Box<dyn Fn(String) + Send + Sync>;

/// A relay for one `rtspsrc`: listening on 127.0.0.1, closed when dropped.
pub(super) struct Relay {
    port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    closed: AtomicBool,
    /// Every socket of the relay (clones), shut down when it closes.
    sockets: Mutex<Vec<TcpStream>>,
    on_refuse: OnRefuse,
    /// The server, as `host:port`, for messages.
    server: String,
}

impl Shared {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap_or_else(|e| e.into_inner()));
        for s in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Keep a clone of `socket` to shut it down at close (at once when closed already).
    fn keep(&self, socket: &TcpStream) {
        let Ok(clone) = socket.try_clone() else {
            let _ = socket.shutdown(Shutdown::Both);
            return;
        };
        let mut sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed() {
            let _ = clone.shutdown(Shutdown::Both);
            return;
        }
        sockets.push(clone);
    }

    fn refuse(&self, why: String) {
        if !self.closed() {
            (self.on_refuse)(format!(
                "the RTSP server {} answered past a bound of the station: {why}; the stream stops",
                self.server
            ));
        }
        self.close();
    }
}

impl Relay {
    /// A relay to the RTSP server at `host`:`port`, listening on a free port of 127.0.0.1;
    /// `on_refuse` is told why it closed a connection.
    pub(super) fn start(host: &str, port: u16, on_refuse: OnRefuse) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            closed: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            on_refuse,
            server: match host.contains(':') {
                true => format!("[{host}]:{port}"),
                false => format!("{host}:{port}"),
            },
        });
        let accepting = shared.clone();
        let host = host.to_string();
        std::thread::Builder::new()
            .name("octopipe-rtsp-relay".into())
            .spawn(move || accept(listener, &accepting, &host, port))?;
        Ok(Relay {
            port: local,
            shared,
        })
    }

    /// The port `rtspsrc` connects to (its `proxy`, `127.0.0.1:PORT`).
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// Close every connection: an `rtspsrc` reading through the relay gets the end of its
    /// stream.
    pub(super) fn close(&self) {
        self.shared.close();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.close();
    }
}

/// Take `rtspsrc`'s connections (at most [`MAX_CONNECTIONS`], from loopback) until the relay
/// closes; each gets its own connection to the server.
fn accept(listener: TcpListener, shared: &Arc<Shared>, host: &str, port: u16) {
    let mut taken = 0;
    while !shared.closed() {
        match listener.accept() {
            Ok((client, peer)) if peer.ip().is_loopback() && taken < MAX_CONNECTIONS => {
                taken += 1;
                let shared = shared.clone();
                let host = host.to_string();
                let spawned = std::thread::Builder::new()
                    .name("octopipe-rtsp-relay".into())
                    .spawn(move || relay(client, &shared, &host, port));
                if spawned.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Relay one connection: the client's requests to the server as they come (a thread of their
/// own), the server's messages to the client once each is whole and within the caps.
fn relay(client: TcpStream, shared: &Arc<Shared>, host: &str, port: u16) {
    let _ = client.set_nonblocking(false);
    shared.keep(&client);
    let server = match connect(host, port) {
        Ok(s) => s,
        Err(e) => {
            // Not a refusal: `rtspsrc` sees its connection end, as when the server is down,
            // and the source's own retries apply.
            tracing::debug!("RTSP relay: cannot connect to {}: {e}", shared.server);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    };
    shared.keep(&server);
    if shared.closed() {
        return;
    }
    if let (Ok(mut from), Ok(mut to)) = (client.try_clone(), server.try_clone()) {
        let copying = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("octopipe-rtsp-relay".into())
            .spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                // The client is gone: so is this connection.
                copying.close_pair(&from, &to);
            });
        if spawned.is_err() {
            return;
        }
    }
    answers(server, client, shared);
}

impl Shared {
    fn close_pair(&self, a: &TcpStream, b: &TcpStream) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    }
}

/// Connect to `host`:`port` (each address it resolves to, within [`CONNECT_TIMEOUT`]).
fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("the host resolves to no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Read the server's messages and hand each to the client once it is whole and within the
/// caps; past one, refuse (both connections close).
fn answers(mut server: TcpStream, mut client: TcpStream, shared: &Shared) {
    let _ = server.set_read_timeout(Some(POLL));
    let _ = client.set_write_timeout(Some(MESSAGE_DEADLINE));
    let mut pending: Vec<u8> = Vec::new();
    let mut started: Option<Instant> = None;
    let mut chunk = vec![0u8; 16 << 10];
    while !shared.closed() {
        match server.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                started.get_or_insert_with(Instant::now);
                pending.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        loop {
            match message_len(&pending) {
                Ok(Some(n)) => {
                    if client.write_all(&pending[..n]).is_err() {
                        shared.close_pair(&server, &client);
                        return;
                    }
                    pending.drain(..n);
                    started = (!pending.is_empty()).then(Instant::now);
                }
                Ok(None) => break,
                Err(why) => {
                    shared.refuse(why);
                    return;
                }
            }
        }
        if started.is_some_and(|t| t.elapsed() > MESSAGE_DEADLINE) {
            shared.refuse(format!(
                "a message took more than {} s to arrive (a server sending it byte by byte?)",
                MESSAGE_DEADLINE.as_secs()
            ));
            return;
        }
    }
    shared.close_pair(&server, &client);
}

/// The length of the message `bytes` start with once it is whole (`None`: more is needed), or
/// why it passes a cap: an interleaved packet (`$`, channel, 16-bit length), else an RTSP
/// message (head, then a body of its `Content-Length`).
pub(super) fn message_len(bytes: &[u8]) -> Result<Option<usize>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes[0] == b'$' {
        let Some(len) = bytes.get(2..4) else {
            return Ok(None);
        };
        let n = 4 + usize::from(u16::from_be_bytes([len[0], len[1]]));
        return Ok((bytes.len() >= n).then_some(n));
    }
    let within = &bytes[..bytes.len().min(MAX_HEAD)];
    let Some(end) = head_end(within) else {
        return match bytes.len() >= MAX_HEAD {
            true => Err(format!(
                "a message head of more than {MAX_HEAD} bytes (at most {MAX_HEAD})"
            )),
            false => Ok(None),
        };
    };
    let head = String::from_utf8_lossy(&bytes[..end]);
    let lines = head.lines().count();
    if lines > MAX_HEADERS + 1 {
        return Err(format!(
            "a message of {lines} header lines (at most {MAX_HEADERS})"
        ));
    }
    let mut body = 0usize;
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            body = match value.parse::<u64>() {
                Ok(n) if n <= MAX_BODY as u64 => n as usize,
                Ok(_) => {
                    return Err(format!(
                        "Content-Length {value}, more than {MAX_BODY} bytes (at most {MAX_BODY})"
                    ))
                }
                Err(_) => return Err(format!("Content-Length '{value}' is not a length")),
            };
        }
    }
    let total = end + body;
    let Some(content) = bytes.get(end..total) else {
        return Ok(None);
    };
    let media = content
        .split(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"m="))
        .count();
    if media > MAX_MEDIA {
        return Err(format!(
            "an SDP of {media} media sections (m= lines; at most {MAX_MEDIA})"
        ));
    }
    Ok(Some(total))
}

/// Where a message head ends (after its blank line: CRLF CRLF, or LF LF).
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The host and port (554 when none) of an `rtsp://`, `rtspt://` or `rtspu://` URI: those the
/// relay takes (`rtsps` is TLS to the server itself, `rtsph` a tunnel over HTTP: not relayed).
pub(super) fn relayed_server(uri: &str) -> Option<(String, u16)> {
    let (scheme, rest) = uri.split_once("://")?;
    if !matches!(
        scheme.to_ascii_lowercase().as_str(),
        "rtsp" | "rtspt" | "rtspu"
    ) {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    let port = match port {
        None | Some("") => 554,
        Some(p) => p.parse().ok()?,
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// Write `bytes` to `w`, for the tests' servers.
#[cfg(test)]
fn send(w: &mut impl Write, bytes: &[u8]) {
    let _ = w.write_all(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_whole_and_within_the_caps() {
        let ok = b"RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Length: 5\r\n\r\nm=a\r\nRTSP";
        assert_eq!(message_len(&ok[..20]), Ok(None));
        assert_eq!(message_len(ok), Ok(Some(ok.len() - 4)));
        assert_eq!(message_len(b"$\x00\x00\x03abc$"), Ok(Some(7)));
        assert_eq!(message_len(b"$\x00\x00\x03ab"), Ok(None));
        let huge = b"RTSP/1.0 200 OK\r\nContent-Length: 1500000000\r\n\r\n";
        assert!(message_len(huge)
            .unwrap_err()
            .contains("Content-Length 1500000000"));
        let mut endless = b"RTSP/1.0 200 OK\r\nX: ".to_vec();
        endless.extend(vec![b'a'; MAX_HEAD]);
        assert!(message_len(&endless)
            .unwrap_err()
            .contains("head of more than 65536"));
        let mut sdp = String::new();
        for _ in 0..17 {
            sdp += "m=video 0 RTP/AVP 96\r\n";
        }
        let many = format!(
            "RTSP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{sdp}",
            sdp.len()
        );
        assert!(message_len(many.as_bytes())
            .unwrap_err()
            .contains("17 media sections"));
        let lines = format!("RTSP/1.0 200 OK\r\n{}\r\n", "X: y\r\n".repeat(200));
        assert!(message_len(lines.as_bytes())
            .unwrap_err()
            .contains("header lines"));
    }

    #[test]
    fn the_server_of_a_relayed_uri() {
        let s = |u: &str| relayed_server(u);
        assert_eq!(s("rtsp://cam:8554/x"), Some(("cam".into(), 8554)));
        assert_eq!(s("RTSPT://u:p@cam/x"), Some(("cam".into(), 554)));
        assert_eq!(s("rtsp://[::1]:99/x"), Some(("::1".into(), 99)));
        assert_eq!(s("rtsps://cam/x"), None);
        assert_eq!(s("http://cam/x"), None);
        assert_eq!(s("rtsp://cam:bad/x"), None);
    }

    #[test]
    fn a_relay_passes_what_is_whole_and_closes_on_what_is_not() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let refused = Arc::new(Mutex::new(None));
        let r = refused.clone();
        let relay = Relay::start(
            "127.0.0.1",
            port,
            Box::new(move |why| *r.lock().unwrap() = Some(why)),
        )
        .unwrap();
        let serving = std::thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            let mut buf = [0u8; 256];
            let _ = conn.read(&mut buf);
            send(&mut conn, b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n");
            send(
                &mut conn,
                b"RTSP/1.0 200 OK\r\nContent-Length: 1500000000\r\n\r\n",
            );
            std::thread::sleep(Duration::from_millis(500));
        });
        let mut client = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        client
            .write_all(b"OPTIONS rtsp://x/ RTSP/1.0\r\nCSeq: 1\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let _ = client.read_to_end(&mut got);
        assert_eq!(got, b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n");
        let why = refused.lock().unwrap().clone().unwrap();
        assert!(
            why.contains("Content-Length 1500000000, more than 65536"),
            "{why}"
        );
        serving.join().unwrap();
    }
}
