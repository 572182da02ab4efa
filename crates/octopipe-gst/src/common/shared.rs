//! One stage shared by elements of several branches (or pipelines) of one process:
//! `octodetect shared=det0` in four branches is one detector, one model session and one
//! collector, whose inference calls hold the frames of every branch (the detect stage's own
//! deadline-bounded collector, as with several streams in `octopipe run`).
//!
//! The first element to start under a name opens the stage (the engine) and starts it on the
//! runner's own stage thread ([`Running::start`]: the loop `octopipe run` runs each stage in,
//! waiting for a frame until the stage's deadline, then `process`, `timeout` or `finish`); each
//! element joins it as a stream, with an edge of its own, as streams join a running pipeline.
//! An element hands its frames to the engine without waiting (up to its `in-flight` buffers:
//! [`super::flight`]) and takes them back in the order they went, so the engine holds several
//! frames of each branch, and its collector closes a call when its frames fill it or the first
//! one's wait ends (`max-wait-ms`; by default half of the frame budget). As in the runner, a
//! stage that fails (or panics) stops: every frame it held, and every frame handed to it after,
//! gets its error. The engine stops when the last element using it stops.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use octopipe_core::budget::{Budget, Tally};
use octopipe_core::frame::Frame;
use octopipe_core::stage::{Fail, Running, Stage, Wires};

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

/// How many frames the stage's output edge holds before its thread waits for the frames to be
/// handed back (the return thread only routes them).
const OUTPUT_EDGE: usize = 64;

/// A frame back from the shared stage, or the stage's error (every frame it held gets it).
type Reply = Result<Frame, Arc<octopipe_core::Error>>;

/// Where the frames in the stage go back: per stream, in the order its frames went (the stage
/// keeps each stream's order); and once the stage failed, its error.
#[derive(Default)]
struct Waiting {
    replies: HashMap<u32, VecDeque<Sender<Reply>>>,
    failed: Option<Arc<octopipe_core::Error>>,
}

/// A stage running on the runner's stage thread for every element sharing it.
struct Engine {
    /// The property values it was opened with: every element sharing it must have the same.
    values: Values,
    /// Where an element's edge joins the stage's inbox (taken at drop: no stream joins any more).
    joins: Mutex<Option<Sender<Receiver<Frame>>>>,
    waiting: Arc<Mutex<Waiting>>,
    /// The stage's thread and the thread handing its frames back.
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_stream: AtomicU32,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // No edge left and none to join: the stage finishes what it holds and its thread ends,
        // then the return thread.
        self.joins.lock().unwrap().take();
        for thread in self.threads.lock().unwrap().drain(..) {
            let _ = thread.join();
        }
    }
}

/// The engines by shared name, while some element uses them.
static ENGINES: LazyLock<Mutex<HashMap<String, Weak<Engine>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// An element's place in a shared engine: its stream and its edge into the stage.
pub(crate) struct Handle {
    /// Dropped before the engine (fields drop in order): the last element's edge closes, so
    /// the stage's thread sees its inbox end and the engine's drop can join it.
    frames: Sender<Frame>,
    engine: Arc<Engine>,
    stream: u32,
}

/// The engine named `name` (its stage, of kind `kind`, opened with `open` when no element uses
/// one of that name yet), and a stream of it for the caller, whose property `values` must be
/// those it was opened with.
pub(crate) fn attach(
    name: &str,
    kind: &'static str,
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
            let engine = Arc::new(start(name, kind, values, open()?)?);
            engines.insert(name.to_string(), Arc::downgrade(&engine));
            engine
        }
    };
    engines.retain(|_, e| e.strong_count() > 0);
    let stream = engine.next_stream.fetch_add(1, Ordering::Relaxed);
    let (frames, edge) = crossbeam_channel::unbounded();
    let joined = engine
        .joins
        .lock()
        .unwrap()
        .as_ref()
        .is_some_and(|joins| joins.send(edge).is_ok());
    if !joined {
        return Err(PluginError::SharedStopped);
    }
    gstreamer::info!(CAT, "shared={name}: stream {stream} joins");
    Ok(Handle {
        frames,
        engine,
        stream,
    })
}

