//! Relays of the station's own between a network source element and its server: every answer
//! of the server is read here, within caps, before GStreamer parses a byte of it, and the
//! relay's sockets are closed when the stream stops, so an element blocked reading a server's
//! answer returns.
//!
//! - [`rtsp`]: `rtspsrc` (of an `rtsp`, `rtspt` or `rtspu` URI) connects to the relay as to
//!   its `proxy` and sends its requests unchanged; each message of the server is handed on
//!   only once whole and within the caps. A redirect is refused, naming where it points.
//! - [`http`]: `souphttpsrc` (of an `http` URI) reads from the relay's address instead of the
//!   server's (its `location` rewritten, so that an HLS or DASH demuxer resolving the
//!   playlist's URIs fetches them through the relay too); each answer's head is capped, a
//!   document (a playlist, a manifest) is read whole within [`http::MAX_DOCUMENT`] bytes and
//!   its URIs on the server are rewritten to the relay, a media body is handed on as it comes
//!   with a floor on its rate.
//!
//! Caps shared by both: a message head of at most [`shared::MAX_HEAD`] bytes and
//! [`shared::MAX_HEADERS`] lines, whole within [`shared::MESSAGE_DEADLINE`] of its first
//! byte. An answer past a cap closes both connections and the stream fails with the cap named.
//! `rtsps`, `rtsph` and `https` are TLS or tunnels to the server itself: not relayed (the
//! station's policy takes them only with `--allow-scheme`, docs/security.md).

mod body;
mod head;
pub(super) mod http;
pub(super) mod rtsp;
mod shared;

pub(super) use http::relayed_http;
pub(super) use rtsp::relayed_server;
pub(super) use shared::Relay;

/// A relay to an HTTP server, for `souphttpsrc`'s location.
pub(super) use http::start as start_http;
/// A relay to an RTSP server, for `rtspsrc`'s `proxy`.
pub(super) use rtsp::start as start_rtsp;

/// The readers of what a server answers, for the fuzz targets (`octopipe_sources::fuzzing`).
#[cfg(any(test, fuzzing))]
pub mod fuzzing {
    /// The length of the RTSP message (or interleaved packet) `bytes` start with, once whole,
    /// or the cap it passes.
    pub fn rtsp_message(bytes: &[u8]) -> Result<Option<usize>, String> {
        super::rtsp::message_len(bytes)
    }

    /// A document of an HTTP server at `host`:`port` rewritten for the relay: `Err` with the
    /// refusal, or `Err("gone")`.
    pub fn http_document(document: &[u8], host: &str, port: u16) -> Result<Vec<u8>, String> {
        let shared = super::shared::test_shared(host, port);
        super::body::rewrite(document, &shared).map_err(|f| match f {
            super::body::Failure::Refused(why) => why,
            super::body::Failure::Gone => "gone".into(),
        })
    }

    /// A chunked body decoded.
    pub fn dechunk(raw: &[u8]) -> Result<Vec<u8>, String> {
        super::body::dechunk(raw)
    }

    /// The servers (host, port) a URI names for the RTSP relay and for the HTTP relay.
    pub fn relayed(uri: &str) -> Vec<(String, u16)> {
        let http = super::http::relayed_http(uri).map(|t| (t.host, t.port));
        super::rtsp::relayed_server(uri)
            .into_iter()
            .chain(http)
            .collect()
    }
}
