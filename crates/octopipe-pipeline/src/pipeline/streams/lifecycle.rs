//! A stream's life in the book: its id, port and share of the station's memory budget taken
//! before it is opened (without the book's lock, so a slow open holds up nobody), its threads
//! joined once they ended (its budget given back then), and a removed stream whose source does
//! not stop detached after its deadline ([`REMOVE_DEADLINE`](admit::REMOVE_DEADLINE) by
//! default): what it gives is dropped, but it counts toward the most streams and the budget
//! until its threads truly end.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::super::admit;
use super::super::{PipelineError, STREAM_REMOVED};
use super::book::Book;
use super::info::StreamState;
use super::records::{Entry, Records};
use octopipe_core::error::Error;
use octopipe_core::stage::Payload;

impl Book {
    /// Take an id for a stream about to be opened (`id`, or the next automatic one), the UDP
    /// port it receives on and `bytes` of the station's memory budget, when no other stream
    /// holds them, fewer than the most streams run, are opened or have not stopped yet (removed,
    /// failed or detached streams whose threads run on, sources' pipelines still stopping), and
    /// the budget has room. The id and port are given back when the guard is dropped, the
    /// bytes too unless the stream was admitted ([`Reserved::admitted`]).
    pub(super) fn reserve(
        &self,
        id: Option<u32>,
        port: Option<u16>,
        bytes: u64,
    ) -> Result<Reserved<'_>, Error> {
        let mut entries = self.entries();
        self.reap(&mut entries);
        let mut opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        let id = match id {
            Some(id) if entries.taken(id) || opening.contains_key(&id) => {
                return Err(PipelineError::StreamTaken(id).into())
            }
            Some(id) => id,
            None => entries
                .next_id(opening.keys().copied())
                .ok_or(PipelineError::StreamTaken(admit::AUTO_IDS - 1))?,
        };
        if self.control.joins.lock().map_or(true, |j| j.is_none()) {
            return Err(PipelineError::NotTakingStreams.into());
        }
        let busy = |e: &Entry| matches!(e.state(), StreamState::Running | StreamState::Removing);
        if let Some(port) = port {
            let holder = entries
                .live()
                .find(|(_, e)| e.port == Some(port) && busy(e))
                .map(|(id, _)| id)
                .or_else(|| {
                    let mut held = opening.iter();
                    held.find(|(_, p)| **p == Some(port)).map(|(id, _)| *id)
                });
            if let Some(stream) = holder {
                return Err(PipelineError::PortTaken { port, stream }.into());
            }
        }
        let max = self.max_streams.load(Ordering::SeqCst);
        // A stream counts until its threads were joined (its branch taken: they ended and its
        // source's pipeline stopped), whatever its state.
        let running = entries
            .live()
            .filter(|(_, e)| e.added && (busy(e) || e.branch.is_some()))
            .count();
        if running + opening.len() >= max {
            return Err(PipelineError::TooManyStreams(max).into());
        }
        self.memory.reserve(id, bytes)?;
        opening.insert(id, port);
        Ok(Reserved {
            book: self,
            id,
            admitted: false,
        })
    }

    /// Join the threads of the streams that ended and whose source's pipeline stopped (a panic
    /// in one fails that stream), giving back their share of the memory budget; detach those
    /// of streams removed longer than the remove deadline
    /// ([`REMOVE_DEADLINE`](admit::REMOVE_DEADLINE) by default) ago that did not end. Only
    /// the streams not over yet are looked at; those joined are over ([`Records::over`]).
    pub(super) fn reap(&self, entries: &mut Records) {
        let deadline = self.remove_deadline();
        for id in entries.live_ids() {
            let Some(e) = entries.get_mut(id) else {
                continue;
            };
            let ended = e
                .branch
                .as_ref()
                .is_some_and(|b| b.threads.iter().all(|t| t.handle.is_finished()));
            // Its threads ended, but its source's pipeline is still stopping: not over yet.
            let done = ended && !octopipe_sources::stream_stopping(id);
            let overdue = e.removed.is_some_and(|at| at.elapsed() > deadline);
            if !ended && overdue && e.branch.is_some() && !e.detached {
                self.detach(id, e);
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
                    self.control.stream_failed(id, &e.fate, panic);
                }
            }
            self.memory.release(id);
            entries.over(id);
            self.ended(id);
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
    /// dropped; the stream counts toward the most streams at once and the memory budget until
    /// they end (joined by [`Book::reap`]).
    fn detach(&self, id: u32, e: &mut Entry) {
        let Some(b) = &e.branch else {
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
            "stream {id}: {} did not end within {:.1} s of its removal: detached (what it gives is dropped; it counts toward --max-streams and --memory-budget until its threads end)",
            busy.join(", "),
            self.remove_deadline().as_secs_f64()
        );
        tracing::warn!("{line}");
        self.tally.with(|t| {
            t.source_event(id, "detached after removal");
            t.add_line(line);
        });
        e.detached = true;
    }
}
/// An id (and a UDP port) taken for a stream being opened: given back when dropped (the stream
/// was added under it by then, or its open failed); its share of the memory budget too, unless
/// the stream was admitted (then held until its threads end).
pub(super) struct Reserved<'a> {
    book: &'a Book,
    pub(super) id: u32,
    admitted: bool,
}

impl Reserved<'_> {
    /// The stream is in the book: its share of the budget stays held until its threads end.
    pub(super) fn admitted(mut self) {
        self.admitted = true;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        let mut opening = self.book.opening.lock().unwrap_or_else(|e| e.into_inner());
        opening.remove(&self.id);
        if !self.admitted {
            self.book.memory.release(self.id);
        }
    }
}
