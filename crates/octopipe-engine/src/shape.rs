//! Shape inference over a [`Model`]'s graph for a given batch: every tensor's shape and element
//! type, with the model's own input size (the shared CenterNet's NHWC input, then its leading
//! Transpose to NCHW, is inferred like any other node).

use std::collections::HashMap;

use crate::model::{Dim, ElemType, Model, Node, Op};

/// The largest batch the planner takes (its byte counts stay far from overflowing).
pub const MAX_BATCH: u64 = 1 << 16;

/// The most elements one tensor may have (about 10^12, past any GPU's memory): every size the
/// planner and the interpreter compute from shapes stays far from overflowing.
pub const MAX_ELEMENTS: u64 = 1 << 40;

/// A tensor's index in [`Shapes::tensors`].
pub type TensorId = usize;

/// Why the graph's shapes could not be inferred.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The batch asked for is 0 or over [`MAX_BATCH`].
    #[error("batch {0} is out of range (1 to {MAX_BATCH})")]
    Batch(u64),
    /// A graph input the engine cannot size.
    #[error("graph input {name:?}: {reason}")]
    Input {
        /// The input.
        name: String,
        /// Why.
        reason: String,
    },
    /// A node reads a tensor that nothing gives before it.
    #[error(
        "node {node:?} reads tensor {tensor:?}, which no graph input, weight or earlier node gives"
    )]
    UnknownTensor {
        /// The node.
        node: String,
        /// The tensor.
        tensor: String,
    },
    /// A node's inputs do not fit its op.
    #[error("node {node:?} ({op}): {reason}")]
    Node {
        /// The node.
        node: String,
        /// Its op type.
        op: &'static str,
        /// Why.
        reason: String,
    },
    /// A tensor (an input, a weight or a node's output) larger than [`MAX_ELEMENTS`].
    #[error("tensor {name:?} of shape {shape:?} has more than {MAX_ELEMENTS} elements (2^40){at}")]
    TooLarge {
        /// The tensor.
        name: String,
        /// Its shape.
        shape: Vec<u64>,
        /// Where it comes from, for the message (`", the output of node \"c1\" (Conv)"`, or
        /// empty).
        at: String,
    },
    /// A graph output that is not given, or not as declared.
    #[error("graph output {name:?}: {reason}")]
    Output {
        /// The output.
        name: String,
        /// Why.
        reason: String,
    },
}

/// Where a tensor comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A graph input.
    Input,
    /// An initializer.
    Weight,
    /// The output of node `n` (its index in [`Model::nodes`]).
    Node(usize),
}

/// A tensor's inferred type and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub elem: ElemType,
    /// Its shape, batch included.
    pub shape: Vec<u64>,
    /// Where it comes from.
    pub source: Source,
}

impl TensorInfo {
    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem.size()
    }
}

/// The tensors a node reads and writes.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeIo {
    /// Its inputs (`None` for an omitted optional input).
    pub inputs: Vec<Option<TensorId>>,
    /// Its outputs.
    pub outputs: Vec<TensorId>,
}

/// Every tensor of the graph with its shape, for one batch.
#[derive(Clone, Debug)]
pub struct Shapes {
    /// The batch the shapes are for.
    pub batch: u64,
    /// The tensors.
    pub tensors: Vec<TensorInfo>,
    /// Each node's tensors, in the order of [`Model::nodes`].
    pub nodes: Vec<NodeIo>,
    /// The graph outputs' tensors.
    pub outputs: Vec<TensorId>,
    ids: HashMap<String, TensorId>,
}

impl Shapes {
    /// The tensor of a name.
    pub fn id(&self, name: &str) -> Option<TensorId> {
        self.ids.get(name).copied()
    }

    /// The tensor of a name's info.
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.id(name).map(|i| &self.tensors[i])
    }
}

