//! The pipeline itself: built from a graph (every stage opened), then run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::describe::Graph;
use octopipe_core::budget::{Budget, Tally};
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::source::StartGate;
use octopipe_core::stage::{Caps, Role};
use octopipe_onnx::appinfer::AppInfer;
use octopipe_sources::AppSource;
use octopipe_stages::batch::{CropBatch, Downstream};
use octopipe_stages::sink::Object;

use super::collect::{announce, expected_frames, finish, Collector};
use super::control::{Control, Fate, StopHandle, BATCHER, DEFAULT_STOP_GRACE, IN_FLIGHT_AT_STOP};
use super::handles::AppHandles;
use super::observer::{Observer, Outcome, ResultsObserver};
use super::ready::{Expected, Ready};
use super::streams;
use super::wire::{join, spawn, wire};
use octopipe_core::stage::open_chain;

/// A built pipeline: every stage opened and checked, no thread started yet.
pub struct Pipeline {
    pub(super) observers: Vec<Box<dyn Observer>>,
    pub(super) keep_pixels: Arc<AtomicBool>,
    pub(super) nodes: Vec<Ready>,
    pub(super) rows: Vec<String>,
    pub(super) budget: Duration,
    pub(super) frame_interval: Option<Duration>,
    pub(super) live: bool,
    pub(super) caps: Caps,
    pub(super) apps: AppHandles,
    pub(super) batches: Option<Sender<CropBatch>>,
    pub(super) tally: Tally,
    pub(super) control: Arc<Control>,
    pub(super) expected: Arc<Expected>,
    pub(super) stop_grace: Duration,
    pub(super) downstream: Arc<Downstream>,
    /// The streams of the description: id, source, fate.
    pub(super) sources: Vec<(u32, String, Fate)>,
    /// Once [`Pipeline::streams`] was asked for: the streams added while running, the end of
    /// the channel their edges come on, and the node it goes to.
    pub(super) streams: Option<(Arc<streams::Book>, Receiver<Receiver<Frame>>, usize)>,
    /// The paced sources' common start, told by the collector when their first frames have
    /// reached the end (the preroll).
    pub(super) start: Arc<StartGate>,
}

impl Pipeline {
    /// Open every stage of `graph`: models are loaded and checked, the crop size settled, the
    /// backends chosen, the sources and sinks opened. Nothing runs yet. First of all, an output
    /// of a stage that resolves to an input of the run (or to another output) is refused
    /// ([`Graph::check_paths`]), so nothing is created or truncated.
    pub fn build(graph: Graph) -> Result<Pipeline, Error> {
        // Before any stage opens (a sink creates its file when it opens).
        graph.check_paths(&[])?;
        let rows = graph.rows();
        let live = graph.is_live();
        let frame_interval = graph.frame_interval();
        let Graph {
            nodes,
            budget,
            overwrite,
        } = graph;
        let mut report = Budget::new(budget, rows.clone());
        report.set_live(live);
        let tally = Tally::new(report);
        let apps = AppHandles::collect(&nodes);
        let mut sources = Vec::new();
        for (stream, n) in nodes.iter().filter(|n| n.role == Role::Source).enumerate() {
            let stream = stream as u32;
            let name = n.element.describe_source().unwrap_or_default();
            tally.with(|t| t.name_stream(stream, &name));
            sources.push((stream, name, Fate::default()));
        }
        let keep_pixels = Arc::new(AtomicBool::new(false));
        let control = Arc::new(Control::new(tally.clone()));
        // The batch stage predicts from it; the collector feeds it.
        let downstream = Arc::new(Downstream::new(budget * 2));
        let mut caps = Caps::default();
        // Opened sink to source: the sources, last, each get their stream's end.
        let mut ends = sources.iter().rev().map(|s| (s.0, s.2.clone()));
        let mut start = None;
        let mut ready = open_chain(
            nodes,
            &mut caps,
            |ctx| {
                ctx.tally = tally.clone();
                ctx.budget = budget;
                ctx.live_interval = frame_interval.filter(|_| live);
                ctx.downstream = downstream.clone();
                ctx.keep_pixels = keep_pixels.clone();
                ctx.stopped_early = control.stop.clone();
                ctx.stream_failed = control.failed.clone();
                ctx.overwrite = overwrite;
                // The collector tells the paced sources' gate when their first frames are
                // through: the clocks start on a warm pipeline.
                ctx.start.expect_preroll();
                start = Some(ctx.start.clone());
            },
            |n, ctx| {
                let stream = match n.role {
                    Role::Source => ends.next(),
                    _ => None,
                };
                Ready::open(n, &rows, ctx, stream)
            },
        )?;
        let expected = expected_frames(&mut ready);
        if let Ok(mut i) = control.interrupters.lock() {
            for n in &ready {
                if let Some(s) = n.running.as_source() {
                    i.push(s.interrupter());
                }
            }
        }
        Ok(Pipeline {
            observers: Vec::new(),
            keep_pixels,
            nodes: ready,
            rows,
            budget,
            frame_interval,
            live,
            caps,
            apps,
            batches: None,
            tally,
            control,
            expected,
            stop_grace: DEFAULT_STOP_GRACE,
            downstream,
            sources,
            streams: None,
            start: start.unwrap_or_default(),
        })
    }

