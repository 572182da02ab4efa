//! An ONNX file read into the engine's terms: its inputs and outputs with their shapes (the batch
//! symbolic), the default domain's opset, the nodes of the engine's op set with their attributes,
//! and the initializers as typed weights. The file is bounded (a size cap) and every weight's
//! declared size is checked against its bytes; an op outside the set, or an attribute value the
//! engine does not execute, refuses the model naming the node.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::proto;
pub use crate::weight::{ElemType, Weight, WeightData, WeightError};

/// The largest file [`Model::read`] takes (1 GiB; the shared CenterNet is ~8 MB).
pub const DEFAULT_SIZE_CAP: u64 = 1 << 30;

/// Why a model was refused.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read.
    #[error("cannot read the model {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file is larger than the cap.
    #[error("the model {} is larger than {cap} bytes (the engine's cap on a model file)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap it passed.
        cap: u64,
    },
    /// The bytes are not an ONNX model.
    #[error("the model {} is not a valid ONNX file: {source}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// prost's error.
        source: prost::DecodeError,
    },
    /// Something the model must have is missing or malformed (no graph, no opset, an input
    /// without a tensor type, ...).
    #[error("the model is malformed: {0}")]
    Malformed(String),
    /// A node whose op is outside the engine's set.
    #[error("unsupported op {op_type} (domain {domain:?}) at node {node:?}: the engine runs only {}", OP_SET.join(", "))]
    UnsupportedOp {
        /// The node's op type.
        op_type: String,
        /// The node's domain.
        domain: String,
        /// The node's name.
        node: String,
    },
    /// An attribute value the engine does not execute.
    #[error("node {node:?} ({op_type}): attribute {attribute} = {value} is not supported (the engine takes {supported})")]
    UnsupportedAttribute {
        /// The node's name.
        node: String,
        /// The node's op type.
        op_type: String,
        /// The attribute's name.
        attribute: String,
        /// Its value, as text.
        value: String,
        /// What the engine takes.
        supported: String,
    },
    /// A weight that cannot be read: its type, its location or its size.
    #[error(transparent)]
    Weight(#[from] WeightError),
}

/// The ops the engine plans and (later) executes; any other refuses the model.
pub const OP_SET: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Resize",
    "HardSwish",
    "HardSigmoid",
    "Add",
    "Mul",
    "Relu",
    "GlobalAveragePool",
    "Sigmoid",
    "Concat",
    "Transpose",
    "Clip",
];

/// One op of [`OP_SET`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Convolution (groups: depthwise and grouped).
    Conv,
    /// Transposed convolution.
    ConvTranspose,
    /// Bilinear resize.
    Resize,
    /// x * HardSigmoid(x) with slope 1/6.
    HardSwish,
    /// max(0, min(1, alpha * x + beta)).
    HardSigmoid,
    /// Broadcasting sum.
    Add,
    /// Broadcasting product.
    Mul,
    /// max(x, 0).
    Relu,
    /// Mean over H and W.
    GlobalAveragePool,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// Joins along an axis.
    Concat,
    /// Permutes the axes.
    Transpose,
    /// Clamps between constant bounds.
    Clip,
}

impl Op {
    /// The op of an ONNX op type in the default domain, if in the set.
    pub fn parse(op_type: &str) -> Option<Op> {
        Some(match op_type {
            "Conv" => Op::Conv,
            "ConvTranspose" => Op::ConvTranspose,
            "Resize" => Op::Resize,
            "HardSwish" => Op::HardSwish,
            "HardSigmoid" => Op::HardSigmoid,
            "Add" => Op::Add,
            "Mul" => Op::Mul,
            "Relu" => Op::Relu,
            "GlobalAveragePool" => Op::GlobalAveragePool,
            "Sigmoid" => Op::Sigmoid,
            "Concat" => Op::Concat,
            "Transpose" => Op::Transpose,
            "Clip" => Op::Clip,
            _ => return None,
        })
    }

    /// The ONNX op type.
    pub fn name(self) -> &'static str {
        OP_SET[self as usize]
    }

    /// An activation (one input, same shape, applied per element).
    pub fn is_activation(self) -> bool {
        matches!(
            self,
            Op::Relu | Op::HardSwish | Op::HardSigmoid | Op::Sigmoid | Op::Clip
        )
    }
}

/// A dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(u64),
    /// A named free size (the batch).
    Symbolic(String),
}

