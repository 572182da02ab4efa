//! Stages: what each kind of stage declares about itself, and the registry that holds them.
//!
//! A stage kind lives in its own module and declares itself once, as a [`StageDecl`]: its name,
//! its [`Role`] in the pipeline, its properties ([`PropSpec`]: type, default, range, doc) and a
//! constructor that turns checked properties into an [`Element`] (its validated settings). That
//! one declaration drives parsing and validation of descriptions, `octopipe inspect` and the
//! docs, as a GStreamer element's ParamSpecs do. The [`Registry`] lists the declarations: the
//! built-in ones (`Registry::builtin()`, from the `octopipe` package, which knows the stages:
//! `use octopipe::Builtin;`) plus any an application registers, each with one line (here on an
//! empty registry, as a crate that has only this one can write it):
//!
//! ```
//! # use octopipe_core::stage::*;
//! # use octopipe_core::frame::Frame;
//! # use octopipe_core::Error;
//! /// Counts frames and passes them on.
//! #[derive(Debug)]
//! struct Count;
//!
//! struct Counting(u64);
//!
//! impl Stage<Frame, Frame> for Counting {
//!     fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
//!         self.0 += 1;
//!         out.push(frame);
//!         Ok(())
//!     }
//! }
//!
//! impl Element for Count {
//!     fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
//!         Ok(Running::stage(Box::new(Counting(0))))
//!     }
//! }
//!
//! const COUNT: StageDecl = StageDecl {
//!     name: "count",
//!     role: Role::Filter(Item::FRAMES),
//!     doc: "counts frames",
//!     props: &[],
//!     needs: &[],
//!     provides: &[],
//!     make: |_| Ok(Box::new(Count)),
//! };
//!
//! let mut registry = Registry::empty();
//! registry.register(COUNT);
//! ```
//!
//! At run time every stage runs on its own thread as a [`Stage`]; the runner owns the thread,
//! the channels, the timestamps and the shutdown. What travels between stages is an open set
//! ([`Item`], [`Payload`]): frames and batches, or a payload type of the application's own,
//! which its stages take and give ([`Role::Convert`]) with no change here or in the runner.

pub mod caps;
mod downstream;
#[doc(hidden)]
pub mod edge;
mod element;
mod inspect;
pub mod limits;
mod open;
mod pool;
mod port;
mod props;
#[cfg(test)]
mod props_tests;
mod registry;
mod reinfer;
mod role;
mod running;
pub mod source;
mod step;
mod threads;

pub use caps::{Caps, PageLocked};
pub use downstream::Downstream;
pub use element::{Element, OpenContext};
pub use inspect::INSPECT_WIDTH;
pub use octopipe_props_derive::{PropChoice, Properties};
pub use open::{open_chain, Chained};
pub use port::{Item, Payload};
pub use props::{parse_bool, BOOL_SPELLINGS};
#[doc(hidden)]
pub use props::{prop_default, props_concat, props_len, Shown, ShownText};
pub use props::{
    ChoiceError, PropChoice, PropSpec, PropType, PropValue, Properties, Props, StageDecl, NAME_PROP,
};
pub use registry::Registry;
pub use reinfer::{CropPlan, Reinfer, TrackLabels, REINFER_MAX_RESIZE};
pub use role::Role;
pub use running::Running;
#[doc(hidden)]
pub use running::Wires;
pub use step::Stage;
#[doc(hidden)]
pub use threads::{slow_call, spawn_error, wiring, working, Fail, SLOW_CALL};
