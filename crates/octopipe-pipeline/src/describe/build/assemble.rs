//! Description -> [`Graph`]: the chains checked, then assembled into one graph.

use std::collections::HashMap;
use std::time::Duration;

use super::super::{closest, expand_devices, DescribeError, Description, Span};
use super::super::{Builtin, EdgePolicy, Graph, Node, Queue};
use super::chain::Chain;
use super::pending::{names, Pending, Shape};
use octopipe_core::stage::{Item, Registry, Role};

/// Check `desc` against the built-in stages and make its graph.
pub fn build(desc: &Description) -> Result<Graph, DescribeError> {
    build_with(desc, &Registry::builtin())
}

/// Check `desc` against `registry` and make its graph. A batch stage given `devices=` is first
/// written out as one chain per GPU ([`expand_devices`], `all` counting the host's CUDA
/// devices), so every check below applies to each GPU's chain.
pub fn build_with(desc: &Description, registry: &Registry) -> Result<Graph, DescribeError> {
    let desc = expand_devices(desc, registry, &super::super::devices::cuda_devices)?;
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
    super::super::devices::refuse_devices(desc, registry)?;
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
            policy: EdgePolicy::Block,
        },
        (true, _) if into_collector => Queue::LIVE_INTO_COLLECTOR,
        (true, _) => Queue::LIVE,
    }
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
        .unwrap_or(octopipe_core::budget::DEFAULT_BUDGET);
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