    /// Parse a description (as `octopipe run` takes it; `${name}` from `vars`), check it against
    /// the built-in stages and build it.
    pub fn from_description(
        text: &str,
        vars: &std::collections::HashMap<String, String>,
    ) -> Result<Pipeline, Error> {
        let desc = crate::describe::parse("<description>", text, vars)?;
        Pipeline::build(crate::describe::build(&desc)?)
    }

    /// A channel of every classified object, in pipeline order (each stream's frames in order).
    /// The channel holds `capacity` objects; a reader that falls behind holds the pipeline back.
    pub fn results(&mut self, capacity: usize) -> Receiver<Object> {
        let (tx, rx) = bounded(capacity.max(1));
        self.observe(Box::new(ResultsObserver(tx)));
        rx
    }

    /// A channel of every finished batch, after the observers saw it: its frames (boxes,
    /// classifications, timestamps), crops and the preprocessed tensor, for applications that run
    /// their own model. The channel holds `capacity` batches; a reader that falls behind holds the
    /// pipeline back. Asking again replaces the earlier channel.
    pub fn batches(&mut self, capacity: usize) -> Receiver<CropBatch> {
        let (tx, rx) = bounded(capacity.max(1));
        self.batches = Some(tx);
        rx
    }

    /// The handle that feeds the application source named `name` (`app name=NAME`), or the
    /// first application source when `name` is `None`.
    pub fn app_source(&self, name: Option<&str>) -> Option<AppSource> {
        self.apps.source(name)
    }

    /// The handles of every application source, in stream order (each says its
    /// [name](AppSource::name) and [stream](AppSource::stream)).
    pub fn app_sources(&self) -> Vec<AppSource> {
        self.apps.sources()
    }

    /// The handle that takes the batches of the `appinfer` stage named `name` (the first one
    /// when `name` is `None`) and sends their labels back.
    pub fn app_infer(&self, name: Option<&str>) -> Option<AppInfer> {
        self.apps.infer(name)
    }

    /// Add an observer of finished batches and of the report.
    pub fn observe(&mut self, observer: Box<dyn Observer>) {
        self.observers.push(observer);
    }

    /// Keep frames' pixels until the end of the pipeline (for observers that draw on frames);
    /// by default they go back to their pool right after preprocessing.
    pub fn keep_pixels(&mut self, keep: bool) {
        self.keep_pixels.store(keep, Ordering::Relaxed);
    }

