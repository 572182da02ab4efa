//! Helpers of the engine's tests: ONNX models built in the test (encoded with prost), and the
//! shared data's convention (a missing prerequisite skips with a printed reason, and fails under
//! CI=true).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use octopipe_engine::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};

/// ONNX's FLOAT16 and FLOAT codes.
pub const F16: i32 = 10;
pub const F32: i32 = 1;

/// Under CI a missing prerequisite is a failure, elsewhere a printed skip.
pub fn skip(reason: &str) -> bool {
    if std::env::var_os("CI").is_some() {
        panic!("prerequisite missing under CI: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    true
}

/// The shared data folder ($OCTOPIPE_DATA, else the workspace's ../shared/data), if it has the
/// shared CenterNet.
pub fn shared_centernet() -> Option<PathBuf> {
    let dir = std::env::var_os("OCTOPIPE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/data"));
    let model = dir.join("models/coco-centernet-512.onnx");
    if model.is_file() {
        Some(model)
    } else {
        skip(&format!(
            "the shared CenterNet is not at {} (set OCTOPIPE_DATA)",
            model.display()
        ));
        None
    }
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh temporary folder of this test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("octopipe-engine-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A graph under construction.
#[derive(Default)]
pub struct Graph {
    pub proto: GraphProto,
}

/// A dimension: -1 for the symbolic batch.
fn dims(shape: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape
            .iter()
            .map(|&d| {
                if d < 0 {
                    Dimension {
                        dim_value: None,
                        dim_param: Some("batch".into()),
                    }
                } else {
                    Dimension {
                        dim_value: Some(d),
                        dim_param: None,
                    }
                }
            })
            .collect(),
    }
}

fn value(name: &str, elem: i32, shape: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: elem,
                shape: Some(dims(shape)),
            }),
        }),
    }
}

/// An int attribute.
pub fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: 2,
        ..Default::default()
    }
}

/// A float attribute.
pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f: v,
        r#type: 1,
        ..Default::default()
    }
}

/// An int-list attribute.
pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: 7,
        ..Default::default()
    }
}

/// A string attribute.
pub fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        s: v.as_bytes().to_vec(),
        r#type: 3,
        ..Default::default()
    }
}

impl Graph {
    /// A graph input (-1: the batch).
    pub fn input(&mut self, name: &str, elem: i32, shape: &[i64]) -> &mut Self {
        self.proto.input.push(value(name, elem, shape));
        self
    }

    /// A graph output (-1: the batch).
    pub fn output(&mut self, name: &str, elem: i32, shape: &[i64]) -> &mut Self {
        self.proto.output.push(value(name, elem, shape));
        self
    }

    /// An FP16 weight in raw_data, values 0.01 * i.
    pub fn weight_f16(&mut self, name: &str, shape: &[i64]) -> &mut Self {
        let n: i64 = shape.iter().product();
        let raw = (0..n)
            .flat_map(|i| half::f16::from_f32(0.01 * i as f32).to_le_bytes())
            .collect();
        self.proto.initializer.push(TensorProto {
            dims: shape.to_vec(),
            data_type: F16,
            name: name.into(),
            raw_data: raw,
            ..Default::default()
        });
        self
    }

    /// An FP32 weight in the typed field.
    pub fn weight_f32(&mut self, name: &str, shape: &[i64], values: &[f32]) -> &mut Self {
        self.proto.initializer.push(TensorProto {
            dims: shape.to_vec(),
            data_type: F32,
            name: name.into(),
            float_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// A node of the default domain.
    pub fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> &mut Self {
        self.proto.node.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            op_type: op.into(),
            attribute: attrs,
            domain: String::new(),
        });
        self
    }

    /// The model of the graph at `opset`.
    pub fn model(&self, opset: i64) -> ModelProto {
        ModelProto {
            ir_version: 8,
            producer_name: "octopipe-engine tests".into(),
            graph: Some(self.proto.clone()),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: opset,
            }],
        }
    }
}

/// Runs python3 with `args` in the workspace; its stdout, or None (a printed skip) when it
/// cannot run.
pub fn python(args: &[&str]) -> Option<String> {
    let out = Command::new("python3")
        .args(args)
        .current_dir(workspace())
        .output();
    match out {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => {
            skip(&format!(
                "python3 {} failed (pip install -r scripts/requirements.txt): {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
            None
        }
        Err(e) => {
            skip(&format!("python3 does not run: {e}"));
            None
        }
    }
}

/// The six-class heads model (FP16 with `fp16`, else FP32) made into `dir`, with what onnx (Python) says of it: its initializers'
/// bytes and its Conv nodes.
pub fn heads_model(
    source: &Path,
    dir: &Path,
    fp16: bool,
) -> Option<(std::path::PathBuf, u64, usize)> {
    let out = dir.join(if fp16 { "heads16.onnx" } else { "heads32.onnx" });
    let (source, out_arg) = (source.to_str()?, out.to_str()?);
    let half: &[&str] = match fp16 {
        true => &["--fp16", "--io", "fp16", "--resize-fp16"],
        false => &[],
    };
    let mut args = vec!["scripts/make_centernet_heads.py", source, out_arg];
    args.extend_from_slice(half);
    args.extend_from_slice(&[
        "--fuse",
        "hardswish",
        "--logits",
        "--keep-classes",
        "0,1,2,3,5,7",
        "--drop-reshapes",
    ]);
    python(&args)?;
    let facts = python(&[
        "-c",
        "import sys, onnx\n\
         from onnx import numpy_helper\n\
         m = onnx.load(sys.argv[1])\n\
         b = sum(numpy_helper.to_array(t).nbytes for t in m.graph.initializer)\n\
         c = sum(n.op_type == 'Conv' for n in m.graph.node)\n\
         print(b, c)",
        out_arg,
    ])?;
    let mut words = facts.split_whitespace();
    let bytes = words.next()?.parse().ok()?;
    let convs = words.next()?.parse().ok()?;
    Some((out, bytes, convs))
}
