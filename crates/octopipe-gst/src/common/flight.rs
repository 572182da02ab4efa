//! The buffers an element using a shared stage keeps in flight: the streaming thread hands a
//! buffer's frame to the stage and returns at once (up to `in-flight` buffers; then it waits for
//! room), and the element's output thread waits for each frame back in the order they went,
//! writes its objects on its buffer and pushes it on the src pad. So a branch has several frames
//! in the stage's calls, as a stream in `octopipe run` does, and its buffers leave in order.
//!
//! A serialized event waits until the buffers before it have left ([`Flight::drain`]); a flush
//! drops what is in flight; stopping ends the thread and drops what it holds.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use gstreamer as gst;
use octopipe_core::frame::Frame;

use super::error::PluginError;
use super::meta::Read;
use super::report::Marks;
use super::shared::Ticket;

/// How many buffers an element keeps in flight by default.
pub(crate) const DEFAULT_IN_FLIGHT: u32 = 4;

/// The `in-flight` property of the elements that can share their stage.
pub(crate) fn in_flight_param_spec() -> gst::glib::ParamSpec {
    use gst::prelude::*;
    gst::glib::ParamSpecUInt::builder("in-flight")
        .blurb(
            "with shared: how many buffers the element keeps in the shared stage at once (its \
             streaming thread waits when they are all out; the element's latency grows by as \
             many frames); without shared: unused",
        )
        .minimum(1)
        .maximum(64)
        .default_value(DEFAULT_IN_FLIGHT)
        .mutable_ready()
        .build()
}

/// A buffer whose frame is in the shared stage, and what goes on it once back.
pub(crate) struct Pending {
    pub(crate) buffer: gst::Buffer,
    pub(crate) ticket: Ticket,
    pub(crate) read: Read,
    pub(crate) marks: Marks,
    pub(crate) started: Instant,
}

/// What the output thread does with a frame back from the stage and its buffer: write the
/// objects and push the buffer (the flow it got back).
pub(crate) type Deliver = dyn Fn(Pending, Result<Frame, PluginError>) -> Result<gst::FlowSuccess, gst::FlowError>
    + Send
    + Sync;

struct Inner {
    /// In the order they came: the buffers whose frames are not back yet.
    queue: VecDeque<Pending>,
    /// Buffers the output thread took from the queue and has not pushed yet.
    pushing: usize,
    /// The last flow downstream gave (or the error of a frame), returned upstream.
    flow: Result<gst::FlowSuccess, gst::FlowError>,
    flushing: bool,
    stopped: bool,
    /// Counts the flushes: a frame back from before one is dropped.
    generation: u64,
}

/// The buffers in flight of one element, and its output thread.
pub(crate) struct Flight {
    inner: Mutex<Inner>,
    changed: Condvar,
    limit: usize,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Flight {
    /// Start the output thread (named after `element`), which hands each frame back to
    /// `deliver`; at most `limit` buffers are in flight.
    pub(crate) fn start(
        element: &str,
        limit: u32,
        deliver: Box<Deliver>,
    ) -> Result<Arc<Flight>, PluginError> {
        let flight = Arc::new(Flight {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                pushing: 0,
                flow: Ok(gst::FlowSuccess::Ok),
                flushing: false,
                stopped: false,
                generation: 0,
            }),
            changed: Condvar::new(),
            limit: limit.max(1) as usize,
            thread: Mutex::new(None),
        });
        let run = flight.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{element}-out"))
            .spawn(move || run.output(&*deliver))
            .map_err(|e| PluginError::Buffer(format!("{element}: no output thread: {e}")))?;
        *flight.thread.lock().unwrap() = Some(thread);
        Ok(flight)
    }

    /// How many buffers it keeps in flight at most.
    pub(crate) fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// Wait for room for one more buffer; the flow to give upstream instead when the element is
    /// flushing or stopped, or downstream refused a buffer.
    pub(crate) fn wait_room(&self) -> Result<gst::FlowSuccess, gst::FlowError> {
        let mut inner = self.inner.lock().unwrap();
        loop {
            if inner.flushing || inner.stopped {
                return Err(gst::FlowError::Flushing);
            }
            inner.flow?;
            if inner.queue.len() + inner.pushing < self.limit {
                return Ok(gst::FlowSuccess::Ok);
            }
            inner = self.changed.wait(inner).unwrap();
        }
    }

    /// Put `pending` in flight (dropped when flushing or stopped).
    pub(crate) fn add(&self, pending: Pending) {
        let mut inner = self.inner.lock().unwrap();
        if inner.flushing || inner.stopped {
            return;
        }
        inner.queue.push_back(pending);
        self.changed.notify_all();
    }

    /// Wait until every buffer in flight has left (or been dropped by a flush or a stop): a
    /// serialized event goes out after the buffers before it.
    pub(crate) fn drain(&self) {
        let mut inner = self.inner.lock().unwrap();
        while !(inner.queue.is_empty() && inner.pushing == 0 || inner.flushing || inner.stopped) {
            inner = self.changed.wait(inner).unwrap();
        }
    }

    /// FLUSH_START: drop what is in flight and refuse buffers until [`Flight::unflush`].
    pub(crate) fn flush(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.flushing = true;
        inner.generation += 1;
        inner.queue.clear();
        self.changed.notify_all();
    }

    /// FLUSH_STOP: take buffers again.
    pub(crate) fn unflush(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.flushing = false;
        inner.flow = Ok(gst::FlowSuccess::Ok);
        self.changed.notify_all();
    }

    /// End the output thread, dropping what is in flight.
    pub(crate) fn stop(&self) {
        {
            let mut inner = self.inner.lock().unwrap();
            inner.stopped = true;
            inner.generation += 1;
            inner.queue.clear();
            self.changed.notify_all();
        }
        if let Some(thread) = self.thread.lock().unwrap().take() {
            let _ = thread.join();
        }
    }

    /// The output thread: each frame back in the order they went, to `deliver`.
    fn output(&self, deliver: &Deliver) {
        loop {
            let (waiting, generation) = {
                let mut inner = self.inner.lock().unwrap();
                while inner.queue.is_empty() && !inner.stopped {
                    inner = self.changed.wait(inner).unwrap();
                }
                let Some(front) = inner.queue.front() else {
                    return;
                };
                (front.ticket.clone(), inner.generation)
            };
            // The stage answers every frame (its collector's deadlines bound the wait).
            let back = waiting.wait();
            let pending = {
                let mut inner = self.inner.lock().unwrap();
                if inner.generation != generation {
                    continue;
                }
                let Some(pending) = inner.queue.pop_front() else {
                    continue;
                };
                inner.pushing += 1;
                pending
            };
            let flow = deliver(pending, back);
            let mut inner = self.inner.lock().unwrap();
            inner.pushing -= 1;
            if let Err(e) = flow {
                if inner.flow.is_ok() && inner.generation == generation {
                    inner.flow = Err(e);
                }
            }
            self.changed.notify_all();
        }
    }
}
