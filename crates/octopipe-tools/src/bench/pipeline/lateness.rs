//! Where a run's late frames lost their time: every frame's end-to-end latency with its stream,
//! its due time and its time in each stage, recorded by an [`Observer`] on the collector thread
//! ([`Recorder`]), then summed up ([`Lateness`]) by GPU (the streams' runs of `devices`), by
//! time in the run (the first two seconds against the rest, and the start step by step) and by
//! stage (the late frames' time in each stage against every frame's).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octopipe_core::budget::Report;
use octopipe_core::crops::CropBatch;
use octopipe_core::observer::Observer;

/// The part of the run the start is kept apart from, seconds.
const START_S: f64 = 2.0;

/// The start's steps ([`Lateness::steps`]): this long each, seconds, and how many.
const STEP_S: f64 = 0.25;
const STEPS: usize = 12;

/// One frame's times.
struct Sample {
    stream: u32,
    arrival: Instant,
    /// When it reached the end.
    end: Instant,
    total_us: u32,
    /// `(stage row, time in it, µs)`: from the previous mark (or the arrival) to its own.
    steps: Vec<(u16, u32)>,
}

/// What the recorder keeps.
#[derive(Default)]
struct Record {
    /// When the run started (the observers' start).
    started: Option<Instant>,
    stages: Vec<String>,
    samples: Vec<Sample>,
}

/// The observer that records every frame (the last part of a frame that travels in parts).
pub(super) struct Recorder(Arc<Mutex<Record>>);

/// What [`Recorder`] saw, read once the run is over.
pub(super) struct Recorded(Arc<Mutex<Record>>);

/// A recorder, and the handle that reads it after the run.
pub(super) fn recorder() -> (Recorder, Recorded) {
    let shared = Arc::new(Mutex::new(Record::default()));
    (Recorder(shared.clone()), Recorded(shared))
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Observer for Recorder {
    fn start(&mut self, stages: &[String]) {
        if let Ok(mut r) = self.0.lock() {
            r.stages = stages.to_vec();
            r.started = Some(Instant::now());
        }
    }

    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        let Ok(mut r) = self.0.lock() else { return };
        for f in &batch.frames {
            if f.part.index + 1 < f.part.count {
                continue;
            }
            let Some(total) = f.times.total() else {
                continue;
            };
            r.samples.push(Sample {
                stream: f.stream,
                arrival: f.times.arrival,
                end: f.times.arrival + total,
                total_us: micros(total),
                steps: f.times.stages().map(|(s, d)| (s, micros(d))).collect(),
            });
        }
    }

    fn finish(&mut self, _report: &mut Report) {}
}

/// A stage's share of the late frames' time.
#[derive(Debug, Clone, PartialEq)]
pub struct StageLateness {
    /// The stage's report row.
    pub stage: String,
    /// Mean time in it of the frames over the bound, ms.
    pub late_ms: f64,
    /// Mean time in it of every frame, ms.
    pub all_ms: f64,
}

/// Where a run's latency went.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lateness {
    /// Frames recorded.
    pub frames: usize,
    /// Frames over the bound.
    pub late: usize,
    /// `(GPU, frames, p99 ms)` of each GPU's streams.
    pub by_gpu: Vec<(usize, usize, f64)>,
    /// p99 ms of the frames due in the run's first [`START_S`] seconds, and of the rest.
    pub start_p99: f64,
    /// p99 ms of the frames due after the first [`START_S`] seconds.
    pub after_p99: f64,
    /// The second of the run (from its first due frame) with the most late frames, and how many.
    pub worst_second: Option<(u64, usize)>,
    /// Stages by the late frames' excess time in them (late mean minus all mean), largest first.
    pub stages: Vec<StageLateness>,
    /// Seconds from the run's start to its first frame at the end (the start: decoders,
    /// first calls).
    pub first_s: f64,
    /// `(GPU, seconds from the run's start to its streams' last frame at the end)`.
    pub last_s: Vec<(usize, f64)>,
    /// Frames per second from the first frame at the end to the last (the start left out).
    pub steady_fps: f64,
    /// The run's first [`STEPS`] steps of [`STEP_S`] seconds from its first due frame: where
    /// the start's late frames were and what held them.
    pub steps: Vec<Step>,
}

