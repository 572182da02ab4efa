//! octopipe's stages opened outside a pipeline, the way a GStreamer element needs them: made from
//! the element's property values by the stage's own declaration ([`StageDecl::element`], the
//! checks `octopipe run` makes), opened as a chain the way every runner opens one
//! ([`open_chain`], with an [`OpenContext`] of their own), and driven one frame at a time: a
//! buffer leaves the element before the next comes, so a stage that collects frames (the batch
//! and detect stages' deadline-bounded collectors) is run to its deadline at once, with nothing
//! else to wait for.

use std::time::{Duration, Instant};

use octopipe_core::frame::Frame;
use octopipe_core::stage::{
    open_chain, Caps, Chained, Element, OpenContext, Payload, Role, Running, Stage, StageDecl,
};

use super::error::PluginError;
use super::props::Values;

/// A stage of an element's chain, not yet open: its name, its role and its settings.
pub(crate) struct Settings {
    name: &'static str,
    role: Role,
    element: Box<dyn Element>,
}

impl Chained for Settings {
    fn role(&self) -> Role {
        self.role
    }

    fn element_mut(&mut self) -> &mut dyn Element {
        &mut *self.element
    }
}

/// The settings of `decl` from the values set on the element that the stage declares, and
/// `fixed`, the values the element sets itself (after the user's, so they win).
pub(crate) fn settings(
    decl: &StageDecl,
    values: &Values,
    fixed: &[(&str, &str)],
) -> Result<Settings, PluginError> {
    let mut pairs = values.pairs(decl);
    pairs.retain(|(k, _)| !fixed.iter().any(|(f, _)| f == k));
    pairs.extend_from_slice(fixed);
    let element = decl
        .element(&pairs)
        .map_err(|e| PluginError::Property(e.message))?;
    Ok(Settings {
        name: decl.name,
        role: decl.role,
        element,
    })
}

/// What the stage of `settings` tells the stages after it in the caps when configured (a
/// detector's score threshold), read without opening it.
pub(crate) fn told(mut settings: Settings) -> Caps {
    let mut caps = Caps::default();
    settings.element.configure(&mut caps);
    caps
}

/// A stage of an element's chain, opened: [`Opened::stage`] takes it as the stage it is.
pub(crate) struct Opened {
    name: &'static str,
    running: Running,
}

impl Opened {
    /// The stage, as one taking `I` and giving `O`.
    pub(crate) fn stage<I: Payload, O: Payload>(self) -> Result<Box<dyn Stage<I, O>>, PluginError> {
        let name = self.name;
        self.running.into_stage::<I, O>().map_err(|_| {
            PluginError::Property(format!(
                "stage {name} does not take what the element gives it"
            ))
        })
    }
}

/// Open an element's chain `stages` (in pipeline order) as every runner opens one, with
/// [`open_chain`] over caps of their own: configured from source to sink, then opened from sink
/// to source (a model settles its input size before the stages that make its tensors open),
/// with a context of [`OpenContext::new`]'s defaults that `context` adjusts (such as
/// [`alone`]). Gives them opened, in the same order.
pub(crate) fn open_stages<const N: usize>(
    stages: [Settings; N],
    context: impl FnOnce(&mut OpenContext<'_>),
) -> Result<[Opened; N], PluginError> {
    open_stages_after(&mut Caps::default(), stages, context)
}

/// [`open_stages`] after stages that told `caps` what they give (a detector's score threshold
/// for a tracker): what the elements before an element say on the frame meta.
pub(crate) fn open_stages_after<const N: usize>(
    caps: &mut Caps,
    stages: [Settings; N],
    context: impl FnOnce(&mut OpenContext<'_>),
) -> Result<[Opened; N], PluginError> {
    let opened = open_chain(Vec::from(stages), caps, context, |s, ctx| {
        let running = s.element.open(ctx)?;
        Ok(Opened {
            name: s.name,
            running,
        })
    })?;
    Ok(opened
        .try_into()
        .unwrap_or_else(|_| unreachable!("open_chain gives one stage for each it is given")))
}

/// The context of stages an element has alone (not shared with other elements): no budget to
/// wait for (a collection closes as soon as it holds a frame: the element has no other frame
/// to add to it).
pub(crate) fn alone(ctx: &mut OpenContext<'_>) {
    ctx.budget = Duration::ZERO;
}

/// A stage opened outside a pipeline, that takes frames and gives `O`, called in the element's
/// streaming thread. Not the core's driver (`Running::start`, which a shared stage runs on:
/// [`super::shared`]): that one is a thread between channels, and here the buffer must leave
/// before the next comes, in GStreamer's thread, so it would add a thread and two channel hops
/// per buffer for nothing.
pub(crate) struct Driven<O> {
    stage: Box<dyn Stage<Frame, O>>,
}

impl<O: Payload> Driven<O> {
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
