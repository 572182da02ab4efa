//! Opening a chain of a graph's nodes, the one way every runner does it (a pipeline's build, a
//! stream added while running; the GStreamer plugin's elements open theirs through the same
//! [`octopipe_core::stage::open_chain`]): every element configured from source to sink (what it
//! tells later stages goes into the caps; a source starts a branch), then every node opened from
//! sink to source with one [`OpenContext`] over those caps, so that a model settles its input
//! size before the stages that make its tensors open.

use octopipe_core::stage::{self, Caps, Chained, Element, OpenContext, Role};
use octopipe_core::Error;

use crate::describe::Node;

impl Chained for Node {
    fn role(&self) -> Role {
        self.role
    }

    fn element_mut(&mut self) -> &mut dyn Element {
        &mut *self.element
    }
}

/// Open the chain `nodes` (in pipeline order) over `caps`: configure every element from source
/// to sink, make the [`OpenContext`] (the defaults of [`OpenContext::new`], then `context`
/// gives it the run's services: its report, budget and flags), and open every node from sink
/// to source with `open`, which opens the node's element with the context
/// (`node.element.open(ctx)`) and gives what its caller keeps of it. Returns what `open` gave,
/// in pipeline order; the first error stops the opening. It is
/// [`octopipe_core::stage::open_chain`], which opens any chain, on a graph's nodes.
///
/// ```no_run
/// # use std::collections::HashMap;
/// # use std::time::Duration;
/// use octopipe_core::stage::Caps;
/// use octopipe_pipeline::describe::{build, parse};
/// use octopipe_pipeline::pipeline::open_chain;
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
pub fn open_chain<T>(
    nodes: Vec<Node>,
    caps: &mut Caps,
    context: impl FnOnce(&mut OpenContext<'_>),
    open: impl FnMut(Node, &mut OpenContext<'_>) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    stage::open_chain(nodes, caps, context, open)
}
