//! Streams added and removed while a pipeline runs.
//!
//! ```text
//! octopipe run "batch max-frames=8 ! classify model=m.onnx ! mqtt" --metrics-addr 127.0.0.1:9184 --streams
//! curl -X POST 127.0.0.1:9184/streams -d '{"id":7,"source":"testsrc live=true ! boxes format=synthetic"}'
//! curl -X DELETE '127.0.0.1:9184/streams/7?mode=drain'
//! ```
//!
//! [`Pipeline::streams`] gives the handle ([`Streams`]); the metrics server serves it over HTTP
//! (`observe::MetricsServer::serve_streams`). A stream is described as a branch of a description
//! is, from its source to the stage that gives its frames their boxes (`media location=rtsp://...
//! ! detect model=d.onnx`); it is opened on the caller's thread, gets its own threads and edges,
//! and its last edge joins the pipeline's one batch stage, which serves it round-robin with the
//! others. Where the description starts with a stage instead of a source (`detect model=d.onnx !
//! track ! batch ! ...`), streams join that stage: every stream's frames share the one detector
//! (its calls hold tiles of several streams), and a stream is described up to its frames
//! (`media location=rtsp://...`). Its stream id is the one asked for (unused in this run: a report row stays one
//! stream's) or the next after the highest. Removing a stream stops its source: with
//! [`RemoveMode::Drain`] the frames it gave go through, with [`RemoveMode::Drop`] those not yet in
//! the batch stage are dropped and counted (`stream removed`). Either way its report row stays,
//! with `in = processed + dropped`. A pipeline that takes streams runs until [`Streams::close`]
//! or a stop, also with no stream left.
//!
//! [`Pipeline::streams`]: super::Pipeline::streams

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use serde::Serialize;

use super::admit;
use super::control::{Control, Fate};
use super::open::open_chain;
use super::ready::{Expected, Ready};
use super::wire::{spawn, StageThread};
use super::PipelineError;
use super::{EdgePolicy, STREAM_REMOVED};
use crate::batch::Downstream;
use crate::budget::Tally;
use crate::describe::Description;
use crate::frame::Frame;
use crate::source::{AppSource, AppSourceSettings};
use crate::stage::edge::{PortRx, PortTx};
use crate::stage::{Caps, Payload, Registry};
use crate::Error;

/// How a stream is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoveMode {
    /// Its source stops; the frames it gave go through the pipeline.
    #[default]
    Drain,
    /// Its source stops; its frames not yet in the batch stage are dropped and counted
    /// ([`STREAM_REMOVED`]).
    Drop,
}

impl RemoveMode {
    /// `drain` or `drop`.
    pub fn parse(s: &str) -> Option<RemoveMode> {
        match s {
            "drain" => Some(RemoveMode::Drain),
            "drop" => Some(RemoveMode::Drop),
            _ => None,
        }
    }
}

/// Where a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamState {
    /// Giving frames.
    Running,
    /// Removed; what it gave is still on its way (or being dropped).
    Removing,
    /// Its stream ended.
    Ended,
    /// Its source failed after its retries (or a stage of its own failed): it ended alone, with
    /// the reason in [`StreamInfo::error`].
    Failed,
    /// Removed and gone from the pipeline.
    Removed,
}

/// A stream, as [`Streams::list`] (and `GET /streams`) gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamInfo {
    /// Its id (`Frame::stream`, the messages' `stream`).
    pub id: u32,
    /// How it was described when added, or its source in the pipeline's description.
    pub source: String,
    /// Where it is.
    pub state: StreamState,
    /// Added while running (only those can be removed).
    pub added: bool,
    /// Frames that entered so far.
    pub frames_in: u64,
    /// Frames that reached the end of the pipeline.
    pub processed: u64,
    /// Frames dropped, all reasons.
    pub dropped: u64,
    /// Why it failed ([`StreamState::Failed`]), credentials in URIs hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A stream just added.
#[derive(Clone)]
pub struct Added {
    /// Its id.
    pub id: u32,
    /// The handle that feeds it, for an `app` source.
    pub app: Option<AppSource>,
}

/// Adds and removes streams of a running pipeline: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Streams(pub(super) Arc<Book>);

