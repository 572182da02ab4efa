//! The fusion plan: the graph as the steps the engine would run, each convolution with what
//! follows it fused into its epilogue, and a traffic model of the plan against the unfused graph.
//!
//! A convolution takes, in order, while each follower is the only consumer of what came before
//! it (and that is not a graph output):
//! - an activation (Relu, HardSwish, HardSigmoid, Sigmoid, Clip);
//! - a residual Add, whose other operand is a tensor of the same shape;
//! - a squeeze-excite gate Mul, whose other operand is a per-channel gate [N, C, 1, 1];
//! - a Mul or Add of a constant that does not grow the shape (a scale or shift).
//!
//! Before it, a gate Mul (x times a [N, C, 1, 1] gate) whose product only this convolution reads
//! is taken into its input: it reads x and the gate, never the product (the squeeze-excite blocks'
//! gate is computed from x itself, so it cannot follow x's own convolution). Its bias is in the
//! convolution. What cannot fuse (GlobalAveragePool, Resize, Concat, Transpose, an elementwise node
//! left alone) is a step of its own, with the activations that follow it when each is the only
//! reader of what came before (a Concat's Relu applied as it writes).
//!
//! The traffic model counts, per call, each tensor a step reads or writes once, and each weight
//! once; per image it divides by the batch. The unfused graph is one kernel per ONNX node, as ONNX
//! Runtime's CUDA provider runs it (a convolution's bias counted inside the convolution).

use std::fmt::Write;

use crate::model::{Model, Op};
use crate::shape::{self, ShapeError, Shapes, Source, TensorId};

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The graph's shapes do not infer.
    #[error(transparent)]
    Shape(#[from] ShapeError),
}

/// What a convolution step has fused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// A gate Mul on its input (x times a per-channel gate, read as x and the gate).
    GateIn,
    /// Its bias.
    Bias,
    /// An activation.
    Activation(Op),
    /// A residual Add.
    Residual,
    /// A per-channel gate Mul on its output.
    Gate,
    /// A Mul by a constant.
    Scale,
    /// An Add of a constant.
    Shift,
}

/// A step's kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A (transposed) convolution with what it fused.
    Conv {
        /// Conv or ConvTranspose.
        op: Op,
        /// Its group count (1: dense; the input's channels: depthwise).
        group: u64,
        /// What it fused, in order.
        fused: Vec<Fused>,
    },
    /// A node on its own.
    Single(Op),
    /// A node other than a convolution with the activations that follow it.
    Joined {
        /// The node's op.
        op: Op,
        /// The activations, in order.
        activations: Vec<Op>,
    },
}

impl StepKind {
    /// A short label ("Conv dw+bias+HardSwish", "Resize").
    pub fn label(&self, input_channels: u64) -> String {
        match self {
            StepKind::Single(op) => op.name().to_owned(),
            StepKind::Joined { op, activations } => activations
                .iter()
                .fold(op.name().to_owned(), |s, a| s + "+" + a.name()),
            StepKind::Conv { op, group, fused } => {
                let mut s = op.name().to_owned();
                if *group > 1 && *group == input_channels {
                    s.push_str(" dw");
                } else if *group > 1 {
                    let _ = write!(s, " g{group}");
                }
                for f in fused {
                    s.push('+');
                    s.push_str(match f {
                        Fused::GateIn => "gate-in",
                        Fused::Bias => "bias",
                        Fused::Activation(op) => op.name(),
                        Fused::Residual => "Add",
                        Fused::Gate => "gate",
                        Fused::Scale => "scale",
                        Fused::Shift => "shift",
                    });
                }
                s
            }
        }
    }
}

/// Bytes moved by a step or a graph, per call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Activations read.
    pub read: u64,
    /// Activations written.
    pub written: u64,
    /// Weights read (once per call).
    pub weights: u64,
}

impl Traffic {
    /// All bytes of one call (sums saturate: a model's sizes are the file's).
    pub fn total(&self) -> u64 {
        self.read
            .saturating_add(self.written)
            .saturating_add(self.weights)
    }

    /// Bytes per image at `batch` images a call.
    pub fn per_image(&self, batch: u64) -> f64 {
        self.total() as f64 / batch as f64
    }

    fn add(&mut self, other: Traffic) {
        self.read = self.read.saturating_add(other.read);
        self.written = self.written.saturating_add(other.written);
        self.weights = self.weights.saturating_add(other.weights);
    }
}

/// One step of the plan: the nodes it runs and the tensors it moves.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Its kind.
    pub kind: StepKind,
    /// The nodes it runs (indices into [`Model::nodes`]), in order.
    pub nodes: Vec<usize>,
    /// The activations it reads.
    pub inputs: Vec<TensorId>,
    /// The weights it reads.
    pub weights: Vec<TensorId>,
    /// The tensors it writes.
    pub outputs: Vec<TensorId>,
    /// Its traffic per call.
    pub traffic: Traffic,
}