/// Start `stage` as the runner starts one (its thread between an inbox that streams join and
/// its output edge), and the thread that hands each frame it gives back to its element.
fn start(
    name: &str,
    kind: &'static str,
    values: &Values,
    stage: Box<dyn Stage<Frame, Frame>>,
) -> Result<Engine, PluginError> {
    let thread_error = |source| PluginError::Thread {
        shared: name.to_string(),
        source,
    };
    let running = Running::stage(Box::new(Counted { stage, held: 0 }) as Box<dyn Stage<_, _>>);
    // The runner's report is not the element's (octojsonl's budget report is): a tally of one
    // row takes what the stage's thread records.
    let tally = Tally::new(Budget::new(Duration::ZERO, vec![kind.to_string()]));
    let (output, back) = running.edge(OUTPUT_EDGE, false, &format!("{kind} -> elements"), &tally);
    let back = back
        .typed::<Frame>()
        .map_err(|_| PluginError::Property(format!("stage {kind} does not give frames")))?;
    let (joins, joined) = crossbeam_channel::unbounded();
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    let failed = waiting.clone();
    let fail: Fail = Arc::new(move |e| {
        let e = Arc::new(e);
        gstreamer::error!(CAT, "{kind}: {e}");
        let mut waiting = failed.lock().unwrap();
        waiting.failed = Some(e.clone());
        for reply in waiting.replies.drain().flat_map(|(_, replies)| replies) {
            let _ = reply.send(Err(e.clone()));
        }
    });
    let stage = running
        .start(Wires {
            kind,
            thread: format!("octopipe-{name}"),
            inputs: Vec::new(),
            joins: Some(joined),
            output,
            slot: 0,
            busy: Arc::new(AtomicBool::new(false)),
            fail,
        })
        .map_err(PluginError::Stage)?;
    let routes = waiting.clone();
    let returns = std::thread::Builder::new()
        .name(format!("octopipe-{name}-back"))
        .spawn(move || hand_back(back, &routes))
        .map_err(thread_error)?;
    Ok(Engine {
        values: values.clone(),
        joins: Mutex::new(Some(joins)),
        waiting,
        threads: Mutex::new(vec![stage, returns]),
        next_stream: AtomicU32::new(0),
    })
}

/// The shared stage, logging how many frames each of its calls gives back (and how many it
/// still holds): how full its inference calls are.
struct Counted {
    stage: Box<dyn Stage<Frame, Frame>>,
    held: usize,
}

impl Counted {
    /// After a call that took `before` to `out.len()` frames.
    fn gave(&mut self, before: usize, out: &[Frame]) {
        let n = out.len() - before;
        if n > 0 {
            self.held = self.held.saturating_sub(n);
            gstreamer::debug!(CAT, "{n} frames back from one call, {} held", self.held);
        }
    }
}

impl Stage<Frame, Frame> for Counted {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), octopipe_core::Error> {
        let before = out.len();
        self.held += 1;
        self.stage.process(frame, out)?;
        self.gave(before, out);
        Ok(())
    }
    fn deadline(&self) -> Option<std::time::Instant> {
        self.stage.deadline()
    }
    fn timeout(&mut self, out: &mut Vec<Frame>) -> Result<(), octopipe_core::Error> {
        let before = out.len();
        self.stage.timeout(out)?;
        self.gave(before, out);
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<Frame>) -> Result<(), octopipe_core::Error> {
        let before = out.len();
        self.stage.finish(out)?;
        self.gave(before, out);
        Ok(())
    }
}

/// The return thread: each frame the stage gives goes back to the element it came from, in the
/// order its frames went, until the stage's thread ends.
fn hand_back(back: Receiver<Frame>, waiting: &Mutex<Waiting>) {
    for frame in back.iter() {
        let reply = waiting
            .lock()
            .unwrap()
            .replies
            .get_mut(&frame.stream)
            .and_then(VecDeque::pop_front);
        if let Some(reply) = reply {
            let _ = reply.send(Ok(frame));
        }
    }
    // The stage ended: a frame it did not give back is not coming (its ticket says so).
    waiting.lock().unwrap().replies.clear();
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
        let mut waiting = self.engine.waiting.lock().unwrap();
        if let Some(e) = &waiting.failed {
            // The stage stopped at its error: the frame gets it too.
            let _ = tx.send(Err(e.clone()));
        } else {
            // Its place in the queue before the frame goes: the stage cannot give it back first.
            let queue = waiting.replies.entry(self.stream).or_default();
            queue.push_back(tx);
            if self.frames.send(frame).is_err() {
                queue.pop_back();
            }
        }
        drop(waiting);
        Ticket {
            back: Some(rx),
            stream,
        }
    }

    /// `frame` through the shared stage, back with what the stage did to it.
    pub(crate) fn run(&self, frame: Frame) -> Result<Frame, PluginError> {
        self.submit(frame).wait()
    }
}
