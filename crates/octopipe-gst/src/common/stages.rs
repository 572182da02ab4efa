//! octopipe's stages opened outside a pipeline, the way a GStreamer element needs them: made from
//! the element's property values by the stage's own declaration ([`StageDecl::element`], the
//! checks `octopipe run` makes), opened with an [`OpenContext`] of their own, and driven one
//! frame at a time: a buffer leaves the element before the next comes, so a stage that collects
//! frames (the batch and detect stages' deadline-bounded collectors) is run to its deadline at
//! once, with nothing else to wait for.

use std::time::{Duration, Instant};

use octopipe_core::frame::Frame;
use octopipe_core::stage::{Caps, Element, OpenContext, Payload, Stage, StageDecl};

use super::error::PluginError;
use super::props::Values;

/// The settings of `decl` from the values set on the element that the stage declares, and
/// `fixed`, the values the element sets itself (after the user's, so they win).
pub(crate) fn settings(
    decl: &StageDecl,
    values: &Values,
    fixed: &[(&str, &str)],
) -> Result<Box<dyn Element>, PluginError> {
    let mut pairs = values.pairs(decl);
    pairs.retain(|(k, _)| !fixed.iter().any(|(f, _)| f == k));
    pairs.extend_from_slice(fixed);
    decl.element(&pairs)
        .map_err(|e| PluginError::Property(e.message))
}

/// A context for opening stages outside a pipeline, over `caps`: the defaults of
/// [`OpenContext::new`], with no budget to wait for (a collection closes as soon as it holds a
/// frame: the element has no other frame to add to it).
pub(crate) fn context(caps: &mut Caps) -> OpenContext<'_> {
    let mut ctx = OpenContext::new(caps);
    ctx.budget = Duration::ZERO;
    ctx
}

/// Open `element` (of the stage `name`) with `ctx`, as a stage taking `I` and giving `O`.
pub(crate) fn open_stage<I: Payload, O: Payload>(
    name: &str,
    element: Box<dyn Element>,
    ctx: &mut OpenContext,
) -> Result<Box<dyn Stage<I, O>>, PluginError> {
    element.open(ctx)?.into_stage::<I, O>().map_err(|_| {
        PluginError::Property(format!(
            "stage {name} does not take what the element gives it"
        ))
    })
}

/// A stage opened outside a pipeline, that takes frames and gives `O`.
pub(crate) struct Driven<O> {
    stage: Box<dyn Stage<Frame, O>>,
}

impl<O: Payload> Driven<O> {
    /// Open `element` (of the stage `name`) with `ctx`.
    pub(crate) fn open(
        name: &'static str,
        element: Box<dyn Element>,
        ctx: &mut OpenContext,
    ) -> Result<Self, PluginError> {
        Ok(Driven::new(open_stage(name, element, ctx)?))
    }

    /// Drive `stage`.
    pub(crate) fn new(stage: Box<dyn Stage<Frame, O>>) -> Self {
        Driven { stage }
    }

    /// What the stage gives for `frame`: if it holds the frame for others (a collector), it is
    /// run to its deadline, at once or after the wait its settings ask for.
    pub(crate) fn run(&mut self, frame: Frame, out: &mut Vec<O>) -> Result<(), PluginError> {
        let before = out.len();
        self.stage.process(frame, out)?;
        while out.len() == before {
            let Some(deadline) = self.stage.deadline() else {
                break;
            };
            let now = Instant::now();
            if deadline > now {
                std::thread::sleep(deadline - now);
            }
            self.stage.timeout(out)?;
        }
        Ok(())
    }
}
