//! The parts a graph is built from: what a description makes, a node while the graph is being
//! built, and the stage names an error offers.

use super::super::QueueSettings;
use octopipe_core::stage::{Element, Registry, Role, StageDecl};

/// What a description makes: a whole pipeline, or a stream to add to a running one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Whole,
    Branch,
}

/// A node while the graph is being built.
pub(super) struct Pending {
    pub(super) kind: &'static str,
    pub(super) role: Role,
    pub(super) name: Option<String>,
    pub(super) element: Box<dyn Element>,
    /// Edge settings from a `queue` after it.
    pub(super) queue: QueueSettings,
}

pub(super) fn names(registry: &Registry, keep: impl Fn(&StageDecl) -> bool) -> String {
    let v: Vec<String> = registry
        .decls()
        .iter()
        .filter(|d| keep(d))
        .map(|d| format!("'{}'", d.name))
        .collect();
    format!("one of {}", v.join(", "))
}