/// Every stream of the run, and what opening another needs.
pub(super) struct Book {
    pub(super) registry: Registry,
    pub(super) control: Arc<Control>,
    pub(super) tally: Tally,
    pub(super) rows: Vec<String>,
    /// The row of the stage streams join (a stream's stages come before it), its kind, and
    /// whether it is the batch stage (streams then bring their boxes).
    pub(super) joins_at: (usize, &'static str, bool),
    pub(super) live: bool,
    pub(super) caps: Caps,
    pub(super) budget: Duration,
    pub(super) live_interval: Option<Duration>,
    pub(super) downstream: Arc<Downstream>,
    pub(super) keep_pixels: Arc<AtomicBool>,
    pub(super) expected: Arc<Expected>,
    pub(super) entries: Mutex<BTreeMap<u32, Entry>>,
    /// Streams being opened (their ids taken, and the UDP port each receives on), outside the
    /// lock of `entries`: a slow open holds up no list, health check or other add. Locked
    /// after `entries` when both are.
    pub(super) opening: Mutex<BTreeMap<u32, Option<u16>>>,
    /// Told the id of each stream added while running once its threads ended or were detached
    /// ([`Streams::on_end`]).
    pub(super) on_end: Mutex<Vec<EndHook>>,
    /// The most streams added while running that may run at once ([`Streams::set_max_streams`]).
    pub(super) max_streams: AtomicUsize,
    /// The most bytes of frames one stream added while running may hold
    /// ([`Streams::set_max_stream_memory`]).
    pub(super) max_memory: AtomicU64,
    /// Milliseconds a removed stream's threads have to end before they are detached
    /// ([`Streams::set_remove_deadline`]).
    pub(super) remove_deadline: AtomicU64,
}

/// One stream of the run, kept (small) after it ended: its id is not used again.
pub(super) struct Entry {
    /// How it is shown: its description, credentials hidden, cut ([`admit::shown`]).
    pub(super) source: String,
    pub(super) added: bool,
    /// Whether its source's stream ended, and why it failed.
    pub(super) fate: Fate,
    /// When it was removed.
    pub(super) removed: Option<Instant>,
    /// Its threads did not end within the remove deadline ([`Streams::set_remove_deadline`]): left to end on
    /// their own, the stream no longer counted.
    pub(super) detached: bool,
    /// The UDP port its source receives on.
    pub(super) port: Option<u16>,
    /// A stream added while running, until its threads ended and were joined.
    pub(super) branch: Option<Branch>,
}

/// What a stream added while running holds while it runs.
pub(super) struct Branch {
    interrupt: Box<dyn Fn() + Send + Sync>,
    /// Set by a removal with `mode=drop`: its edges drop what comes.
    discard: Arc<AtomicBool>,
    /// Its edge into the stage streams join (a removal with `mode=drop` empties it).
    tail: Receiver<Frame>,
    threads: Vec<StageThread>,
}

impl Entry {
    fn state(&self) -> StreamState {
        if self.detached {
            return StreamState::Removed;
        }
        let ended = match &self.branch {
            Some(b) => b.threads.iter().all(|t| t.handle.is_finished()),
            None if self.added => true,
            None => self.fate.ended.load(Ordering::SeqCst),
        };
        match (self.removed.is_some(), ended) {
            (false, false) => StreamState::Running,
            (false, true) if self.fate.failure().is_some() => StreamState::Failed,
            (false, true) => StreamState::Ended,
            (true, false) => StreamState::Removing,
            (true, true) => StreamState::Removed,
        }
    }
}

impl Streams {
    /// Add the stream `description`, parsed (one chain from a source to its boxes: `testsrc
    /// live=true ! boxes format=synthetic`, `app name=cam live=true`, `udpsrc ... ! avdec_h264 !
    /// detect model=d.onnx`), as stream `id`, or the next id after the highest when `None`. It
    /// is checked and opened here (a bad description or input is an error naming it, and
    /// nothing is added); its frames join the batch stage at once. It is listed as its text.
    pub fn add(&self, description: &Description, id: Option<u32>) -> Result<Added, Error> {
        self.0.add(description, id)
    }

    /// [`Streams::add`] of a description's text, parsed here (no variables; errors at
    /// `<stream>`).
    pub fn add_text(&self, text: &str, id: Option<u32>) -> Result<Added, Error> {
        let desc = crate::describe::parse("<stream>", text, &HashMap::new())?;
        self.0.add(&desc, id)
    }

    /// Remove stream `id` (one added while running): its source stops; `mode` says what becomes
    /// of the frames it already gave. Its report row stays. Removing it again does nothing.
    pub fn remove(&self, id: u32, mode: RemoveMode) -> Result<(), Error> {
        self.0.remove(id, mode)
    }

    /// Every stream of the run, in id order: those of the description and those added
    /// (also ended and removed ones).
    pub fn list(&self) -> Vec<StreamInfo> {
        self.0.list()
    }

    /// How many streams are running (what `GET /health` says), without listing them.
    pub fn running(&self) -> usize {
        let mut entries = self.0.entries();
        self.0.reap(&mut entries);
        let running = entries
            .values()
            .filter(|e| e.state() == StreamState::Running);
        running.count()
    }