/// Infers every tensor's shape for `batch` images.
pub fn infer(model: &Model, batch: u64) -> Result<Shapes, ShapeError> {
    if batch == 0 || batch > MAX_BATCH {
        return Err(ShapeError::Batch(batch));
    }
    let mut s = Shapes {
        batch,
        tensors: Vec::new(),
        nodes: Vec::with_capacity(model.nodes.len()),
        outputs: Vec::new(),
        ids: HashMap::new(),
    };
    for w in model.weights.values() {
        add(
            &mut s,
            model,
            &w.name,
            w.elem,
            w.dims.clone(),
            Source::Weight,
        )?;
    }
    for input in &model.inputs {
        let input_error = |reason: String| ShapeError::Input {
            name: input.name.clone(),
            reason,
        };
        let mut shape = Vec::with_capacity(input.dims.len());
        for (axis, d) in input.dims.iter().enumerate() {
            shape.push(match (axis, d) {
                (0, Dim::Symbolic(_)) => batch,
                (0, Dim::Fixed(n)) if *n == batch => batch,
                (0, Dim::Fixed(n)) => {
                    return Err(input_error(format!(
                        "its batch is fixed at {n}, not {batch}"
                    )))
                }
                (_, Dim::Fixed(n)) => *n,
                (_, Dim::Symbolic(p)) => {
                    return Err(input_error(format!(
                        "axis {axis} is free ({p:?}): only the batch may be"
                    )))
                }
            });
        }
        add(&mut s, model, &input.name, input.elem, shape, Source::Input)?;
    }
    for (index, node) in model.nodes.iter().enumerate() {
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for name in &node.inputs {
            if name.is_empty() {
                inputs.push(None);
                continue;
            }
            let id = s.id(name).ok_or_else(|| ShapeError::UnknownTensor {
                node: node.name.clone(),
                tensor: name.clone(),
            })?;
            inputs.push(Some(id));
        }
        // Every op of the set gives one tensor.
        if node.outputs.len() != 1 || node.outputs[0].is_empty() {
            return Err(node_error(
                node,
                format!("it gives {} outputs, not one", node.outputs.len()),
            ));
        }
        let (elem, shape) = infer_node(model, &s, node, &inputs)?;
        let mut outputs = Vec::with_capacity(node.outputs.len());
        for name in &node.outputs {
            if s.ids.contains_key(name) {
                return Err(node_error(
                    node,
                    format!("its output {name:?} is given twice in the graph"),
                ));
            }
            outputs.push(add(
                &mut s,
                model,
                name,
                elem,
                shape.clone(),
                Source::Node(index),
            )?);
        }
        s.nodes.push(NodeIo { inputs, outputs });
    }
    for out in &model.outputs {
        let output_error = |reason: String| ShapeError::Output {
            name: out.name.clone(),
            reason,
        };
        let id = s
            .id(&out.name)
            .ok_or_else(|| output_error("no node gives it".into()))?;
        let t = &s.tensors[id];
        let fits = t.shape.len() == out.dims.len()
            && t.shape
                .iter()
                .zip(&out.dims)
                .enumerate()
                .all(|(axis, (&n, d))| match d {
                    Dim::Fixed(m) => n == *m,
                    Dim::Symbolic(_) => axis != 0 || n == batch,
                });
        if !fits || t.elem != out.elem {
            return Err(output_error(format!(
                "inferred {:?} {:?}, declared {:?} {:?}",
                t.elem, t.shape, out.elem, out.dims
            )));
        }
        s.outputs.push(id);
    }
    Ok(s)
}

/// Adds a tensor of `model`, returning its id; one of more than [`MAX_ELEMENTS`] elements (or
/// with an axis of more, whatever the others) is refused, naming the node that gives it.
fn add(
    s: &mut Shapes,
    model: &Model,
    name: &str,
    elem: ElemType,
    shape: Vec<u64>,
    source: Source,
) -> Result<TensorId, ShapeError> {
    let elements = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d).filter(|_| d <= MAX_ELEMENTS));
    if elements.is_none_or(|n| n > MAX_ELEMENTS) {
        let at = match source {
            Source::Node(i) => {
                let n = &model.nodes[i];
                format!(", the output of node {:?} ({})", n.name, n.op.name())
            }
            Source::Input | Source::Weight => String::new(),
        };
        return Err(ShapeError::TooLarge {
            name: name.to_owned(),
            shape,
            at,
        });
    }
    let id = s.tensors.len();
    s.tensors.push(TensorInfo {
        name: name.to_owned(),
        elem,
        shape,
        source,
    });
    s.ids.insert(name.to_owned(), id);
    Ok(id)
}

fn node_error(node: &Node, reason: String) -> ShapeError {
    ShapeError::Node {
        node: node.name.clone(),
        op: node.op.name(),
        reason,
    }
}

