//! The book's records: every stream of the run by id, those not over yet indexed apart (what a
//! reap, a health check and a port or count check walk), and of those over only the newest
//! [`KEPT_RECORDS`] (an older one is dropped, its id not taken again), with counts by state kept
//! as streams end and are removed. What listing a page, `/health` and `/metrics` cost is then
//! the live streams' and the page's, not every stream the station ever had.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;

use super::super::admit::{self, AUTO_IDS};
use super::super::control::Fate;
use super::super::wire::StageThread;
use super::info::{StreamCounts, StreamState};
use octopipe_core::frame::Frame;

/// How many streams that are over (ended, failed or removed, their threads joined) the book
/// keeps, the newest to end: an older one is no longer listed and can no longer be removed;
/// its id is not taken again.
pub const KEPT_RECORDS: usize = 1024;

/// One stream of the run, kept (small) a while after it ended ([`Records`]): its id is not
/// used again.
pub(in crate::pipeline) struct Entry {
    /// How it is shown: its description, credentials hidden, cut ([`admit::shown`]).
    pub(in crate::pipeline) source: String,
    pub(in crate::pipeline) added: bool,
    /// Whether its source's stream ended, and why it failed.
    pub(in crate::pipeline) fate: Fate,
    /// When it was removed.
    pub(in crate::pipeline) removed: Option<Instant>,
    /// Its threads did not end within the remove deadline
    /// ([`Streams::set_remove_deadline`](super::Streams::set_remove_deadline)): left to end on
    /// their own, the stream no longer counted.
    pub(in crate::pipeline) detached: bool,
    /// The UDP port its source receives on.
    pub(in crate::pipeline) port: Option<u16>,
    /// A stream added while running, until its threads ended and were joined.
    pub(in crate::pipeline) branch: Option<Branch>,
}

/// What a stream added while running holds while it runs.
pub(in crate::pipeline) struct Branch {
    pub(super) interrupt: Box<dyn Fn() + Send + Sync>,
    /// Set by a removal with `mode=drop`: its edges drop what comes.
    pub(super) discard: Arc<AtomicBool>,
    /// Its edge into the stage streams join (a removal with `mode=drop` empties it).
    pub(super) tail: Receiver<Frame>,
    pub(super) threads: Vec<StageThread>,
}

impl Entry {
    pub(super) fn state(&self) -> StreamState {
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

/// The records of the book's streams ([`Book::entries`](super::Book::entries)).
#[derive(Default)]
pub(in crate::pipeline) struct Records {
    /// Every stream kept, by id: a page is a range of it.
    map: BTreeMap<u32, Entry>,
    /// Streams not over yet: those of the description and those added whose threads were not
    /// joined.
    live: BTreeSet<u32>,
    /// Streams over, oldest first, at most [`KEPT_RECORDS`].
    over: VecDeque<u32>,
    /// Ids of streams over that were dropped: not taken again (a report row stays one
    /// stream's). Four bytes or so each, where the report keeps a row.
    dropped: BTreeSet<u32>,
    /// The highest id ever kept below [`AUTO_IDS`]: automatic ids keep growing past dropped
    /// ones.
    highest: Option<u32>,
    /// Streams over by state: `ended` and `removed` count every stream so far, `failed` those
    /// kept and not removed.
    counts: StreamCounts,
}

impl FromIterator<(u32, Entry)> for Records {
    fn from_iter<I: IntoIterator<Item = (u32, Entry)>>(entries: I) -> Records {
        let mut records = Records::default();
        for (id, entry) in entries {
            records.insert(id, entry);
        }
        records
    }
}

impl Records {
    /// Keep stream `id`, not over yet.
    pub(super) fn insert(&mut self, id: u32, entry: Entry) {
        if id < AUTO_IDS {
            self.highest = self.highest.max(Some(id));
        }
        self.map.insert(id, entry);
        self.live.insert(id);
    }

    /// Whether `id` is taken: kept, or dropped once over.
    pub(super) fn taken(&self, id: u32) -> bool {
        self.map.contains_key(&id) || self.dropped.contains(&id)
    }

    /// The id an add without one takes, `opening` being taken too: the next after the highest
    /// ever taken in the automatic range (dropped ids sit below it), else the lowest free one
    /// there ([`admit::next_id`], walking every id: only once the range is full). `None` when
    /// it is full.
    pub(super) fn next_id(&self, opening: impl Iterator<Item = u32> + Clone) -> Option<u32> {
        let auto = opening.clone().filter(|id| *id < AUTO_IDS).max();
        match self.highest.max(auto) {
            None => Some(0),
            Some(h) if h + 1 < AUTO_IDS => Some(h + 1),
            Some(_) => {
                let kept = self.map.keys().chain(&self.dropped).copied();
                admit::next_id(kept.chain(opening))
            }
        }
    }

    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Entry> {
        self.map.get_mut(&id)
    }

    /// The streams kept with ids in `range`, in id order.
    pub(super) fn range(
        &self,
        range: impl RangeBounds<u32>,
    ) -> impl Iterator<Item = (&u32, &Entry)> + '_ {
        self.map.range(range)
    }

    /// Every stream kept, in id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&u32, &Entry)> + '_ {
        self.map.iter()
    }

