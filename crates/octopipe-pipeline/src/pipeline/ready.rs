//! Opened nodes waiting for their threads, and the frames the sources expect to give.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::describe::{Node, Queue};
use octopipe_core::error::Error;
use octopipe_core::frame::StageSlot;
use octopipe_core::stage::{OpenContext, Role, Running};
use octopipe_sources::FrameSource;

use super::control::Fate;

/// The frames each source expects to give, as they learn it (`UNKNOWN` until then).
pub(super) struct Expected(pub(super) Vec<AtomicU64>);

impl Expected {
    pub(super) const UNKNOWN: u64 = u64::MAX;

    /// All sources' frames, once every source knows its own.
    pub(super) fn total(&self) -> Option<u64> {
        self.0.iter().try_fold(0u64, |sum, n| {
            let n = n.load(Ordering::Relaxed);
            (n != Self::UNKNOWN).then(|| sum.saturating_add(n))
        })
    }

    /// Ask source `i` for its length, until it tells.
    pub(super) fn learn(&self, i: usize, source: &dyn FrameSource) {
        let Some(slot) = self.0.get(i) else { return };
        if slot.load(Ordering::Relaxed) == Self::UNKNOWN {
            if let Some(n) = source.expected_frames() {
                slot.store(n.min(Self::UNKNOWN - 1), Ordering::Relaxed);
            }
        }
    }
}

/// One opened node, waiting for its thread.
pub(super) struct Ready {
    pub(super) kind: &'static str,
    pub(super) running: Running,
    pub(super) output: Option<usize>,
    pub(super) queue: Queue,
    /// Its report row, and the row's index.
    pub(super) row: String,
    pub(super) slot: StageSlot,
    /// `source` for sources, else the kind: how edges are named in drop reasons.
    pub(super) label: &'static str,
    /// For a source: its place in the run's [`Expected`] frames.
    pub(super) source: Option<usize>,
    /// For a source: what happens at its end.
    pub(super) end: SourceEnd,
    /// The stream the node belongs to alone (a source; a stage of a stream added while
    /// running): its failure ends that stream, not the run.
    pub(super) stream: Option<(u32, Fate)>,
}

/// A source's end: where the source goes.
pub(super) struct SourceEnd {
    /// Kept until the run is over (see `Control::retired`); a stream added while running is torn
    /// down as it ends instead: a run that takes streams for good cannot keep every ended
    /// stream's decoder.
    pub(super) retire: bool,
}

impl Ready {
    /// Open node `n`, whose report row is among `rows`, of `stream` when it belongs to one alone.
    pub(super) fn open(
        n: Node,
        rows: &[String],
        ctx: &mut OpenContext,
        stream: Option<(u32, Fate)>,
    ) -> Result<Ready, Error> {
        let slot = rows.iter().position(|r| *r == n.row).unwrap_or(0) as StageSlot;
        Ok(Ready {
            kind: n.kind,
            running: n.element.open(ctx)?,
            output: n.output,
            queue: n.queue,
            row: n.row,
            slot,
            label: if n.role == Role::Source {
                "source"
            } else {
                n.kind
            },
            source: None,
            end: SourceEnd { retire: true },
            stream,
        })
    }
}
