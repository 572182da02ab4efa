//! One chain of a description (`a ! b ! c`) placed stage by stage: roles in order, needs met,
//! defaults put in.

use super::super::QueueSettings;
use super::super::{DescribeError, Description, Span, StageDesc};
use super::classifiers::place_classifier;
use super::head::{fragment, gstreamer_head, unknown};
use super::pending::{names, Pending, Shape};
use octopipe_core::stage::{Element, Item, Props, Registry, Role, StageDecl};
use octopipe_sources::{HeadSettings, SourceConfig, SourceKind};

/// One chain of the description, checked.
pub(super) struct Chain {
    pub(super) nodes: Vec<Pending>,
    /// `NAME.` the chain ends in.
    /// The stage it feeds by name, and whether its frames have their boxes by then.
    pub(super) target: Option<(String, Span, bool)>,
    /// What the chain gives at its end.
    pub(super) item: Option<Item>,
    /// The span of its last element (for "ends early" messages).
    pub(super) last: Span,
    /// Whether its items carry boxes by the end (a boxes stage, or a source that brings them).
    pub(super) has_boxes: bool,
    /// The roles met so far (and those they provide).
    pub(super) seen: Vec<Role>,
    /// The highest rank met so far.
    pub(super) rank: u8,
    /// A whole pipeline's chain, or a stream to add to a running one.
    pub(super) shape: Shape,
}

impl Chain {
    pub(super) fn build(
        desc: &Description,
        registry: &Registry,
        stages: &[StageDesc],
        shape: Shape,
    ) -> Result<Chain, DescribeError> {
        let mut c = Chain {
            shape,
            nodes: Vec::new(),
            target: None,
            item: None,
            last: stages[0].span,
            has_boxes: false,
            seen: Vec::new(),
            rank: 0,
        };
        // A GStreamer head: the elements before the first octopipe stage.
        let head = gstreamer_head(desc, registry, stages)?;
        if head > 0 {
            let fragment = fragment(desc, &stages[..head])?;
            let live = octopipe_sources::fragment_is_live(&fragment);
            let mut source = SourceConfig::new(SourceKind::Launch {
                fragment,
                decode: false,
            });
            source.live = live;
            c.nodes.push(Pending {
                kind: "launch",
                role: Role::Source,
                name: None,
                element: Box::new(source),
                queue: QueueSettings::default(),
            });
            c.seen.push(Role::Source);
            c.item = Some(Item::FRAMES);
        }
        for (i, st) in stages.iter().enumerate().skip(head) {
            c.last = Span {
                start: st.span.start,
                len: st.end - st.span.start,
            };
            if st.reference {
                if shape == Shape::Branch {
                    return Err(desc.error(
                        st.span,
                        "a stream added while running joins the pipeline by itself: leave out 'NAME.'",
                    ));
                }
                if i + 1 != stages.len() || c.item.is_none() {
                    return Err(desc.error(
                        st.span,
                        "a reference 'NAME.' ends a branch, after its boxes stage (or its source, into a shared detect)",
                    ));
                }
                c.target = Some((st.kind.clone(), st.span, c.has_boxes));
                return Ok(c);
            }
            let decl = registry
                .get(&st.kind)
                .ok_or_else(|| unknown(desc, registry, st))?;
            let props = Props::new(desc, st, decl);
            props.check()?;
            let element = (decl.make)(&props)?;
            if decl.role == Role::Head {
                c.set_head(desc, st, head, &*element)?;
                continue;
            }
            if decl.role == Role::Edge {
                let queue = element.downcast_ref::<QueueSettings>().copied();
                match (c.nodes.last_mut(), queue) {
                    (Some(last), Some(q)) if i + 1 < stages.len() => last.queue = q,
                    _ => return Err(desc.error(st.span, "a queue must stand between two stages")),
                }
                continue;
            }
            let name = props.given("name").map(String::from);
            c.place(desc, registry, st, decl, element, name)?;
        }
        // A stream added while running may end before its boxes (into a shared detect):
        // build_branch decides.
        if shape == Shape::Branch {
            return Ok(c);
        }
        c.boxed(desc, registry)?;
        if c.nodes.last().is_none_or(|n| n.role != Role::Sink) {
            return Err(desc.error(
                c.last,
                format!(
                    "the pipeline ends early: expected {} next",
                    names(registry, |d| d.role == Role::Sink)
                ),
            ));
        }
        Ok(c)
    }

    /// Apply a `head` stage (`settings`) to the GStreamer head of the chain, which must be the
    /// only node so far (`head` elements of the chain formed it).
    pub(super) fn set_head(
        &mut self,
        desc: &Description,
        st: &StageDesc,
        head: usize,
        settings: &dyn Element,
    ) -> Result<(), DescribeError> {
        let settings = settings.downcast_ref::<HeadSettings>();
        let source = match self.nodes.as_mut_slice() {
            [only] if head > 0 => only.element.downcast_mut::<SourceConfig>(),
            _ => None,
        };
        match (source, settings) {
            (Some(source), Some(settings)) => {
                source.watch = settings.watch;
                if let (Some(decoder), SourceKind::Launch { decode, .. }) =
                    (settings.decoder, &mut source.kind)
                {
                    *decode = true;
                    source.decoder = decoder;
                    source.device = settings.device;
                }
                if let Some(framerate) = settings.framerate {
                    source.framerate = framerate;
                    source.head_framerate = Some(framerate);
                }
                Ok(())
            }
            _ => Err(desc.error(
                st.span,
                "'head' sets the GStreamer elements a branch starts with: put it right after them \
                 (udpsrc ... ! avdec_h264 ! head timeout=5 ! boxes ...)",
            )),
        }
    }

