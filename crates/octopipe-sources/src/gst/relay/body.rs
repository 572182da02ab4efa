//! The bodies of an HTTP server's answers: a document (a playlist, a manifest) told from
//! media, read whole within [`MAX_DOCUMENT`] bytes, uncompressed, its URIs on the server
//! rewritten to the relay.

use std::io::Read;
use std::net::TcpStream;
use std::time::Instant;

use super::head::header;
use super::shared::{Shared, MESSAGE_DEADLINE};
use octopipe_core::redact;

/// The most bytes of a document (a playlist, a manifest) of the server, uncompressed.
pub(in crate::gst) const MAX_DOCUMENT: usize = 1 << 20;

/// Bytes of a body looked at to tell a document from media.
pub(super) const SNIFF: usize = 8;

/// Why an HTTP exchange ended early: a cap passed (the stream fails), or a connection gone.
pub(super) enum Failure {
    /// Past a cap: why (the stream's error).
    Refused(String),
    /// A connection closed or failed.
    Gone,
}

impl From<std::io::Error> for Failure {
    fn from(_: std::io::Error) -> Failure {
        Failure::Gone
    }
}

pub(super) fn waiting(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Read until `body` holds `want` bytes or the body ends (within [`MESSAGE_DEADLINE`] of
/// `started`).
pub(super) fn fill(
    mut server: &TcpStream,
    body: &mut Vec<u8>,
    want: usize,
    started: Instant,
    shared: &Shared,
) -> Result<bool, Failure> {
    let mut chunk = [0u8; 16 << 10];
    while body.len() < want {
        if shared.closed() {
            return Err(Failure::Gone);
        }
        match server.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if waiting(&e) => {}
            Err(_) => return Err(Failure::Gone),
        }
        if started.elapsed() > MESSAGE_DEADLINE {
            return Err(Failure::Refused(format!(
                "an answer's body took more than {} s to begin, or a document to arrive \
                 (a server sending it byte by byte?)",
                MESSAGE_DEADLINE.as_secs()
            )));
        }
    }
    Ok(false)
}

/// Whether an answer is a document (read whole within caps) rather than media: its type, its
/// path or its first bytes say a playlist, a manifest or text.
pub(super) fn is_document(content_type: Option<&str>, path: &str, first: &[u8]) -> bool {
    let ct = content_type.unwrap_or("").to_ascii_lowercase();
    let by_type = ct.contains("mpegurl")
        || ct.contains("xml")
        || ct.contains("json")
        || ct.starts_with("text/");
    let path = path.to_ascii_lowercase();
    let by_path = [".m3u8", ".m3u", ".mpd"].iter().any(|e| path.ends_with(e));
    let first = first.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(first);
    let start = first.iter().position(|b| !b.is_ascii_whitespace());
    let first = &first[start.unwrap_or(first.len())..];
    let by_bytes = first.starts_with(b"#EXT") || first.starts_with(b"<");
    by_type || by_path || by_bytes
}

/// A document's body whole (its `Content-Length`, chunks or up to the end), uncompressed and
/// within [`MAX_DOCUMENT`] bytes.
pub(super) fn read_document(
    server: &TcpStream,
    head: &str,
    mut body: Vec<u8>,
    started: Instant,
    shared: &Shared,
) -> Result<Vec<u8>, Failure> {
    let refuse = |why: String| Failure::Refused(why);
    let kind = header(head, "content-type").unwrap_or("no Content-Type");
    let kind = redact::shown(kind);
    if let Some(e) =
        header(head, "content-encoding").filter(|e| !e.eq_ignore_ascii_case("identity"))
    {
        return Err(refuse(format!(
            "a document ({kind}) in Content-Encoding '{}' (the station reads documents \
             uncompressed only)",
            redact::shown(e)
        )));
    }
    let chunked = header(head, "transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    let length = match (chunked, header(head, "content-length")) {
        (false, Some(v)) => match v.parse::<u64>() {
            Ok(n) if n <= MAX_DOCUMENT as u64 => Some(n as usize),
            Ok(_) => {
                return Err(refuse(format!(
                    "a document ({kind}: a playlist, a manifest) of Content-Length {v}, more \
                     than {MAX_DOCUMENT} bytes (at most {MAX_DOCUMENT})"
                )))
            }
            Err(_) => {
                return Err(refuse(format!(
                    "Content-Length '{}' is not a length",
                    redact::shown(v)
                )))
            }
        },
        _ => None,
    };
    // Chunk sizes and their line ends come on top of the document.
    let raw_cap = MAX_DOCUMENT + MAX_DOCUMENT / 8;
    let cap = match (length, chunked) {
        (Some(n), _) => n,
        (None, true) => raw_cap,
        (None, false) => MAX_DOCUMENT,
    };
    let ended = fill(server, &mut body, cap + 1, started, shared)?;
    let too_large = || {
        refuse(format!(
            "a document ({kind}: a playlist, a manifest) of more than {MAX_DOCUMENT} bytes \
             (at most {MAX_DOCUMENT})"
        ))
    };
    if !ended && length.is_none() {
        return Err(too_large());
    }
    body.truncate(cap);
    match chunked {
        true => {
            let decoded = dechunk(&body).map_err(refuse)?;
            match decoded.len() > MAX_DOCUMENT {
                true => Err(too_large()),
                false => Ok(decoded),
            }
        }
        false => Ok(body),
    }
}

/// A chunked body decoded (its trailer dropped); an error for one that is not.
pub(super) fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "a chunked document that is not one".to_string();
    let mut out = Vec::new();
    loop {
        let line_end = raw.iter().position(|b| *b == b'\n').ok_or_else(bad)?;
        let line = std::str::from_utf8(&raw[..line_end]).map_err(|_| bad())?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| bad())?;
        raw = &raw[line_end + 1..];
        if size == 0 {
            return Ok(out);
        }
        let data = raw.get(..size).ok_or_else(bad)?;
        out.extend_from_slice(data);
        raw = &raw[size..];
        raw = raw.strip_prefix(b"\r").unwrap_or(raw);
        raw = raw.strip_prefix(b"\n").ok_or_else(bad)?;
    }
}