    /// The streams not over yet.
    pub(super) fn live(&self) -> impl Iterator<Item = (u32, &Entry)> + '_ {
        let map = &self.map;
        self.live.iter().filter_map(|id| Some((*id, map.get(id)?)))
    }

    /// The ids of the streams not over yet.
    pub(super) fn live_ids(&self) -> Vec<u32> {
        self.live.iter().copied().collect()
    }

    /// Every stream's entry, to take what it holds at the end of the run.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Entry> + '_ {
        self.map.values_mut()
    }

    /// Stream `id` is over (its threads joined): counted by its state now, and the oldest
    /// stream over dropped when more than [`KEPT_RECORDS`] are.
    pub(super) fn over(&mut self, id: u32) {
        let Some(state) = self.map.get(&id).map(Entry::state) else {
            return;
        };
        if !self.live.remove(&id) {
            return;
        }
        *self.counts.get_mut(state) += 1;
        self.over.push_back(id);
        while self.over.len() > KEPT_RECORDS {
            let Some(old) = self.over.pop_front() else {
                break;
            };
            if let Some(e) = self.map.remove(&old) {
                // A failed stream no longer kept can no longer be removed: it leaves the
                // count of those failed (ended and removed ones count every stream so far).
                if e.state() == StreamState::Failed {
                    self.counts.failed = self.counts.failed.saturating_sub(1);
                }
            }
            self.dropped.insert(old);
        }
    }

    /// Stream `id`, over, was removed now (it had ended or failed): counted as removed.
    pub(super) fn removed_over(&mut self, id: u32, before: StreamState) {
        if self.live.contains(&id) || before == StreamState::Removed {
            return;
        }
        let n = self.counts.get_mut(before);
        *n = n.saturating_sub(1);
        self.counts.removed += 1;
    }

    /// Streams by state: those over from the counts, those not over yet looked at.
    pub(super) fn counts(&self) -> StreamCounts {
        let mut counts = self.counts;
        for (_, e) in self.live() {
            *counts.get_mut(e.state()) += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream added while running whose threads were joined: over, ended.
    fn joined() -> Entry {
        Entry {
            source: "testsrc".into(),
            added: true,
            fate: Fate::default(),
            removed: None,
            detached: false,
            port: None,
            branch: None,
        }
    }

    #[test]
    fn the_newest_streams_over_are_kept_and_every_one_counted() {
        let mut records = Records::default();
        let n = KEPT_RECORDS as u32 + 500;
        for id in 0..n {
            let next = records.next_id(std::iter::empty()).unwrap();
            assert_eq!(next, id, "automatic ids grow past dropped ones");
            records.insert(id, joined());
            records.over(id);
        }
        let kept: Vec<u32> = records.iter().map(|(id, _)| *id).collect();
        assert_eq!(kept, (500..n).collect::<Vec<_>>());
        assert_eq!(records.live_ids(), Vec::<u32>::new());
        assert_eq!(records.counts().ended, n as usize);
        // A dropped id stays taken; a kept one removed moves from ended to removed.
        assert!(records.taken(0) && records.taken(n - 1) && !records.taken(n));
        let kept = records.get_mut(600).unwrap();
        let before = kept.state();
        kept.removed = Some(Instant::now());
        records.removed_over(600, before);
        let counts = records.counts();
        assert_eq!((counts.ended, counts.removed), (n as usize - 1, 1));
        // A page is a range of the kept.
        let page: Vec<u32> = records.range(1000..).take(2).map(|(id, _)| *id).collect();
        assert_eq!(page, vec![1000, 1001]);
    }
}
