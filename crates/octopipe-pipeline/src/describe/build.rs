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

use std::collections::HashMap;
use std::time::Duration;

use super::{closest, expand_devices, quote, DescribeError, Description, Span, StageDesc};
use super::{Builtin, Graph, Node, Queue, QueueSettings};
use crate::source::{HeadSettings, SourceConfig, SourceKind};
use crate::stage::{Element, Item, Props, Registry, Role, StageDecl};

/// Check `desc` against the built-in stages and make its graph.
pub fn build(desc: &Description) -> Result<Graph, DescribeError> {
    build_with(desc, &Registry::builtin())
}

/// Check `desc` against `registry` and make its graph. A batch stage given `devices=` is first
/// written out as one chain per GPU ([`expand_devices`], `all` counting the host's CUDA
/// devices), so every check below applies to each GPU's chain.
pub fn build_with(desc: &Description, registry: &Registry) -> Result<Graph, DescribeError> {
    let desc = expand_devices(desc, registry, &super::devices::cuda_devices)?;
    assemble(
        &desc,
        registry,
        chains(&desc, registry, Shape::Whole)?,
        true,
    )
}

/// Like [`build_with`], for a pipeline that takes streams while it runs
/// ([`Pipeline::streams`](crate::pipeline::Pipeline::streams)): it may have no source yet
/// (`batch ! classify model=m.onnx ! mqtt`, `detect model=d.onnx ! track ! batch ! jsonl`).
/// Its streams join the stage it starts with, or its one batch stage, so
/// `devices=` is refused.
pub fn build_open(desc: &Description, registry: &Registry) -> Result<Graph, DescribeError> {
    super::devices::refuse_devices(desc, registry)?;
    assemble(desc, registry, chains(desc, registry, Shape::Whole)?, false)
}

/// Check `desc`, a stream to add to a running pipeline: one chain from a source to the stage
/// that gives its frames their boxes (`testsrc live=true ! boxes format=synthetic`), joining the
/// pipeline's batch stage by itself; or, where the pipeline's shared detect gives the boxes
/// (`boxed` false), from its source to its frames. Its nodes, upstream first; the last one's
/// output is left unset. `live`: whether the pipeline's edges are live ones (the stream's own
/// `live` counts too).
pub fn build_branch(
    desc: &Description,
    registry: &Registry,
    live: bool,
    boxed: bool,
) -> Result<Vec<Node>, DescribeError> {
    let mut chains = chains(desc, registry, Shape::Branch)?;
    if let Some(second) = chains.get(1) {
        return Err(desc.error(
            second.last,
            "a stream is one chain, from its source to its boxes",
        ));
    }
    let Some(chain) = chains.pop() else {
        return Err(desc.error(Span { start: 0, len: 0 }, "a stream needs a source"));
    };
    if boxed {
        chain.boxed(desc, registry)?;
    }
    let nodes = chain.nodes;
    let live = live || nodes.iter().any(|n| n.element.is_live());
    let output: Vec<Option<usize>> = (0..nodes.len())
        .map(|i| (i + 1 < nodes.len()).then_some(i + 1))
        .collect();
    let rows = rows(&nodes, &output);
    let last = nodes.len().saturating_sub(1);
    Ok(nodes
        .into_iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (n, row))| Node {
            kind: n.kind,
            role: n.role,
            name: n.name,
            row,
            element: n.element,
            output: output[i],
            // Without its own boxes, the stream's frames go into the pipeline's shared detect.
            queue: n
                .queue
                .resolve(default_queue(live, n.role, 1, i == last && !boxed)),
        })
        .collect())
}

/// What a description makes: a whole pipeline, or a stream to add to a running one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Whole,
    Branch,
}

/// The chains of `desc`, each checked.
fn chains(
    desc: &Description,
    registry: &Registry,
    shape: Shape,
) -> Result<Vec<Chain>, DescribeError> {
    desc.chains()
        .map(|stages| Chain::build(desc, registry, stages, shape))
        .collect()
}

