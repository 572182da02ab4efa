//! What the control plane answers: `/metrics` and `/health` to anyone, `/streams` only to a
//! request that names this station (`Host`, `Origin`) and carries its token; bodies are JSON.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::config::ControlConfig;
use super::consts::{per_client, DEFAULT_LIST, MAX_BODY, MAX_LIST, REQUEST_DEADLINE};
use super::guard::{self, Refused};
use super::metrics::Metrics;
use octopipe_core::stage::Registry;
use octopipe_core::{Error, ErrorKind};
use octopipe_pipeline::pipeline::{PipelineError, RemoveMode, Streams};

/// What the server answers from.
pub(super) struct Shared {
    pub(super) config: ControlConfig,
    pub(super) metrics: Metrics,
    pub(super) scrapes: AtomicU64,
    pub(super) streams: Mutex<Option<Streams>>,
    pub(super) registry: Registry,
}

type Answer = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: String, kind: &'static str) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(kind));
    r
}

fn json(status: StatusCode, body: serde_json::Value) -> Answer {
    reply(status, body.to_string() + "\n", "application/json")
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Answer {
    let message = octopipe_core::redact::credentials(&message.to_string()).into_owned();
    let mut r = json(status, json!({ "error": message }));
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

fn refused((status, message): Refused) -> Answer {
    error(status, message)
}

/// The answer to a request over a connection cap (the probe lane's to anything but health and
/// metrics): 503, naming the cap, `ip`'s own when it was the client's.
pub(super) fn too_many(max: usize, ip: Option<IpAddr>) -> Answer {
    let message = match ip {
        Some(ip) => format!(
            "too many connections from {ip} (at most {} at once from one client, a quarter of --max-connections {max}): try again",
            per_client(max)
        ),
        None => format!("too many connections (--max-connections {max}): try again"),
    };
    error(StatusCode::SERVICE_UNAVAILABLE, message)
}

/// Answer one request of `peer`.
pub(super) async fn answer(
    req: Request<Incoming>,
    shared: &Arc<Shared>,
    peer: SocketAddr,
) -> Answer {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    match (&method, path.as_str()) {
        (&Method::GET, "/metrics" | "/") => {
            shared.scrapes.fetch_add(1, Ordering::SeqCst);
            let text = shared.metrics.render();
            reply(
                StatusCode::OK,
                text,
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
        (&Method::GET, "/health") => health(shared),
        (_, p) if p == "/streams" || p.starts_with("/streams/") => streams(req, shared, peer).await,
        (&Method::GET, _) => error(StatusCode::NOT_FOUND, "try /metrics, /health or /streams"),
        _ => error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} {path}")),
    }
}

fn health(shared: &Shared) -> Answer {
    if !shared.metrics.running() {
        return json(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "finished" }),
        );
    }
    let mut health = json!({ "status": "running" });
    // A station with failed streams still runs (200: no scheduler should restart it for one
    // bad camera), but says so: `degraded`, and how many failed until they are removed.
    if let Some((running, failed)) = shared.metrics.stream_counts() {
        health["streams"] = running.into();
        health["failed"] = failed.into();
        if failed > 0 {
            health["status"] = "degraded".into();
        }
    }
    json(StatusCode::OK, health)
}

/// `GET /streams`, `POST /streams`, `DELETE /streams/{id}`: guarded.
async fn streams(req: Request<Incoming>, shared: &Arc<Shared>, peer: SocketAddr) -> Answer {
    let headers = req.headers();
    let checks = guard::host_allowed(headers, &shared.config.allow_hosts)
        .and_then(|()| guard::origin_allowed(headers))
        .and_then(|()| guard::authorized(headers, &shared.config.tokens));
    if let Err(r) = checks {
        return refused(r);
    }
    let Some(streams) = shared.streams.lock().ok().and_then(|s| s.clone()) else {
        return error(
            StatusCode::NOT_FOUND,
            "this pipeline takes no streams while running (octopipe run --streams)",
        );
    };
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    match (req.method().clone(), path.strip_prefix("/streams/")) {
        (Method::GET, None) => list(&streams, &query),
        (Method::POST, None) => add(req, streams, shared, peer).await,
        (Method::DELETE, Some(id)) => remove(&streams, &shared.metrics, id, &query, peer),
        (method, _) => error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} {path}")),
    }
}

/// The query's parameters (the last of a name counts).
fn params(query: &str) -> HashMap<&str, &str> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect()
}