/// The fusion plan of a model for a batch.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Every tensor's shape for the batch.
    pub shapes: Shapes,
    /// The steps, in an order that runs.
    pub steps: Vec<Step>,
    /// The plan's traffic per call.
    pub fused: Traffic,
    /// The unfused graph's traffic per call (one kernel per node).
    pub unfused: Traffic,
    /// The unfused graph's kernels (its nodes).
    pub unfused_kernels: usize,
}

impl Plan {
    /// Plans `model` for `batch` images a call.
    pub fn new(model: &Model, batch: u64) -> Result<Plan, PlanError> {
        let shapes = shape::infer(model, batch)?;
        let groups = fuse(model, &shapes);
        let mut steps = Vec::with_capacity(groups.len());
        let mut fused = Traffic::default();
        for (kind, nodes) in groups {
            let step = step(&shapes, kind, nodes);
            fused.add(step.traffic);
            steps.push(step);
        }
        let mut unfused = Traffic::default();
        for index in 0..model.nodes.len() {
            let kind = StepKind::Single(model.nodes[index].op);
            unfused.add(step(&shapes, kind, vec![index]).traffic);
        }
        Ok(Plan {
            shapes,
            steps,
            fused,
            unfused,
            unfused_kernels: model.nodes.len(),
        })
    }

    /// The unfused graph's traffic over the plan's.
    pub fn ratio(&self) -> f64 {
        self.unfused.total() as f64 / self.fused.total().max(1) as f64
    }

    /// A text table (step, kind, output shape, bytes per image) with the totals and the ratio of
    /// the unfused graph's traffic to the plan's.
    pub fn summary(&self) -> String {
        let batch = self.shapes.batch;
        let mut s = format!(
            "{:>4}  {:<36} {:<22} {:>14}\n",
            "step", "kind", "output shape", "bytes/image"
        );
        for (i, step) in self.steps.iter().enumerate() {
            let first = &self.shapes.tensors[step.inputs.first().copied().unwrap_or(0)];
            let channels = first.shape.get(1).copied().unwrap_or(0);
            let out = step
                .outputs
                .first()
                .map(|&o| format!("{:?}", self.shapes.tensors[o].shape))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{i:>4}  {:<36} {:<22} {:>14.0}",
                step.kind.label(channels),
                out,
                step.traffic.per_image(batch)
            );
        }
        let mb = |t: &Traffic| t.per_image(batch) / 1e6;
        let _ = writeln!(
            s,
            "plan: {} steps, {:.2} MB per image (activations {:.2} MB read, {:.2} MB written; weights {:.2} MB a call of {batch})",
            self.steps.len(),
            mb(&self.fused),
            self.fused.read as f64 / batch as f64 / 1e6,
            self.fused.written as f64 / batch as f64 / 1e6,
            self.fused.weights as f64 / 1e6,
        );
        let _ = writeln!(
            s,
            "unfused: {} kernels, {:.2} MB per image (activations {:.2} MB read, {:.2} MB written)",
            self.unfused_kernels,
            mb(&self.unfused),
            self.unfused.read as f64 / batch as f64 / 1e6,
            self.unfused.written as f64 / batch as f64 / 1e6,
        );
        let _ = writeln!(s, "unfused / fused traffic: {:.2}x", self.ratio());
        s
    }
}

/// A step's tensors and traffic: what its nodes read that no node of it wrote, and what it
/// wrote that something outside reads (or a graph output), each tensor once.
fn step(shapes: &Shapes, kind: StepKind, nodes: Vec<usize>) -> Step {
    let mut produced = Vec::new();
    for &n in &nodes {
        produced.extend(shapes.nodes[n].outputs.iter().copied());
    }
    let (mut inputs, mut weights) = (Vec::new(), Vec::new());
    for &n in &nodes {
        for &t in shapes.nodes[n].inputs.iter().flatten() {
            let list = if shapes.tensors[t].source == Source::Weight {
                &mut weights
            } else {
                &mut inputs
            };
            if !produced.contains(&t) && !list.contains(&t) {
                list.push(t);
            }
        }
    }
    let last = *nodes.last().expect("a step runs a node");
    let outputs = shapes.nodes[last].outputs.clone();
    let bytes = |list: &[TensorId]| {
        list.iter()
            .map(|&t| shapes.tensors[t].bytes())
            .fold(0, u64::saturating_add)
    };
    let traffic = Traffic {
        read: bytes(&inputs),
        written: bytes(&outputs),
        weights: bytes(&weights),
    };
    Step {
        kind,
        nodes,
        inputs,
        weights,
        outputs,
        traffic,
    }
}