/// An edge's queue when the description sets none: a live pipeline keeps its frame queues short
/// and drops the oldest (a live frame must not wait behind others of its stream); its batch
/// edges block (see `DEFAULT_LIVE_BATCH_QUEUE`); a frame edge into a collector holds four
/// (see `DEFAULT_LIVE_COLLECTOR_QUEUE`).
fn default_queue(live: bool, role: Role, burst: usize, into_collector: bool) -> Queue {
    match (live, role.output()) {
        (false, _) => Queue::FILE,
        (true, Some(item)) if item == Item::BATCHES => Queue::LIVE_BATCHES,
        // After a collector (a shared detect) live frames come in bursts: dropping all but
        // the newest of each would lose most of them; they were let in at the source's edge.
        (true, _) if burst > 1 => Queue {
            size: burst,
            policy: super::EdgePolicy::Block,
        },
        (true, _) if into_collector => Queue::LIVE_INTO_COLLECTOR,
        (true, _) => Queue::LIVE,
    }
}

/// A node while the graph is being built.
struct Pending {
    kind: &'static str,
    role: Role,
    name: Option<String>,
    element: Box<dyn Element>,
    /// Edge settings from a `queue` after it.
    queue: QueueSettings,
}

/// One chain of the description, checked.
struct Chain {
    nodes: Vec<Pending>,
    /// `NAME.` the chain ends in.
    /// The stage it feeds by name, and whether its frames have their boxes by then.
    target: Option<(String, Span, bool)>,
    /// What the chain gives at its end.
    item: Option<Item>,
    /// The span of its last element (for "ends early" messages).
    last: Span,
    /// Whether its items carry boxes by the end (a boxes stage, or a source that brings them).
    has_boxes: bool,
    /// The roles met so far (and those they provide).
    seen: Vec<Role>,
    /// The highest rank met so far.
    rank: u8,
    /// A whole pipeline's chain, or a stream to add to a running one.
    shape: Shape,
}