    /// Take no more streams: the run ends when the streams it has end.
    pub fn close(&self) {
        self.0.control.close_joins();
    }

    /// At most `n` streams added while running run at once: adding one more is
    /// [`PipelineError::TooManyStreams`]. Streams being opened and streams being removed count
    /// (a removed stream until its threads ended, or until it was detached
    /// [`REMOVE_DEADLINE`](super::REMOVE_DEADLINE) after its removal); those that ended,
    /// failed or were removed do not. Unlimited until set.
    pub fn set_max_streams(&self, n: usize) {
        self.0.max_streams.store(n, Ordering::SeqCst);
    }

    /// A stream added while running may hold at most `bytes` of frames: one whose estimate
    /// (its queues full of frames as large as its source may give) passes it is refused before
    /// it opens, [`PipelineError::StreamMemory`]. [`DEFAULT_MAX_STREAM_MEMORY`] until set.
    ///
    /// [`DEFAULT_MAX_STREAM_MEMORY`]: super::DEFAULT_MAX_STREAM_MEMORY
    pub fn set_max_stream_memory(&self, bytes: u64) {
        self.0.max_memory.store(bytes, Ordering::SeqCst);
    }

    /// A removed stream whose threads have not ended `deadline` after its removal is detached
    /// (default [`REMOVE_DEADLINE`](super::REMOVE_DEADLINE)): its threads are left to
    /// end on their own, it no longer counts toward the most streams at once, and the report
    /// says so.
    pub fn set_remove_deadline(&self, deadline: Duration) {
        let ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        self.0.remove_deadline.store(ms, Ordering::SeqCst);
    }

    /// Call `hook` with the id of every stream added while running once it is over (its
    /// threads ended, or were detached after its removal): what keeps something per stream
    /// (the control plane's metrics) lets it go.
    pub fn on_end(&self, hook: impl Fn(u32) + Send + Sync + 'static) {
        let mut hooks = self.0.on_end.lock().unwrap_or_else(|e| e.into_inner());
        hooks.push(Box::new(hook));
    }
}

mod lifecycle;

/// Told the id of a stream that is over ([`Streams::on_end`]).
type EndHook = Box<dyn Fn(u32) + Send + Sync>;

impl Book {
    fn entries(&self) -> MutexGuard<'_, BTreeMap<u32, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, desc: &Description, id: Option<u32>) -> Result<Added, Error> {
        // A stream joining the batch stage brings its boxes; one joining a shared detect, not.
        let (joined_row, joins, boxed) = self.joins_at;
        let mut nodes = crate::describe::build_branch(desc, &self.registry, self.live, boxed)?;
        super::memory::check(&nodes, self.max_memory.load(Ordering::SeqCst))?;
        let place = |row: &String| self.rows[..joined_row].iter().position(|r| r == row);
        if let Some(n) = nodes.iter().find(|n| place(&n.row).is_none()) {
            return Err(PipelineError::StreamStage {
                stage: n.kind.to_string(),
                joins,
            }
            .into());
        }
        let port = admit::udp_port(desc);
        // The id (and the port) are taken now; the stream is opened without the lock.
        let reserved = self.reserve(id, port)?;
        let id = reserved.id;
        // build_branch gives a chain that starts with its source.
        nodes[0].element.set_stream(id);
        let name = nodes[0].element.describe_source().unwrap_or_default();
        let app = nodes[0]
            .element
            .downcast_ref::<AppSourceSettings>()
            .map(|a| a.handle());
        if nodes[0].element.is_live() {
            self.tally.with(|t| t.set_live(true));
        }
        // Every stage of the stream is its own: a failure of one ends the stream alone.
        let fate = Fate::default();
        let mut caps = self.caps.clone();
        let mut ready = open_chain(
            nodes,
            &mut caps,
            |ctx| {
                ctx.tally = self.tally.clone();
                ctx.budget = self.budget;
                ctx.live_interval = self.live_interval;
                ctx.downstream = self.downstream.clone();
                ctx.keep_pixels = self.keep_pixels.clone();
                ctx.stopped_early = self.control.stop.clone();
                ctx.stream_failed = self.control.failed.clone();
                // A live stream added while running starts its own clock (a start gate of its
                // own), and writes nothing (a source and its boxes): `overwrite` stays off.
            },
            |n, ctx| Ready::open(n, &self.rows, ctx, Some((id, fate.clone()))),
        )?;
        ready[0].end.retire = false;
        let interrupt: Arc<dyn Fn() + Send + Sync> = match ready[0].running.as_source() {
            Some(source) => Arc::from(source.interrupter()),
            None => return Err(PipelineError::NoBatchToJoin("a stream with no source").into()),
        };
        if let Ok(mut slot) = fate.interrupt.lock() {
            *slot = Some(interrupt.clone());
        }
        self.tally.with(|t| t.name_stream(id, &admit::shown(&name)));
        // Its edges, the last into the stage streams join; all drop what comes once it is removed with
        // mode=drop.
        let discard = Arc::new(AtomicBool::new(false));
        // A stream's stages give frames (the builder let no other stage in), so its edges are
        // frames' edges: a removal can drop what they hold.
        let mut edges: Vec<(PortTx, PortRx)> = Vec::with_capacity(ready.len());
        let mut tail = None;
        for (i, r) in ready.iter().enumerate() {
            let to = ready.get(i + 1).map_or(joins, |n| n.label);
            let name = format!("{} -> {to}", r.label);
            let drop_oldest = r.queue.policy == EdgePolicy::DropOldest;
            let (tx, rx) = r
                .running
                .edge(r.queue.size, drop_oldest, &name, &self.tally);
            let (Ok(mut tx), Ok(rx)) = (tx.typed::<Frame>(), rx.typed::<Frame>()) else {
                return Err(PipelineError::StreamStage {
                    stage: r.kind.to_string(),
                    joins,
                }
                .into());
            };
            tx.discard_when(discard.clone());
            tail = Some(rx.clone());
            edges.push((PortTx::new(tx), PortRx::new(rx)));
        }
        let Some(tail) = tail else {
            return Err(PipelineError::NoBatchToJoin("a stream with no source").into());
        };
        let joined = match self.control.joins.lock() {
            Ok(joins) => joins.as_ref().is_some_and(|j| j.send(tail.clone()).is_ok()),
            Err(_) => false,
        };
        if !joined {
            return Err(PipelineError::NotTakingStreams.into());
        }
        let mut threads = Vec::with_capacity(ready.len());
        let mut input = Vec::new();
        let mut failed = None;
        for (r, (tx, rx)) in ready.into_iter().zip(edges) {
            let inputs = std::mem::replace(&mut input, vec![rx]);
            match spawn(r, inputs, tx, None, &self.control, &self.expected) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let removing = failed.is_some();
        if removing {
            // The threads started end with their edges; the stream is counted as removed.
            interrupt();
        }
        let branch = Branch {
            interrupt: Box::new(move || interrupt()),
            discard,
            tail,
            threads,
        };
        let mut entries = self.entries();
        // A stop of the run while this stream was opened did not see it: it stops now.
        if self.control.stop.load(Ordering::SeqCst) {
            (branch.interrupt)();
        }
        entries.insert(
            id,
            Entry {
                source: admit::shown(&desc.text),
                added: true,
                fate,
                removed: removing.then(Instant::now),
                detached: false,
                port,
                branch: Some(branch),
            },
        );
        drop(reserved);
        match failed {
            Some(e) => Err(e),
            None => Ok(Added { id, app }),
        }
    }

