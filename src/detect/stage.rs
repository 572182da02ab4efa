//! The detect stage at run time: frames of every stream it serves are collected until their
//! tiles fill one inference call (`max-batch`) or the first frame's wait ends (the batch stage's
//! [`Window`]), then detected together; every stream's frames leave in their order.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DetectConfig, DetectError, Detector};
use crate::batch::{Downstream, Window};
use crate::budget::Tally;
use crate::files::RunPath;
use crate::frame::Frame;
use crate::stage::{Element, OpenContext, Running, Stage};
use crate::Error;

/// A collected frame: to be detected, or (`detect interval`) left to the tracker to predict.
struct Held {
    frame: Frame,
    detect: bool,
}

/// The detect stage: the detector, the frames collected for its next call, and where its
/// report line goes.
struct DetectStage {
    detector: Detector,
    window: Window,
    held: Vec<Held>,
    /// Tiles of the frames held.
    tiles: usize,
    /// Running estimate (ns) of one call of the detector.
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

    /// Detect the frames held and hand them on, in the order they came.
    fn flush(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.tiles = 0;
        let held = std::mem::take(&mut self.held);
        let order: Vec<bool> = held.iter().map(|h| h.detect).collect();
        let (to_detect, passed): (Vec<Held>, Vec<Held>) = held.into_iter().partition(|h| h.detect);
        let frames: Vec<Frame> = to_detect.into_iter().map(|h| h.frame).collect();
        let t = Instant::now();
        let mut detected = if frames.is_empty() {
            Vec::new().into_iter()
        } else {
            let frames = self.detector.detect_frames(frames)?;
            let ns = t.elapsed().as_nanos() as u64;
            self.call_ns = if self.call_ns == 0 {
                ns
            } else {
                (self.call_ns * 7 + ns) / 8
            };
            frames.into_iter()
        };
        let mut passed = passed.into_iter().map(|h| h.frame);
        for detect in order {
            let frame = if detect {
                detected.next()
            } else {
                passed.next()
            };
            out.push(frame.expect("every frame held comes back"));
        }
        Ok(())
    }
}

impl Stage<Frame, Frame> for DetectStage {
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
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
            // Behind a held frame of its stream (its order), else on at once.
            if self.held.iter().any(|h| h.frame.stream == frame.stream) {
                self.held.push(Held {
                    frame,
                    detect: false,
                });
            } else {
                out.push(frame);
            }
            return Ok(());
        }
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
        let oldest = self.held.first()?.frame.times.arrival;
        let newest = self.held.last()?.frame.times.arrival;
        let after = self.call_ns + self.downstream.batch_ns.load(Ordering::Relaxed);
        Some(
            self.window
                .deadline(oldest, newest, Duration::from_nanos(after)),
        )
    }

    fn timeout(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.flush(out)
    }

    fn finish(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.flush(out)?;
        if let Some(mut section) = self.detector.report_section(self.budget) {
            section.predicted_frames = self.predicted;
            self.tally.with(|t| t.add_section(&section));
        }
        Ok(())
    }
}

impl Element for DetectConfig {
    fn configure(&mut self, caps: &mut crate::stage::Caps) {
        // A `track` after it follows this threshold unless given its own.
        caps.detect_score = Some(self.score);
    }

    fn burst(&self) -> usize {
        // A call's frames (each at least one tile), and the frames held behind them for the
        // tracker.
        self.max_batch.saturating_mul(self.interval.max(1) as usize)
    }
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        if self.interval > 1 && !ctx.caps.tracked {
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
            "detect: {}x{} input, {} decoder, {} preprocessing, batch sizes {:?}",
            detector.model.io.size.0,
            detector.model.io.size.1,
            detector.model.io.decoder.name(),
            detector.backend.name(),
            detector.batch_sizes(),
        );
        Ok(Running::Frames(Box::new(DetectStage {
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
