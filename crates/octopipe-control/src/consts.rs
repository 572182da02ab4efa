//! The control plane's fixed numbers and names: its caps and deadlines, the pages of
//! `GET /streams`, and the environment variable a token is read from.

use std::time::Duration;

/// The environment variable an API token is read from.
pub const TOKEN_ENV: &str = "OCTOPIPE_API_TOKEN";

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
