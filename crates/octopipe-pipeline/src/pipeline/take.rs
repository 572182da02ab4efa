//! How a running pipeline takes streams: the handle it gives ([`Pipeline::streams`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::admit;
use super::control::BATCHER;
use super::ready::Expected;
use super::runner::Pipeline;
use super::streams::{Book, Entry, Streams};
use super::PipelineError;
use octopipe_core::error::Error;
use octopipe_core::frame::StageSlot;
use octopipe_core::stage::{Item, Registry, Role};

impl Pipeline {
    /// Take streams while running: the handle adds streams (described with the stages of
    /// `registry`), removes them and lists them, from any thread, before and while the
    /// pipeline runs. From now on the run lasts until [`Streams::close`] or a stop, also with
    /// no stream left. Streams join the stage the description starts with when it starts with
    /// no source (a shared `detect`), else the pipeline's batch stage: an error when it has
    /// none or several. Asking again gives the same handle.
    pub fn streams(&mut self, registry: &Registry) -> Result<Streams, Error> {
        if let Some((book, _, _)) = &self.streams {
            return Ok(Streams(book.clone()));
        }
        // Streams join the stage the description starts with when it has no source there
        // (`detect ... ! track ! batch ...`: a shared detector), else the batch stage.
        let fed = |i: usize| self.nodes.iter().any(|m| m.output == Some(i));
        let mut heads = self
            .nodes
            .iter()
            .enumerate()
            .filter(|&(i, n)| n.running.items().0 == Some(Item::FRAMES) && !fed(i));
        let mut batchers = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.running.items() == BATCHER);
        let target = match (heads.next(), heads.next(), batchers.next(), batchers.next()) {
            (Some((i, _)), None, _, _) => i,
            (Some(_), Some(_), _, _) => return Err(PipelineError::NoBatchToJoin("several").into()),
            (None, _, Some((i, _)), None) => i,
            (None, _, None, _) => return Err(PipelineError::NoBatchToJoin("none").into()),
            (None, _, Some(_), Some(_)) => {
                return Err(PipelineError::NoBatchToJoin("several").into())
            }
        };
        let (target_row, target_kind) = (self.nodes[target].row.clone(), self.nodes[target].kind);
        let joins_batch = self.nodes[target].running.items() == BATCHER;
        // A report row for every stage a stream may hold, before the joined stage's: those
        // giving frames their boxes only where the stream joins the batch stage.
        let mut rows = self.rows.clone();
        let mut at = rows.iter().position(|r| *r == target_row).unwrap_or(0);
        let before = registry.decls().iter().filter(|d| match d.role {
            Role::Boxes | Role::Track => joins_batch,
            Role::Filter(item) => item == Item::FRAMES,
            _ => false,
        });
        for row in std::iter::once("decode").chain(before.map(|d| d.name)) {
            if !rows.iter().any(|r| r == row) {
                rows.insert(at, row.to_string());
                at += 1;
            }
        }
        for n in &mut self.nodes {
            n.slot = rows.iter().position(|r| *r == n.row).unwrap_or(0) as StageSlot;
        }
        self.tally.with(|t| t.set_rows(rows.clone()));
        self.rows = rows;
        // The run's length is not known any more.
        let lengths = self.expected.0.iter().map(|n| n.load(Ordering::Relaxed));
        let unknown = std::iter::once(Expected::UNKNOWN);
        self.expected = Arc::new(Expected(
            lengths.chain(unknown).map(AtomicU64::new).collect(),
        ));
        let entries = self.sources.iter().map(|(id, source, fate)| {
            let entry = Entry {
                source: source.clone(),
                added: false,
                fate: fate.clone(),
                removed: None,
                detached: false,
                port: None,
                branch: None,
            };
            (*id, entry)
        });
        let book = Arc::new(Book {
            registry: registry.clone(),
            control: self.control.clone(),
            tally: self.tally.clone(),
            rows: self.rows.clone(),
            joins_at: (at, target_kind, joins_batch),
            live: self.live,
            caps: self.caps.clone(),
            budget: self.budget,
            live_interval: self.frame_interval.filter(|_| self.live),
            downstream: self.downstream.clone(),
            keep_pixels: self.keep_pixels.clone(),
            expected: self.expected.clone(),
            entries: Mutex::new(entries.collect()),
            opening: Mutex::new(BTreeMap::new()),
            on_end: Mutex::new(Vec::new()),
            max_streams: AtomicUsize::new(usize::MAX),
            max_memory: AtomicU64::new(super::memory::DEFAULT_MAX_STREAM_MEMORY),
            memory: super::memory::Budget::new(super::memory::default_memory_budget()),
            remove_deadline: AtomicU64::new(admit::REMOVE_DEADLINE.as_millis() as u64),
        });
        let (joins, joined) = crossbeam_channel::unbounded();
        if let Ok(mut slot) = self.control.joins.lock() {
            *slot = Some(joins);
        }
        // A stop interrupts the streams added while running too.
        let weak = Arc::downgrade(&book);
        if let Ok(mut interrupters) = self.control.interrupters.lock() {
            interrupters.push(Box::new(move || {
                if let Some(book) = weak.upgrade() {
                    book.interrupt_all();
                }
            }));
        }
        self.streams = Some((book.clone(), joined, target));
        Ok(Streams(book))
    }
}