    fn remove(&self, id: u32, mode: RemoveMode) -> Result<(), Error> {
        let mut entries = self.entries();
        let entry = entries
            .get_mut(&id)
            .ok_or(PipelineError::UnknownStream(id))?;
        if !entry.added {
            return Err(PipelineError::StaticStream(id).into());
        }
        entry.removed.get_or_insert_with(Instant::now);
        if let Some(b) = &entry.branch {
            if mode == RemoveMode::Drop {
                b.discard.store(true, Ordering::SeqCst);
                while let Ok(frame) = b.tail.try_recv() {
                    frame.count_drop(&self.tally, STREAM_REMOVED);
                }
            }
            (b.interrupt)();
        }
        Ok(())
    }

    fn list(&self) -> Vec<StreamInfo> {
        let mut entries = self.entries();
        self.reap(&mut entries);
        entries
            .iter()
            .map(|(&id, e)| {
                let (frames_in, processed, dropped) =
                    self.tally.with(|t| t.stream_counts(id)).unwrap_or_default();
                StreamInfo {
                    id,
                    source: e.source.clone(),
                    state: e.state(),
                    added: e.added,
                    frames_in,
                    processed,
                    dropped,
                    error: e.fate.failure(),
                }
            })
            .collect()
    }

    /// Ask every stream added while running to stop (a stop of the run).
    pub(super) fn interrupt_all(&self) {
        for e in self.entries().values() {
            if let Some(b) = &e.branch {
                (b.interrupt)();
            }
        }
    }

    /// The threads of the streams added while running, for the end of the run to wait for.
    pub(super) fn take_threads(&self) -> Vec<StageThread> {
        let mut entries = self.entries();
        let branches = entries.values_mut().filter_map(|e| e.branch.take());
        branches.flat_map(|b| b.threads).collect()
    }
}
