//! A Prometheus endpoint: a tiny HTTP/1.1 server on its own thread, text exposition format.
//!
//! ```text
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=o.jsonl --metrics-addr 127.0.0.1:9184
//! curl -s 127.0.0.1:9184/metrics
//! ```
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `octopipe_stage_latency_seconds` | histogram | `stream`, `stage` (`decode` .. `sink`, and `end-to-end`) |
//! | `octopipe_frames_total` | counter | `stream`: frames that reached the sink |
//! | `octopipe_objects_total` | counter | `stream`: objects classified |
//! | `octopipe_frames_dropped_total` | counter | `stream`, `reason` |
//! | `octopipe_budget_misses_total` | counter | `stream`: frames whose end-to-end latency exceeded the budget |
//! | `octopipe_budget_seconds` | gauge | the per-frame budget |
//! | `octopipe_fps` | gauge | frames per second reaching the sink over the last 2 s |
//! | `octopipe_running` | gauge | 1 while the pipeline runs, 0 once it finished |
//!
//! Drops: while the run goes on, the observer sees only the gaps in frame numbers of the frames
//! that reached the end (`reason="seq-gap"`); when the run finishes they are replaced by the
//! report's exact counts by reason. The server stays up until the [`MetricsServer`] is dropped.
//!
//! The same address serves the pipeline's health and, for a pipeline that takes streams while
//! running ([`MetricsServer::serve_streams`], `octopipe run --streams`), its streams; answers are
//! JSON (an error is `{"error":"..."}`):
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /health` | `200 {"status":"running","streams":N}` (N: streams running, when it takes streams); `503 {"status":"finished"}` once the run is over |
//! | `GET /streams` | `200 [{"id","source","state","added","frames_in","processed","dropped"}, ...]` |
//! | `POST /streams` with `{"source":"testsrc live=true ! boxes format=synthetic","id":7}` (`id` optional) | `201 {"id":7}`; `400` a bad description or input, `409` an id used in this run, `503` no more streams taken |
//! | `DELETE /streams/7?mode=drain` (or `mode=drop`; default drain) | `200 {"id":7,"mode":"drain"}`; `404` no such stream, `409` a stream of the description |
//!
//! ```text
//! curl -s -X POST 127.0.0.1:9184/streams -d '{"source":"udpsrc port=5004 caps=... ! rtph264depay ! avdec_h264 ! boxes format=synthetic"}'
//! curl -s -X DELETE '127.0.0.1:9184/streams/1?mode=drop'
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{secs, GapCounter};
use crate::batch::CropBatch;
use crate::budget::Report;
use crate::pipeline::{self, Observer, PipelineError, RemoveMode, Streams};
use crate::Error;

/// The largest request body taken (a stream's description).
const MAX_BODY: usize = 64 * 1024;

/// Upper bounds (seconds) of the latency histogram buckets (`+Inf` is added).
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.0333, 0.05, 0.1, 0.25, 0.5, 1.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| v <= *b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += v;
    }
}

#[derive(Debug, Default)]
struct StreamState {
    frames: u64,
    objects: u64,
    misses: u64,
    /// Keyed by stage name.
    latency: BTreeMap<String, Histogram>,
}

#[derive(Debug, Default)]
struct State {
    streams: BTreeMap<u32, StreamState>,
    gaps: GapCounter,
    /// Exact drops from the report, once the run finished.
    final_drops: Option<Vec<(u32, String, u64)>>,
    budget: Duration,
    recent: VecDeque<Instant>,
    running: bool,
}

