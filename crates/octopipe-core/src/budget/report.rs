//! The end-of-run report: the table people read and the JSON object machines read
//! (docs/report.md gives its schema, version [`REPORT_VERSION`]).

use std::fmt;
use std::time::Duration;

use super::section::{Section, SectionKind, REPORT_VERSION};
use super::series::ms;
use super::Stats;

/// A stage busy at least this share of the run (in percent) is named the bottleneck.
const BOTTLENECK_PERCENT: f64 = 80.0;

/// End-of-run summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Budget per frame.
    pub budget: Duration,
    /// Whether a source was live (frames due at their time). Without one (files, image
    /// folders) frames wait for each other and nothing is late: latency over the budget is
    /// queueing, shown but not counted as a failure.
    pub live: bool,
    /// Wall time of the run.
    pub wall: Duration,
    /// Frames that entered.
    pub frames_in: u64,
    /// Frames that reached the sink.
    pub processed: u64,
    /// Frames dropped, by reason.
    pub dropped: Vec<(String, u64)>,
    /// Frames lost by the decoder (gaps in presentation time): they never entered, so they are
    /// not among `frames_in`.
    pub lost: u64,
    /// Damaged frames the sources found (a cut or corrupt image, a frame the video decoder
    /// concealed errors in), kept or skipped (`on-damaged`).
    pub damaged: u64,
    /// Of those, the ones the sources left out (`on-damaged=skip`): not among `frames_in`.
    pub damaged_skipped: u64,
    /// Processed frames whose end-to-end latency exceeded the budget.
    pub over_budget: u64,
    /// Per-stage time, in pipeline order.
    pub stages: Vec<(String, Stats)>,
    /// Per stage, the same rows as `stages`: that time apart (waiting in the queue before the
    /// stage, working in it) and how busy the stage was.
    pub split: Vec<StageSplit>,
    /// End-to-end latency (arrival to sink).
    pub total: Stats,
    /// Whether the pipeline has a classifier: without one, `objects` counts the boxes that
    /// went through, none of them classified.
    pub classifier: bool,
    /// Objects that went through (classified, with a classifier: a crop of each went
    /// through it).
    pub objects: u64,
    /// Objects the classifier ran on whose output was not finite (NaN or infinite logits),
    /// written flagged with no label (`classify non-finite=flag`).
    pub non_finite: u64,
    /// Objects that took their track's last label with no crop made (`classify
    /// reinfer-interval`).
    pub reused: u64,
    /// Of those, the ones whose track had no label to give (its crop's logits were not finite,
    /// or the batch carrying it was dropped): written with no label.
    pub reused_unlabelled: u64,
    /// Boxes not classified, by reason.
    pub skipped: Vec<(String, u64)>,
    /// What the late-frame policy did, and how often.
    pub actions: Vec<(String, u64)>,
    /// Per-stream accounting and latency.
    pub streams: Vec<StreamReport>,
    /// The stages' typed sections (detector, tracks, tile filter, brokers, ...), in the order
    /// they were added.
    pub sections: Vec<Section>,
    /// Further lines from stages and observers (energy, files written, ...).
    pub extra: Vec<String>,
    /// Outputs asked for that were not written, each with why (`--plot p.svg: cannot draw
    /// ...`): observers add them, and the run fails (`octopipe run` exits 1).
    pub not_written: Vec<String>,
    /// The error the run ended with, if any (as `Outcome::error`): the JSON report's `error`.
    pub error: Option<RunError>,
}

/// The error a run ended with, as the JSON report gives it (`error`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunError {
    /// Its kind (`input`, `config`, `model`, `io`, ...: [`ErrorKind::name`](crate::error::ErrorKind::name)).
    pub kind: String,
    /// The error's one line.
    pub message: String,
    /// The input it is about (a file, a URI, a GStreamer head), when it names one.
    pub input: Option<String>,
}

/// One stage's time apart: how long frames waited in the queue before it, how long they then
/// spent in it, and how much of the run its calls took.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSplit {
    /// The stage's row (as in [`Report::stages`]).
    pub stage: String,
    /// Each frame's wait in the queue before the stage; `None` for a row with no queue before
    /// it (a source).
    pub queued: Option<Stats>,
    /// Each frame's time in the stage after it took it (its row's time less the wait: working,
    /// and held for a batch to fill).
    pub work: Option<Stats>,
    /// The time of the stage's calls, all of the run (a stage of several workers: their mean).
    pub busy: Option<Duration>,
}

impl StageSplit {
    /// The stage's busy time as a share of `wall`, in percent.
    pub fn busy_percent(&self, wall: Duration) -> Option<f64> {
        self.busy
            .map(|b| 100.0 * b.as_secs_f64() / wall.as_secs_f64().max(1e-9))
    }
}