/// A page of the streams: those with an id after `after`, at most `limit` of them
/// ([`DEFAULT_LIST`], at most [`MAX_LIST`]); `X-Next-After` gives the next page's `after`.
fn list(streams: &Streams, query: &str) -> Answer {
    let params = params(query);
    let number = |key: &str| params.get(key).map(|v| v.parse::<u64>());
    let after = match number("after") {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "after=ID: a stream id"),
    };
    let limit = match number("limit") {
        None => DEFAULT_LIST,
        Some(Ok(v)) if v > 0 => (v as usize).min(MAX_LIST),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("limit=N: a number from 1 to {MAX_LIST}"),
            )
        }
    };
    // The page alone is looked up: a station that has had many streams lists as fast.
    let (page, more) = match after.map(u32::try_from) {
        Some(Err(_)) => (Vec::new(), false),
        Some(Ok(a)) => streams.page(Some(a), limit),
        None => streams.page(None, limit),
    };
    let mut r = json(StatusCode::OK, json!(page));
    if let (true, Some(last)) = (more, page.last()) {
        if let Ok(v) = last.id.to_string().parse() {
            r.headers_mut().insert("x-next-after", v);
        }
    }
    r
}

/// A stream as JSON: its description as text, or its stages with typed values.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Add {
    source: Option<String>,
    stages: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    id: Option<u32>,
}

const EXPECTED: &str = "expected {\"source\": \"DESCRIPTION\", \"id\": N (optional)} or \
     {\"stages\": [{\"stage\": \"media\", \"location\": \"rtsp://...\"}, {\"stage\": \"boxes\", ...}], \"id\": N}";

async fn add(
    req: Request<Incoming>,
    streams: Streams,
    shared: &Arc<Shared>,
    peer: SocketAddr,
) -> Answer {
    if let Err(r) = guard::json_body(req.headers()) {
        return refused(r);
    }
    let length = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if length.is_some_and(|n| n > MAX_BODY) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a body of at most {MAX_BODY} bytes"),
        );
    }
    let body = Limited::new(req.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(REQUEST_DEADLINE, body).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a body of at most {MAX_BODY} bytes"),
            )
        }
        Err(_) => return error(StatusCode::REQUEST_TIMEOUT, "the body came too slowly"),
    };
    // Parsing the description, checking it and opening the stream all cost time that grows
    // with what the client sent or names: off the server's thread, so health and the other
    // requests are answered meanwhile.
    let shared = shared.clone();
    let added = tokio::task::spawn_blocking(move || open(&body, &streams, &shared, peer)).await;
    match added {
        Ok(answer) => answer,
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("adding the stream failed: {e}"),
        ),
    }
}

/// Parse, check and open the stream `body` describes (on a blocking thread); the log says who
/// added what.
fn open(body: &[u8], streams: &Streams, shared: &Shared, peer: SocketAddr) -> Answer {
    let add: Add = match serde_json::from_slice(body) {
        Ok(a) => a,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("{EXPECTED}: {e}")),
    };
    let text = match (add.source, add.stages) {
        (Some(text), None) => text,
        (None, Some(stages)) => match typed(&stages) {
            Ok(text) => text,
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        },
        _ => return error(StatusCode::BAD_REQUEST, EXPECTED),
    };
    let desc = match octopipe_pipeline::describe::parse("<stream>", &text, &HashMap::new()) {
        Ok(d) => d,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    if let Err(r) = shared.config.policy.check(&desc, &shared.registry) {
        let status = match r.forbidden {
            true => StatusCode::FORBIDDEN,
            false => StatusCode::BAD_REQUEST,
        };
        return error(status, r.message);
    }
    if let Some(reason) = super::typefind::unknown_type(&desc) {
        return error(StatusCode::BAD_REQUEST, reason);
    }
    match streams.add(&desc, add.id) {
        Ok(added) => {
            tracing::info!(
                target: "octopipe::audit",
                "stream {} added by {peer}: {}",
                added.id,
                shown(&desc.text)
            );
            json(StatusCode::CREATED, json!({ "id": added.id }))
        }
        Err(Error::Pipeline(PipelineError::TooManyStreams(n))) => error(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "this station runs at most {n} streams added over HTTP at once (--max-streams {n}): remove one first"
            ),
        ),
        Err(e) => error(status_of(&e), e),
    }
}

/// Why a list of typed stages is no description (the answer's `error`, status 400).
#[derive(Debug, thiserror::Error)]
enum StagesError {
    /// A stage without its `stage` name.
    #[error("stages[{0}]: a \"stage\" name is needed")]
    NoName(usize),
    /// A `stage` that is not a name.
    #[error("stages[{index}]: '{kind}' is not a stage name")]
    BadName {
        /// The stage's place in the list.
        index: usize,
        /// What was given.
        kind: String,
    },
    /// A key that is not a property name.
    #[error("stages[{index}]: '{key}' is not a property name")]
    BadKey {
        /// The stage's place in the list.
        index: usize,
        /// What was given.
        key: String,
    },
    /// A value that is no string, number or boolean.
    #[error("stages[{index}].{key}: {value} is not a string, number or boolean")]
    BadValue {
        /// The stage's place in the list.
        index: usize,
        /// The property.
        key: String,
        /// The value as JSON.
        value: serde_json::Value,
    },
}

