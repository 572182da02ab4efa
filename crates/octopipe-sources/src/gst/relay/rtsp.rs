//! The RTSP relay: `rtspsrc` connects to it as to its `proxy` (GStreamer 1.22's RTSP
//! connection then opens its TCP connection to the relay and sends its requests there
//! unchanged); each message of the server is handed on once whole and within the caps:
//!
//! - a message head within [`MAX_HEAD`](super::MAX_HEAD) bytes and
//!   [`MAX_HEADERS`](super::MAX_HEADERS) lines;
//! - a body (`Content-Length`) of at most [`MAX_BODY`] bytes, an SDP of at most [`MAX_MEDIA`]
//!   media sections (`m=` lines);
//! - each message (and each interleaved RTP/RTCP packet, `$`-framed) whole within
//!   [`MESSAGE_DEADLINE`] of its first byte: a server that drips an answer cannot hold a
//!   stream;
//! - no redirect (a 3xx answer with a `Location`): the station would have to connect where a
//!   server it does not know says; the stream fails naming the location, to be added as a
//!   stream of its own (checked by the station's policy) if it is meant.
//!
//! `rtspsrc` has no property that bounds an answer, and a check on a connection of our own
//! before it would read another answer than the one `rtspsrc` gets; the relay checks the very
//! bytes it is handed. The requests `rtspsrc` sends go to the server as they are.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use super::head::{header, status, whole_head};
use super::shared::{connect, OnRefuse, Protocol, Relay, Shared, MESSAGE_DEADLINE, POLL};
use octopipe_core::redact;

/// The most bytes of one message body of the server (`Content-Length`): an SDP is a few KiB.
pub(in crate::gst) const MAX_BODY: usize = 64 << 10;
/// The most media sections (`m=` lines) of one SDP.
pub(in crate::gst) const MAX_MEDIA: usize = 16;

/// A relay to the RTSP server at `host`:`port` for one `rtspsrc` (its `proxy`).
pub(in crate::gst) fn start(host: &str, port: u16, on_refuse: OnRefuse) -> std::io::Result<Relay> {
    Relay::start(Protocol::Rtsp, relay, host, port, on_refuse)
}

/// Relay one connection: the client's requests to the server as they come (a thread of their
/// own), the server's messages to the client once each is whole and within the caps.
fn relay(client: TcpStream, shared: &Arc<Shared>) {
    let server = match connect(&shared.host, shared.port) {
        Ok(s) => s,
        Err(e) => {
            // Not a refusal: `rtspsrc` sees its connection end, as when the server is down,
            // and the source's own retries apply.
            tracing::debug!("RTSP relay: cannot connect to {}: {e}", shared.server);
            let _ = client.shutdown(std::net::Shutdown::Both);
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
            .name("octopipe-relay".into())
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
pub(in crate::gst) fn message_len(bytes: &[u8]) -> Result<Option<usize>, String> {
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
    let Some(end) = whole_head(bytes)? else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&bytes[..end]);
    if let (Some(code @ 300..=399), Some(location)) = (status(&head), header(&head, "location")) {
        return Err(format!(
            "a redirect (RTSP {code}) to '{}': the station follows no redirect; add the stream \
             with that location if it is meant",
            redact::shown(location)
        ));
    }
    let body = match header(&head, "content-length") {
        None => 0,
        Some(value) => match value.parse::<u64>() {
            Ok(n) if n <= MAX_BODY as u64 => n as usize,
            Ok(_) => {
                return Err(format!(
                    "Content-Length {value}, more than {MAX_BODY} bytes (at most {MAX_BODY})"
                ))
            }
            Err(_) => {
                return Err(format!(
                    "Content-Length '{}' is not a length",
                    redact::shown(value)
                ))
            }
        },
    };
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

/// The host and port (554 when none) of an `rtsp://`, `rtspt://` or `rtspu://` URI: those the
/// relay takes (`rtsps` is TLS to the server itself, `rtsph` a tunnel over HTTP: not relayed).
pub(in crate::gst) fn relayed_server(uri: &str) -> Option<(String, u16)> {
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

#[cfg(test)]
mod tests {
    use super::super::shared::{send, MAX_HEAD};
    use super::*;
    use std::net::TcpListener;
    use std::sync::Mutex;
    use std::time::Duration;

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
            .contains("200 header lines"));
        let moved = b"RTSP/1.0 302 Found\r\nCSeq: 3\r\nLocation: rtsp://u:pw@10.9.9.9/x\r\n\r\n";
        let why = message_len(moved).unwrap_err();
        assert!(
            why.contains("a redirect (RTSP 302) to 'rtsp://***@10.9.9.9/x'"),
            "{why}"
        );
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
        let on_refuse: OnRefuse = Box::new(move |why| *r.lock().unwrap() = Some(why));
        let relay = start("127.0.0.1", port, on_refuse).unwrap();
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