/// The frames due in one step of the run's start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// Frames due in it.
    pub frames: usize,
    /// Of them, over the bound.
    pub late: usize,
    /// Their mean latency, ms.
    pub mean_ms: f64,
    /// The stage they spent the most time in, and their mean time in it, ms.
    pub stage: Option<(String, f64)>,
}

/// The report row of stage `i`, by its number where the run did not name it.
fn stage_name(r: &Record, i: usize) -> String {
    r.stages.get(i).cloned().unwrap_or_else(|| format!("#{i}"))
}

/// The mean of `n` values summing to `sum_us` microseconds, ms.
fn mean_ms(sum_us: u64, n: usize) -> f64 {
    sum_us as f64 / 1e3 / n.max(1) as f64
}

fn p99(mut v: Vec<u32>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let at = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    f64::from(v[at]) / 1e3
}

impl Recorded {
    /// The summary of the run, frames over `bound_ms` being late; stream `i` of `streams` ran
    /// on `devices[i * K / streams]` (K GPUs; empty `devices`: GPU 0).
    pub(super) fn lateness(&self, bound_ms: f64, streams: usize, devices: &[usize]) -> Lateness {
        let Ok(r) = self.0.lock() else {
            return Lateness::default();
        };
        summarize(&r, bound_ms, streams, devices)
    }
}

fn summarize(r: &Record, bound_ms: f64, streams: usize, devices: &[usize]) -> Lateness {
    let samples = &r.samples;
    let Some(t0) = samples.iter().map(|s| s.arrival).min() else {
        return Lateness::default();
    };
    let bound_us = (bound_ms * 1e3) as u32;
    let k = devices.len().clamp(1, streams.max(1));
    let gpu_of = |stream: u32| {
        let i = stream as usize * k / streams.max(1);
        devices.get(i.min(k - 1)).copied().unwrap_or(0)
    };
    // Each GPU's frames' latencies, and when its last frame reached the end.
    let mut per_gpu = std::collections::BTreeMap::<usize, (Vec<u32>, Instant)>::new();
    for s in samples {
        let (totals, last) = per_gpu
            .entry(gpu_of(s.stream))
            .or_insert((Vec::new(), s.end));
        totals.push(s.total_us);
        *last = (*last).max(s.end);
    }
    let since = |s: &Sample| s.arrival.saturating_duration_since(t0).as_secs_f64();
    let (start, after): (Vec<&Sample>, Vec<&Sample>) =
        samples.iter().partition(|s| since(s) < START_S);
    let mut seconds = std::collections::BTreeMap::<u64, usize>::new();
    for s in samples.iter().filter(|s| s.total_us > bound_us) {
        *seconds.entry(since(s) as u64).or_default() += 1;
    }
    let worst_second = seconds
        .iter()
        .max_by_key(|(sec, n)| (**n, std::cmp::Reverse(**sec)))
        .map(|(s, n)| (*s, *n));
    // Mean time per stage row, over the late frames and over all.
    let rows = r.stages.len().max(
        samples
            .iter()
            .flat_map(|s| s.steps.iter().map(|(slot, _)| *slot as usize + 1))
            .max()
            .unwrap_or(0),
    );
    let mut late_sum = vec![0u64; rows];
    let mut all_sum = vec![0u64; rows];
    let late = samples.iter().filter(|s| s.total_us > bound_us).count();
    for s in samples {
        for &(slot, us) in &s.steps {
            all_sum[slot as usize] += u64::from(us);
            if s.total_us > bound_us {
                late_sum[slot as usize] += u64::from(us);
            }
        }
    }
    let mut stages: Vec<StageLateness> = (0..rows)
        .filter(|&i| all_sum[i] > 0)
        .map(|i| StageLateness {
            stage: stage_name(r, i),
            late_ms: mean_ms(late_sum[i], late),
            all_ms: mean_ms(all_sum[i], samples.len()),
        })
        .collect();
    stages.sort_by(|a, b| (b.late_ms - b.all_ms).total_cmp(&(a.late_ms - a.all_ms)));
    let steps = start_steps(r, t0, bound_us, rows);
    let started = r.started.unwrap_or(t0);
    let secs = |at: Instant| at.saturating_duration_since(started).as_secs_f64();
    let first = samples.iter().map(|s| s.end).min().unwrap_or(started);
    let last = samples.iter().map(|s| s.end).max().unwrap_or(started);
    let last_s = per_gpu
        .iter()
        .map(|(&g, &(_, end))| (g, secs(end)))
        .collect();
    let by_gpu = per_gpu
        .into_iter()
        .map(|(g, (totals, _))| (g, totals.len(), p99(totals)))
        .collect();
    let span = last.saturating_duration_since(first).as_secs_f64();
    let steady_fps = match span > 0.0 {
        true => (samples.len() - 1) as f64 / span,
        false => 0.0,
    };
    Lateness {
        first_s: secs(first),
        last_s,
        steady_fps,
        frames: samples.len(),
        late,
        by_gpu,
        start_p99: p99(start.iter().map(|s| s.total_us).collect()),
        after_p99: p99(after.iter().map(|s| s.total_us).collect()),
        worst_second,
        stages,
        steps,
    }
}

