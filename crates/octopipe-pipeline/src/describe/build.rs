//! Description -> [`Graph`]: every stage and property checked against the registry before
//! anything starts.
//!
//! A description is one or more chains (`a ! b ! c`). A chain starts with a source (a registered
//! source stage, or GStreamer elements that octopipe hands to GStreamer with an appsink appended)
//! or continues a chain that names it; it ends in a sink or in `NAME.`, a reference to the stage
//! named NAME, which then takes the chain's items as one more input (branches of a multi-stream
//! pipeline feed one batch stage this way; each source is a stream, 0, 1, ... in order). Along a
//! chain, each stage must take what the previous one gives, roles keep their order (boxes before
//! batch before preprocess before infer before sink), and what a stage needs must come before it:
//! a missing batch or preprocess stage is put in with its defaults, anything else missing is an
//! error naming the stage that needs it.
//!
//! A GStreamer head is the run of GStreamer elements (and caps) a chain starts with, up to the
//! first octopipe stage. Inside it, a name that is both an octopipe stage and a GStreamer
//! element (`queue`) is the GStreamer element, unless it is written with one of the octopipe
//! stage's own properties (`queue size=2`, `queue policy=drop-oldest`): that is octopipe's edge
//! queue, and it ends the head. A `head` stage right after the head (or after such a queue)
//! sets the head's timeouts and reconnects.

mod assemble;
mod chain;
mod classifiers;
mod head;
mod pending;

pub use assemble::{build, build_branch, build_open, build_with};
pub use head::unknown;