/// One stream's part of a [`Report`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StreamReport {
    /// Stream id.
    pub stream: u32,
    /// Its source, as named in frames.
    pub source: String,
    /// Frames that entered.
    pub frames_in: u64,
    /// Frames that reached the sink.
    pub processed: u64,
    /// Frames dropped, by reason.
    #[serde(serialize_with = "ser_counts")]
    pub dropped: Vec<(String, u64)>,
    /// Frames lost by the decoder (gaps in presentation time), not among `frames_in`.
    pub lost: u64,
    /// Damaged frames its source found, kept or skipped.
    pub damaged: u64,
    /// Of those, the ones its source left out: not among `frames_in`.
    pub damaged_skipped: u64,
    /// Processed frames over budget.
    pub over_budget: u64,
    /// End-to-end latency.
    pub total: Stats,
    /// How far behind its schedule its frames left the source (from their due time to the
    /// source's mark), for a live run; `None` from files.
    #[serde(rename = "behind_schedule")]
    pub behind: Option<Stats>,
    /// What happened to its source, how often (`reconnects`, `went quiet`).
    #[serde(serialize_with = "ser_counts")]
    pub events: Vec<(String, u64)>,
}

impl StreamReport {
    /// Frames dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }
}

impl Report {
    /// Frames dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }

    /// Budget minus p99 end-to-end latency, in ms (negative: over budget).
    pub fn headroom_ms(&self) -> f64 {
        ms(self.budget) - ms(self.total.p99)
    }

    /// Processed frames per second of wall time.
    pub fn fps(&self) -> f64 {
        self.processed as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Every section of kind `T`, typed, in the order they were added.
    pub fn sections<T: SectionKind>(&self) -> Vec<T> {
        self.sections.iter().filter_map(Section::get).collect()
    }

    /// The lines after the table: each section's, then the further lines, in order (what the
    /// text report ends with).
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        let sections = self.sections.iter().flat_map(|s| s.text.lines());
        sections.chain(self.extra.iter().flat_map(|l| l.lines()))
    }
}

fn ser_counts<S: serde::Serializer, K: AsRef<str>>(
    v: &[(K, u64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, n)| (k.as_ref(), n)))
}

/// The report as one JSON object (`octopipe run --report json`; docs/report.md): its schema
/// `version`, durations in milliseconds (`budget_ms`, `wall_ms`, `p50_ms`, ...), counts by
/// reason as objects, stages in pipeline order, the derived `dropped_total`, `headroom_ms` and
/// `fps`, and the stages' typed `sections` by kind.
impl serde::Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Counts<'a, K>(&'a [(K, u64)]);
        impl<K: AsRef<str>> serde::Serialize for Counts<'_, K> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                ser_counts(self.0, s)
            }
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("version", &REPORT_VERSION)?;
        m.serialize_entry("budget_ms", &ms(self.budget))?;
        m.serialize_entry("live", &self.live)?;
        m.serialize_entry("wall_ms", &ms(self.wall))?;
        m.serialize_entry("frames_in", &self.frames_in)?;
        m.serialize_entry("processed", &self.processed)?;
        m.serialize_entry("dropped_total", &self.dropped_total())?;
        m.serialize_entry("dropped", &Counts(&self.dropped))?;
        m.serialize_entry("lost", &self.lost)?;
        m.serialize_entry("damaged", &self.damaged)?;
        m.serialize_entry("damaged_skipped", &self.damaged_skipped)?;
        m.serialize_entry("over_budget", &self.over_budget)?;
        // No frame processed: no latency, so no headroom to give.
        m.serialize_entry(
            "headroom_ms",
            &(self.processed > 0).then(|| self.headroom_ms()),
        )?;
        m.serialize_entry("fps", &self.fps())?;
        let stages: Vec<_> = self
            .stages
            .iter()
            .map(|(name, st)| {
                let split = self.split.iter().find(|s| s.stage == *name);
                StageRow {
                    stage: name,
                    stats: st,
                    queued: split.and_then(|s| s.queued),
                    work: split.and_then(|s| s.work),
                    busy_ms: split.and_then(|s| s.busy).map(ms),
                    busy_percent: split.and_then(|s| s.busy_percent(self.wall)),
                }
            })
            .collect();
        m.serialize_entry("stages", &stages)?;
        m.serialize_entry("total", &self.total)?;
        m.serialize_entry("classifier", &self.classifier)?;
        m.serialize_entry("objects", &self.objects)?;
        m.serialize_entry("non_finite", &self.non_finite)?;
        m.serialize_entry("reused", &self.reused)?;
        m.serialize_entry("reused_unlabelled", &self.reused_unlabelled)?;
        m.serialize_entry("skipped", &Counts(&self.skipped))?;
        m.serialize_entry("actions", &Counts(&self.actions))?;
        m.serialize_entry("streams", &self.streams)?;
        let mut sections: serde_json::Map<String, serde_json::Value> = serde_json::Map::new();
        for sec in &self.sections {
            let list = sections
                .entry(sec.kind)
                .or_insert_with(|| serde_json::Value::Array(Vec::new()));
            if let serde_json::Value::Array(list) = list {
                list.push(sec.fields.clone());
            }
        }
        m.serialize_entry("sections", &sections)?;
        m.serialize_entry("extra", &self.extra)?;
        m.serialize_entry("not_written", &self.not_written)?;
        m.serialize_entry("error", &self.error)?;
        m.end()
    }
}