impl State {
    fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP octopipe_stage_latency_seconds Time a frame spent in each stage (gap since its previous mark); end-to-end from arrival to the sink."
        );
        let _ = writeln!(o, "# TYPE octopipe_stage_latency_seconds histogram");
        for (stream, s) in &self.streams {
            for (stage, h) in &s.latency {
                let mut acc = 0;
                for (b, n) in LATENCY_BUCKETS.iter().zip(h.counts) {
                    acc += n;
                    let _ = writeln!(
                        o,
                        "octopipe_stage_latency_seconds_bucket{{stream=\"{stream}\",stage=\"{stage}\",le=\"{b}\"}} {acc}"
                    );
                }
                let _ = writeln!(
                    o,
                    "octopipe_stage_latency_seconds_bucket{{stream=\"{stream}\",stage=\"{stage}\",le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(
                    o,
                    "octopipe_stage_latency_seconds_sum{{stream=\"{stream}\",stage=\"{stage}\"}} {}",
                    h.sum
                );
                let _ = writeln!(
                    o,
                    "octopipe_stage_latency_seconds_count{{stream=\"{stream}\",stage=\"{stage}\"}} {}",
                    h.count
                );
            }
        }
        let mut counter = |name: &str, help: &str, f: &dyn Fn(&StreamState) -> u64| {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} counter");
            for (stream, s) in &self.streams {
                let _ = writeln!(o, "{name}{{stream=\"{stream}\"}} {}", f(s));
            }
        };
        counter(
            "octopipe_frames_total",
            "Frames that reached the sink.",
            &|s| s.frames,
        );
        counter("octopipe_objects_total", "Objects classified.", &|s| {
            s.objects
        });
        counter(
            "octopipe_budget_misses_total",
            "Frames whose end-to-end latency exceeded the budget.",
            &|s| s.misses,
        );
        let _ = writeln!(
            o,
            "# HELP octopipe_frames_dropped_total Frames dropped, by reason (seq-gap: missing frame numbers seen at the sink while running)."
        );
        let _ = writeln!(o, "# TYPE octopipe_frames_dropped_total counter");
        match &self.final_drops {
            Some(drops) => {
                for (stream, reason, n) in drops {
                    let reason = reason.replace('\\', "\\\\").replace('"', "\\\"");
                    let _ = writeln!(
                        o,
                        "octopipe_frames_dropped_total{{stream=\"{stream}\",reason=\"{reason}\"}} {n}"
                    );
                }
            }
            None => {
                for stream in self.streams.keys() {
                    let _ = writeln!(
                        o,
                        "octopipe_frames_dropped_total{{stream=\"{stream}\",reason=\"seq-gap\"}} {}",
                        self.gaps.missing(*stream)
                    );
                }
            }
        }
        let _ = writeln!(o, "# HELP octopipe_budget_seconds The per-frame budget.");
        let _ = writeln!(o, "# TYPE octopipe_budget_seconds gauge");
        let _ = writeln!(o, "octopipe_budget_seconds {}", secs(self.budget));
        let _ = writeln!(
            o,
            "# HELP octopipe_fps Frames per second reaching the sink over the last 2 s."
        );
        let _ = writeln!(o, "# TYPE octopipe_fps gauge");
        let _ = writeln!(o, "octopipe_fps {}", self.fps());
        let _ = writeln!(o, "# HELP octopipe_running 1 while the pipeline runs.");
        let _ = writeln!(o, "# TYPE octopipe_running gauge");
        let _ = writeln!(o, "octopipe_running {}", u8::from(self.running));
        o
    }

    fn fps(&self) -> f64 {
        let now = Instant::now();
        let window = Duration::from_secs(2);
        let n = self
            .recent
            .iter()
            .filter(|t| now.duration_since(**t) <= window)
            .count();
        n as f64 / window.as_secs_f64()
    }
}