/// The frames due in each of the first [`STEPS`] steps from `t0`, over `rows` stage rows.
fn start_steps(r: &Record, t0: Instant, bound_us: u32, rows: usize) -> Vec<Step> {
    let mut sums = vec![(0usize, 0usize, 0u64, vec![0u64; rows]); STEPS];
    for s in &r.samples {
        let i = (s.arrival.saturating_duration_since(t0).as_secs_f64() / STEP_S) as usize;
        let Some((frames, late, total, per_stage)) = sums.get_mut(i) else {
            continue;
        };
        *frames += 1;
        *late += usize::from(s.total_us > bound_us);
        *total += u64::from(s.total_us);
        for &(slot, us) in &s.steps {
            per_stage[slot as usize] += u64::from(us);
        }
    }
    sums.into_iter()
        .map(|(frames, late, total, per_stage)| {
            let stage = (0..rows)
                .max_by_key(|&i| per_stage[i])
                .filter(|&i| per_stage[i] > 0)
                .map(|i| (stage_name(r, i), mean_ms(per_stage[i], frames)));
            Step {
                frames,
                late,
                mean_ms: mean_ms(total, frames),
                stage,
            }
        })
        .collect()
}

impl Lateness {
    /// The stage that bounds the run: the one its frames spent the most time in (queued before
    /// it and in it), with that time and every stage's together, ms a frame. A stage that holds
    /// frames longest is the one the others wait for; a ratio to a decoder's figure says less
    /// (its start may dominate it).
    pub fn bound(&self) -> Option<(&str, f64, f64)> {
        let total: f64 = self.stages.iter().map(|s| s.all_ms).sum();
        self.stages
            .iter()
            .max_by(|a, b| a.all_ms.total_cmp(&b.all_ms))
            .map(|s| (s.stage.as_str(), s.all_ms, total))
    }

    /// When the frames came through, on one line.
    pub fn through(&self) -> String {
        let last: Vec<String> = self
            .last_s
            .iter()
            .map(|(g, s)| format!("GPU {g} {s:.2} s"))
            .collect();
        format!(
            "first frame at the end {:.2} s after the start; last frame by GPU: {}; {:.1} fps from the first frame at the end to the last",
            self.first_s,
            last.join(", "),
            self.steady_fps
        )
    }

