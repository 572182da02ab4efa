//! The few ONNX messages the engine reads, derived by hand with the field numbers of onnx.proto
//! (no protoc, no build script). Fields the engine does not read are left out: prost skips them
//! when decoding. Enumerations are kept as their integers (`data_type`, `elem_type`, the
//! attribute's `type`).

/// `onnx.ModelProto`: the file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// `ir_version = 1`.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// `producer_name = 2`.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// `graph = 7`.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// `opset_import = 8`.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `onnx.OperatorSetIdProto`: an operator set and its version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// `domain = 1` ("" or "ai.onnx": the default set).
    #[prost(string, tag = "1")]
    pub domain: String,
    /// `version = 2`.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `onnx.GraphProto`: nodes, weights, inputs and outputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// `node = 1`, in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// `name = 2`.
    #[prost(string, tag = "2")]
    pub name: String,
    /// `initializer = 5`: the weights.
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// `input = 11`.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// `output = 12`.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    /// `value_info = 13`.
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// `onnx.NodeProto`: one operator.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// `input = 1` (tensor names; "" for an omitted optional input).
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// `output = 2`.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// `name = 3`.
    #[prost(string, tag = "3")]
    pub name: String,
    /// `op_type = 4`.
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// `attribute = 5`.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// `domain = 7`.
    #[prost(string, tag = "7")]
    pub domain: String,
}

/// `onnx.AttributeProto` (graph and tensor attributes left out: no op of the engine's set has
/// one, and a node that does is refused by its op type first).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `f = 2`.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// `i = 3`.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// `s = 4`.
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// `floats = 7`.
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    /// `ints = 8`.
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    /// `strings = 9`.
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// `type = 20` (AttributeType: 1 FLOAT, 2 INT, 3 STRING, 4 TENSOR, 5 GRAPH, 6 FLOATS, 7 INTS,
    /// 8 STRINGS, ...).
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// `onnx.TensorProto`: a weight.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// `dims = 1`.
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// `data_type = 2` (1 FLOAT, 6 INT32, 7 INT64, 10 FLOAT16, ...).
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// `float_data = 4`.
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// `int32_data = 5` (INT32, and FLOAT16 as its bits).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// `int64_data = 7`.
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// `name = 8`.
    #[prost(string, tag = "8")]
    pub name: String,
    /// `raw_data = 9` (little-endian).
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// `data_location = 14` (0 DEFAULT, 1 EXTERNAL).
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// `onnx.ValueInfoProto`: a graph input's or output's name and type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `type = 2`.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `onnx.TypeProto` (its tensor case only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    /// `tensor_type = 1`.
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

/// `onnx.TypeProto.Tensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProtoTensor {
    /// `elem_type = 1`.
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    /// `shape = 2`.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `onnx.TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// `dim = 1`.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `onnx.TensorShapeProto.Dimension`: its `value` oneof as two optional fields (the same wire
/// format).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    /// `dim_value = 1`.
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    /// `dim_param = 2`.
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}
