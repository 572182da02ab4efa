//! The HTTP relay: `souphttpsrc` reads from `http://127.0.0.1:PORT/...` instead of the server
//! ([`HttpTarget::through`]), so that what an HLS or DASH demuxer resolves against the
//! playlist's URI (its variants, its reloads, its segments) comes through the relay too. One
//! request per connection: the request goes to the server with its `Host`, asking for no
//! compression and `Connection: close`; the answer comes back capped:
//!
//! - a head within [`MAX_HEAD`](super::MAX_HEAD) bytes and [`MAX_HEADERS`](super::MAX_HEADERS)
//!   lines, whole within [`MESSAGE_DEADLINE`] of its first byte;
//! - a redirect only to the same server (its `Location` rewritten to the relay); one to another
//!   server is refused, naming it;
//! - a **document** (a playlist or manifest: its `Content-Type`, its path's extension, or its
//!   first bytes `#EXT` or `<` say so) read whole, uncompressed, within [`MAX_DOCUMENT`]
//!   bytes and [`MESSAGE_DEADLINE`]; its URIs on the server rewritten to the relay; an HLS
//!   playlist naming another server's URI is refused (the demuxer would fetch it uncapped);
//! - a **media** body (anything else) handed on as it comes: it is a stream, bounded by its
//!   rate: at least [`MIN_MEDIA_BYTES`] in every [`MEDIA_WINDOW`] spent waiting for it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::body::{fill, is_document, read_document, rewrite, waiting, Failure, SNIFF};
use super::head::{header, status, whole_head};
use super::shared::{connect, OnRefuse, Protocol, Relay, Shared, MESSAGE_DEADLINE, POLL};
use octopipe_core::redact;

/// The span of waiting for a media body over which [`MIN_MEDIA_BYTES`] must come.
pub(in crate::gst) const MEDIA_WINDOW: Duration = Duration::from_secs(10);

/// The fewest bytes of a media body in each [`MEDIA_WINDOW`] (a live video stream sends far
/// more; a server dripping its body sends less).
pub(in crate::gst) const MIN_MEDIA_BYTES: usize = 1024;

/// An `http://` URI's server and the rest of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::gst) struct HttpTarget {
    /// The host, without brackets.
    pub host: String,
    /// The port (80 when none).
    pub port: u16,
    /// `user:password`, if any.
    userinfo: Option<String>,
    /// The path, query and fragment (`/` when none).
    rest: String,
}

impl HttpTarget {
    /// The same URI on the relay listening on 127.0.0.1:`local`.
    pub(in crate::gst) fn through(&self, local: u16) -> String {
        let user = self
            .userinfo
            .as_deref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        format!("http://{user}127.0.0.1:{local}{}", self.rest)
    }
}

/// The server of an `http://` URI (`https` is TLS to the server itself: not relayed).
pub(in crate::gst) fn relayed_http(uri: &str) -> Option<HttpTarget> {
    let (scheme, rest) = uri.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
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
        None | Some("") => 80,
        Some(p) => p.parse().ok()?,
    };
    let rest = match &rest[end..] {
        "" => "/".to_string(),
        r if r.starts_with('/') => r.to_string(),
        r => format!("/{r}"),
    };
    (!host.is_empty()).then(|| HttpTarget {
        host: host.to_string(),
        port,
        userinfo,
        rest,
    })
}

/// A relay to the HTTP server at `host`:`port` for one `souphttpsrc` (reading from
/// [`HttpTarget::through`] the relay's port).
pub(in crate::gst) fn start(host: &str, port: u16, on_refuse: OnRefuse) -> std::io::Result<Relay> {
    Relay::start(Protocol::Http, relay, host, port, on_refuse)
}

/// Relay one request of `souphttpsrc` and its answer.
fn relay(client: TcpStream, shared: &Arc<Shared>) {
    let mut server = None;
    match exchange(&client, shared, &mut server) {
        Ok(()) => {}
        Err(Failure::Refused(why)) => shared.refuse(why),
        Err(Failure::Gone) => {}
    }
    let _ = client.shutdown(Shutdown::Both);
    if let Some((id, server)) = server {
        let _ = server.shutdown(Shutdown::Both);
        shared.forget(id);
    }
}