/// A graph input or output: name, element type and declared shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    /// The tensor's name.
    pub name: String,
    /// Its element type.
    pub elem: ElemType,
    /// Its declared shape.
    pub dims: Vec<Dim>,
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// A float.
    Float(f32),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// Floats.
    Floats(Vec<f32>),
    /// Integers.
    Ints(Vec<i64>),
    /// Strings.
    Strs(Vec<String>),
}

/// A node of the engine's op set.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The node's name (as in the file; may be empty).
    pub name: String,
    /// Its op.
    pub op: Op,
    /// Its input tensors' names ("" for an omitted optional input).
    pub inputs: Vec<String>,
    /// Its output tensors' names.
    pub outputs: Vec<String>,
    /// Its attributes by name.
    pub attrs: BTreeMap<String, Attr>,
}

impl Node {
    /// An integer attribute, or `default` when absent.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.attrs.get(name) {
            Some(Attr::Int(v)) => *v,
            _ => default,
        }
    }

    /// A float attribute, or `default` when absent.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        match self.attrs.get(name) {
            Some(Attr::Float(v)) => *v,
            _ => default,
        }
    }

    /// An integer-list attribute, if present.
    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        match self.attrs.get(name) {
            Some(Attr::Ints(v)) => Some(v),
            _ => None,
        }
    }

    /// A string attribute, or `default` when absent.
    pub fn string<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        match self.attrs.get(name) {
            Some(Attr::Str(v)) => v,
            _ => default,
        }
    }
}

/// A model of the engine's op set, read from an ONNX file.
#[derive(Clone, Debug)]
pub struct Model {
    /// The file's IR version.
    pub ir_version: i64,
    /// The default domain's opset version.
    pub opset: i64,
    /// The graph's inputs (initializers listed as inputs left out).
    pub inputs: Vec<ValueInfo>,
    /// The graph's outputs.
    pub outputs: Vec<ValueInfo>,
    /// The nodes, in the file's (topological) order.
    pub nodes: Vec<Node>,
    /// The initializers by name.
    pub weights: BTreeMap<String, Weight>,
}

impl Model {
    /// Reads the ONNX file at `path` (at most [`DEFAULT_SIZE_CAP`] bytes).
    pub fn read(path: &Path) -> Result<Model, ModelError> {
        Model::read_capped(path, DEFAULT_SIZE_CAP)
    }