/// A description from typed stages: `[{"stage": "media", "location": "..."}, ...]`, every
/// value quoted ([`octopipe_pipeline::describe::quote`]) so that none can end its stage or chain.
fn typed(stages: &[serde_json::Map<String, serde_json::Value>]) -> Result<String, StagesError> {
    let mut parts = Vec::with_capacity(stages.len());
    for (i, stage) in stages.iter().enumerate() {
        let kind = stage
            .get("stage")
            .and_then(|v| v.as_str())
            .ok_or(StagesError::NoName(i))?;
        if !kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            || kind.is_empty()
        {
            return Err(StagesError::BadName {
                index: i,
                kind: kind.to_string(),
            });
        }
        let mut text = kind.to_string();
        for (key, value) in stage.iter().filter(|(k, _)| *k != "stage") {
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(StagesError::BadKey {
                    index: i,
                    key: key.clone(),
                });
            }
            let value = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                other => {
                    return Err(StagesError::BadValue {
                        index: i,
                        key: key.clone(),
                        value: other.clone(),
                    })
                }
            };
            text += &format!(" {key}={}", octopipe_pipeline::describe::quote(&value));
        }
        parts.push(text);
    }
    Ok(parts.join(" ! "))
}

/// The most characters of a description an audit line shows (a body may hold 64 KiB).
const SHOWN_CHARS: usize = 400;

/// A description as a log line shows it: credentials hidden, control characters escaped, cut
/// after [`SHOWN_CHARS`].
fn shown(text: &str) -> String {
    let text = octopipe_core::redact::credentials(text);
    let mut out: String = text.chars().take(SHOWN_CHARS).collect::<String>();
    if text.chars().nth(SHOWN_CHARS).is_some() {
        out += "...";
    }
    out.escape_debug().to_string()
}

/// `DELETE /streams/{id}`: the stream's series go, the log says who removed which.
fn remove(streams: &Streams, metrics: &Metrics, id: &str, query: &str, peer: SocketAddr) -> Answer {
    let Ok(id) = id.parse::<u32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("'{id}' is not a stream id"),
        );
    };
    let mode = params(query).get("mode").copied().unwrap_or("drain");
    let Some(remove) = RemoveMode::parse(mode) else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("mode={mode}: expected drain or drop"),
        );
    };
    match streams.remove(id, remove) {
        Ok(()) => {
            // Its row alone is looked up: a page of one from the id before it.
            let (row, _) = streams.page(id.checked_sub(1), 1);
            let source = row.into_iter().find(|s| s.id == id);
            let source = source.map(|s| shown(&s.source)).unwrap_or_default();
            tracing::info!(target: "octopipe::audit", "stream {id} removed by {peer} (mode={mode}): {source}");
            metrics.removed(id);
            json(StatusCode::OK, json!({ "id": id, "mode": mode }))
        }
        Err(e) => error(status_of(&e), e),
    }
}

/// The HTTP status of a stream request's error, by its kind: no such stream, a stream id taken
/// (or one of the description), a pipeline that takes no more streams, one that runs as many as
/// it takes; any other error is the request's.
fn status_of(e: &Error) -> StatusCode {
    match e.kind() {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Closed => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::BAD_REQUEST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_line_hides_credentials_escapes_and_is_cut() {
        let line = shown("media location=rtsp://u:secret@cam/x\n! boxes");
        assert_eq!(line, "media location=rtsp://***@cam/x\\n! boxes");
        let long = shown(&"a".repeat(10_000));
        assert_eq!(long.len(), SHOWN_CHARS + 3, "{long}");
        assert!(long.ends_with("..."));
    }

    #[test]
    fn typed_stages_become_a_description_that_reads_back() {
        let stages: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(
            r#"[{"stage":"media","location":"a b\\ ! filesink location=x","retry":2},
                {"stage":"boxes","format":"synthetic","count":3}]"#,
        )
        .unwrap();
        let text = typed(&stages).unwrap();
        let d = octopipe_pipeline::describe::parse("<t>", &text, &HashMap::new()).unwrap();
        assert_eq!(d.stages.len(), 2, "{text}");
        assert_eq!(d.stages[0].props[0].value, "a b\\ ! filesink location=x");
        assert!(typed(&serde_json::from_str::<Vec<_>>(r#"[{"stage":"a b"}]"#).unwrap()).is_err());
        assert!(
            typed(&serde_json::from_str::<Vec<_>>(r#"[{"stage":"m","x!":1}]"#).unwrap()).is_err()
        );
    }
}
