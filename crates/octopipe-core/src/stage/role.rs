//! A stage's place in a pipeline: what it takes and gives, and the order stages come in.

use std::fmt;

use super::port::Item;

/// A stage's place in a pipeline. The role fixes what a stage takes and gives ([`Role::input`],
/// [`Role::output`]) and the order stages must come in ([`Role::rank`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Makes frames: decoders, an application's frames.
    Source,
    /// Attaches boxes to frames: annotation replay, a detector.
    Boxes,
    /// Follows boxes from frame to frame.
    Track,
    /// Collects frames' crops into ragged batches.
    Batch,
    /// Makes a batch's tensor: crop + resize + normalize.
    Preprocess,
    /// Runs a model on a batch's tensor.
    Infer,
    /// Writes results out; ends a chain.
    Sink,
    /// Passes its items on (frames, batches or any other [`Payload`](super::Payload)), anywhere
    /// they travel (counters, filters, taps).
    Filter(Item),
    /// Takes one item and gives another, anywhere its input travels: a stage of an
    /// application's own payload ([`Item::of`]), such as embeddings made from frames
    /// (`input: Item::FRAMES`) or consumed into batches for a sink (`output: Item::BATCHES`).
    /// It has no rank: what may come before and after it is what it takes and gives.
    Convert {
        /// What it takes.
        input: Item,
        /// What it gives.
        output: Item,
    },
    /// Not a stage: sets the capacity and policy of the edge it stands on (`queue`).
    Edge,
    /// Not a stage: settings of the GStreamer head before it (`head`: timeouts, reconnects).
    Head,
}

impl Role {
    /// What the stage takes (`None`: nothing, a source).
    pub fn input(self) -> Option<Item> {
        match self {
            Role::Source | Role::Edge | Role::Head => None,
            Role::Boxes | Role::Track | Role::Batch => Some(Item::FRAMES),
            Role::Preprocess | Role::Infer | Role::Sink => Some(Item::BATCHES),
            Role::Filter(item) | Role::Convert { input: item, .. } => Some(item),
        }
    }

    /// What the stage gives.
    pub fn output(self) -> Option<Item> {
        match self {
            Role::Edge | Role::Head => None,
            Role::Source | Role::Boxes | Role::Track => Some(Item::FRAMES),
            Role::Batch | Role::Preprocess | Role::Infer | Role::Sink => Some(Item::BATCHES),
            Role::Filter(item) | Role::Convert { output: item, .. } => Some(item),
        }
    }

    /// Order within a chain: a stage may not follow one of a higher rank. Filters, converters
    /// and edges stand anywhere their items travel.
    pub fn rank(self) -> Option<u8> {
        match self {
            Role::Source => Some(0),
            Role::Boxes => Some(1),
            Role::Track => Some(2),
            Role::Batch => Some(3),
            Role::Preprocess => Some(4),
            Role::Infer => Some(5),
            Role::Sink => Some(6),
            Role::Filter(_) | Role::Convert { .. } | Role::Edge | Role::Head => None,
        }
    }

    /// Lower-case name, as `octopipe inspect` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Boxes => "boxes",
            Role::Track => "track",
            Role::Batch => "batch",
            Role::Preprocess => "preprocess",
            Role::Infer => "infer",
            Role::Sink => "sink",
            Role::Filter(_) => "filter",
            Role::Convert { .. } => "convert",
            Role::Edge => "edge",
            Role::Head => "head",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}