/// Relay the request on `client` and its answer; the connection to the server (with its id
/// among the kept sockets) left in `kept`.
fn exchange(
    client: &TcpStream,
    shared: &Arc<Shared>,
    kept: &mut Option<(u64, TcpStream)>,
) -> Result<(), Failure> {
    let (request, leftover) = read_head(client, shared, "a request")?;
    let request = String::from_utf8_lossy(&request);
    let (to_server, path) = request_to_server(&request, shared).ok_or(Failure::Gone)?;
    let mut server = connect(&shared.host, shared.port).map_err(|e| {
        // Not a refusal: `souphttpsrc` sees its connection end, as when the server is down.
        tracing::debug!("HTTP relay: cannot connect to {}: {e}", shared.server);
        Failure::Gone
    })?;
    *kept = Some((shared.keep(&server), server.try_clone()?));
    server.write_all(to_server.as_bytes())?;
    server.write_all(&leftover)?;
    // A request body (none for GET) goes as it comes.
    if let (Ok(mut from), Ok(mut to)) = (client.try_clone(), server.try_clone()) {
        let _ = std::thread::Builder::new()
            .name("octopipe-relay".into())
            .spawn(move || {
                let _ = from.set_read_timeout(None);
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Both);
            });
    }
    let (head, mut body) = read_head(&server, shared, "a response head")?;
    let started = Instant::now();
    let head = String::from_utf8_lossy(&head).into_owned();
    let code = status(&head).unwrap_or(0);
    let mut location = None;
    if let (300..=399, Some(to)) = (code, header(&head, "location")) {
        location = Some(redirect(code, to, shared).map_err(Failure::Refused)?);
    }
    fill(&server, &mut body, SNIFF, started, shared)?;
    let mut client = client.try_clone()?;
    match is_document(header(&head, "content-type"), &path, &body) {
        true => {
            let document = read_document(&server, &head, body, started, shared)?;
            let document = rewrite(&document, shared)?;
            let head = response_head(&head, location.as_deref(), Some(document.len()));
            client.write_all(head.as_bytes())?;
            client.write_all(&document)?;
        }
        false => {
            let head = response_head(&head, location.as_deref(), None);
            client.write_all(head.as_bytes())?;
            client.write_all(&body)?;
            pump(&server, &mut client, shared)?;
        }
    }
    Ok(())
}

/// Read a message head from `stream` (whole within the caps, and within
/// [`MESSAGE_DEADLINE`] of its first byte); the head and the bytes read after it.
fn read_head(
    mut stream: &TcpStream,
    shared: &Shared,
    what: &str,
) -> Result<(Vec<u8>, Vec<u8>), Failure> {
    let _ = stream.set_read_timeout(Some(POLL));
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8 << 10];
    let mut started: Option<Instant> = None;
    loop {
        if shared.closed() {
            return Err(Failure::Gone);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Failure::Gone),
            Ok(n) => {
                started.get_or_insert_with(Instant::now);
                bytes.extend_from_slice(&chunk[..n]);
            }
            Err(e) if waiting(&e) => {}
            Err(_) => return Err(Failure::Gone),
        }
        if let Some(end) = whole_head(&bytes).map_err(Failure::Refused)? {
            let rest = bytes.split_off(end);
            return Ok((bytes, rest));
        }
        if started.is_some_and(|t| t.elapsed() > MESSAGE_DEADLINE) {
            return Err(Failure::Refused(format!(
                "{what} took more than {} s to arrive (a server sending it byte by byte?)",
                MESSAGE_DEADLINE.as_secs()
            )));
        }
    }
}

/// The request for the server (origin-form target, the server's `Host`, no compression, one
/// request per connection) and its path; `None` for what is no request.
fn request_to_server(head: &str, shared: &Shared) -> Option<(String, String)> {
    let mut lines = head.lines();
    let mut words = lines.next()?.split_whitespace();
    let (method, target, version) = (words.next()?, words.next()?, words.next()?);
    let target = match target.split_once("://") {
        Some((_, rest)) => match rest.find('/') {
            Some(i) => &rest[i..],
            None => "/",
        },
        None => target,
    };
    let mut out = format!("{method} {target} {version}\r\n");
    const DROPPED: &[&str] = &[
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "accept-encoding",
        "te",
        "upgrade",
    ];
    for line in lines.take_while(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim();
        if !DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            out += line;
            out += "\r\n";
        }
    }
    let host = match shared.host.contains(':') {
        true => format!("[{}]", shared.host),
        false => shared.host.clone(),
    };
    match shared.port {
        80 => out += &format!("Host: {host}\r\n"),
        p => out += &format!("Host: {host}:{p}\r\n"),
    }
    out += "Accept-Encoding: identity\r\nConnection: close\r\n\r\n";
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    Some((out, path))
}

/// Where a redirect of the server may send `souphttpsrc`: a path on the same server (made a
/// URI of the relay), never another server.
fn redirect(code: u16, location: &str, shared: &Shared) -> Result<String, String> {
    let absolute = location.contains("://") || location.starts_with("//");
    if !absolute {
        return Ok(location.to_string());
    }
    let uri = match location.starts_with("//") {
        true => format!("http:{location}"),
        false => location.to_string(),
    };
    match relayed_http(&uri) {
        Some(t) if t.host.eq_ignore_ascii_case(&shared.host) && t.port == shared.port => {
            Ok(t.through(shared.local))
        }
        _ => Err(format!(
            "a redirect (HTTP {code}) to '{}', off the stream's server: the station follows no \
             redirect to another server; add the stream with that location if it is meant",
            redact::shown(location)
        )),
    }
}