/// A running metrics endpoint. [`MetricsServer::observer`] gives the observer that feeds it;
/// the server answers `GET /metrics` until this value is dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    scrapes: Arc<AtomicU64>,
    streams: Arc<Mutex<Option<Streams>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Listen on `addr` (e.g. `127.0.0.1:9184`; port 0 picks a free one, see
    /// [`MetricsServer::local_addr`]) and serve on a thread of its own.
    pub fn serve(addr: impl ToSocketAddrs) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            running: true,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = Arc::new(AtomicU64::new(0));
        let streams = Arc::new(Mutex::new(None));
        let thread = {
            let (state, stop, scrapes) = (state.clone(), stop.clone(), scrapes.clone());
            let streams = streams.clone();
            thread::Builder::new()
                .name("octopipe-metrics".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match listener.accept() {
                            Ok((conn, _)) => {
                                let server = Served {
                                    state: &state,
                                    scrapes: &scrapes,
                                    streams: &streams,
                                };
                                if let Err(e) = server.answer(conn) {
                                    tracing::debug!("metrics: request failed: {e}");
                                }
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                thread::sleep(Duration::from_millis(10));
                            }
                            Err(e) => {
                                tracing::warn!("metrics: accept failed: {e}");
                                thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                })?
        };
        Ok(MetricsServer {
            addr,
            state,
            stop,
            scrapes,
            streams,
            thread: Some(thread),
        })
    }

    /// Serve `streams` too: `GET`, `POST /streams`, `DELETE /streams/{id}` (see the module's
    /// table).
    pub fn serve_streams(&self, streams: Streams) {
        if let Ok(mut slot) = self.streams.lock() {
            *slot = Some(streams);
        }
    }

    /// The address bound (with the port picked when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `GET /metrics` requests answered so far.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::SeqCst)
    }

    /// The exposition text as a scrape would get it now.
    pub fn render(&self) -> String {
        self.state.lock().map(|s| s.render()).unwrap_or_default()
    }

    /// The observer that feeds this server (add it with
    /// [`Pipeline::observe`](crate::pipeline::Pipeline::observe)).
    pub fn observer(&self) -> Box<dyn Observer> {
        Box::new(MetricsObserver {
            state: self.state.clone(),
            addr: self.addr,
            names: Vec::new(),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the server's thread answers from.
struct Served<'a> {
    state: &'a Mutex<State>,
    scrapes: &'a AtomicU64,
    streams: &'a Mutex<Option<Streams>>,
}

/// An answer: status line, body, content type.
type Answer = (&'static str, String, &'static str);

/// JSON answers.
fn json(status: &'static str, body: serde_json::Value) -> Answer {
    (status, body.to_string() + "\n", "application/json")
}

fn json_error(status: &'static str, message: impl std::fmt::Display) -> Answer {
    json(status, serde_json::json!({ "error": message.to_string() }))
}

impl Served<'_> {
    /// Answer one connection (one request; the connection closes after it).
    fn answer(&self, conn: TcpStream) -> std::io::Result<()> {
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        conn.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut reader = BufReader::new(conn.try_clone()?);
        let mut request = String::new();
        reader.read_line(&mut request)?;
        let mut length = 0;
        let mut line = String::new();
        while reader.read_line(&mut line)? > 2 {
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(usize::MAX);
                }
            }
            line.clear();
        }
        let mut parts = request.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let (status, body, kind) = if length > MAX_BODY {
            json_error(
                "413 Payload Too Large",
                format!("a body of at most {MAX_BODY} bytes"),
            )
        } else {
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            self.route(method, target, &body)
        };
        let mut conn = conn;
        write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        conn.flush()
    }

    fn route(&self, method: &str, target: &str, body: &[u8]) -> Answer {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match (method, path) {
            ("GET", "/metrics") | ("GET", "/") => {
                self.scrapes.fetch_add(1, Ordering::SeqCst);
                let body = self.state.lock().map(|s| s.render()).unwrap_or_default();
                ("200 OK", body, "text/plain; version=0.0.4; charset=utf-8")
            }
            ("GET", "/health") => self.health(),
            (_, p) if p == "/streams" || p.starts_with("/streams/") => {
                let Some(streams) = self.streams.lock().ok().and_then(|s| s.clone()) else {
                    return json_error(
                        "404 Not Found",
                        "this pipeline takes no streams while running (octopipe run --streams)",
                    );
                };
                streams_request(&streams, method, p, query, body)
            }
            ("GET", _) => json_error("404 Not Found", "try /metrics, /health or /streams"),
            _ => json_error("405 Method Not Allowed", format!("{method} {path}")),
        }
    }

    fn health(&self) -> Answer {
        let running = self.state.lock().is_ok_and(|s| s.running);
        if !running {
            return json(
                "503 Service Unavailable",
                serde_json::json!({ "status": "finished" }),
            );
        }
        let mut health = serde_json::json!({ "status": "running" });
        if let Some(streams) = self.streams.lock().ok().and_then(|s| s.clone()) {
            let list = streams.list();
            let n = list
                .iter()
                .filter(|s| s.state == pipeline::StreamState::Running)
                .count();
            health["streams"] = n.into();
        }
        json("200 OK", health)
    }
}