#[derive(serde::Serialize)]
struct StageRow<'a> {
    stage: &'a str,
    #[serde(flatten)]
    stats: &'a Stats,
    /// Each frame's wait in the queue before the stage.
    queued: Option<Stats>,
    /// Each frame's time in the stage after it took it.
    work: Option<Stats>,
    busy_ms: Option<f64>,
    busy_percent: Option<f64>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fps = 1.0 / self.budget.as_secs_f64();
        match self.live {
            true => writeln!(f, "budget {:.1} ms/frame ({fps:.1} fps)", ms(self.budget))?,
            false => writeln!(
                f,
                "budget {:.1} ms/frame ({fps:.1} fps); file input: frames wait for each other, so latency is queueing, not lateness",
                ms(self.budget)
            )?,
        }
        writeln!(
            f,
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>5}",
            "stage (ms)", "p50", "p95", "p99", "max", "work p50", "queue p50", "queue p99", "busy"
        )?;
        let row =
            |f: &mut fmt::Formatter<'_>, name: &str, s: &Stats, split: Option<&StageSplit>| {
                write!(
                    f,
                    "{:<12} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                    name,
                    ms(s.p50),
                    ms(s.p95),
                    ms(s.p99),
                    ms(s.max)
                )?;
                let apart =
                    split.and_then(|sp| Some((sp.work?, sp.queued?, sp.busy_percent(self.wall)?)));
                match apart {
                    Some((work, queued, busy)) => writeln!(
                        f,
                        " {:>9.2} {:>9.2} {:>9.2} {:>4.0}%",
                        ms(work.p50),
                        ms(queued.p50),
                        ms(queued.p99),
                        busy
                    ),
                    None => writeln!(f),
                }
            };
        for (name, s) in &self.stages {
            row(f, name, s, self.split.iter().find(|sp| sp.stage == *name))?;
        }
        row(f, "end-to-end", &self.total, None)?;
        writeln!(
            f,
            "frames: {} in = {} processed + {} dropped{}",
            self.frames_in,
            self.processed,
            self.dropped_total(),
            list(&self.dropped)
        )?;
        if self.lost > 0 {
            writeln!(
                f,
                "lost by the decoder: {} frame{} (gaps in presentation time; not among the frames in)",
                self.lost,
                if self.lost == 1 { "" } else { "s" }
            )?;
        }
        if self.damaged > 0 {
            let kept = self.damaged - self.damaged_skipped;
            writeln!(
                f,
                "damaged input: {} frame{} ({kept} kept, {} skipped: not among the frames in; on-damaged=keep|skip|fail on the source)",
                self.damaged,
                if self.damaged == 1 { "" } else { "s" },
                self.damaged_skipped
            )?;
        }
        self.fmt_timing(f)?;
        self.fmt_load(f)?;
        self.fmt_objects(f)?;
        // From files nothing is late: a prediction that changed nothing is not worth a line.
        let acted = |action: &str| self.live || !action.ends_with("processed anyway");
        for (action, n) in self.actions.iter().filter(|(a, _)| acted(a)) {
            write!(f, "\nlate-frame policy: {action}: {n}")?;
        }
        if self.streams.len() > 1 {
            write!(
                f,
                "\n{:<6} {:>6} {:>9} {:>8} {:>6} {:>9} {:>9}  source",
                "stream", "in", "processed", "dropped", "over", "p50 ms", "p99 ms"
            )?;
            for s in &self.streams {
                write!(
                    f,
                    "\n{:<6} {:>6} {:>9} {:>8} {:>6} {:>9.2} {:>9.2}  {}",
                    s.stream,
                    s.frames_in,
                    s.processed,
                    s.dropped_total(),
                    s.over_budget,
                    ms(s.total.p50),
                    ms(s.total.p99),
                    s.source
                )?;
            }
        }
        for s in self.streams.iter().filter(|s| !s.events.is_empty()) {
            let events: Vec<String> = s.events.iter().map(|(e, n)| format!("{e}: {n}")).collect();
            write!(f, "\nsource {}: {}", s.stream, events.join(", "))?;
        }
        for line in self.lines() {
            write!(f, "\n{line}")?;
        }
        Ok(())
    }
}

