//! Stopping a stream source's pipeline within a deadline: one stuck in its own I/O is left to
//! stop on a thread of its own.

use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

use crate::watch::secs;

/// How long a network or live source's pipeline has to stop before it is left to stop on its
/// own ([`stop_within`]).
pub(super) const TEARDOWN_DEADLINE: Duration = Duration::from_secs(2);

/// Set `pipeline` to NULL on a thread of its own and wait for it at most
/// [`TEARDOWN_DEADLINE`]: whether it stopped. One that did not is left to stop there (its
/// elements are stuck in their own I/O: `rtspsrc` reading a server's endless headers), said
/// once, naming `name`; the caller's stream ends anyway.
pub(super) fn stop_within(pipeline: &gst::Pipeline, name: &str) -> bool {
    let (done, stopped) = std::sync::mpsc::sync_channel(1);
    let stopping = pipeline.clone();
    let spawned = std::thread::Builder::new()
        .name("octopipe-teardown".into())
        .spawn(move || {
            let _ = stopping.set_state(gst::State::Null);
            let _ = done.send(());
        });
    if spawned.is_err() {
        // No thread to spare: stop it here, however long it takes.
        let _ = pipeline.set_state(gst::State::Null);
        return true;
    }
    match stopped.recv_timeout(TEARDOWN_DEADLINE) {
        Ok(()) => true,
        Err(_) => {
            tracing::warn!(
                "{name}: the source did not stop within {} s (an element stuck in its own I/O: a server that sends without end?): left to stop on its own; the stream ends",
                secs(TEARDOWN_DEADLINE)
            );
            false
        }
    }
}
