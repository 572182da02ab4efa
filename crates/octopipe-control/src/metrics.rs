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
//!
//! A stream that ended (a stream added while running that was removed, ended or failed) keeps
//! its series until [`KEPT_ENDED`] streams ended after it; then its series go, so a station
//! that takes streams for months serves a bounded page ([`Metrics::ended`]).
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
    gone: HashSet<u32>,
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
        }
    }

    /// The exposition text as a scrape gets it now.
    pub fn render(&self) -> String {
        self.state.lock().map(|s| s.render()).unwrap_or_default()
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

/// Seconds as the metrics print them.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