    /// Reads the ONNX file at `path`, refusing one over `cap` bytes (the read itself stops past
    /// the cap, whatever the file system says of the size).
    pub fn read_capped(path: &Path, cap: u64) -> Result<Model, ModelError> {
        let io = |source| ModelError::Io {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let too_large = || ModelError::TooLarge {
            path: path.to_owned(),
            cap,
        };
        if file.metadata().map_err(io)?.len() > cap {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        file.take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > cap {
            return Err(too_large());
        }
        let proto =
            proto::ModelProto::decode(bytes.as_slice()).map_err(|source| ModelError::Decode {
                path: path.to_owned(),
                source,
            })?;
        Model::from_proto(proto)
    }

    /// The model of decoded ONNX messages.
    pub fn from_proto(model: proto::ModelProto) -> Result<Model, ModelError> {
        let opset = model
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map(|o| o.version)
            .ok_or_else(|| ModelError::Malformed("no opset of the default domain".into()))?;
        let graph = model
            .graph
            .ok_or_else(|| ModelError::Malformed("no graph".into()))?;
        // Ops first: a model outside the set is refused naming its first such node, whatever
        // else it holds.
        let mut nodes = Vec::with_capacity(graph.node.len());
        for n in graph.node {
            nodes.push(node(n)?);
        }
        let mut weights = BTreeMap::new();
        for t in graph.initializer {
            let w = crate::weight::read(t)?;
            if weights.contains_key(&w.name) {
                return Err(ModelError::Malformed(format!(
                    "initializer {:?} given twice",
                    w.name
                )));
            }
            weights.insert(w.name.clone(), w);
        }
        let inputs = graph
            .input
            .into_iter()
            .filter(|v| !weights.contains_key(&v.name))
            .map(value_info)
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = graph
            .output
            .into_iter()
            .map(value_info)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Model {
            ir_version: model.ir_version,
            opset,
            inputs,
            outputs,
            nodes,
            weights,
        })
    }

    /// The bytes of all initializers.
    pub fn weight_bytes(&self) -> u64 {
        self.weights.values().map(Weight::byte_size).sum()
    }
}

/// A graph input or output of the file.
fn value_info(v: proto::ValueInfoProto) -> Result<ValueInfo, ModelError> {
    let tensor = v.r#type.and_then(|t| t.tensor_type).ok_or_else(|| {
        ModelError::Malformed(format!("graph input/output {:?} is not a tensor", v.name))
    })?;
    let elem = ElemType::from_onnx(tensor.elem_type).ok_or_else(|| {
        ModelError::Malformed(format!(
            "graph input/output {:?} has element type {} (the engine takes float16, float32)",
            v.name, tensor.elem_type
        ))
    })?;
    let shape = tensor.shape.ok_or_else(|| {
        ModelError::Malformed(format!("graph input/output {:?} has no shape", v.name))
    })?;
    let dims = shape
        .dim
        .into_iter()
        .map(|d| match (d.dim_value, d.dim_param) {
            (Some(n), _) if n >= 0 => Ok(Dim::Fixed(n as u64)),
            (None, Some(p)) if !p.is_empty() => Ok(Dim::Symbolic(p)),
            _ => Err(ModelError::Malformed(format!(
                "graph input/output {:?} has a dimension that is neither a size nor a name",
                v.name
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ValueInfo {
        name: v.name,
        elem,
        dims,
    })
}

/// A node of the set with its attributes, or the refusal naming it.
fn node(n: proto::NodeProto) -> Result<Node, ModelError> {
    let default_domain = n.domain.is_empty() || n.domain == "ai.onnx";
    let op = Op::parse(&n.op_type)
        .filter(|_| default_domain)
        .ok_or_else(|| ModelError::UnsupportedOp {
            op_type: n.op_type.clone(),
            domain: n.domain.clone(),
            node: n.name.clone(),
        })?;
    let mut attrs = BTreeMap::new();
    for a in n.attribute {
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        let value = match a.r#type {
            1 => Attr::Float(a.f),
            2 => Attr::Int(a.i),
            3 => Attr::Str(text(a.s)),
            6 => Attr::Floats(a.floats),
            7 => Attr::Ints(a.ints),
            8 => Attr::Strs(a.strings.into_iter().map(text).collect()),
            other => {
                return Err(ModelError::UnsupportedAttribute {
                    node: n.name.clone(),
                    op_type: n.op_type.clone(),
                    attribute: a.name,
                    value: format!("of attribute type {other}"),
                    supported: "float, int, string and their lists".into(),
                })
            }
        };
        attrs.insert(a.name, value);
    }
    let node = Node {
        name: n.name,
        op,
        inputs: n.input,
        outputs: n.output,
        attrs,
    };
    check_attributes(&node)?;
    Ok(node)
}

/// Refuses attribute values the engine does not execute, naming them.
fn check_attributes(node: &Node) -> Result<(), ModelError> {
    let refuse = |attribute: &str, value: String, supported: &str| {
        Err(ModelError::UnsupportedAttribute {
            node: node.name.clone(),
            op_type: node.op.name().into(),
            attribute: attribute.into(),
            value,
            supported: supported.into(),
        })
    };
    let string = |name: &str, default: &str, allowed: &[&str]| {
        let v = node.string(name, default);
        if allowed.contains(&v) {
            Ok(())
        } else {
            refuse(name, format!("{v:?}"), &allowed.join(" or "))
        }
    };
    match node.op {
        Op::Conv => string("auto_pad", "NOTSET", &["NOTSET", "VALID"]),
        Op::ConvTranspose => {
            string("auto_pad", "NOTSET", &["NOTSET"])?;
            if node.attrs.contains_key("output_shape") {
                return refuse("output_shape", "given".into(), "pads instead");
            }
            Ok(())
        }
        // What the shared CenterNet's upsampling uses: bilinear, asymmetric coordinates.
        Op::Resize => {
            string("mode", "nearest", &["linear"])?;
            string(
                "coordinate_transformation_mode",
                "half_pixel",
                &["asymmetric"],
            )?;
            for (name, allowed) in [("exclude_outside", 0), ("antialias", 0)] {
                let v = node.int(name, 0);
                if v != allowed {
                    return refuse(name, v.to_string(), &allowed.to_string());
                }
            }
            if node.attrs.contains_key("axes") {
                return refuse("axes", "given".into(), "all axes (no axes attribute)");
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
