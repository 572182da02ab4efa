//! Edges as a description sets them: their capacity and policy ([`Queue`]), the defaults, and
//! the `queue` pseudo-stage that sets the edge it stands on. The runner (`crate::pipeline`, which
//! re-exports these) makes the channels.

use octopipe_core::error::Error;
use octopipe_core::error::PipelineError;
use octopipe_core::stage::{
    Element, OpenContext, PropChoice, Properties, Role, Running, StageDecl,
};

/// Default capacity of every edge of a file pipeline.
pub const DEFAULT_QUEUE: usize = 4;

/// Default capacity of the frame edges of a live pipeline: a live frame must not wait behind
/// others of its stream.
pub const DEFAULT_LIVE_QUEUE: usize = 1;

/// Default capacity of a live frame edge into a collector (a shared `detect`): it takes frames
/// of many streams into calls, so a stream's frame may wait out the call in flight, its own
/// call and, now and then, a slower call of the GPU it shares. Measured on an H100 (BENCHMARKS.md,
/// 2026-11-27) with the detector busy ~85% of the time: with two frames a stream dropped a
/// frame on such a stall now and then (34 streams at `interval=2`: 9 of 10,200 frames), with
/// four none up to 40 streams, the p99 latency still under 100 ms (90 ms at 40). A frame four
/// intervals old would be late anyway: deeper edges would only hold stale frames.
pub const DEFAULT_LIVE_COLLECTOR_QUEUE: usize = 4;

/// Default capacity of the batch edges of a live pipeline, which block when full. A batch holds
/// frames of every stream: dropping one on a momentary stall of a later stage (a GPU call that
/// takes 20 ms once) threw away frames of every stream that were on time (measured on the H100:
/// 71 of 1,200 frames of 4 live streams with one-batch edges, 2 of 2,400 of 8 streams with
/// four-batch ones, every stage's p99 under 6 ms). Blocking pushes a stall back to the frame edges
/// at the entrance, which drop a stream's frame only when its next one is due (a stall longer
/// than a frame interval); frames that will be late are the batch stage's `late` policy's.
pub const DEFAULT_LIVE_BATCH_QUEUE: usize = 4;

/// What an edge does when it is full (`queue policy=block|drop-oldest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
pub enum EdgePolicy {
    /// The upstream stage waits (file input: nothing is lost).
    #[default]
    Block,
    /// The oldest item on the edge is dropped, and its frames counted (live input: the freshest
    /// frames go on, latency cannot pile up).
    DropOldest,
}

/// One edge between two stages: its capacity and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Items it holds before the policy applies.
    pub size: usize,
    /// What happens when it is full.
    pub policy: EdgePolicy,
}

impl Queue {
    /// The default edge of a file pipeline: 4 items, block.
    pub const FILE: Queue = Queue {
        size: DEFAULT_QUEUE,
        policy: EdgePolicy::Block,
    };
    /// The default frame edge of a live pipeline: 1 frame, drop the oldest.
    pub const LIVE: Queue = Queue {
        size: DEFAULT_LIVE_QUEUE,
        policy: EdgePolicy::DropOldest,
    };
    /// The default frame edge of a live pipeline into a collector: 4 frames, drop the oldest.
    pub const LIVE_INTO_COLLECTOR: Queue = Queue {
        size: DEFAULT_LIVE_COLLECTOR_QUEUE,
        policy: EdgePolicy::DropOldest,
    };
    /// The default batch edge of a live pipeline: 4 batches, block.
    pub const LIVE_BATCHES: Queue = Queue {
        size: DEFAULT_LIVE_BATCH_QUEUE,
        policy: EdgePolicy::Block,
    };
}

/// The `queue` stage's settings, its properties declared once ([`QUEUE`]): what it sets on
/// the edge it stands on (unset: the pipeline's file or live default, which `inspect` shows as
/// the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Properties)]
pub struct QueueSettings {
    /// frames or batches the edge holds before its policy applies
    #[prop(default = "4 (live: 1 frame, 4 into a shared detect; batches 4)", value = None, positive, range = ..=octopipe_core::stage::limits::MAX_QUEUE)]
    pub size: Option<usize>,
    /// when full: the upstream stage waits, or the oldest item is dropped and counted
    #[prop(default = "block (live frames: drop-oldest)", value = None)]
    pub policy: Option<EdgePolicy>,
}

impl QueueSettings {
    /// The edge these settings give, on a pipeline whose edges default to `default`.
    pub fn resolve(self, default: Queue) -> Queue {
        Queue {
            size: self.size.unwrap_or(default.size),
            policy: self.policy.unwrap_or(default.policy),
        }
    }
}

impl Element for QueueSettings {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Err(PipelineError::NotAStage("queue").into())
    }
}

/// `queue size=N policy=block|drop-oldest` between two stages.
pub const QUEUE: StageDecl = StageDecl {
    name: "queue",
    role: Role::Edge,
    doc: "sets the capacity and policy of the edge it stands on (between two stages)",
    props: QueueSettings::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(QueueSettings::from_props(p)?)),
};
