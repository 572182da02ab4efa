//! The handle that adds and removes streams of a running pipeline.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::book::Book;
use super::info::{Added, RemoveMode, StreamCounts, StreamInfo};
use crate::describe::Description;
use octopipe_core::error::Error;

/// Adds and removes streams of a running pipeline: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Streams(pub(in crate::pipeline) Arc<Book>);

impl Streams {
    /// Add the stream `description`, parsed (one chain from a source to its boxes: `testsrc
    /// live=true ! boxes format=synthetic`, `app name=cam live=true`, `udpsrc ... ! avdec_h264 !
    /// detect model=d.onnx`), as stream `id`, or the next id after the highest when `None`. It
    /// is checked and opened here (a bad description or input is an error naming it, and
    /// nothing is added); its frames join the batch stage at once. It is listed as its text.
    pub fn add(&self, description: &Description, id: Option<u32>) -> Result<Added, Error> {
        self.0.add(description, id)
    }

    /// [`Streams::add`] of a description's text, parsed here (no variables; errors at
    /// `<stream>`).
    pub fn add_text(&self, text: &str, id: Option<u32>) -> Result<Added, Error> {
        let desc = crate::describe::parse("<stream>", text, &HashMap::new())?;
        self.0.add(&desc, id)
    }

    /// Remove stream `id` (one added while running): its source stops; `mode` says what becomes
    /// of the frames it already gave. Its report row stays. Removing it again does nothing.
    pub fn remove(&self, id: u32, mode: RemoveMode) -> Result<(), Error> {
        self.0.remove(id, mode)
    }

    /// Every stream of the run kept, in id order: those of the description and those added,
    /// also the newest [`KEPT_RECORDS`](crate::pipeline::KEPT_RECORDS) ended, failed or removed
    /// ones.
    pub fn list(&self) -> Vec<StreamInfo> {
        self.0.list()
    }

    /// A page of [`Streams::list`]: at most `limit` streams with an id after `after`, and
    /// whether more follow; its cost is the page's, not every stream's the run has had.
    pub fn page(&self, after: Option<u32>, limit: usize) -> (Vec<StreamInfo>, bool) {
        self.0.page(after, limit)
    }

    /// How many streams are running (what `GET /health` says), without listing them.
    pub fn running(&self) -> usize {
        self.counts().running
    }

    /// How many streams are in each state (what `GET /health` and `/metrics` say): only the
    /// streams not over yet are looked at, those over are counted as they end.
    pub fn counts(&self) -> StreamCounts {
        let mut entries = self.0.entries();
        self.0.reap(&mut entries);
        entries.counts()
    }

    /// Take no more streams: the run ends when the streams it has end.
    pub fn close(&self) {
        self.0.control.close_joins();
    }

    /// At most `n` streams added while running run at once: adding one more is
    /// [`PipelineError::TooManyStreams`]. Streams being opened and streams being removed count
    /// (a removed or failed stream until its threads ended, also once it was detached
    /// [`REMOVE_DEADLINE`](crate::pipeline::REMOVE_DEADLINE) after its removal, and a source's
    /// pipeline still stopping after its stream ended); those that ended do not. Unlimited until
    /// set.
    ///
    /// [`PipelineError::TooManyStreams`]: crate::pipeline::PipelineError::TooManyStreams
    pub fn set_max_streams(&self, n: usize) {
        self.0.max_streams.store(n, Ordering::SeqCst);
    }

    /// A stream added while running may hold at most `bytes` of frames: one whose estimate
    /// (its queues full of frames as large as its source may give) passes it is refused before
    /// it opens, [`PipelineError::StreamMemory`]. [`DEFAULT_MAX_STREAM_MEMORY`] until set.
    ///
    /// [`DEFAULT_MAX_STREAM_MEMORY`]: crate::pipeline::DEFAULT_MAX_STREAM_MEMORY
    /// [`PipelineError::StreamMemory`]: crate::pipeline::PipelineError::StreamMemory
    pub fn set_max_stream_memory(&self, bytes: u64) {
        self.0.max_memory.store(bytes, Ordering::SeqCst);
    }

    /// The streams added while running may hold at most `bytes` together: each stream's
    /// estimate (its frames, as [`Streams::set_max_stream_memory`] counts them, and the tensors
    /// of a detector or classifier of its own) is held from its admission until its threads
    /// have ended (its source's pipeline stopped, also after a removal or a failure); a stream
    /// that does not fit in what is left is refused before it opens,
    /// [`PipelineError::MemoryBudget`]. [`default_memory_budget`] until set.
    ///
    /// [`default_memory_budget`]: crate::pipeline::default_memory_budget
    /// [`PipelineError::MemoryBudget`]: crate::pipeline::PipelineError::MemoryBudget
    pub fn set_memory_budget(&self, bytes: u64) {
        self.0.memory.set_limit(bytes);
    }

    /// A removed stream whose threads have not ended `deadline` after its removal is detached
    /// (default [`REMOVE_DEADLINE`](crate::pipeline::REMOVE_DEADLINE)): what it still gives is
    /// dropped and the report says so; it counts toward the most streams at once and the memory
    /// budget until its threads end.
    pub fn set_remove_deadline(&self, deadline: Duration) {
        let ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        self.0.remove_deadline.store(ms, Ordering::SeqCst);
    }

    /// Call `hook` with the id of every stream added while running once it is over (its
    /// threads ended, or were detached after its removal): what keeps something per stream
    /// (the control plane's metrics) lets it go.
    pub fn on_end(&self, hook: impl Fn(u32) + Send + Sync + 'static) {
        let mut hooks = self.0.on_end.lock().unwrap_or_else(|e| e.into_inner());
        hooks.push(Box::new(hook));
    }
}
