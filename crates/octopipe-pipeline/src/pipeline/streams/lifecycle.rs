//! A stream's life in the book: its id and port taken before it is opened (without the book's
//! lock, so a slow open holds up nobody), its threads joined once they ended, and a removed
//! stream whose source does not stop detached after its deadline ([`REMOVE_DEADLINE`](admit::REMOVE_DEADLINE) by default).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::super::admit;
use super::super::{PipelineError, STREAM_REMOVED};
use super::book::{Book, Entry};
use super::info::StreamState;
use octopipe_core::error::Error;
use octopipe_core::stage::Payload;

impl Book {
    /// Take an id for a stream about to be opened (`id`, or the next automatic one) and the
    /// UDP port it receives on, when no other stream holds them and fewer than the most streams
    /// run, are opened or are being removed. Given back when the guard is dropped.
    pub(super) fn reserve(
        &self,
        id: Option<u32>,
        port: Option<u16>,
    ) -> Result<Reserved<'_>, Error> {
        let mut entries = self.entries();
        self.reap(&mut entries);
        let mut opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        let id = match id {
            Some(id) if entries.contains_key(&id) || opening.contains_key(&id) => {
                return Err(PipelineError::StreamTaken(id).into())
            }
            Some(id) => id,
            None => admit::next_id(entries.keys().chain(opening.keys()).copied())
                .ok_or(PipelineError::StreamTaken(admit::AUTO_IDS - 1))?,
        };
        if self.control.joins.lock().map_or(true, |j| j.is_none()) {
            return Err(PipelineError::NotTakingStreams.into());
        }
        let busy = |e: &Entry| matches!(e.state(), StreamState::Running | StreamState::Removing);
        if let Some(port) = port {
            let holder = entries
                .iter()
                .find(|(_, e)| e.port == Some(port) && busy(e))
                .map(|(id, _)| *id)
                .or_else(|| {
                    let mut held = opening.iter();
                    held.find(|(_, p)| **p == Some(port)).map(|(id, _)| *id)
                });
            if let Some(stream) = holder {
                return Err(PipelineError::PortTaken { port, stream }.into());
            }
        }
        let max = self.max_streams.load(Ordering::SeqCst);
        let running = entries.values().filter(|e| e.added && busy(e)).count();
        if running + opening.len() >= max {
            return Err(PipelineError::TooManyStreams(max).into());
        }
        opening.insert(id, port);
        Ok(Reserved { book: self, id })
    }

    /// Join the threads of the streams that ended (a panic in one fails that stream); detach those
    /// of streams removed longer than the remove deadline ([`REMOVE_DEADLINE`](admit::REMOVE_DEADLINE) by default) ago
    /// that did not end.
    pub(super) fn reap(&self, entries: &mut BTreeMap<u32, Entry>) {
        let deadline = self.remove_deadline();
        for (id, e) in entries.iter_mut() {
            let done = e
                .branch
                .as_ref()
                .is_some_and(|b| b.threads.iter().all(|t| t.handle.is_finished()));
            let overdue = e.removed.is_some_and(|at| at.elapsed() > deadline);
            if !done && overdue && e.branch.is_some() {
                self.detach(*id, e);
                continue;
            }
            if !done {
                continue;
            }
            // A panic in one of a stream's threads fails that stream (its state, the log,
            // the report), not the run.
            for t in e.branch.take().map(|b| b.threads).unwrap_or_default() {
                if t.handle.join().is_err() {
                    let panic = PipelineError::Panic(t.kind.to_string()).into();
                    self.control.stream_failed(*id, &e.fate, panic);
                }
            }
            self.ended(*id);
        }
    }

    /// How long a removed stream's threads have to end before they are detached.
    fn remove_deadline(&self) -> Duration {
        Duration::from_millis(self.remove_deadline.load(Ordering::SeqCst))
    }

    /// Tell the hooks that stream `id` is over.
    fn ended(&self, id: u32) {
        let hooks = self.on_end.lock().unwrap_or_else(|e| e.into_inner());
        hooks.iter().for_each(|hook| hook(id));
    }

    /// Leave the threads of removed stream `id` to end on their own: what they still give is
    /// dropped, and the stream no longer counts toward the most streams at once.
    fn detach(&self, id: u32, e: &mut Entry) {
        let Some(b) = e.branch.take() else {
            return;
        };
        b.discard.store(true, Ordering::SeqCst);
        while let Ok(frame) = b.tail.try_recv() {
            frame.count_drop(&self.tally, STREAM_REMOVED);
        }
        let busy: Vec<&str> = b
            .threads
            .iter()
            .filter(|t| !t.handle.is_finished())
            .map(|t| t.kind)
            .collect();
        let line = format!(
            "stream {id}: {} did not end within {:.1} s of its removal: detached (its threads end when its source lets go; the stream no longer counts toward --max-streams)",
            busy.join(", "),
            self.remove_deadline().as_secs_f64()
        );
        tracing::warn!("{line}");
        self.tally.with(|t| {
            t.source_event(id, "detached after removal");
            t.add_line(line);
        });
        e.detached = true;
        // The join handles are dropped: the threads run on, detached.
        drop(b.threads);
        self.ended(id);
    }
}
/// An id (and a UDP port) taken for a stream being opened: given back when dropped (the stream
/// was added under it by then, or its open failed).
pub(super) struct Reserved<'a> {
    book: &'a Book,
    pub(super) id: u32,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        let mut opening = self.book.opening.lock().unwrap_or_else(|e| e.into_inner());
        opening.remove(&self.id);
    }
}
