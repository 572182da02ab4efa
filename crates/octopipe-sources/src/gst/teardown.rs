//! Stopping a stream source's pipeline within a deadline: one stuck in its own I/O has its
//! network connections closed (the relays of its RTSP sources) and gets a second deadline; one
//! still not stopped then is left to stop on a thread of its own, and counted
//! ([`pipelines_stopping`], [`stream_stopping`]) until it has: the station counts its stream
//! against its most streams and its memory budget until then.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

use crate::watch::secs;

/// How long a network or live source's pipeline has to stop before its connections are
/// closed, and again after ([`stop_within`]).
pub(super) const TEARDOWN_DEADLINE: Duration = Duration::from_secs(2);

/// Pipelines left stopping on a thread of their own, not stopped yet.
static STOPPING: AtomicUsize = AtomicUsize::new(0);

/// Of those, how many each stream left.
static STOPPING_STREAMS: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// Whether a pipeline of `stream`'s source is still stopping on a thread of its own: the
/// stream has not truly stopped.
pub fn stream_stopping(stream: u32) -> bool {
    let streams = STOPPING_STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    streams.get(&stream).is_some_and(|n| *n > 0)
}

/// Count (`left`) or uncount a pipeline of `stream` left stopping.
fn count_left(stream: u32, left: bool) {
    let mut streams = STOPPING_STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    let n = streams.entry(stream).or_insert(0);
    match left {
        true => {
            *n += 1;
            STOPPING.fetch_add(1, Ordering::SeqCst);
        }
        false => {
            *n = n.saturating_sub(1);
            STOPPING.fetch_sub(1, Ordering::SeqCst);
            if *n == 0 {
                streams.remove(&stream);
            }
        }
    }
}

/// How many sources' pipelines of this process did not stop within their deadlines and are
/// still stopping: they hold threads and sockets, and count against `--max-streams`.
pub fn pipelines_stopping() -> usize {
    STOPPING.load(Ordering::SeqCst)
}

/// Where one pipeline's stop is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Waiting,
    Stopped,
    /// Given up on: counted in [`STOPPING`] until it stops.
    Left,
}

/// Set `pipeline` to NULL on a thread of its own and wait for it at most
/// [`TEARDOWN_DEADLINE`]; then `force` it (close its sockets) and wait as long again: whether
/// it stopped. One that did not is left to stop there (counted by [`pipelines_stopping`] and,
/// as `stream`'s, by [`stream_stopping`] until it has), said once, naming `name`; the
/// caller's stream ends anyway.
pub(super) fn stop_within(
    pipeline: &gst::Pipeline,
    name: &str,
    stream: u32,
    force: &dyn Fn(),
) -> bool {
    let state = Arc::new(Mutex::new(Stop::Waiting));
    let (done, stopped) = std::sync::mpsc::sync_channel(1);
    let stopping = pipeline.clone();
    let at_end = state.clone();
    let spawned = std::thread::Builder::new()
        .name("octopipe-teardown".into())
        .spawn(move || {
            let _ = stopping.set_state(gst::State::Null);
            let mut state = at_end.lock().unwrap_or_else(|e| e.into_inner());
            if *state == Stop::Left {
                count_left(stream, false);
            }
            *state = Stop::Stopped;
            let _ = done.send(());
        });
    if spawned.is_err() {
        // No thread to spare: close its connections and stop it here.
        force();
        let _ = pipeline.set_state(gst::State::Null);
        return true;
    }
    if stopped.recv_timeout(TEARDOWN_DEADLINE).is_ok() {
        return true;
    }
    force();
    if stopped.recv_timeout(TEARDOWN_DEADLINE).is_ok() {
        tracing::info!(
            "{name}: the source stopped once its connections were closed (it had not within {} s)",
            secs(TEARDOWN_DEADLINE)
        );
        return true;
    }
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if *state == Stop::Stopped {
        return true;
    }
    *state = Stop::Left;
    count_left(stream, true);
    tracing::warn!(
        "{name}: the source did not stop within {} s, nor once its connections were closed (an element stuck in its own I/O): left to stop on its own, counted against --max-streams until it has; the stream ends",
        secs(TEARDOWN_DEADLINE * 2)
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipeline_that_does_not_stop_is_counted_until_it_has() {
        gst::init().unwrap();
        // identity sleeps 5 s on each buffer, uninterruptibly: NULL waits for it.
        let pipeline = gst::parse::launch(
            "videotestsrc is-live=true ! identity sleep-time=5000000 ! fakesink",
        )
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
        pipeline.set_state(gst::State::Playing).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let before = pipelines_stopping();
        let forced = std::sync::atomic::AtomicBool::new(false);
        let start = std::time::Instant::now();
        let stopped = stop_within(&pipeline, "test", 4_000_000_000, &|| {
            forced.store(true, Ordering::SeqCst);
        });
        assert!(!stopped, "stopped after {:?}", start.elapsed());
        assert!(forced.load(Ordering::SeqCst));
        assert!(start.elapsed() >= TEARDOWN_DEADLINE * 2);
        assert_eq!(pipelines_stopping(), before + 1);
        assert!(stream_stopping(4_000_000_000));
        // It stops once the buffer's sleep ends: no longer counted.
        let start = std::time::Instant::now();
        while pipelines_stopping() > before {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(pipeline.current_state(), gst::State::Null);
        assert!(!stream_stopping(4_000_000_000));
    }
}