    /// The start step by step on one line: `frames/late mean ms (stage ms)` a step.
    pub fn start(&self) -> String {
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| {
                let stage = s
                    .stage
                    .as_ref()
                    .map_or(String::new(), |(n, ms)| format!(" ({n} {ms:.0})"));
                format!("{}/{} {:.0}{stage}", s.frames, s.late, s.mean_ms)
            })
            .collect();
        format!(
            "by {:.0} ms from the first due frame, frames/late mean ms (the stage most of it went to): {}",
            STEP_S * 1e3,
            steps.join(" | ")
        )
    }

    /// The summary on one line (the stages: the four with the most excess time).
    pub fn line(&self, bound_ms: f64) -> String {
        let gpus: Vec<String> = self
            .by_gpu
            .iter()
            .map(|(g, n, p)| format!("GPU {g} {p:.1} ({n} frames)"))
            .collect();
        let stages: Vec<String> = self
            .stages
            .iter()
            .take(4)
            .map(|s| format!("{} {:.1} vs {:.1}", s.stage, s.late_ms, s.all_ms))
            .collect();
        let worst = self
            .worst_second
            .map_or("none".into(), |(s, n)| format!("second {s} ({n} late)"));
        format!(
            "{} of {} frames over {bound_ms:.0} ms; p99 ms by GPU: {}; p99 in the first {START_S:.0} s \
             {:.1}, after {:.1}; most late frames: {worst}; late frames' mean ms per stage \
             against all frames': {}",
            self.late,
            self.frames,
            gpus.join(", "),
            self.start_p99,
            self.after_p99,
            stages.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(stream: u32, at: Instant, steps: &[(u16, u32)]) -> Sample {
        let total_us: u32 = steps.iter().map(|(_, us)| us).sum();
        Sample {
            stream,
            arrival: at,
            end: at + Duration::from_micros(u64::from(total_us)),
            total_us,
            steps: steps.to_vec(),
        }
    }

    #[test]
    fn the_late_frames_are_found_by_gpu_time_and_stage() {
        let t0 = Instant::now();
        let mut r = Record {
            started: Some(t0),
            stages: vec!["media".into(), "detect".into(), "jsonl".into()],
            samples: Vec::new(),
        };
        // Four streams over GPUs 0 and 1 (streams 0, 1 on GPU 0; 2, 3 on GPU 1): on GPU 1 every
        // frame due after 3 s waits 150 ms in detect; the others take 20 ms in all.
        for i in 0..400u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 33);
            for stream in 0..4 {
                let detect = if stream >= 2 && i * 33 >= 3000 {
                    150_000
                } else {
                    10_000
                };
                r.samples
                    .push(sample(stream, at, &[(0, 5_000), (1, detect), (2, 5_000)]));
            }
        }
        let l = summarize(&r, 100.0, 4, &[0, 1]);
        assert_eq!(l.frames, 1600);
        assert_eq!(l.late, 2 * (400 - 91));
        assert_eq!(l.by_gpu[0], (0, 800, 20.0));
        assert_eq!(l.by_gpu[1], (1, 800, 160.0));
        assert_eq!((l.start_p99, l.after_p99), (20.0, 160.0));
        assert_eq!(l.stages[0].stage, "detect");
        assert_eq!(l.stages[0].late_ms, 150.0);
        assert!(l.worst_second.is_some_and(|(s, _)| s >= 3), "{l:?}");
        // The last frames: 399 x 33 ms after the start, plus 20 ms (GPU 0) or 160 ms (GPU 1).
        let last: Vec<(usize, i64)> = l
            .last_s
            .iter()
            .map(|(g, s)| (*g, (s * 1e3).round() as i64))
            .collect();
        assert_eq!(last, vec![(0, 13_187), (1, 13_327)]);
        assert!((l.first_s - 0.02).abs() < 1e-9, "{l:?}");
        assert!(
            (l.steady_fps - 1599.0 / (13.327 - 0.02)).abs() < 1e-6,
            "{l:?}"
        );
        let line = l.line(100.0);
        assert!(line.contains("GPU 1 160.0 (800 frames)"), "{line}");
        // Each 250 ms step of the start: 8 frames due in 264 ms (7.6 steps of 33 ms) a stream,
        // nothing late before 3 s.
        assert_eq!(l.steps.len(), STEPS);
        assert_eq!(l.steps[0].frames, 4 * 8);
        assert!(l.steps.iter().all(|s| s.late == 0), "{:?}", l.steps);
        assert_eq!(l.steps[0].stage, Some(("detect".into(), 10.0)));
        assert!(l.start().starts_with("by 250 ms from the first due frame"));
        // detect holds a frame longest: (10 ms x 982 frames + 150 ms x 618) / 1600, of that
        // plus 10 ms (media and jsonl) in all.
        let (stage, ms, total) = l.bound().unwrap();
        assert_eq!(stage, "detect");
        assert!(
            (ms - (10.0 * 982.0 + 150.0 * 618.0) / 1600.0).abs() < 1e-9,
            "{ms}"
        );
        assert!((total - ms - 10.0).abs() < 1e-9, "{total}");
    }
}
