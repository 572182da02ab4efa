//! The book of streams: every stream of the run, and what opening, listing and removing one
//! needs.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::super::admit;
use super::super::control::{Control, Fate};
use super::super::ready::{Expected, Ready};
use super::super::wire::{spawn, StageThread};
use super::super::PipelineError;
use super::super::{EdgePolicy, STREAM_REMOVED};
use super::info::{Added, RemoveMode, StreamInfo};
use super::records::{Branch, Entry, Records};
use crate::describe::Description;
use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::edge::{PortRx, PortTx};
use octopipe_core::stage::open_chain;
use octopipe_core::stage::{Caps, Payload, Registry};
use octopipe_sources::AppSourceSettings;
use octopipe_stages::batch::Downstream;

/// Every stream of the run, and what opening another needs.
pub(in crate::pipeline) struct Book {
    pub(in crate::pipeline) registry: Registry,
    pub(in crate::pipeline) control: Arc<Control>,
    pub(in crate::pipeline) tally: Tally,
    pub(in crate::pipeline) rows: Vec<String>,
    /// The row of the stage streams join (a stream's stages come before it), its kind, and
    /// whether it is the batch stage (streams then bring their boxes).
    pub(in crate::pipeline) joins_at: (usize, &'static str, bool),
    pub(in crate::pipeline) live: bool,
    pub(in crate::pipeline) caps: Caps,
    pub(in crate::pipeline) budget: Duration,
    pub(in crate::pipeline) live_interval: Option<Duration>,
    pub(in crate::pipeline) downstream: Arc<Downstream>,
    pub(in crate::pipeline) keep_pixels: Arc<AtomicBool>,
    pub(in crate::pipeline) expected: Arc<Expected>,
    /// Every stream kept: those not over yet, and the newest of those over
    /// ([`KEPT_RECORDS`](super::KEPT_RECORDS)).
    pub(in crate::pipeline) entries: Mutex<Records>,
    /// Streams being opened (their ids taken, and the UDP port each receives on), outside the
    /// lock of `entries`: a slow open holds up no list, health check or other add. Locked
    /// after `entries` when both are.
    pub(in crate::pipeline) opening: Mutex<BTreeMap<u32, Option<u16>>>,
    /// Told the id of each stream added while running once its threads ended or were detached
    /// ([`Streams::on_end`](super::Streams::on_end)).
    pub(in crate::pipeline) on_end: Mutex<Vec<EndHook>>,
    /// The most streams added while running that may run at once
    /// ([`Streams::set_max_streams`](super::Streams::set_max_streams)).
    pub(in crate::pipeline) max_streams: AtomicUsize,
    /// The most bytes of frames one stream added while running may hold
    /// ([`Streams::set_max_stream_memory`](super::Streams::set_max_stream_memory)).
    pub(in crate::pipeline) max_memory: AtomicU64,
    /// The station's memory budget: each stream added while running holds its estimate until
    /// its threads ended ([`Streams::set_memory_budget`](super::Streams::set_memory_budget)).
    pub(in crate::pipeline) memory: super::super::memory::Budget,
    /// Milliseconds a removed stream's threads have to end before they are detached
    /// ([`Streams::set_remove_deadline`](super::Streams::set_remove_deadline)).
    pub(in crate::pipeline) remove_deadline: AtomicU64,
}

/// Told the id of a stream that is over ([`Streams::on_end`](super::Streams::on_end)).
type EndHook = Box<dyn Fn(u32) + Send + Sync>;

impl Book {
    pub(super) fn entries(&self) -> MutexGuard<'_, Records> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn add(&self, desc: &Description, id: Option<u32>) -> Result<Added, Error> {
        // A stream joining the batch stage brings its boxes; one joining a shared detect, not.
        let (joined_row, joins, boxed) = self.joins_at;
        let mut nodes = crate::describe::build_branch(desc, &self.registry, self.live, boxed)?;
        let bytes = super::super::memory::check(&nodes, self.max_memory.load(Ordering::SeqCst))?;
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
        let reserved = self.reserve(id, port, bytes)?;
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
        reserved.admitted();
        match failed {
            Some(e) => Err(e),
            None => Ok(Added { id, app }),
        }
    }

    pub(super) fn remove(&self, id: u32, mode: RemoveMode) -> Result<(), Error> {
        let mut entries = self.entries();
        let entry = entries
            .get_mut(id)
            .ok_or(PipelineError::UnknownStream(id))?;
        if !entry.added {
            return Err(PipelineError::StaticStream(id).into());
        }
        let before = entry.state();
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
        entries.removed_over(id, before);
        Ok(())
    }

    pub(super) fn list(&self) -> Vec<StreamInfo> {
        let mut entries = self.entries();
        self.reap(&mut entries);
        entries.iter().map(|(&id, e)| self.info(id, e)).collect()
    }

    /// At most `limit` streams with an id after `after` (from the first without), in id
    /// order, and whether more follow. Only the streams not over yet are looked at (a reap)
    /// and the page looked up and copied (its counts, source and error): a station that has had
    /// a million streams lists ten as it lists ten.
    pub(super) fn page(&self, after: Option<u32>, limit: usize) -> (Vec<StreamInfo>, bool) {
        let mut entries = self.entries();
        self.reap(&mut entries);
        let from = match after {
            None => Bound::Unbounded,
            Some(a) => Bound::Excluded(a),
        };
        let mut page = entries.range((from, Bound::Unbounded));
        let infos: Vec<StreamInfo> = page
            .by_ref()
            .take(limit)
            .map(|(&id, e)| self.info(id, e))
            .collect();
        let more = page.next().is_some();
        (infos, more)
    }

    /// Stream `id` as it is listed.
    fn info(&self, id: u32, e: &Entry) -> StreamInfo {
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
    }

    /// Ask every stream added while running to stop (a stop of the run).
    pub(in crate::pipeline) fn interrupt_all(&self) {
        for (_, e) in self.entries().live() {
            if let Some(b) = &e.branch {
                (b.interrupt)();
            }
        }
    }

    /// The threads of the streams added while running, for the end of the run to wait for
    /// (those of detached streams are not waited for).
    pub(in crate::pipeline) fn take_threads(&self) -> Vec<StageThread> {
        let mut entries = self.entries();
        let branches = entries
            .values_mut()
            .filter_map(|e| e.branch.take().filter(|_| !e.detached));
        branches.flat_map(|b| b.threads).collect()
    }
}
