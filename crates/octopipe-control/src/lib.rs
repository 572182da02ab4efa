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
//! | `GET /health` | `200 {"status":"running","streams":N,"failed":F}` (N: streams running, F: streams failed and not removed, when it takes streams; `"status":"degraded"` while F > 0); `503 {"status":"finished"}` once the run is over; open to anyone |
//! | `GET /streams?after=ID&limit=N` | `200 [{"id","source","state","added","frames_in","processed","dropped","error"}, ...]`, at most `limit` (default 100, at most 1000) with an id after `after`; `X-Next-After: ID` when there are more |
//! | `POST /streams` with `{"source":"testsrc live=true ! boxes format=synthetic","id":7}` or `{"stages":[{"stage":"rtp","port":5004},{"stage":"boxes","format":"synthetic"}]}` | `201 {"id":7}`; `400` a bad description or input (a `media` file that is empty or of no type GStreamer can tell), `403` an element or file not allowed, `409` an id used in this run or a UDP port another stream receives on, `413` a body over 64 KiB, `415` not JSON, `429` `--max-streams` reached, `503` no more streams taken |
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
//! Every stream added or removed is logged with who asked (the peer's address) and what (the
//! description, credentials hidden): `octopipe: note: stream 7 added by 127.0.0.1:50312: ...`
//! (the `octopipe::audit` target, on by default).
//!
//! Nothing a client does starves `/health`: connections are capped in all and per client
//! address, and one over a cap still gets `/health` and `/metrics` answered (the server's probe
//! lane); a stream's description is parsed, checked and opened off the server's thread, without
//! the book of streams locked across the open.

mod config;
mod consts;
mod error;
mod guard;
mod metrics;
mod plane;
mod policy;
mod routes;
mod server;
mod typefind;

pub use config::ControlConfig;
pub use consts::{
    DEFAULT_LIST, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_STREAMS, HEAD_DEADLINE, MAX_HEAD, MAX_LIST,
    REQUEST_DEADLINE, TOKEN_ENV,
};
pub use error::ControlError;
pub use guard::{Token, MIN_TOKEN_LEN, NEED_TOKEN};
pub use metrics::{Metrics, KEPT_ENDED, LATENCY_BUCKETS};
pub use plane::ControlPlane;
pub use policy::{Policy, Refusal, URI_SCHEMES};
