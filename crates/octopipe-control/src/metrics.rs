//! Prometheus metrics of a run, in the text exposition format, served at `GET /metrics` by the
//! [control plane](crate):
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
//! | `octopipe_stream_up` | gauge | `stream`: 1 while it runs, 0 once it ended, failed or is being removed |
//! | `octopipe_stream_failed` | gauge | `stream`, `reason`: 1 for a stream that failed (its reason's class) |
//! | `octopipe_streams` | gauge | `state` (`running`, `removing`, `ended`, `failed`, `removed`): streams in each |
//! | `octopipe_stream_failures` | gauge | `reason`: streams failed and not removed, by [`failure_reason`] |
//!
//! The stream series (`octopipe_stream_*`, `octopipe_streams`) are those of a station that takes
//! streams ([`Metrics::watch`]): an operator alerts on `octopipe_streams{state="failed"} > 0`.
//! A removed stream's series go at once ([`Metrics::removed`]), so a station that took a
//! thousand streams one after the other serves the page it served with none. A stream that
//! ended or failed without being removed keeps its series until [`KEPT_ENDED`] streams ended
//! after it ([`Metrics::ended`]); the counts by state and by reason count it until it is
//! removed (or until the station no longer keeps it, [`KEPT_RECORDS`] streams over after it),
//! so the page stays bounded and a failure still shows. `ended` and `removed` count every
//! stream so far. A scrape looks at the streams not over yet and those the station keeps, never
//! at every stream it had.
//!
//! Drops: while the run goes on, the observer sees only the gaps in frame numbers of the frames
//! that reached the end (`reason="seq-gap"`); when the run finishes they are replaced by the
//! report's exact counts by reason.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octopipe_core::budget::{GapCounter, Report};
use octopipe_core::crops::CropBatch;
use octopipe_core::observer::Observer;
use octopipe_pipeline::pipeline::{
    StreamCounts, StreamInfo, StreamState as Where, Streams, KEPT_RECORDS,
};

/// How many ended streams keep their series (the most recent to end).
pub const KEPT_ENDED: usize = 32;

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
    /// Streams that ended, oldest first, whose series are still shown.
    ended: VecDeque<u32>,
    /// Streams whose series were let go: frames of theirs still on their way are not counted.
    gone: Gone,
}

/// The newest [`KEPT_RECORDS`] streams whose series were let go (as many as the station keeps
/// streams over: an older one's frames are long through), so that a station that had a million
/// streams holds what it held after a thousand.
#[derive(Debug, Default)]
struct Gone {
    ids: HashSet<u32>,
    /// Oldest first.
    order: VecDeque<u32>,
}

impl Gone {
    fn insert(&mut self, id: u32) {
        if !self.ids.insert(id) {
            return;
        }
        self.order.push_back(id);
        while self.order.len() > KEPT_RECORDS {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }

    fn contains(&self, id: &u32) -> bool {
        self.ids.contains(id)
    }
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

/// The Prometheus metrics of a run: fed by [`Metrics::observer`], rendered by
/// [`Metrics::render`] (what `GET /metrics` of the [control plane](crate) answers).
/// Cheap to clone; every clone is the same metrics.
#[derive(Clone)]
pub struct Metrics {
    state: Arc<Mutex<State>>,
    /// The streams of a station that takes them, for their state series.
    streams: Arc<Mutex<Option<Streams>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Metrics of a run that has not started (`octopipe_running` 1 until it finishes).
    pub fn new() -> Metrics {
        Metrics {
            state: Arc::new(Mutex::new(State {
                running: true,
                ..State::default()
            })),
            streams: Arc::new(Mutex::new(None)),
        }
    }

    /// The exposition text as a scrape gets it now.
    pub fn render(&self) -> String {
        // The list first, the metrics' lock after: the book of streams tells the metrics of a
        // stream's end under its own lock.
        let list = self.stream_list();
        let Ok(s) = self.state.lock() else {
            return String::new();
        };
        let mut text = s.render();
        if let Some((list, counts)) = list {
            render_streams(&mut text, &list, counts, &s.gone);
        }
        text
    }

    /// Serve the state series of `streams` (those of a station that takes streams).
    pub fn watch(&self, streams: Streams) {
        if let Ok(mut slot) = self.streams.lock() {
            *slot = Some(streams);
        }
    }

    /// The streams the watched station ([`Metrics::watch`]) keeps (those not over and the
    /// newest [`KEPT_RECORDS`] over) and its counts by state; `None` when none is watched.
    fn stream_list(&self) -> Option<(Vec<StreamInfo>, StreamCounts)> {
        let streams = self.streams.lock().ok()?.clone()?;
        Some((streams.list(), streams.counts()))
    }

    /// Streams of the watched station by state: (running, failed); `None` when none is watched.
    /// Only its streams not over yet are looked at (the others are counted as they end).
    pub fn stream_counts(&self) -> Option<(usize, usize)> {
        let streams = self.streams.lock().ok()?.clone()?;
        let counts = streams.counts();
        Some((counts.running, counts.failed))
    }

    /// Stream `stream` was removed: its series go now (frames of it still on their way are not
    /// counted).
    pub fn removed(&self, stream: u32) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        s.streams.remove(&stream);
        s.ended.retain(|e| *e != stream);
        s.gone.insert(stream);
    }

    /// Whether the run is still going (its report not made yet).
    pub fn running(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.running)
    }