/// The response head for `souphttpsrc`: `Location` the relay's, one answer per connection,
/// and a document's length (as decoded) in place of the server's framing.
fn response_head(head: &str, location: Option<&str>, length: Option<usize>) -> String {
    let mut lines = head.lines();
    let mut out = format!("{}\r\n", lines.next().unwrap_or(""));
    for line in lines.take_while(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let framing = matches!(name.as_str(), "content-length" | "transfer-encoding");
        let dropped = matches!(name.as_str(), "connection" | "keep-alive")
            || (name == "location" && location.is_some())
            || (framing && length.is_some());
        if !dropped {
            out += line;
            out += "\r\n";
        }
    }
    if let Some(l) = location {
        out += &format!("Location: {l}\r\n");
    }
    if let Some(n) = length {
        out += &format!("Content-Length: {n}\r\n");
    }
    out += "Connection: close\r\n\r\n";
    out
}

/// Hand a media body on as it comes, refusing one slower than [`MIN_MEDIA_BYTES`] per
/// [`MEDIA_WINDOW`] of waiting for it.
fn pump(mut server: &TcpStream, client: &mut TcpStream, shared: &Shared) -> Result<(), Failure> {
    let mut chunk = vec![0u8; 32 << 10];
    let (mut waited, mut got) = (Duration::ZERO, 0usize);
    while !shared.closed() {
        let asked = Instant::now();
        let read = server.read(&mut chunk);
        waited += asked.elapsed();
        match read {
            Ok(0) => return Ok(()),
            Ok(n) => {
                got += n;
                client.write_all(&chunk[..n])?;
            }
            Err(e) if waiting(&e) => {}
            Err(_) => return Err(Failure::Gone),
        }
        if waited >= MEDIA_WINDOW {
            if got < MIN_MEDIA_BYTES {
                return Err(Failure::Refused(format!(
                    "a media body slower than {MIN_MEDIA_BYTES} bytes in {} s (a server \
                     dripping it?)",
                    MEDIA_WINDOW.as_secs()
                )));
            }
            (waited, got) = (Duration::ZERO, 0);
        }
    }
    Err(Failure::Gone)
}

#[cfg(test)]
mod tests {
    use super::super::shared::test_shared;
    use super::*;

    #[test]
    fn the_server_of_an_http_uri_and_its_uri_through_the_relay() {
        let t = relayed_http("HTTP://u:p@cam.example:8080/live/x.m3u8?k=1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("cam.example", 8080));
        assert_eq!(t.through(9), "http://u:p@127.0.0.1:9/live/x.m3u8?k=1");
        let t = relayed_http("http://[::1]/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 80));
        assert_eq!(
            relayed_http("http://h").unwrap().through(5),
            "http://127.0.0.1:5/"
        );
        assert_eq!(relayed_http("https://h/x"), None);
        assert_eq!(relayed_http("http://h:x/"), None);
    }

    #[test]
    fn heads_for_the_server_and_for_souphttpsrc() {
        let shared = test_shared("cam", 8080);
        let (req, path) = request_to_server(
            "GET http://127.0.0.1:5/a/b.m3u8?x=1 HTTP/1.1\r\nHost: 127.0.0.1:5\r\nAccept-Encoding: gzip\r\nUser-Agent: s\r\nConnection: keep-alive\r\n\r\n",
            &shared,
        )
        .unwrap();
        assert_eq!(
            req,
            "GET /a/b.m3u8?x=1 HTTP/1.1\r\nUser-Agent: s\r\nHost: cam:8080\r\n\
             Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(path, "/a/b.m3u8");
        let head = "HTTP/1.1 302 Found\r\nLocation: http://cam:8080/b\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
        let to = redirect(302, "http://CAM:8080/b", &shared).unwrap();
        assert_eq!(to, "http://127.0.0.1:7/b");
        assert_eq!(
            response_head(head, Some(&to), Some(3)),
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:7/b\r\nContent-Length: 3\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(redirect(301, "/elsewhere", &shared).unwrap(), "/elsewhere");
        let why = redirect(302, "http://u:pw@other:8080/b", &shared).unwrap_err();
        assert!(
            why.contains("a redirect (HTTP 302) to 'http://***@other:8080/b'"),
            "{why}"
        );
        assert!(redirect(302, "http://cam:8081/b", &shared).is_err());
    }
}
