//! The graph a pipeline runs: nodes (opened stages to be) and the edges between them.

use std::any::Any;
use std::time::Duration;

use super::Queue;
use octopipe_core::files::RunPath;
use octopipe_core::stage::{Chained, Element, Role};

/// One stage of the graph.
#[derive(Debug)]
#[non_exhaustive]
pub struct Node {
    /// Stage kind (`images`, `boxes`, ...; `launch` for a GStreamer head).
    pub kind: &'static str,
    /// Its role.
    pub role: Role,
    /// The `name=` it was given, if any.
    pub name: Option<String>,
    /// Its row in the budget report (nodes of different branches at the same place share one).
    pub row: String,
    /// Its settings, opened when the pipeline is built.
    pub element: Box<dyn Element>,
    /// Where its output goes: another node, or (`None`) the end of the pipeline.
    pub output: Option<usize>,
    /// The edge its output travels on.
    pub queue: Queue,
}

/// A graph's nodes are a chain that [`octopipe_core::stage::open_chain`] opens, the one way every
/// runner opens one (a pipeline's build, a stream added while running, the GStreamer plugin's
/// elements).
///
/// ```no_run
/// # use std::collections::HashMap;
/// # use std::time::Duration;
/// use octopipe_core::stage::{open_chain, Caps};
/// use octopipe_pipeline::describe::{build, parse};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let text = "testsrc num-buffers=10 ! boxes format=synthetic ! batch ! preprocess ! tensors location=t";
/// let graph = build(&parse("<example>", text, &HashMap::new())?)?;
/// let mut caps = Caps::default();
/// let running = open_chain(
///     graph.nodes,
///     &mut caps,
///     |ctx| ctx.budget = Duration::from_millis(40),
///     |node, ctx| node.element.open(ctx),
/// )?;
/// assert_eq!(running.len(), 5);
/// # Ok(())
/// # }
/// ```
impl Chained for Node {
    fn role(&self) -> Role {
        self.role
    }

    fn element_mut(&mut self) -> &mut dyn Element {
        &mut *self.element
    }
}

/// Nodes and edges, validated: every node's input matches what its upstream nodes give, roles
/// come in order, and all chains meet in one that ends in a sink. Nodes are in an order where
/// every node comes after the nodes that feed it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Graph {
    /// The nodes, upstream first.
    pub nodes: Vec<Node>,
    /// The per-frame budget (default: the shortest frame interval of the sources).
    pub budget: Duration,
    /// Every output may replace earlier output (`octopipe run --force`); by default an
    /// existing file, or a folder holding an earlier run's output, is refused.
    pub overwrite: bool,
}

impl Graph {
    /// The settings of the first node whose element is a `T`.
    pub fn element<T: Any>(&self) -> Option<&T> {
        self.elements().next()
    }

    /// The settings of the first node whose element is a `T`, to change them before the
    /// pipeline is built.
    pub fn element_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.nodes.iter_mut().find_map(|n| n.element.downcast_mut())
    }

    /// The settings of every node whose element is a `T`, upstream first.
    pub fn elements<T: Any>(&self) -> impl Iterator<Item = &T> {
        self.nodes.iter().filter_map(|n| n.element.downcast_ref())
    }

    /// The source nodes, in stream order.
    pub fn sources(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.role == Role::Source)
    }

    /// Whether any source is live.
    pub fn is_live(&self) -> bool {
        self.sources().any(|n| n.element.is_live())
    }

    /// The shortest nominal time between frames of the sources.
    pub fn frame_interval(&self) -> Option<Duration> {
        self.sources()
            .filter_map(|n| n.element.frame_interval())
            .min()
    }

    /// The report rows, in pipeline order.
    pub fn rows(&self) -> Vec<String> {
        let mut rows: Vec<String> = Vec::new();
        for n in &self.nodes {
            if !rows.contains(&n.row) {
                rows.push(n.row.clone());
            }
        }
        rows
    }

    /// Every file and folder the stages read, upstream first.
    pub fn reads(&self) -> Vec<RunPath> {
        self.nodes.iter().flat_map(|n| n.element.inputs()).collect()
    }

    /// Every file and folder the stages write, upstream first.
    pub fn writes(&self) -> Vec<RunPath> {
        self.nodes
            .iter()
            .flat_map(|n| n.element.outputs())
            .collect()
    }

    /// Whether a stage writes to stdout (`jsonl location=-`).
    pub fn writes_stdout(&self) -> bool {
        self.nodes.iter().any(|n| n.element.writes_stdout())
    }
}
