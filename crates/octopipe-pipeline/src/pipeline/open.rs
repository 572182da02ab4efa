//! Opening a chain of stages, the one way every runner does it (a pipeline's build, a stream
//! added while running, next the GStreamer plugin's elements): every element configured from
//! source to sink (what it tells later stages goes into the caps; a source starts a branch),
//! then every node opened from sink to source with one [`OpenContext`] over those caps, so that
//! a model settles its input size before the stages that make its tensors open.

use octopipe_core::stage::{Caps, OpenContext, Role};
use octopipe_core::Error;

use crate::describe::Node;

/// Open the chain `nodes` (in pipeline order) over `caps`: configure every element from source
/// to sink, make the [`OpenContext`] (the defaults of [`OpenContext::new`], then `context`
/// gives it the run's services: its report, budget and flags), and open every node from sink
/// to source with `open`, which opens the node's element with the context
/// (`node.element.open(ctx)`) and gives what its caller keeps of it. Returns what `open` gave,
/// in pipeline order; the first error stops the opening.
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
    mut nodes: Vec<Node>,
    caps: &mut Caps,
    context: impl FnOnce(&mut OpenContext<'_>),
    mut open: impl FnMut(Node, &mut OpenContext<'_>) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    // A chain starts a branch of its own: a stream added while running configures its stages on
    // a copy of the run's caps, where what the run's last branch told its own stages is forgotten.
    caps.begin_branch();
    for n in &mut nodes {
        if n.role == Role::Source {
            caps.begin_branch();
        }
        n.element.configure(caps);
    }
    let mut ctx = OpenContext::new(caps);
    context(&mut ctx);
    let mut opened = Vec::with_capacity(nodes.len());
    for n in nodes.into_iter().rev() {
        opened.push(open(n, &mut ctx)?);
    }
    opened.reverse();
    Ok(opened)
}