/// Groups the nodes into steps (kind and nodes), in an order that runs: each step where its last
/// node was.
fn fuse(model: &Model, shapes: &Shapes) -> Vec<(StepKind, Vec<usize>)> {
    // Who reads each tensor (a node once per input slot; a graph output counts as a reader).
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); shapes.tensors.len()];
    for (n, io) in shapes.nodes.iter().enumerate() {
        for &t in io.inputs.iter().flatten() {
            readers[t].push(n);
        }
    }
    for &t in &shapes.outputs {
        readers[t].push(usize::MAX);
    }
    let only_reader = |t: TensorId| match readers[t][..] {
        [n] if n != usize::MAX => Some(n),
        _ => None,
    };
    let info = |t: TensorId| &shapes.tensors[t];
    let is_weight = |t: TensorId| info(t).source == Source::Weight;
    // A [N, C, 1, 1] activation gating an [N, C, H, W] one.
    let is_gate = |g: TensorId, x: TensorId| {
        let (g, x) = (&info(g).shape, &info(x).shape);
        g.len() == 4 && x.len() == 4 && g[..2] == x[..2] && g[2..] == [1, 1] && x != g
    };
    let operands = |n: usize| -> Option<(TensorId, TensorId)> {
        match shapes.nodes[n].inputs[..] {
            [Some(a), Some(b)] => Some((a, b)),
            _ => None,
        }
    };
    let mut taken = vec![false; model.nodes.len()];
    let mut steps: Vec<(usize, StepKind, Vec<usize>)> = Vec::new();
    for (c, node) in model.nodes.iter().enumerate() {
        if !matches!(node.op, Op::Conv | Op::ConvTranspose) || taken[c] {
            continue;
        }
        let mut nodes = vec![c];
        let mut fused = Vec::new();
        let x = shapes.nodes[c].inputs[0].expect("a convolution has its input");
        if let (Source::Node(m), Some(_)) = (info(x).source, only_reader(x)) {
            let gate_mul = model.nodes[m].op == Op::Mul
                && !taken[m]
                && operands(m).is_some_and(|(a, b)| {
                    !is_weight(a) && !is_weight(b) && (is_gate(a, b) || is_gate(b, a))
                });
            if gate_mul {
                nodes.insert(0, m);
                fused.push(Fused::GateIn);
            }
        }
        if shapes.nodes[c].inputs.get(2).copied().flatten().is_some() {
            fused.push(Fused::Bias);
        }
        let mut cur = shapes.nodes[c].outputs[0];
        while let Some(f) = only_reader(cur).filter(|&f| !taken[f]) {
            let op = model.nodes[f].op;
            let what = if op.is_activation() {
                Some(Fused::Activation(op))
            } else if let (Some((a, b)), true) = (operands(f), matches!(op, Op::Add | Op::Mul)) {
                let other = if a == cur { b } else { a };
                let same = shape::broadcast(&info(cur).shape, &info(other).shape).as_ref()
                    == Some(&info(cur).shape);
                match (op, other == cur, same, is_weight(other)) {
                    (_, true, _, _) | (_, _, false, _) => None,
                    (Op::Add, _, _, true) => Some(Fused::Shift),
                    (Op::Mul, _, _, true) => Some(Fused::Scale),
                    (Op::Add, _, _, false) if info(other).shape == info(cur).shape => {
                        Some(Fused::Residual)
                    }
                    (Op::Mul, _, _, false) if is_gate(other, cur) => Some(Fused::Gate),
                    _ => None,
                }
            } else {
                None
            };
            let Some(what) = what else { break };
            fused.push(what);
            nodes.push(f);
            cur = shapes.nodes[f].outputs[0];
        }
        for &n in &nodes {
            taken[n] = true;
        }
        let group = node.int("group", 1).max(1) as u64;
        let kind = StepKind::Conv {
            op: node.op,
            group,
            fused,
        };
        let at = *nodes.last().expect("the convolution");
        steps.push((at, kind, nodes));
    }
    // The rest, each with the activations that follow it (a Concat's or a Resize's Relu is
    // applied as the kernel writes).
    for (n, node) in model.nodes.iter().enumerate() {
        if taken[n] {
            continue;
        }
        let (mut nodes, mut activations) = (vec![n], Vec::new());
        let mut cur = shapes.nodes[n].outputs[0];
        while let Some(f) =
            only_reader(cur).filter(|&f| !taken[f] && model.nodes[f].op.is_activation())
        {
            taken[f] = true;
            activations.push(model.nodes[f].op);
            nodes.push(f);
            cur = shapes.nodes[f].outputs[0];
        }
        let kind = if activations.is_empty() {
            StepKind::Single(node.op)
        } else {
            StepKind::Joined {
                op: node.op,
                activations,
            }
        };
        steps.push((*nodes.last().expect("the node"), kind, nodes));
    }
    steps.sort_by_key(|(at, _, _)| *at);
    steps.into_iter().map(|(_, k, n)| (k, n)).collect()
}
