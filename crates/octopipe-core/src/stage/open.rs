//! Opening a chain of stages, the one way every runner does it (a pipeline's build, a stream
//! added while running, the GStreamer plugin's elements): every element configured from source
//! to sink (what it tells later stages goes into the caps; a source starts a branch), then every
//! item opened from sink to source with one [`OpenContext`] over those caps, so that a model
//! settles its input size before the stages that make its tensors open.

use super::caps::Caps;
use super::element::{Element, OpenContext};
use super::role::Role;
use crate::Error;

/// An item of a chain that [`open_chain`] opens: its stage's role (a [`Role::Source`] starts a
/// branch of the caps) and its settings, to configure before the chain opens. A runner's own
/// node type gives them from its fields; a bare chain is `(Role, Box<dyn Element>)` pairs.
pub trait Chained {
    /// The stage's role.
    fn role(&self) -> Role;
    /// The stage's settings.
    fn element_mut(&mut self) -> &mut dyn Element;
}

impl Chained for (Role, Box<dyn Element>) {
    fn role(&self) -> Role {
        self.0
    }

    fn element_mut(&mut self) -> &mut dyn Element {
        &mut *self.1
    }
}

/// Open the chain `items` (in pipeline order) over `caps`: configure every element from source
/// to sink, make the [`OpenContext`] (the defaults of [`OpenContext::new`], then `context`
/// gives it the run's services: its report, budget and flags), and open every item from sink
/// to source with `open`, which opens the item's element with the context
/// (`element.open(ctx)`) and gives what its caller keeps of it. Returns what `open` gave, in
/// pipeline order; the first error stops the opening.
///
/// ```
/// # use std::time::Duration;
/// # use octopipe_core::frame::Frame;
/// # use octopipe_core::Error;
/// use octopipe_core::stage::{open_chain, Caps, Element, OpenContext, Role, Running, Stage};
///
/// /// Passes frames on.
/// #[derive(Debug)]
/// struct Pass;
///
/// impl Stage<Frame, Frame> for Pass {
///     fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
///         out.push(frame);
///         Ok(())
///     }
/// }
///
/// impl Element for Pass {
///     fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
///         Ok(Running::stage(Box::new(*self)))
///     }
/// }
///
/// # fn main() -> Result<(), Error> {
/// let chain: Vec<(Role, Box<dyn Element>)> = vec![
///     (Role::Boxes, Box::new(Pass)),
///     (Role::Track, Box::new(Pass)),
/// ];
/// let mut caps = Caps::default();
/// let running = open_chain(
///     chain,
///     &mut caps,
///     |ctx| ctx.budget = Duration::from_millis(40),
///     |(_, element), ctx| element.open(ctx),
/// )?;
/// assert_eq!(running.len(), 2);
/// # Ok(())
/// # }
/// ```
pub fn open_chain<N: Chained, T>(
    mut items: Vec<N>,
    caps: &mut Caps,
    context: impl FnOnce(&mut OpenContext<'_>),
    mut open: impl FnMut(N, &mut OpenContext<'_>) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    // A chain starts a branch of its own: a stream added while running configures its stages on
    // a copy of the run's caps, where what the run's last branch told its own stages is forgotten.
    caps.begin_branch();
    for n in &mut items {
        if n.role() == Role::Source {
            caps.begin_branch();
        }
        n.element_mut().configure(caps);
    }
    let mut ctx = OpenContext::new(caps);
    context(&mut ctx);
    let mut opened = Vec::with_capacity(items.len());
    for n in items.into_iter().rev() {
        opened.push(open(n, &mut ctx)?);
    }
    opened.reverse();
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::frame::Frame;
    use crate::stage::{Running, Stage};

    /// What the test elements did, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// Told for its branch by the element `first`.
    #[derive(Debug, Clone)]
    struct Told(&'static str);

    /// An element that logs its configure and its open, and what it saw in the caps.
    #[derive(Debug)]
    struct Logged {
        name: &'static str,
        log: Log,
    }

    struct Pass;

    impl Stage<Frame, Frame> for Pass {
        fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
            out.push(frame);
            Ok(())
        }
    }

    impl Element for Logged {
        fn configure(&mut self, caps: &mut Caps) {
            let seen = caps.get::<Told>().map_or("nothing", |t| t.0);
            let line = format!("configure {} (saw {seen})", self.name);
            self.log.lock().unwrap().push(line);
            caps.insert_for_branch(Told(self.name));
        }

        fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
            let budget = ctx.budget.as_millis();
            let line = format!("open {} (budget {budget} ms)", self.name);
            self.log.lock().unwrap().push(line);
            Ok(Running::stage(Box::new(Pass)))
        }
    }

    fn item(role: Role, name: &'static str, log: &Log) -> (Role, Box<dyn Element>) {
        let log = log.clone();
        (role, Box::new(Logged { name, log }))
    }

    #[test]
    fn configures_source_to_sink_and_opens_sink_to_source() {
        let log = Log::default();
        let chain = vec![
            item(Role::Source, "a", &log),
            item(Role::Boxes, "b", &log),
            item(Role::Source, "c", &log),
            item(Role::Track, "d", &log),
        ];
        let mut caps = Caps::default();
        // Told by a branch before the chain: forgotten where the chain starts.
        caps.insert_for_branch(Told("before"));
        let mut order = Vec::new();
        let opened = open_chain(
            chain,
            &mut caps,
            |ctx| ctx.budget = std::time::Duration::from_millis(7),
            |(role, element), ctx| {
                order.push(role);
                element.open(ctx).map(|running| (role, running))
            },
        )
        .unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [
                "configure a (saw nothing)",
                "configure b (saw a)",
                "configure c (saw nothing)",
                "configure d (saw c)",
                "open d (budget 7 ms)",
                "open c (budget 7 ms)",
                "open b (budget 7 ms)",
                "open a (budget 7 ms)",
            ]
        );
        assert_eq!(
            order,
            [Role::Track, Role::Source, Role::Boxes, Role::Source]
        );
        let roles: Vec<Role> = opened.iter().map(|(role, _)| *role).collect();
        assert_eq!(
            roles,
            [Role::Source, Role::Boxes, Role::Source, Role::Track]
        );
    }

    #[test]
    fn the_first_error_stops_the_opening() {
        let log = Log::default();
        let chain = vec![item(Role::Boxes, "a", &log), item(Role::Track, "b", &log)];
        let mut caps = Caps::default();
        let mut calls = 0;
        let result: Result<Vec<()>, Error> = open_chain(
            chain,
            &mut caps,
            |_| {},
            |_, _| {
                calls += 1;
                Err(crate::error::PipelineError::NotAStage("b").into())
            },
        );
        assert!(result.is_err());
        assert_eq!(calls, 1);
        assert_eq!(
            *log.lock().unwrap(),
            ["configure a (saw nothing)", "configure b (saw a)"]
        );
    }
}
