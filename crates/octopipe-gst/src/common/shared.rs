//! One stage shared by elements of several branches (or pipelines) of one process:
//! `octodetect shared=det0` in four branches is one detector, one model session and one
//! collector, whose inference calls hold the frames of every branch (the detect stage's own
//! deadline-bounded collector, as with several streams in `octopipe run`).
//!
//! The first element to start under a name opens the stage and its thread (the engine); each
//! element is a stream of it. An element hands its frames to the engine without waiting (up to
//! its `in-flight` buffers: [`super::flight`]) and takes them back in the order they went, so
//! the engine holds several frames of each branch, and its collector closes a call when its
//! frames fill it or the first one's wait ends (`max-wait-ms`; by default half of the frame
//! budget). The engine stops when the last element using it stops.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use octopipe_core::frame::Frame;
use octopipe_core::stage::Stage;

use super::error::PluginError;
use super::props::Values;

/// The `shared` property of the elements that can share their stage.
pub(crate) fn shared_param_spec() -> gstreamer::glib::ParamSpec {
    use gstreamer::prelude::*;
    gstreamer::glib::ParamSpecString::builder("shared")
        .blurb(
            "a name: the elements of this process naming the same one share one stage (one model \
             session, one collector batching the frames of all their branches); set them alike, \
             the first to start opens it (unset: the element's own)",
        )
        .mutable_ready()
        .build()
}

static CAT: LazyLock<gstreamer::DebugCategory> = LazyLock::new(|| {
    gstreamer::DebugCategory::new(
        "octopipe-shared",
        gstreamer::DebugColorFlags::empty(),
        Some("octopipe stages shared across branches"),
    )
});

/// A frame handed to the engine, and where it goes back.
type Job = (Frame, Sender<Reply>);

/// A frame back from the shared stage, or the stage's error (every frame it held gets it).
type Reply = Result<Frame, Arc<octopipe_core::Error>>;

/// A stage running on a thread of its own for every element sharing it.
struct Engine {
    /// The property values it was opened with: every element sharing it must have the same.
    values: Values,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    next_stream: AtomicU32,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // No sender left: the thread finishes what it holds and ends.
        self.jobs.lock().unwrap().take();
        if let Some(thread) = self.thread.lock().unwrap().take() {
            let _ = thread.join();
        }
    }
}

/// The engines by shared name, while some element uses them.
static ENGINES: LazyLock<Mutex<HashMap<String, Weak<Engine>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// An element's place in a shared engine: its stream.
pub(crate) struct Handle {
    engine: Arc<Engine>,
    stream: u32,
}

/// The engine named `name` (opened with `open` when no element uses one of that name yet), and
/// a stream of it for the caller, whose property `values` must be those it was opened with.
pub(crate) fn attach(
    name: &str,
    values: &Values,
    open: impl FnOnce() -> Result<Box<dyn Stage<Frame, Frame>>, PluginError>,
) -> Result<Handle, PluginError> {
    let mut engines = ENGINES.lock().unwrap();
    let engine = match engines.get(name).and_then(Weak::upgrade) {
        Some(engine) => {
            // One stage serves them all: properties set otherwise would be ignored silently.
            if let Some(key) = engine.values.differs(values) {
                return Err(PluginError::Property(format!(
                    "shared={name}: {key} is set otherwise than on the element that opened it \
                     (elements sharing a stage set its properties alike)"
                )));
            }
            engine
        }
        None => {
            let stage = open()?;
            let (tx, rx) = crossbeam_channel::unbounded();
            let thread = std::thread::Builder::new()
                .name(format!("octopipe-{name}"))
                .spawn(move || serve(stage, rx))
                .map_err(|e| PluginError::Thread {
                    shared: name.to_string(),
                    source: e,
                })?;
            let engine = Arc::new(Engine {
                values: values.clone(),
                jobs: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                next_stream: AtomicU32::new(0),
            });
            engines.insert(name.to_string(), Arc::downgrade(&engine));
            engine
        }
    };
    engines.retain(|_, e| e.strong_count() > 0);
    let stream = engine.next_stream.fetch_add(1, Ordering::Relaxed);
    gstreamer::info!(CAT, "shared={name}: stream {stream} joins");
    Ok(Handle { engine, stream })
}

/// A frame handed to the shared stage: where it comes back.
#[derive(Clone)]
pub(crate) struct Ticket {
    back: Option<Receiver<Reply>>,
    /// The frame's own stream number, given back to it.
    stream: u32,
}

impl Ticket {
    /// Wait for the frame back with what the stage did to it: the stage's own error, typed, if
    /// it failed on a frame it held.
    pub(crate) fn wait(&self) -> Result<Frame, PluginError> {
        let back = self.back.as_ref().and_then(|back| back.recv().ok());
        let mut frame = back
            .ok_or(PluginError::SharedStopped)?
            .map_err(PluginError::Shared)?;
        frame.stream = self.stream;
        Ok(frame)
    }
}

impl Handle {
    /// Hand `frame` to the shared stage without waiting for it.
    pub(crate) fn submit(&self, mut frame: Frame) -> Ticket {
        let stream = std::mem::replace(&mut frame.stream, self.stream);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let jobs = self.engine.jobs.lock().unwrap().clone();
        let sent = jobs.is_some_and(|jobs| jobs.send((frame, tx)).is_ok());
        Ticket {
            back: sent.then_some(rx),
            stream,
        }
    }

    /// `frame` through the shared stage, back with what the stage did to it.
    pub(crate) fn run(&self, frame: Frame) -> Result<Frame, PluginError> {
        self.submit(frame).wait()
    }
}

/// The engine's thread: frames in from every element, each back to its own once the stage gives
/// it, the stage's deadlines kept while no frame comes.
fn serve(mut stage: Box<dyn Stage<Frame, Frame>>, jobs: Receiver<Job>) {
    // Per stream, in the order its frames came (the stage keeps each stream's order).
    let mut waiting: HashMap<u32, VecDeque<Sender<Reply>>> = HashMap::new();
    let mut out = Vec::new();
    loop {
        let next = match stage.deadline() {
            Some(deadline) => jobs.recv_deadline(deadline),
            None => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let done = match next {
            Ok((frame, reply)) => {
                waiting.entry(frame.stream).or_default().push_back(reply);
                stage.process(frame, &mut out)
            }
            Err(RecvTimeoutError::Timeout) => stage.timeout(&mut out),
            Err(RecvTimeoutError::Disconnected) => {
                let _ = stage.finish(&mut out);
                break;
            }
        };
        if let Err(e) = done {
            // Every frame held fails with the stage's error.
            let e = Arc::new(e);
            for reply in waiting.drain().flat_map(|(_, replies)| replies) {
                let _ = reply.send(Err(e.clone()));
            }
            out.clear();
            continue;
        }
        if !out.is_empty() {
            let held: usize = waiting.values().map(VecDeque::len).sum();
            gstreamer::debug!(CAT, "{} frames back from one call, {held} held", out.len());
        }
        for frame in out.drain(..) {
            if let Some(reply) = waiting.get_mut(&frame.stream).and_then(VecDeque::pop_front) {
                let _ = reply.send(Ok(frame));
            }
        }
    }
}