    /// Append the stage `st` of kind `decl`, after checking that it takes what the chain gives,
    /// keeps the roles' order and has what it needs before it (putting in an implied batch or
    /// preprocess stage).
    pub(super) fn place(
        &mut self,
        desc: &Description,
        registry: &Registry,
        st: &StageDesc,
        decl: &StageDecl,
        element: Box<dyn Element>,
        name: Option<String>,
    ) -> Result<(), DescribeError> {
        if self.nodes.last().is_some_and(|n| n.role == Role::Sink) {
            return Err(desc.error(
                st.span,
                format!(
                    "stage '{}' cannot come here: a sink ends the pipeline",
                    st.kind
                ),
            ));
        }
        if self.shape == Shape::Branch {
            // A stream's stages take and give frames, up to its boxes.
            let frames = Some(Item::FRAMES);
            let joins_batch = decl.role != Role::Source
                && (decl.role.input() != frames
                    || decl.role.output() != frames
                    || decl.role.rank() >= Role::Batch.rank());
            if self.nodes.is_empty() && decl.role != Role::Source {
                return Err(desc.error(
                    st.span,
                    format!(
                        "a stream starts with its source: expected {}",
                        names(registry, |d| d.role == Role::Source)
                    ),
                ));
            }
            if joins_batch {
                return Err(desc.error(
                    st.span,
                    format!(
                        "stage '{}' cannot come here: a stream added while running ends with its \
                         boxes and joins the pipeline's batch stage",
                        st.kind
                    ),
                ));
            }
        }
        // A chain that does not start with a source continues the chains that name it.
        if self.nodes.is_empty() && decl.role != Role::Source {
            self.seen.extend([Role::Source, Role::Boxes]);
            self.has_boxes = true;
            self.item = decl.role.input();
        }
        for need in decl.needs {
            if !self.seen.contains(need) && !matches!(need, Role::Batch | Role::Preprocess) {
                return Err(desc.error(
                    st.span,
                    format!("a {need} stage must come before '{}'", st.kind),
                ));
            }
        }
        if self.item == Some(Item::FRAMES) && decl.role.input() == Some(Item::BATCHES) {
            self.implied(desc, registry, "batch", st.span)?;
        }
        if decl.needs.contains(&Role::Preprocess) && !self.seen.contains(&Role::Preprocess) {
            self.implied(desc, registry, "preprocess", st.span)?;
        }
        let fits = decl.role.input() == self.item
            && decl.role.rank().is_none_or(|r| r >= self.rank)
            && (decl.role != Role::Source || self.nodes.is_empty());
        if !fits {
            return Err(desc.error(
                st.span,
                format!(
                    "stage '{}' cannot come here: expected {}",
                    st.kind,
                    self.expected(registry)
                ),
            ));
        }
        self.met(decl);
        let mut element = element;
        place_classifier(&mut self.nodes, element.as_mut(), name.as_deref())
            .map_err(|e| desc.error(st.span, e))?;
        self.nodes.push(Pending {
            kind: decl.name,
            role: decl.role,
            name,
            element,
            queue: QueueSettings::default(),
        });
        Ok(())
    }

    /// Note that a stage of kind `decl` now ends the chain.
    pub(super) fn met(&mut self, decl: &StageDecl) {
        self.rank = decl.role.rank().unwrap_or(self.rank).max(self.rank);
        self.seen.push(decl.role);
        self.seen.extend(decl.provides);
        self.has_boxes |= self.seen.contains(&Role::Boxes);
        self.item = decl.role.output();
    }

    /// Put in the stage `kind` with its defaults, before the stage at `span`.
    pub(super) fn implied(
        &mut self,
        desc: &Description,
        registry: &Registry,
        kind: &str,
        span: Span,
    ) -> Result<(), DescribeError> {
        let decl = registry
            .get(kind)
            .ok_or_else(|| desc.error(span, format!("a {kind} stage must come here")))?;
        let none = StageDesc {
            kind: kind.into(),
            span,
            props: Vec::new(),
            chain: 0,
            reference: false,
            end: span.start,
        };
        let element = (decl.make)(&Props::new(desc, &none, decl))?;
        self.met(decl);
        self.nodes.push(Pending {
            kind: decl.name,
            role: decl.role,
            name: None,
            element,
            queue: QueueSettings::default(),
        });
        Ok(())
    }

    /// An error unless the chain's frames have their boxes by its end.
    pub(super) fn boxed(
        &self,
        desc: &Description,
        registry: &Registry,
    ) -> Result<(), DescribeError> {
        if self.item == Some(Item::FRAMES) && !self.has_boxes {
            return Err(desc.error(
                self.last,
                format!(
                    "the branch ends early: expected {} next",
                    self.expected(registry)
                ),
            ));
        }
        Ok(())
    }

    /// The stages that may come next, for messages.
    pub(super) fn expected(&self, registry: &Registry) -> String {
        let rank = self.nodes.iter().filter_map(|n| n.role.rank()).max();
        match (self.item, rank) {
            (None, _) => names(registry, |d| d.role == Role::Source),
            (Some(item), _) if item == Item::FRAMES && !self.has_boxes => {
                names(registry, |d| d.role == Role::Boxes)
            }
            // An application's own payload: the stages that take it.
            (Some(item), _) if item != Item::FRAMES && item != Item::BATCHES => {
                names(registry, |d| d.role.input() == Some(item))
            }
            (item, rank) => names(registry, |d| {
                let input = d.role.input();
                let batch_ok = item == Some(Item::FRAMES) && input == Some(Item::BATCHES);
                (input == item || batch_ok)
                    && d.role.rank().is_some_and(|r| Some(r) > rank)
                    && d.role != Role::Preprocess
                    && d.role != Role::Batch
            }),
        }
    }
}
