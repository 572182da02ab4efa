//! The detect stage at run time: frames of every stream it serves are collected until their
//! tiles fill one inference call (`max-batch`) or the first frame's wait ends (the batch stage's
//! [`Window`]), then detected together; every stream's frames leave in their order. With
//! `overlap-calls` (by default on CUDA) a call's model runs happen on the model's own thread: the
//! stage starts a call (preprocessing its tiles) and completes the one before (placing its boxes)
//! while the model runs, so that the model does not wait for the stage's own work between calls.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::detector::Call;
use super::error::DetectError;
use super::{DetectConfig, Detector};
use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{Element, OpenContext, Running, Stage};
use octopipe_stages::batch::{Downstream, Window};
use octopipe_stages::track::{DetectScore, Tracked};

/// A collected frame: to be detected, or (`detect interval`) left to the tracker to predict.
struct Held {
    frame: Frame,
    detect: bool,
}

/// A call started and not yet completed, with the frames left to the tracker that leave
/// behind its frames of their streams.
struct InFlight {
    call: Call,
    /// Each frame in the order it came: in the call (`true`) or in `passed`.
    order: Vec<bool>,
    passed: Vec<Frame>,
    /// The streams of the frames in the call.
    streams: Vec<u32>,
    /// When it started.
    started: Instant,
}

/// The detect stage: the detector, the frames collected for its next call, the call in flight,
/// and where its report line goes.
struct DetectStage {
    detector: Detector,
    window: Window,
    held: Vec<Held>,
    /// Tiles of the frames held.
    tiles: usize,
    /// The call started last, until it is completed (with `overlap-calls`, while the next frames
    /// are collected; without, it is completed as it starts).
    in_flight: Option<InFlight>,
    /// Running estimate (ns) of one call of the detector: its preprocessing, model runs and
    /// placing.
    call_ns: u64,
    /// Running estimates of the time from the batch stage to the sink.
    downstream: Arc<Downstream>,
    /// For live sources: running estimate (ns) of the time between frames arriving here, from
    /// all the streams the stage serves, and when the last one came.
    gap_ns: Option<u64>,
    last_arrival: Option<Instant>,
    /// `detect interval`, and per stream the last frame detected.
    interval: u64,
    last_detected: HashMap<u32, u64>,
    /// Frames left to the tracker.
    predicted: u64,
    tally: Tally,
    budget: Duration,
}

impl DetectStage {
    /// Whether `frame` is one the detector looks at: every frame, or with `interval` N the
    /// first of its stream and then the first at least N frames after the last detected.
    fn wanted(&mut self, frame: &Frame) -> bool {
        if self.interval <= 1 {
            return true;
        }
        match self.last_detected.get(&frame.stream) {
            Some(&last) if frame.seq < last.saturating_add(self.interval) && frame.seq > last => {
                false
            }
            _ => {
                self.last_detected.insert(frame.stream, frame.seq);
                true
            }
        }
    }

    /// Start the call of the frames held and complete the call before it (handing its frames
    /// on): the model has the new call before the stage places the boxes of the old one, so it
    /// runs while the stage does. Without `overlap-calls` the new call is completed at once.
    fn flush(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.tiles = 0;
        let held = std::mem::take(&mut self.held);
        let order: Vec<bool> = held.iter().map(|h| h.detect).collect();
        let (to_detect, passed): (Vec<Held>, Vec<Held>) = held.into_iter().partition(|h| h.detect);
        let frames: Vec<Frame> = to_detect.into_iter().map(|h| h.frame).collect();
        let passed: Vec<Frame> = passed.into_iter().map(|h| h.frame).collect();
        if frames.is_empty() {
            // Only frames left to the tracker (held behind a call's frames of their streams,
            // which leave first).
            self.complete(out)?;
            out.extend(passed);
            return Ok(());
        }
        let mut streams: Vec<u32> = frames.iter().map(|f| f.stream).collect();
        streams.sort_unstable();
        streams.dedup();
        let started = Instant::now();
        let call = self.detector.start(frames)?;
        self.complete(out)?;
        self.in_flight = Some(InFlight {
            call,
            order,
            passed,
            streams,
            started,
        });
        if !self.detector.overlaps() {
            self.complete(out)?;
        }
        Ok(())
    }

    /// Complete the call in flight, if any, and hand its frames on in the order they came.
    fn complete(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        let Some(flight) = self.in_flight.take() else {
            return Ok(());
        };
        let detected = self.detector.complete(flight.call)?;
        let ns = self.detector.last_call().as_nanos() as u64;
        self.call_ns = if self.call_ns == 0 {
            ns
        } else {
            (self.call_ns * 7 + ns) / 8
        };
        let mut detected = detected.into_iter();
        let mut passed = flight.passed.into_iter();
        for detect in flight.order {
            let frame = if detect {
                detected.next()
            } else {
                passed.next()
            };
            out.push(frame.expect("every frame of a call comes back"));
        }
        Ok(())
    }

    /// When the call in flight is expected to be over: its frames are handed on then, even if
    /// no frame comes meanwhile.
    fn call_ends(&self) -> Option<Instant> {
        let flight = self.in_flight.as_ref()?;
        Some(flight.started + Duration::from_nanos(self.call_ns))
    }