/// `document` with its URIs on the server made URIs of the relay; an HLS playlist naming
/// another server refused.
pub(super) fn rewrite(document: &[u8], shared: &Shared) -> Result<Vec<u8>, Failure> {
    let host = match shared.host.contains(':') {
        true => format!("[{}]", shared.host),
        false => shared.host.clone(),
    };
    let mut prefixes = vec![format!("http://{host}:{}", shared.port)];
    if shared.port == 80 {
        prefixes.push(format!("http://{host}"));
    }
    let relay = format!("http://127.0.0.1:{}", shared.local);
    let mut out = Vec::with_capacity(document.len());
    let mut i = 0;
    'scan: while i < document.len() {
        for p in &prefixes {
            let end = i + p.len();
            let matches = document
                .get(i..end)
                .is_some_and(|w| w.eq_ignore_ascii_case(p.as_bytes()));
            let boundary = document
                .get(end)
                .is_none_or(|b| matches!(b, b'/' | b'?' | b'#' | b'"' | b'\'' | b'\r' | b'\n'));
            if matches && boundary {
                out.extend_from_slice(relay.as_bytes());
                i = end;
                continue 'scan;
            }
        }
        out.push(document[i]);
        i += 1;
    }
    let hls = out.starts_with(b"#EXTM3U") || out.starts_with(b"\xEF\xBB\xBF#EXTM3U");
    if hls {
        let text = String::from_utf8_lossy(&out);
        let foreign = text
            .match_indices("://")
            .map(|(at, _)| {
                let from = redact::scheme_start(&text[..at]);
                let to = text[at..]
                    .find(|c: char| c.is_whitespace() || c == '"' || c == ',')
                    .map_or(text.len(), |e| at + e);
                &text[from..to]
            })
            .find(|uri| !uri.starts_with(&relay));
        if let Some(uri) = foreign {
            // Worded as the guard's refusal of a segment source off the playlist's site.
            return Err(Failure::Refused(format!(
                "a segment of its playlist is '{}', not on the playlist's own scheme and host \
                 (http://{host}) and port ({}): not read (the station reads a playlist's URIs \
                 only from its own server)",
                redact::shown(uri),
                shared.port
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::shared::test_shared;
    use super::*;

    #[test]
    fn documents_are_told_from_media() {
        assert!(is_document(
            Some("application/vnd.apple.mpegURL"),
            "/a",
            b""
        ));
        assert!(is_document(None, "/live/x.M3U8", b"\x47\x40"));
        assert!(is_document(Some("video/mp2t"), "/seg", b"#EXTM3U\n"));
        assert!(is_document(None, "/x", b"\xEF\xBB\xBF <MPD"));
        assert!(!is_document(Some("video/mp2t"), "/seg.ts", b"\x47\x40\x00"));
        assert!(!is_document(None, "/stream", b"\x1aE\xdf\xa3"));
    }

    #[test]
    fn chunked_documents_are_decoded() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert!(dechunk(b"zz\r\nabc").is_err());
        assert!(dechunk(b"9\r\nabc").is_err());
    }

    #[test]
    fn a_document_uris_on_the_server_go_through_the_relay() {
        let shared = test_shared("cam", 80);
        let playlist = b"#EXTM3U\n#EXT-X-KEY:METHOD=NONE,URI=\"http://cam/k\"\nhttp://cam:80/a.ts\nhttp://cam/b.ts\nc.ts\n";
        let out = rewrite(playlist, &shared).ok().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "#EXTM3U\n#EXT-X-KEY:METHOD=NONE,URI=\"http://127.0.0.1:7/k\"\n\
             http://127.0.0.1:7/a.ts\nhttp://127.0.0.1:7/b.ts\nc.ts\n"
        );
        for foreign in [
            &b"#EXTM3U\nhttp://camera.evil/a.ts\n"[..],
            b"#EXTM3U\nhttps://cam/a.ts\n",
            b"#EXTM3U\nhttp://cam:81/a.ts\n",
        ] {
            match rewrite(foreign, &shared) {
                Err(Failure::Refused(why)) => assert!(
                    why.contains(
                        "not on the playlist's own scheme and host (http://cam) and port (80)"
                    ),
                    "{why}"
                ),
                _ => panic!("{}", String::from_utf8_lossy(foreign)),
            }
        }
        // A character of several bytes just before a URI's "://" (a server's hostile playlist
        // once panicked the relay here, slicing inside it): the URI is refused like any other.
        for odd in ["é", "→", "😀", "\u{80}"] {
            let playlist = format!("#EXTM3U\nseg{odd}://camera.evil/a.ts\n{odd}://x\n");
            match rewrite(playlist.as_bytes(), &shared) {
                Err(Failure::Refused(why)) => {
                    assert!(
                        why.contains("a segment of its playlist is '://camera.evil/a.ts'"),
                        "{why}"
                    )
                }
                _ => panic!("{playlist}"),
            }
        }
        // A manifest of another kind keeps what it names elsewhere (XML namespaces).
        let mpd = b"<MPD xmlns:xsi=\"http://www.w3.org/x\"><BaseURL>http://cam/v/</BaseURL></MPD>";
        let out = rewrite(mpd, &shared).ok().unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("<BaseURL>http://127.0.0.1:7/v/</BaseURL>"));
    }
}
