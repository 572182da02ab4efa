//! What the handle tells and takes: how a stream is removed, its state and its row in a list,
//! and a stream just added.

use serde::Serialize;

use octopipe_sources::AppSource;

/// How a stream is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoveMode {
    /// Its source stops; the frames it gave go through the pipeline.
    #[default]
    Drain,
    /// Its source stops; its frames not yet in the batch stage are dropped and counted
    /// ([`STREAM_REMOVED`](crate::pipeline::STREAM_REMOVED)).
    Drop,
}

impl RemoveMode {
    /// `drain` or `drop`.
    pub fn parse(s: &str) -> Option<RemoveMode> {
        match s {
            "drain" => Some(RemoveMode::Drain),
            "drop" => Some(RemoveMode::Drop),
            _ => None,
        }
    }
}

/// Where a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamState {
    /// Giving frames.
    Running,
    /// Removed; what it gave is still on its way (or being dropped).
    Removing,
    /// Its stream ended.
    Ended,
    /// Its source failed after its retries (or a stage of its own failed): it ended alone, with
    /// the reason in [`StreamInfo::error`].
    Failed,
    /// Removed and gone from the pipeline.
    Removed,
}

/// A stream, as [`Streams::list`](super::Streams::list) (and `GET /streams`) gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamInfo {
    /// Its id (`Frame::stream`, the messages' `stream`).
    pub id: u32,
    /// How it was described when added, or its source in the pipeline's description.
    pub source: String,
    /// Where it is.
    pub state: StreamState,
    /// Added while running (only those can be removed).
    pub added: bool,
    /// Frames that entered so far.
    pub frames_in: u64,
    /// Frames that reached the end of the pipeline.
    pub processed: u64,
    /// Frames dropped, all reasons.
    pub dropped: u64,
    /// Why it failed ([`StreamState::Failed`]), credentials in URIs hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A stream just added.
#[derive(Clone)]
pub struct Added {
    /// Its id.
    pub id: u32,
    /// The handle that feeds it, for an `app` source.
    pub app: Option<AppSource>,
}

/// How many streams are in each state ([`Streams::counts`](super::Streams::counts)): those
/// running, removing and failed (and not removed) now; `ended` and `removed` count every stream
/// of the run so far, also those no longer kept ([`KEPT_RECORDS`](super::KEPT_RECORDS)). A
/// failed stream no longer kept leaves `failed` (it can no longer be removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StreamCounts {
    /// Giving frames.
    pub running: usize,
    /// Removed, what they gave still on its way.
    pub removing: usize,
    /// Their stream ended.
    pub ended: usize,
    /// Failed and not removed.
    pub failed: usize,
    /// Removed and gone.
    pub removed: usize,
}

impl StreamCounts {
    /// The count of streams in `state`.
    pub fn get(&self, state: StreamState) -> usize {
        match state {
            StreamState::Running => self.running,
            StreamState::Removing => self.removing,
            StreamState::Ended => self.ended,
            StreamState::Failed => self.failed,
            StreamState::Removed => self.removed,
        }
    }

    pub(super) fn get_mut(&mut self, state: StreamState) -> &mut usize {
        match state {
            StreamState::Running => &mut self.running,
            StreamState::Removing => &mut self.removing,
            StreamState::Ended => &mut self.ended,
            StreamState::Failed => &mut self.failed,
            StreamState::Removed => &mut self.removed,
        }
    }
}
