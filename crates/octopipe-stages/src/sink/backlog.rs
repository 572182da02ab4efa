//! What a broker sink holds for its sending thread while the receiver is away or slow: per
//! stream, the last `buffer` seconds of that stream's messages. A stream's message older than
//! that when a newer one of the same stream comes is dropped (and counted), so one busy stream
//! never crowds out the others, and a broker outage shorter than `buffer` loses nothing. The
//! sending thread takes the oldest message of any stream first.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::message::{Delivery, Message};

/// The most bytes held in all, whatever `buffer` says (a stream of very large messages).
pub const MAX_HELD_BYTES: usize = 256 << 20;

#[derive(Default)]
struct Held {
    streams: BTreeMap<u32, VecDeque<(Instant, Message)>>,
    bytes: usize,
    closed: bool,
}

/// A broker sink's buffer (see the module doc): the sink pushes, never waiting; the sending
/// thread pops.
pub struct Backlog {
    held: Mutex<Held>,
    more: Condvar,
    window: Duration,
    delivery: Arc<Delivery>,
}

impl Backlog {
    /// A buffer of `window` of each stream's messages; drops are counted in `delivery`.
    pub fn new(window: Duration, delivery: Arc<Delivery>) -> Arc<Backlog> {
        Arc::new(Backlog {
            held: Mutex::new(Held::default()),
            more: Condvar::new(),
            window,
            delivery,
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hold `message` (counted as accepted); messages of its stream older than the window, and
    /// the oldest of any stream beyond [`MAX_HELD_BYTES`], are dropped (counted). Returns how
    /// many were dropped.
    pub fn push(&self, message: Message) -> u64 {
        let now = Instant::now();
        let mut dropped = 0;
        let mut held = self.held();
        self.delivery.accepted.fetch_add(1, Ordering::SeqCst);
        held.bytes += message.payload.len();
        let queue = held.streams.entry(message.stream).or_default();
        let mut freed = 0;
        while queue
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > self.window)
        {
            if let Some((_, old)) = queue.pop_front() {
                freed += old.payload.len();
                dropped += 1;
            }
        }
        queue.push_back((now, message));
        held.bytes -= freed;
        while held.bytes > MAX_HELD_BYTES {
            let Some(oldest) = oldest_stream(&held.streams) else {
                break;
            };
            let Some((_, old)) = held.streams.get_mut(&oldest).and_then(VecDeque::pop_front) else {
                break;
            };
            held.bytes -= old.payload.len();
            dropped += 1;
        }
        drop(held);
        self.delivery.dropped.fetch_add(dropped, Ordering::SeqCst);
        self.more.notify_one();
        dropped
    }

    /// The oldest message held, waiting up to `wait` for one; `None` when none came or the
    /// backlog is closed and empty.
    pub fn pop(&self, wait: Duration) -> Option<Message> {
        let deadline = Instant::now() + wait;
        let mut held = self.held();
        loop {
            if let Some(stream) = oldest_stream(&held.streams) {
                let (_, m) = held.streams.get_mut(&stream)?.pop_front()?;
                held.bytes -= m.payload.len();
                return Some(m);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if held.closed {
                return None;
            }
            held = self
                .more
                .wait_timeout(held, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Put `message` back at the front of its stream (the transport could not take it now).
    pub(crate) fn unpop(&self, message: Message) {
        let mut held = self.held();
        held.bytes += message.payload.len();
        held.streams
            .entry(message.stream)
            .or_default()
            .push_front((Instant::now(), message));
    }

    /// Messages held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held().streams.values().map(VecDeque::len).sum()
    }

    /// No more messages: a waiting `pop` returns. What is still held stays (counted as not
    /// delivered at the end).
    pub fn close(&self) {
        self.held().closed = true;
        self.more.notify_all();
    }
}

/// The stream whose first held message is the oldest.
fn oldest_stream(streams: &BTreeMap<u32, VecDeque<(Instant, Message)>>) -> Option<u32> {
    streams
        .iter()
        .filter_map(|(s, q)| q.front().map(|(t, _)| (*t, *s)))
        .min()
        .map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(stream: u32, frame: u64) -> Message {
        Message {
            stream,
            frame,
            payload: vec![0; 10],
        }
    }

    #[test]
    fn each_stream_keeps_its_window_and_the_oldest_goes_first() {
        let delivery = Delivery::new();
        let b = Backlog::new(Duration::from_millis(50), delivery.clone());
        b.push(message(0, 0));
        b.push(message(1, 0));
        std::thread::sleep(Duration::from_millis(80));
        // Stream 0's first message is now older than the window: the next one of stream 0
        // drops it; stream 1's stays until stream 1 sends again.
        assert_eq!(b.push(message(0, 1)), 1);
        assert_eq!(b.len(), 2);
        let order: Vec<(u32, u64)> = std::iter::from_fn(|| b.pop(Duration::ZERO))
            .map(|m| (m.stream, m.frame))
            .collect();
        assert_eq!(order, [(1, 0), (0, 1)]);
        assert_eq!(delivery.dropped.load(Ordering::SeqCst), 1);
        assert_eq!(delivery.accepted.load(Ordering::SeqCst), 3);
        b.close();
        assert!(b.pop(Duration::from_secs(5)).is_none(), "closed: no wait");
    }
}