/// `GET /streams`, `POST /streams`, `DELETE /streams/{id}?mode=drain|drop`.
fn streams_request(
    streams: &Streams,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Answer {
    match (method, path.strip_prefix("/streams/")) {
        ("GET", None) => json("200 OK", serde_json::json!(streams.list())),
        ("POST", None) => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Add {
                source: String,
                id: Option<u32>,
            }
            let add: Add = match serde_json::from_slice(body) {
                Ok(add) => add,
                Err(e) => {
                    return json_error(
                        "400 Bad Request",
                        format!(
                            "expected {{\"source\": \"DESCRIPTION\", \"id\": N (optional)}}: {e}"
                        ),
                    )
                }
            };
            match streams.add(&add.source, add.id) {
                Ok(added) => json("201 Created", serde_json::json!({ "id": added.id })),
                Err(e) => json_error(status_of(&e), e),
            }
        }
        ("DELETE", Some(id)) => {
            let Ok(id) = id.parse::<u32>() else {
                return json_error("400 Bad Request", format!("'{id}' is not a stream id"));
            };
            let mode = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("mode="))
                .unwrap_or("drain");
            let Some(remove) = RemoveMode::parse(mode) else {
                return json_error(
                    "400 Bad Request",
                    format!("mode={mode}: expected drain or drop"),
                );
            };
            match streams.remove(id, remove) {
                Ok(()) => json("200 OK", serde_json::json!({ "id": id, "mode": mode })),
                Err(e) => json_error(status_of(&e), e),
            }
        }
        _ => json_error("405 Method Not Allowed", format!("{method} {path}")),
    }
}

/// The HTTP status of a stream request's error.
fn status_of(e: &Error) -> &'static str {
    match e {
        Error::Pipeline(PipelineError::UnknownStream(_)) => "404 Not Found",
        Error::Pipeline(PipelineError::StreamTaken(_) | PipelineError::StaticStream(_)) => {
            "409 Conflict"
        }
        Error::Pipeline(PipelineError::NotTakingStreams) => "503 Service Unavailable",
        _ => "400 Bad Request",
    }
}

struct MetricsObserver {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    /// The report rows (stage names).
    names: Vec<String>,
}

impl Observer for MetricsObserver {
    fn start(&mut self, stages: &[String]) {
        self.names = stages.to_vec();
    }

    fn batch(&mut self, batch: &CropBatch, budget: Duration) {
        let names = &self.names;
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        s.budget = budget;
        s.gaps.add(batch);
        while s
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(2))
        {
            s.recent.pop_front();
        }
        for f in &batch.frames {
            let st = s.streams.entry(f.stream).or_default();
            st.objects += f.detections.len() as u64;
            // A frame in parts counts once, with its last part.
            if !f.part.is_last() {
                continue;
            }
            st.frames += 1;
            for (slot, d) in f.times.stages() {
                if let Some(name) = names.get(slot as usize) {
                    st.latency.entry(name.clone()).or_default().observe(secs(d));
                }
            }
            if let Some(t) = f.times.total() {
                st.latency
                    .entry("end-to-end".into())
                    .or_default()
                    .observe(secs(t));
                st.misses += u64::from(t > budget);
            }
            s.recent.push_back(now);
        }
    }

    fn finish(&mut self, report: &mut Report) {
        if let Ok(mut s) = self.state.lock() {
            s.running = false;
            s.budget = report.budget;
            s.final_drops = Some(
                report
                    .streams
                    .iter()
                    .flat_map(|st| {
                        st.dropped
                            .iter()
                            .map(move |(r, n)| (st.stream, r.clone(), *n))
                    })
                    .collect(),
            );
        }
        report
            .extra
            .push(format!("metrics: http://{}/metrics", self.addr));
    }
}