/// The element type and shape of a node's outputs.
fn infer_node(
    model: &Model,
    s: &Shapes,
    node: &Node,
    inputs: &[Option<TensorId>],
) -> Result<(ElemType, Vec<u64>), ShapeError> {
    let fail = |reason: String| Err(node_error(node, reason));
    let input = |i: usize| inputs.get(i).copied().flatten().map(|id| &s.tensors[id]);
    let Some(x) = input(0) else {
        return fail("its first input is missing".into());
    };
    let constant = |i: usize, what: &str| match input(i) {
        Some(t) if t.source == Source::Weight => Ok(Some(t)),
        Some(t) => Err(node_error(
            node,
            format!("its {what} {:?} must be a weight (an initializer)", t.name),
        )),
        None => Ok(None),
    };
    match node.op {
        Op::Conv | Op::ConvTranspose => {
            let Some(w) = constant(1, "weight")? else {
                return fail("its weight is missing".into());
            };
            conv_shape(node, x, w, constant(2, "bias")?).map(|shape| (x.elem, shape))
        }
        op if op.is_activation() => {
            if op == Op::Clip {
                for (i, what) in [(1, "min"), (2, "max")] {
                    if let Some(t) = constant(i, what)? {
                        if t.shape.iter().product::<u64>() != 1 {
                            return fail(format!("its {what} is not a scalar"));
                        }
                    }
                }
            }
            Ok((x.elem, x.shape.clone()))
        }
        Op::Add | Op::Mul => {
            let Some(y) = input(1) else {
                return fail("its second input is missing".into());
            };
            if x.elem != y.elem {
                return fail(format!("adds or multiplies {:?} and {:?}", x.elem, y.elem));
            }
            match broadcast(&x.shape, &y.shape) {
                Some(shape) => Ok((x.elem, shape)),
                None => fail(format!(
                    "shapes {:?} and {:?} do not broadcast",
                    x.shape, y.shape
                )),
            }
        }
        Op::GlobalAveragePool => {
            if x.shape.len() < 3 {
                return fail(format!("its input {:?} has no spatial axes", x.shape));
            }
            let mut shape = x.shape.clone();
            shape[2..].iter_mut().for_each(|d| *d = 1);
            Ok((x.elem, shape))
        }
        Op::Transpose => {
            let rank = x.shape.len();
            let default: Vec<i64> = (0..rank as i64).rev().collect();
            let perm = node.ints("perm").unwrap_or(&default);
            let mut seen = vec![false; rank];
            let mut shape = Vec::with_capacity(rank);
            for &p in perm {
                match usize::try_from(p).ok().filter(|&p| p < rank && !seen[p]) {
                    Some(p) => {
                        seen[p] = true;
                        shape.push(x.shape[p]);
                    }
                    None => {
                        return fail(format!("perm {perm:?} is not a permutation of {rank} axes"))
                    }
                }
            }
            if shape.len() != rank {
                return fail(format!("perm {perm:?} is not a permutation of {rank} axes"));
            }
            Ok((x.elem, shape))
        }
        Op::Concat => {
            let rank = x.shape.len() as i64;
            let axis = node.int("axis", 1);
            let axis = if axis < 0 { axis + rank } else { axis };
            if !(0..rank).contains(&axis) {
                return fail(format!(
                    "axis {} is outside rank {rank}",
                    node.int("axis", 1)
                ));
            }
            let axis = axis as usize;
            let mut shape = x.shape.clone();
            for t in inputs.iter().skip(1).flatten().map(|&id| &s.tensors[id]) {
                let fits = t.elem == x.elem
                    && t.shape.len() == x.shape.len()
                    && (0..x.shape.len()).all(|a| a == axis || t.shape[a] == x.shape[a]);
                if !fits {
                    return fail(format!(
                        "joins {:?} and {:?} on axis {axis}",
                        x.shape, t.shape
                    ));
                }
                shape[axis] += t.shape[axis];
            }
            Ok((x.elem, shape))
        }
        Op::Resize => {
            // Opset 10: (X, scales); 11 and later: (X, roi, scales, sizes).
            let (scales, sizes) = if model.opset < 11 {
                (constant(1, "scales")?, None)
            } else {
                (constant(2, "scales")?, constant(3, "sizes")?)
            };
            resize_shape(model, node, x, scales, sizes).map(|shape| (x.elem, shape))
        }
        _ => unreachable!("every op is matched above"),
    }
}