    /// Stream `stream` ended: its series stay until [`KEPT_ENDED`] more streams ended, then go
    /// (and frames of it still on their way are not counted).
    pub fn ended(&self, stream: u32) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if s.gone.contains(&stream) || s.ended.contains(&stream) {
            return;
        }
        s.ended.push_back(stream);
        while s.ended.len() > KEPT_ENDED {
            if let Some(old) = s.ended.pop_front() {
                s.streams.remove(&old);
                s.gone.insert(old);
            }
        }
    }

    /// The observer that feeds these metrics (add it with
    /// [`Pipeline::observe`](octopipe_pipeline::pipeline::Pipeline::observe)); its report line names
    /// `url`, where they are served.
    pub fn observer(&self, url: String) -> Box<dyn Observer> {
        Box::new(MetricsObserver {
            state: self.state.clone(),
            url,
            names: Vec::new(),
        })
    }
}

struct MetricsObserver {
    state: Arc<Mutex<State>>,
    /// Where the metrics are served, for the report's line.
    url: String,
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
            if s.gone.contains(&f.stream) {
                continue;
            }
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
        report.extra.push(format!("metrics: {}", self.url));
    }
}

/// The states a stream is counted in, in the order printed.
const STATES: [(Where, &str); 5] = [
    (Where::Running, "running"),
    (Where::Removing, "removing"),
    (Where::Ended, "ended"),
    (Where::Failed, "failed"),
    (Where::Removed, "removed"),
];

/// The class of a stream's failure, from its reason: a bounded set of label values
/// (`timeout`, `unreachable`, `not-found`, `too-large`, `damaged`, `not-allowed`, `other`), so
/// that a label never carries what a peer wrote.
pub fn failure_reason(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| r.contains(w));
    if has(&["timed out", "timeout", "no frame within", "deadline"]) {
        "timeout"
    } else if has(&[
        "refused",
        "unreachable",
        "could not connect",
        "reset by peer",
        "could not read from resource",
        "reconnect",
    ]) {
        "unreachable"
    } else if has(&[
        "not found",
        "no such file",
        "does not exist",
        "could not open",
    ]) {
        "not-found"
    } else if has(&[
        "too large",
        "too many",
        "exceeds",
        "over the",
        "at most",
        "budget",
    ]) {
        "too-large"
    } else if has(&["damaged", "corrupt", "decode", "truncated", "invalid data"]) {
        "damaged"
    } else if has(&["not allowed", "forbidden", "denied", "permission"]) {
        "not-allowed"
    } else {
        "other"
    }
}

/// The stream series of `list` (the streams the station keeps): a removed stream has none, nor
/// has one that ended or failed [`KEPT_ENDED`] ends ago (in `gone`); the counts by state are
/// `counts`, by reason those of the failed streams kept.
fn render_streams(o: &mut String, list: &[StreamInfo], counts: StreamCounts, gone: &Gone) {
    let shown = || {
        list.iter()
            .filter(|s| s.state != Where::Removed && !gone.contains(&s.id))
    };
    let _ = writeln!(
        o,
        "# HELP octopipe_stream_up 1 while the stream runs, 0 once it ended, failed or is being removed."
    );
    let _ = writeln!(o, "# TYPE octopipe_stream_up gauge");
    for s in shown() {
        let up = u8::from(s.state == Where::Running);
        let _ = writeln!(o, "octopipe_stream_up{{stream=\"{}\"}} {up}", s.id);
    }
    let _ = writeln!(
        o,
        "# HELP octopipe_stream_failed 1 for a stream that failed (after its retries), by the class of its reason."
    );
    let _ = writeln!(o, "# TYPE octopipe_stream_failed gauge");
    let mut reasons: BTreeMap<&str, u64> = BTreeMap::new();
    for s in list.iter().filter(|s| s.state == Where::Failed) {
        *reasons
            .entry(failure_reason(s.error.as_deref().unwrap_or("")))
            .or_default() += 1;
    }
    for s in shown().filter(|s| s.state == Where::Failed) {
        let reason = failure_reason(s.error.as_deref().unwrap_or(""));
        let _ = writeln!(
            o,
            "octopipe_stream_failed{{stream=\"{}\",reason=\"{reason}\"}} 1",
            s.id
        );
    }
    let _ = writeln!(
        o,
        "# HELP octopipe_streams Streams of the station in each state (removed: all removed so far)."
    );
    let _ = writeln!(o, "# TYPE octopipe_streams gauge");
    for (state, name) in STATES {
        let n = counts.get(state);
        let _ = writeln!(o, "octopipe_streams{{state=\"{name}\"}} {n}");
    }
    let _ = writeln!(
        o,
        "# HELP octopipe_stream_failures Streams failed and not removed, by the class of their reason."
    );
    let _ = writeln!(o, "# TYPE octopipe_stream_failures gauge");
    for (reason, n) in reasons {
        let _ = writeln!(o, "octopipe_stream_failures{{reason=\"{reason}\"}} {n}");
    }
}

/// Seconds as the metrics print them.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::failure_reason;

    #[test]
    fn failures_fall_in_a_few_classes() {
        for (reason, class) in [
            (
                "rtsp://127.0.0.1:1/cam: Could not read from resource. (after 1 reconnect in a row)",
                "unreachable",
            ),
            ("srt://h:1: Connection refused", "unreachable"),
            ("no frame within start-timeout=20 s", "timeout"),
            ("/d/x.mp4: No such file or directory", "not-found"),
            ("its picture is too large to decode: 30000x30000", "too-large"),
            ("damaged frame at pts 1.000 s", "damaged"),
            ("something else", "other"),
        ] {
            assert_eq!(failure_reason(reason), class, "{reason}");
        }
    }
}