    /// A handle that stops the run from another thread (e.g. on Ctrl-C).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.control.clone())
    }

    /// What the stages settled when they opened: the preprocess settings (with the model's
    /// input size) and the classifier's class names.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The report rows (stage names), in pipeline order.
    pub fn stage_names(&self) -> &[String] {
        &self.rows
    }

    /// How long a stopped run waits for the work in flight ([`DEFAULT_STOP_GRACE`]).
    pub fn set_stop_grace(&mut self, grace: Duration) {
        self.stop_grace = grace;
    }

    /// The per-frame budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The shortest nominal time between frames of the sources.
    pub fn frame_interval(&self) -> Option<Duration> {
        self.frame_interval
    }

    /// Whether a source is live.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The frames the sources will give in all, if each knows its length now (image sequences
    /// and test sources do once open; a media file's duration may only be known once it
    /// decodes: observers hear of it then, [`Observer::expected_frames`]).
    pub fn expected_frames(&self) -> Option<u64> {
        self.expected.total()
    }

    /// Run to end of stream (or the first error, or a stop request) and report.
    ///
    /// After a stop request the run ends within the stop grace whatever is in flight: a stage
    /// blocked in its work cannot be interrupted, so the runner stops waiting for it.
    pub fn run(self) -> Outcome {
        let Pipeline {
            mut observers,
            nodes,
            rows,
            budget,
            batches,
            tally,
            control,
            apps,
            expected,
            stop_grace,
            downstream,
            streams,
            start,
            ..
        } = self;
        // The application holds the handles it took: when it drops its last one without closing,
        // the `app` source sees the end of its stream instead of waiting for ever on ours (and an
        // `appinfer` stage passes its batches on unlabelled).
        drop(apps);
        for o in &mut observers {
            o.start(&rows);
        }
        // The wall clock of the report covers the run, not the opening of the stages.
        tally.with(|t| t.start_now());
        let mut announced = false;
        announce(&expected, &mut announced, &mut observers);
        let batch_slot = nodes
            .iter()
            .find(|n| n.running.items() == BATCHER)
            .map(|n| n.slot);
        let (ends, end_rx) = match wire(&nodes, &tally) {
            Ok(w) => w,
            Err(e) => {
                control.fail(e);
                return finish(observers, &tally, budget, &control, Vec::new());
            }
        };
        let (book, mut joins, joined) = match streams {
            Some((book, joins, at)) => (Some(book), Some(joins), Some(at)),
            None => (None, None, None),
        };
        let mut threads = Vec::new();
        for (i, (n, (inputs, output))) in nodes.into_iter().zip(ends).enumerate() {
            // Streams added while running join their stage.
            let joins = joins.take_if(|_| joined == Some(i));
            match spawn(n, inputs, output, joins, &control, &expected) {
                Ok(thread) => threads.push(thread),
                Err(e) => control.fail(e),
            }
        }
        let mut collector = Collector {
            observers,
            batches,
            tally: &tally,
            budget,
            batch_slot,
            downstream,
            expected,
            announced,
            // Only where paced sources wait at the gate: no lock on each batch otherwise.
            start: start.has_members().then_some(start),
        };
        let gave_up = collector.collect(&end_rx, &control, stop_grace);
        // Whatever is still queued for the collector is in flight from here on.
        drop(end_rx);
        control.close_joins();
        if let Some(book) = book {
            threads.extend(book.take_threads());
        }
        let abandoned = join(threads, &control, stop_grace);
        if gave_up || !abandoned.is_empty() {
            tally.with(|t| {
                t.drop_in_flight(IN_FLIGHT_AT_STOP);
                if !abandoned.is_empty() {
                    t.add_line(format!(
                        "stopped: did not wait for {} (still busy {:.1} s after the stop)",
                        abandoned.join(", "),
                        stop_grace.as_secs_f64()
                    ));
                }
            });
        }
        let outcome = finish(collector.observers, &tally, budget, &control, abandoned);
        let retired = control.retired.lock().map(|mut r| std::mem::take(&mut *r));
        for mut source in retired.unwrap_or_default() {
            source.stop();
        }
        outcome
    }
}