    /// When the frames held must go to the model so that the oldest can still make its budget
    /// (the batch stage's rule). A call in flight does not move it: the new call waits for the
    /// model behind it, and closing the collection sooner would only make it smaller.
    fn collection_due(&self) -> Option<Instant> {
        let oldest = self.held.first()?.frame.times.arrival;
        let newest = self.held.last()?.frame.times.arrival;
        let after = self.call_ns + self.downstream.batch_ns.load(Ordering::Relaxed);
        Some(
            self.window
                .deadline(oldest, newest, Duration::from_nanos(after)),
        )
    }
}

impl Stage<Frame, Frame> for DetectStage {
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        // A call whose runs are over leaves now, not at the next call.
        if self.in_flight.as_mut().is_some_and(|f| f.call.done()) {
            self.complete(out)?;
        }
        if self.gap_ns.is_some() || self.window.interval.is_some() {
            let now = frame.times.arrival;
            if let Some(last) = self.last_arrival.replace(now) {
                let gap = now.saturating_duration_since(last).as_nanos() as u64;
                let ema = self.gap_ns.map_or(gap, |g| (g * 7 + gap) / 8);
                self.gap_ns = Some(ema);
                self.window.interval = Some(Duration::from_nanos(ema));
            }
        }
        if !self.wanted(&frame) {
            frame.detections.clear();
            frame.predicted = true;
            self.predicted += 1;
            // Behind a frame of its stream held or in the call in flight (its order), else on
            // at once.
            if self.held.iter().any(|h| h.frame.stream == frame.stream) {
                self.held.push(Held {
                    frame,
                    detect: false,
                });
            } else if let Some(flight) = self
                .in_flight
                .as_mut()
                .filter(|f| f.streams.contains(&frame.stream))
            {
                flight.order.push(false);
                flight.passed.push(frame);
            } else {
                out.push(frame);
            }
            return Ok(());
        }
        self.detector.config.check_tiles(&frame)?;
        let tiles = self
            .detector
            .config
            .regions(frame.layout.width, frame.layout.height)
            .len();
        if !self.window.fits(self.held.len(), self.tiles, tiles) {
            self.flush(out)?;
        }
        self.tiles += tiles;
        self.held.push(Held {
            frame,
            detect: true,
        });
        if self.window.full(self.held.len(), self.tiles) {
            self.flush(out)?;
        }
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        match (self.collection_due(), self.call_ends()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timeout(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        let now = Instant::now();
        if self.collection_due().is_some_and(|d| d <= now) {
            // Starts the collection's call, and completes the one before.
            self.flush(out)?;
        }
        if self.call_ends().is_some_and(|d| d <= now) {
            self.complete(out)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.flush(out)?;
        self.complete(out)?;
        self.detector.tell_blind();
        if let Some(mut section) = self.detector.report_section(self.budget) {
            section.predicted_frames = self.predicted;
            self.tally.with(|t| t.add_section(&section));
        }
        Ok(())
    }
}

impl Element for DetectConfig {
    fn configure(&mut self, caps: &mut octopipe_core::stage::Caps) {
        // A `track` after it follows this threshold unless given its own.
        caps.insert_for_branch(DetectScore(self.score));
    }

    fn burst(&self) -> usize {
        // A call's frames (each at least one tile), and the frames held behind them for the
        // tracker.
        self.max_batch.saturating_mul(self.interval.max(1) as usize)
    }
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        if self.interval > 1 && ctx.caps.get::<Tracked>().is_none() {
            return Err(DetectError::Model {
                path: self.model.display().to_string(),
                reason: format!(
                    "interval={} leaves frames to a tracker: put a track stage after detect",
                    self.interval
                ),
            }
            .into());
        }
        let (max_batch, max_wait, interval) = (self.max_batch, self.max_wait, self.interval);
        let detector = Detector::new(*self)?;
        tracing::info!(
            "detect: {}x{} input, {} decoder, {} preprocessing, batch sizes {:?}, model runs {}",
            detector.io.size.0,
            detector.io.size.1,
            detector.io.decoder.name(),
            detector.backend.name(),
            detector.batch_sizes(),
            if detector.overlaps() {
                "on a thread of its own (overlap-calls)"
            } else {
                "on the stage's thread"
            },
        );
        Ok(Running::stage(Box::new(DetectStage {
            detector,
            window: Window {
                max_weight: max_batch,
                max_items: max_batch,
                max_wait,
                budget: ctx.budget,
                interval: ctx.live_interval,
            },
            held: Vec::new(),
            tiles: 0,
            in_flight: None,
            call_ns: 0,
            downstream: ctx.downstream.clone(),
            gap_ns: None,
            last_arrival: None,
            interval,
            last_detected: HashMap::new(),
            predicted: 0,
            tally: ctx.tally.clone(),
            budget: ctx.budget,
        })))
    }

    fn inputs(&self) -> Vec<RunPath> {
        vec![RunPath::file("detect model", &self.model)]
    }
}