impl Chain {
    fn build(
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
            let live = crate::source::fragment_is_live(&fragment);
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
    fn set_head(
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
    fn place(
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
    fn met(&mut self, decl: &StageDecl) {
        self.rank = decl.role.rank().unwrap_or(self.rank).max(self.rank);
        self.seen.push(decl.role);
        self.seen.extend(decl.provides);
        self.has_boxes |= self.seen.contains(&Role::Boxes);
        self.item = decl.role.output();
    }

    /// Put in the stage `kind` with its defaults, before the stage at `span`.
    fn implied(
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
    fn boxed(&self, desc: &Description, registry: &Registry) -> Result<(), DescribeError> {
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
    fn expected(&self, registry: &Registry) -> String {
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

fn names(registry: &Registry, keep: impl Fn(&StageDecl) -> bool) -> String {
    let v: Vec<String> = registry
        .decls()
        .iter()
        .filter(|d| keep(d))
        .map(|d| format!("'{}'", d.name))
        .collect();
    format!("one of {}", v.join(", "))
}

/// Chains into one graph: references resolved, streams numbered, queues and budget settled,
/// nodes ordered upstream first.
fn assemble(
    desc: &Description,
    registry: &Registry,
    chains: Vec<Chain>,
    need_source: bool,
) -> Result<Graph, DescribeError> {
    let ends: Vec<&Chain> = chains.iter().filter(|c| c.target.is_none()).collect();
    if let Some(second) = ends.get(1) {
        return Err(desc.error(
            second.last,
            "a second chain ends in a sink: a pipeline has one (branches feed its stages by name)",
        ));
    }
    let mut nodes: Vec<Pending> = Vec::new();
    let mut chain_of: Vec<(usize, usize)> = Vec::new(); // (first node, last node) per chain
    let mut targets: Vec<(usize, String, Span, Option<Item>, bool)> = Vec::new();
    for c in chains {
        let first = nodes.len();
        let last = first + c.nodes.len() - 1;
        if let Some((name, span, boxed)) = c.target {
            targets.push((last, name, span, c.item, boxed));
        }
        nodes.extend(c.nodes);
        chain_of.push((first, last));
    }
    let mut output: Vec<Option<usize>> = vec![None; nodes.len()];
    for &(first, last) in &chain_of {
        for (i, o) in output.iter_mut().enumerate().take(last).skip(first) {
            *o = Some(i + 1);
        }
    }
    for (from, name, span, item, boxed) in targets {
        let to = target(desc, &nodes, from, &name, span, item)?;
        if !boxed && nodes[to].role != Role::Boxes {
            return Err(desc.error(
                span,
                format!(
                    "'{name}.' cannot take this branch: its frames have no boxes yet (a branch without a boxes stage joins a shared detect or boxes stage; '{name}' is a {} stage)",
                    nodes[to].kind
                ),
            ));
        }
        output[from] = Some(to);
    }
    if need_source && !nodes.iter().any(|n| n.role == Role::Source) {
        return Err(desc.error(
            desc.stages[0].span,
            format!(
                "the pipeline has no source: expected {}",
                names(registry, |d| d.role == Role::Source)
            ),
        ));
    }
    let order = upstream_first(&output);
    let mut stream = 0;
    for &i in &order {
        if nodes[i].role == Role::Source {
            nodes[i].element.set_stream(stream);
            stream += 1;
        }
    }
    let live = nodes.iter().any(|n| n.element.is_live());
    let budget = nodes
        .iter()
        .filter_map(|n| n.element.frame_interval())
        .min()
        .unwrap_or(crate::budget::DEFAULT_BUDGET);
    // The frames each stage may get at once: its own burst and those of the stages before it.
    let mut burst = vec![1usize; nodes.len()];
    for &i in &order {
        burst[i] = burst[i].max(nodes[i].element.burst());
        if let Some(o) = output[i] {
            burst[o] = burst[o].max(burst[i]);
        }
    }
    let into_collector: Vec<bool> = output
        .iter()
        .map(|o| o.is_some_and(|o| nodes[o].element.burst() > 1))
        .collect();
    let rows = rows(&nodes, &output);
    let place: HashMap<usize, usize> = order.iter().enumerate().map(|(k, i)| (*i, k)).collect();
    let mut slots: Vec<Option<Pending>> = nodes.into_iter().map(Some).collect();
    let nodes = order
        .iter()
        .map(|&i| {
            let n = slots[i].take().expect("each node once");
            Node {
                kind: n.kind,
                role: n.role,
                name: n.name,
                row: rows[i].clone(),
                element: n.element,
                output: output[i].map(|o| place[&o]),
                queue: n
                    .queue
                    .resolve(default_queue(live, n.role, burst[i], into_collector[i])),
            }
        })
        .collect();
    Ok(Graph {
        nodes,
        budget: if budget.is_zero() {
            Duration::from_millis(1)
        } else {
            budget
        },
        overwrite: false,
    })
}

/// The node named `name` that the chain ending at node `from` (giving `item`) feeds.
fn target(
    desc: &Description,
    nodes: &[Pending],
    from: usize,
    name: &str,
    span: Span,
    item: Option<Item>,
) -> Result<usize, DescribeError> {
    let to = nodes
        .iter()
        .position(|n| n.name.as_deref() == Some(name))
        .ok_or_else(|| {
            let named = nodes.iter().filter_map(|n| n.name.as_deref());
            let hint = closest(name, named)
                .map(|c| format!(" (did you mean '{c}'?)"))
                .unwrap_or_else(|| " (give the stage it feeds name=...)".into());
            desc.error(span, format!("no stage is named '{name}'{hint}"))
        })?;
    let takes = nodes[to].role.input();
    if takes != item || to == from {
        return Err(desc.error(
            span,
            format!(
                "'{name}.' cannot take this branch: stage '{}' takes {}",
                nodes[to].kind,
                takes.map_or("nothing".into(), |i| i.to_string())
            ),
        ));
    }
    Ok(to)
}

/// Node indices ordered so that every node comes after the nodes feeding it (sources in
/// description order first).
fn upstream_first(output: &[Option<usize>]) -> Vec<usize> {
    let mut waiting: Vec<usize> = vec![0; output.len()];
    for o in output.iter().flatten() {
        waiting[*o] += 1;
    }
    let mut order = Vec::with_capacity(output.len());
    let mut ready: Vec<usize> = (0..output.len()).filter(|i| waiting[*i] == 0).collect();
    ready.reverse();
    while let Some(i) = ready.pop() {
        order.push(i);
        if let Some(o) = output[i] {
            waiting[o] -= 1;
            if waiting[o] == 0 {
                ready.push(o);
            }
        }
    }
    order
}

/// Each node's report row: sources share `decode`, sinks `sink`, other stages their kind; a
/// kind met twice on one path gets `#2`, `#3`, ...
fn rows(nodes: &[Pending], output: &[Option<usize>]) -> Vec<String> {
    let base = |n: &Pending| match n.role {
        Role::Source => "decode".to_string(),
        Role::Sink => "sink".to_string(),
        _ => n.kind.to_string(),
    };
    let mut rows: Vec<String> = nodes.iter().map(base).collect();
    for (i, n) in nodes.iter().enumerate() {
        if n.role != Role::Source {
            continue;
        }
        let mut at = Some(i);
        let mut seen: HashMap<String, usize> = HashMap::new();
        while let Some(j) = at {
            let k = seen.entry(base(&nodes[j])).or_default();
            *k += 1;
            if *k > 1 {
                rows[j] = format!("{}#{}", base(&nodes[j]), k);
            }
            at = output[j];
        }
    }
    rows
}

/// How many of `stages` form a GStreamer head (elements before the first octopipe stage).
fn gstreamer_head(
    desc: &Description,
    registry: &Registry,
    stages: &[StageDesc],
) -> Result<usize, DescribeError> {
    let mut head = 0;
    while head < stages.len() {
        let st = &stages[head];
        let element =
            (head > 0 && is_gstreamer_namesake(registry, st)) || is_gstreamer(desc, registry, st)?;
        if !element {
            break;
        }
        head += 1;
    }
    Ok(head)
}

/// Inside a GStreamer head: whether `st` names a GStreamer element that has an octopipe stage's
/// name (`queue`) and none of that stage's properties, and so is the GStreamer element.
fn is_gstreamer_namesake(registry: &Registry, st: &StageDesc) -> bool {
    let Some(decl) = registry.get(&st.kind) else {
        return false;
    };
    let octopipe_prop = st
        .props
        .iter()
        .any(|p| decl.props.iter().any(|d| d.name == p.key));
    !st.reference && !octopipe_prop && crate::source::element_exists(&st.kind)
}

/// The head's elements as gst-launch text, rebuilt from the parsed elements so that variables
/// are substituted. Every value is written so that GStreamer's parser gives the element exactly
/// that value and no value can end its element or chain ([`quote::gst_value`]); a key that is
/// not a property name, or a value with a control character, is an error at it.
fn fragment(desc: &Description, stages: &[StageDesc]) -> Result<String, DescribeError> {
    let mut elements = Vec::with_capacity(stages.len());
    for st in stages {
        let mut e = st.kind.clone();
        for p in &st.props {
            if !quote::gst_key(&p.key) {
                return Err(desc.error(
                    p.key_span,
                    format!("'{}' is not a GStreamer property name", p.key),
                ));
            }
            let value = quote::gst_value(&p.value)
                .map_err(|why| desc.error(p.value_span, format!("{}: {why}", p.key)))?;
            e += &format!(" {}={value}", p.key);
        }
        elements.push(e);
    }
    Ok(elements.join(" ! "))
}

pub(crate) fn unknown(desc: &Description, registry: &Registry, st: &StageDesc) -> DescribeError {
    let hint = closest(&st.kind, registry.names())
        .map(|c| format!(" (did you mean '{c}'?)"))
        .unwrap_or_else(|| {
            format!(
                " (stages: {})",
                registry.names().collect::<Vec<_>>().join(", ")
            )
        });
    desc.error(st.span, format!("unknown stage '{}'{hint}", st.kind))
}

/// Whether `st` names a GStreamer element or caps (an element of a branch's GStreamer head).
fn is_gstreamer(
    desc: &Description,
    registry: &Registry,
    st: &StageDesc,
) -> Result<bool, DescribeError> {
    if st.reference || registry.get(&st.kind).is_some() {
        return Ok(false);
    }
    if st.kind.contains('/') {
        super::caps::check(desc, st)?;
        return Ok(true);
    }
    // An installed element first: `queue2` is GStreamer's, not a misspelt `queue`.
    if crate::source::element_exists(&st.kind) {
        return Ok(true);
    }
    if closest(&st.kind, registry.names()).is_some() {
        return Err(unknown(desc, registry, st));
    }
    let elements = crate::source::element_names();
    let hint = closest(&st.kind, elements.iter().map(String::as_str))
        .map(|c| format!(" (did you mean the GStreamer element '{c}'?)"))
        .unwrap_or_default();
    Err(desc.error(
        st.span,
        format!(
            "unknown stage '{}': neither an octopipe stage ({}) nor an installed GStreamer element{hint}",
            st.kind,
            registry.names().collect::<Vec<_>>().join(", ")
        ),
    ))
}