/// A (transposed) convolution's output shape, its weight and bias checked.
fn conv_shape(
    node: &Node,
    x: &TensorInfo,
    w: &TensorInfo,
    b: Option<&TensorInfo>,
) -> Result<Vec<u64>, ShapeError> {
    let fail = |reason: String| Err(node_error(node, reason));
    if x.shape.len() != 4 || w.shape.len() != 4 {
        return fail(format!(
            "2-D convolutions only: input {:?}, weight {:?}",
            x.shape, w.shape
        ));
    }
    if w.elem != x.elem || b.is_some_and(|b| b.elem != x.elem) {
        return fail(format!(
            "its weight or bias is not of its input's type {:?}",
            x.elem
        ));
    }
    let group = node.int("group", 1);
    let group = u64::try_from(group)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| node_error(node, format!("group {group} is not positive")))?;
    let transposed = node.op == Op::ConvTranspose;
    // Saturated: a product past u64 fits no input's channels, and is refused below.
    let (c, out) = if transposed {
        (w.shape[0], w.shape[1].saturating_mul(group))
    } else {
        (w.shape[1].saturating_mul(group), w.shape[0])
    };
    if c != x.shape[1] || out % group != 0 {
        return fail(format!(
            "input {:?} does not fit weight {:?} with group {group}",
            x.shape, w.shape
        ));
    }
    if let Some(b) = b {
        if b.shape != [out] {
            return fail(format!("bias {:?} is not [{out}]", b.shape));
        }
    }
    let list = |name: &str, default: u64, len: usize| -> Result<Vec<u64>, ShapeError> {
        match node.ints(name) {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len && v.iter().all(|&n| n >= 0) => {
                Ok(v.iter().map(|&n| n as u64).collect())
            }
            Some(v) => Err(node_error(node, format!("{name} {v:?} is not {len} sizes"))),
        }
    };
    let kernel = list("kernel_shape", 0, 2)?;
    if node.ints("kernel_shape").is_some() && kernel[..] != w.shape[2..] {
        return fail(format!(
            "kernel_shape {kernel:?} is not the weight's {:?}",
            &w.shape[2..]
        ));
    }
    let strides = list("strides", 1, 2)?;
    let dilations = list("dilations", 1, 2)?;
    let valid = node.string("auto_pad", "NOTSET") == "VALID";
    let pads = if valid {
        vec![0; 4]
    } else {
        list("pads", 0, 4)?
    };
    let out_pad = list("output_padding", 0, 2)?;
    if strides.contains(&0) || dilations.contains(&0) {
        return fail("a stride or dilation of 0".into());
    }
    let mut shape = vec![x.shape[0], out, 0, 0];
    for a in 0..2 {
        // Checked: the attributes are the file's (a stride of 2^63 is no error of ours).
        let size = (|| {
            let extent = dilations[a]
                .checked_mul(w.shape[2 + a].max(1) - 1)?
                .checked_add(1)?;
            let pad = pads[a].checked_add(pads[a + 2])?;
            if transposed {
                strides[a]
                    .checked_mul(x.shape[2 + a].max(1) - 1)?
                    .checked_add(out_pad[a])?
                    .checked_add(extent)?
                    .checked_sub(pad)
            } else {
                Some(x.shape[2 + a].checked_add(pad)?.checked_sub(extent)? / strides[a] + 1)
            }
        })();
        match size.filter(|&n| n > 0) {
            Some(n) => shape[2 + a] = n,
            None => {
                return fail(format!(
                    "its output is empty or past any size on axis {} (pads {pads:?}, strides \
                     {strides:?}, dilations {dilations:?})",
                    2 + a
                ))
            }
        }
    }
    Ok(shape)
}

/// A Resize's output shape, from its constant scales or sizes.
fn resize_shape(
    model: &Model,
    node: &Node,
    x: &TensorInfo,
    scales: Option<&TensorInfo>,
    sizes: Option<&TensorInfo>,
) -> Result<Vec<u64>, ShapeError> {
    let fail = |reason: String| Err(node_error(node, reason));
    let values = |t: &TensorInfo| model.weights[&t.name].data.to_f32();
    let rank = x.shape.len();
    let shape: Vec<u64> = match (scales.filter(|t| !t.shape.contains(&0)), sizes) {
        (Some(t), _) => {
            let scales = values(t);
            if scales.len() != rank || scales.iter().any(|&f| !(f > 0.0 && f <= 1024.0)) {
                return fail(format!(
                    "scales {scales:?} are not {rank} sizes in (0, 1024]"
                ));
            }
            x.shape
                .iter()
                .zip(&scales)
                .map(|(&n, &f)| (n as f64 * f as f64).floor() as u64)
                .collect()
        }
        (None, Some(t)) => {
            let sizes = values(t);
            if sizes.len() != rank || sizes.iter().any(|n| !(1.0..=1e6).contains(n)) {
                return fail(format!("sizes {sizes:?} are not {rank} sizes"));
            }
            sizes.iter().map(|&n| n as u64).collect()
        }
        (None, None) => return fail("neither scales nor sizes".into()),
    };
    if rank != 4 || shape[..2] != x.shape[..2] || shape.contains(&0) {
        return fail(format!(
            "resizes {:?} to {shape:?}: only H and W of an NCHW tensor",
            x.shape
        ));
    }
    Ok(shape)
}

/// Numpy's broadcast of two shapes, if they broadcast.
pub fn broadcast(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let rank = a.len().max(b.len());
    let at = |s: &[u64], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}