impl Report {
    /// The budget line: live, frames over budget and the headroom; from files, the throughput
    /// against the budget's frame rate, with the latency shown as what it is (queueing).
    fn fmt_timing(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.live {
            return writeln!(
                f,
                "over budget: {} of {} frames; headroom at p99: {:+.2} ms; throughput {:.1} fps over {:.2} s",
                self.over_budget,
                self.processed,
                self.headroom_ms(),
                self.fps(),
                self.wall.as_secs_f64()
            );
        }
        let rate = 1.0 / self.budget.as_secs_f64();
        writeln!(
            f,
            "throughput {:.1} fps over {:.2} s ({:.2}x the budget's {rate:.1} fps); end-to-end p99 {:.2} ms, {} of {} frames over {:.1} ms (queueing: not a failure from files)",
            self.fps(),
            self.wall.as_secs_f64(),
            self.fps() / rate,
            ms(self.total.p99),
            self.over_budget,
            self.processed,
            ms(self.budget)
        )
    }

    /// Where the time went: the busiest stage (the bottleneck when it is near its limit) with
    /// its frames' wait in the queue before it; live, how far the sources fell behind their
    /// schedule.
    fn fmt_load(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.processed == 0 {
            return Ok(());
        }
        let busiest = self
            .split
            .iter()
            .filter_map(|sp| Some((sp, sp.busy_percent(self.wall)?, sp.queued?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((sp, busy, queued)) = busiest {
            let waited = format!(
                "frames waited {} ms in its queue (p99; p50 {} ms)",
                round_ms(queued.p99),
                round_ms(queued.p50)
            );
            if busy >= BOTTLENECK_PERCENT {
                writeln!(f, "bottleneck: {}: {busy:.0}% busy; {waited}", sp.stage)?;
            } else {
                let pace = match self.live {
                    true => "none: the sources' frame rate sets the pace",
                    false => "the sources (decoding)",
                };
                writeln!(
                    f,
                    "bottleneck: {pace}, no stage after them is {BOTTLENECK_PERCENT:.0}% busy; busiest stage {}: {busy:.0}% busy; {waited}",
                    sp.stage
                )?;
            }
        }
        let behind = self
            .streams
            .iter()
            .filter_map(|s| Some((s, s.behind?)))
            .max_by_key(|(_, b)| b.max);
        if let Some((s, b)) = behind {
            let verdict = match b.max > self.budget {
                true => ": the source did not keep real time, and its latency accumulated",
                false => "",
            };
            writeln!(
                f,
                "behind schedule: up to {:.1} ms (stream {}, p99 {:.1} ms){verdict}",
                ms(b.max),
                s.stream,
                ms(b.p99)
            )?;
        }
        Ok(())
    }

    /// The objects line: every box in, classified (or, with no classifier, passed on) or
    /// skipped by reason.
    fn fmt_objects(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let skipped: u64 = self.skipped.iter().map(|(_, n)| n).sum();
        // Objects whose classifier output was not finite are neither classified nor skipped.
        let non_finite = match self.non_finite {
            0 => String::new(),
            n => format!(" + {n} non-finite"),
        };
        // Objects that took their track's label with no crop made (reinfer-interval).
        let reused = match (self.reused, self.reused_unlabelled) {
            (0, _) => String::new(),
            (r, 0) => format!(" + {r} reused"),
            (r, u) => format!(
                " + {r} reused ({u} with no label: their track's last crop was not classified)"
            ),
        };
        let went = match self.classifier {
            true => "classified",
            false => "passed on (no classifier)",
        };
        write!(
            f,
            "objects: {} in = {} {went}{reused}{non_finite} + {} skipped{}",
            self.objects + self.reused + self.non_finite + skipped,
            self.objects,
            skipped,
            list(&self.skipped)
        )
    }
}

/// `d` in ms as the time lines give it: whole ms from 10 ms, one decimal under.
fn round_ms(d: Duration) -> String {
    match ms(d) {
        v if v >= 10.0 => format!("{v:.0}"),
        v => format!("{v:.1}"),
    }
}

fn list<S: fmt::Display>(items: &[(S, u64)]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = items.iter().map(|(r, n)| format!("{r}: {n}")).collect();
    format!(" ({})", parts.join(", "))
}
