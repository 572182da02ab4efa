//! The engine's reading, shape inference and fusion plan on small models built here: each
//! fusion rule, each refusal.

mod common;

use common::{float, int, ints, string, Graph, F16, F32};
use octopipe_core::rng::Rng;
use octopipe_engine::model::Op;
use octopipe_engine::plan::{Fused, StepKind};
use octopipe_engine::{Model, ModelError, Plan, PlanError, ShapeError};
use prost::Message;

/// NHWC FP16 input, its Transpose to NCHW, then one block per fusion rule:
/// - c1: Conv + bias + HardSwish (its output read by three nodes: no further fusion);
/// - c2: depthwise Conv + bias + Relu (read by the pool and the gate);
/// - pool, s1: GlobalAveragePool (alone), then Conv + bias + HardSigmoid (the gate);
/// - c3: gate Mul on its input + Conv + bias + residual Add (the Add read twice: stops there);
/// - c4: Conv (no bias) + Clip + gate Mul + constant scale + Sigmoid (a graph output);
/// - c5: Conv + bias, read by a Relu and a Concat: the Relu is not fused;
/// - Resize (linear, asymmetric) and ConvTranspose + Relu of the Concat.
fn blocks() -> Graph {
    let mut g = Graph::default();
    g.input("x", F16, &[-1, 8, 8, 3])
        .weight_f16("w1", &[8, 3, 3, 3])
        .weight_f16("b1", &[8])
        .weight_f16("wdw", &[8, 1, 3, 3])
        .weight_f16("bdw", &[8])
        .weight_f16("wse", &[8, 8, 1, 1])
        .weight_f16("bse", &[8])
        .weight_f16("w3", &[8, 8, 1, 1])
        .weight_f16("b3", &[8])
        .weight_f16("w4", &[8, 8, 1, 1])
        .weight_f16("lo", &[])
        .weight_f16("hi", &[])
        .weight_f16("k", &[1, 8, 1, 1])
        .weight_f16("w5", &[4, 8, 1, 1])
        .weight_f16("b5", &[4])
        .weight_f16("wt", &[8, 2, 2, 2])
        .weight_f32("roi", &[0], &[])
        .weight_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]);
    let pad1 = || ints("pads", &[1, 1, 1, 1]);
    g.node(
        "Transpose",
        "to_nchw",
        &["x"],
        &["t"],
        vec![ints("perm", &[0, 3, 1, 2])],
    )
    .node("Conv", "c1", &["t", "w1", "b1"], &["c1"], vec![pad1()])
    .node("HardSwish", "a1", &["c1"], &["a1"], vec![])
    .node(
        "Conv",
        "c2",
        &["a1", "wdw", "bdw"],
        &["c2"],
        vec![pad1(), int("group", 8)],
    )
    .node("Relu", "r2", &["c2"], &["r2"], vec![])
    .node("GlobalAveragePool", "pool", &["r2"], &["g"], vec![])
    .node("Conv", "s1", &["g", "wse", "bse"], &["s1"], vec![])
    .node(
        "HardSigmoid",
        "hs",
        &["s1"],
        &["hs"],
        vec![float("alpha", 1.0 / 6.0)],
    )
    .node("Mul", "gate", &["r2", "hs"], &["m1"], vec![])
    .node("Conv", "c3", &["m1", "w3", "b3"], &["c3"], vec![])
    .node("Add", "residual", &["c3", "a1"], &["add1"], vec![])
    .node("Conv", "c4", &["add1", "w4"], &["c4"], vec![])
    .node("Clip", "clip", &["c4", "lo", "hi"], &["cl"], vec![])
    .node("Mul", "gate_out", &["hs", "cl"], &["gm"], vec![])
    .node("Mul", "scale", &["gm", "k"], &["sc"], vec![])
    .node("Sigmoid", "sig", &["sc"], &["out_a"], vec![])
    .node("Conv", "c5", &["add1", "w5", "b5"], &["c5"], vec![])
    .node("Relu", "r5", &["c5"], &["r5"], vec![])
    .node(
        "Concat",
        "cat",
        &["c5", "r5"],
        &["cat"],
        vec![int("axis", 1)],
    )
    .node(
        "Resize",
        "up",
        &["cat", "roi", "scales"],
        &["out_b"],
        vec![
            string("mode", "linear"),
            string("coordinate_transformation_mode", "asymmetric"),
        ],
    )
    .node(
        "ConvTranspose",
        "ct",
        &["cat", "wt"],
        &["ct"],
        vec![ints("strides", &[2, 2])],
    )
    .node("Relu", "rt", &["ct"], &["out_c"], vec![])
    .output("out_a", F16, &[-1, 8, 8, 8])
    .output("out_b", F16, &[-1, 8, 16, 16])
    .output("out_c", F16, &[-1, 2, 16, 16]);
    g
}

fn names(model: &Model, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|&n| model.nodes[n].name.clone()).collect()
}

#[test]
fn reads_the_graph_and_its_typed_weights() {
    let model = Model::from_proto(blocks().model(13)).expect("the model reads");
    assert_eq!(model.opset, 13);
    assert_eq!(model.nodes.len(), 22);
    assert_eq!(model.inputs.len(), 1);
    assert_eq!(model.outputs.len(), 3);
    let w1 = &model.weights["w1"];
    assert_eq!(w1.dims, [8, 3, 3, 3]);
    assert_eq!(w1.byte_size(), 8 * 3 * 3 * 3 * 2);
    assert_eq!(w1.data.to_f32()[100], half::f16::from_f32(1.0).to_f32());
    let scales = &model.weights["scales"];
    assert_eq!(scales.data.to_f32(), [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(scales.byte_size(), 16);
    let expected: u64 = model
        .weights
        .values()
        .map(|w| w.data.len() as u64 * w.elem.size())
        .sum();
    assert_eq!(model.weight_bytes(), expected);
    assert_eq!(model.weights["roi"].byte_size(), 0);
}

#[test]
fn plans_each_fusion_rule() {
    let model = Model::from_proto(blocks().model(13)).expect("the model reads");
    let plan = Plan::new(&model, 2).expect("the model plans");
    print!("{}", plan.summary());
    let got: Vec<(String, Vec<String>)> = plan
        .steps
        .iter()
        .map(|s| (s.kind.label(0), names(&model, &s.nodes)))
        .collect();
    let want: Vec<(&str, Vec<&str>)> = vec![
        ("Transpose", vec!["to_nchw"]),
        ("Conv+bias+HardSwish", vec!["c1", "a1"]),
        ("Conv g8+bias+Relu", vec!["c2", "r2"]),
        ("GlobalAveragePool", vec!["pool"]),
        ("Conv+bias+HardSigmoid", vec!["s1", "hs"]),
        ("Conv+gate-in+bias+Add", vec!["gate", "c3", "residual"]),
        (
            "Conv+Clip+gate+scale+Sigmoid",
            vec!["c4", "clip", "gate_out", "scale", "sig"],
        ),
        ("Conv+bias", vec!["c5"]),
        ("Relu", vec!["r5"]),
        ("Concat", vec!["cat"]),
        ("Resize", vec!["up"]),
        ("ConvTranspose+Relu", vec!["ct", "rt"]),
    ];
    let want: Vec<(String, Vec<String>)> = want
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(got, want);
    // The depthwise convolution is labelled so when its input's channels are known.
    let dw = &plan.steps[2];
    assert_eq!(dw.kind.label(8), "Conv dw+bias+Relu");
    // Every node in exactly one step.
    let mut all: Vec<usize> = plan.steps.iter().flat_map(|s| s.nodes.clone()).collect();
    all.sort();
    assert_eq!(all, (0..model.nodes.len()).collect::<Vec<_>>());

    // Shapes: the NHWC input transposed, the upsampled and transposed-convolved outputs.
    let shape = |name: &str| plan.shapes.get(name).expect(name).shape.clone();
    assert_eq!(shape("t"), [2, 3, 8, 8]);
    assert_eq!(shape("g"), [2, 8, 1, 1]);
    assert_eq!(shape("cat"), [2, 8, 8, 8]);
    assert_eq!(shape("out_b"), [2, 8, 16, 16]);
    assert_eq!(shape("out_c"), [2, 2, 16, 16]);

    // The gate-in step reads r2, the gate and a1 (the residual), never the product m1, and
    // writes add1 alone.
    let step = &plan.steps[5];
    let tensor_names = |ids: &[usize]| -> Vec<String> {
        ids.iter()
            .map(|&t| plan.shapes.tensors[t].name.clone())
            .collect()
    };
    assert_eq!(tensor_names(&step.inputs), ["r2", "hs", "a1"]);
    assert_eq!(tensor_names(&step.weights), ["w3", "b3"]);
    assert_eq!(tensor_names(&step.outputs), ["add1"]);
    let full = 2 * 8 * 8 * 8 * 2; // [2, 8, 8, 8] of FP16
    let gate = 2 * 8 * 2;
    assert_eq!(step.traffic.read, full + gate + full);
    assert_eq!(step.traffic.written, full);
    assert_eq!(step.traffic.weights, 8 * 8 * 2 + 8 * 2);
    assert_eq!(
        step.traffic.per_image(2),
        (3 * full + gate + 144) as f64 / 2.0
    );

    // The unfused graph: one kernel per node; the c4 chain alone writes and re-reads four
    // full tensors more than its fused step.
    assert_eq!(plan.unfused_kernels, 22);
    assert_eq!(
        plan.fused.total(),
        plan.steps.iter().map(|s| s.traffic.total()).sum::<u64>()
    );
    assert_eq!(plan.unfused.weights, plan.fused.weights);
    assert!(plan.unfused.total() > plan.fused.total());
    assert!(plan.summary().contains("unfused / fused traffic"));
}

#[test]
fn a_second_consumer_or_a_graph_output_stops_a_fusion() {
    let model = Model::from_proto(blocks().model(13)).expect("the model reads");
    let plan = Plan::new(&model, 1).expect("the model plans");
    let of = |name: &str| {
        plan.steps
            .iter()
            .find(|s| names(&model, &s.nodes).contains(&name.to_owned()))
            .expect(name)
    };
    // c5's output is read by the Relu and the Concat: the Relu runs alone.
    assert_eq!(of("r5").kind, StepKind::Single(Op::Relu));
    // The Sigmoid's output is a graph output: c4's step ends there and writes it.
    let c4 = of("c4");
    assert_eq!(plan.shapes.tensors[c4.outputs[0]].name, "out_a");
    // With the HardSwish's output given as a graph output as well, c1 keeps its bias alone.
    let mut g = blocks();
    g.output("c1", F16, &[-1, 8, 8, 8]);
    let model = Model::from_proto(g.model(13)).expect("the model reads");
    let plan = Plan::new(&model, 1).expect("the model plans");
    match &plan.steps[1].kind {
        StepKind::Conv { fused, .. } => assert_eq!(fused, &[Fused::Bias]),
        other => panic!("step 1 is {other:?}"),
    }
    assert_eq!(plan.steps[2].kind, StepKind::Single(Op::HardSwish));
}

#[test]
fn an_activation_after_a_concat_is_applied_as_it_writes() {
    let mut g = Graph::default();
    g.input("x", F32, &[-1, 4, 4, 2])
        .node(
            "Transpose",
            "t",
            &["x"],
            &["t"],
            vec![ints("perm", &[0, 3, 1, 2])],
        )
        .node(
            "Concat",
            "cat",
            &["t", "t"],
            &["cat"],
            vec![int("axis", -3)],
        )
        .node("Relu", "relu", &["cat"], &["r"], vec![])
        .node("Sigmoid", "sig", &["r"], &["s"], vec![])
        .node("Add", "twice", &["s", "s"], &["out"], vec![])
        .output("out", F32, &[-1, 4, 4, 4]);
    let model = Model::from_proto(g.model(13)).expect("the model reads");
    let plan = Plan::new(&model, 3).expect("the model plans");
    let got: Vec<(String, Vec<String>)> = plan
        .steps
        .iter()
        .map(|s| (s.kind.label(0), names(&model, &s.nodes)))
        .collect();
    let want = [
        ("Transpose", vec!["t"]),
        ("Concat+Relu+Sigmoid", vec!["cat", "relu", "sig"]),
        ("Add", vec!["twice"]),
    ];
    let want: Vec<(String, Vec<String>)> = want
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(got, want);
    // FP32: the Concat step reads [3, 2, 4, 4] once (both operands are the same tensor) and
    // writes [3, 4, 4, 4]; unfused, the Relu and the Sigmoid each read and write it again.
    let (half, full) = (3 * 2 * 4 * 4 * 4, 3 * 4 * 4 * 4 * 4);
    assert_eq!(plan.steps[1].traffic.read, half);
    assert_eq!(plan.steps[1].traffic.written, full);
    assert_eq!(plan.unfused.total() - plan.fused.total(), 4 * full);
}

#[test]
fn an_op_outside_the_set_is_refused_naming_it_and_its_node() {
    let mut g = blocks();
    g.node(
        "Reshape",
        "flatten_it",
        &["out_a", "shape"],
        &["flat"],
        vec![],
    );
    let err = Model::from_proto(g.model(13)).expect_err("Reshape is outside the set");
    match &err {
        ModelError::UnsupportedOp { op_type, node, .. } => {
            assert_eq!((op_type.as_str(), node.as_str()), ("Reshape", "flatten_it"))
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("Reshape") && text.contains("flatten_it"),
        "{text}"
    );
    // The same op type in another domain is not the engine's.
    let mut g = blocks();
    g.proto.node[4].domain = "com.microsoft".into();
    let err = Model::from_proto(g.model(13)).expect_err("a custom domain is refused");
    assert!(err.to_string().contains("\"r2\""), "{err}");
}

#[test]
fn resize_modes_other_than_the_centernets_are_refused_naming_them() {
    for (attr, value) in [
        ("mode", "nearest"),
        ("coordinate_transformation_mode", "half_pixel"),
    ] {
        let mut g = blocks();
        let up = g.proto.node.iter_mut().find(|n| n.name == "up").unwrap();
        up.attribute.retain(|a| a.name != attr);
        up.attribute.push(string(attr, value));
        let err = Model::from_proto(g.model(13)).expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(err, ModelError::UnsupportedAttribute { .. }),
            "{text}"
        );
        assert!(
            text.contains("\"up\"") && text.contains(attr) && text.contains(value),
            "{text}"
        );
    }
    // Without the attribute, ONNX's default (nearest) is refused as well.
    let mut g = blocks();
    let up = g.proto.node.iter_mut().find(|n| n.name == "up").unwrap();
    up.attribute.retain(|a| a.name != "mode");
    let err = Model::from_proto(g.model(13)).expect_err("refused");
    assert!(err.to_string().contains("mode = \"nearest\""), "{err}");
}

#[test]
fn a_weight_whose_bytes_disagree_with_its_shape_is_refused_naming_it() {
    let mut g = blocks();
    g.proto.initializer[0].raw_data.pop();
    let err = Model::from_proto(g.model(13)).expect_err("refused");
    let text = err.to_string();
    assert!(
        matches!(err, ModelError::Weight(ref w) if w.name == "w1"),
        "{text}"
    );
    assert!(
        text.contains("declares 432 bytes but it holds 431"),
        "{text}"
    );
    // The typed field too: three floats where four are declared.
    let mut g = blocks();
    g.weight_f32("short", &[4], &[1.0, 2.0, 3.0]);
    let err = Model::from_proto(g.model(13)).expect_err("refused");
    assert!(err.to_string().contains("\"short\""), "{err}");
    // And a shape whose size overflows.
    let mut g = blocks();
    g.weight_f32("huge", &[1 << 40, 1 << 40], &[]);
    let err = Model::from_proto(g.model(13)).expect_err("refused");
    assert!(err.to_string().contains("overflows"), "{err}");
}

#[test]
fn files_are_bounded_and_named_in_their_errors() {
    let dir = common::temp_dir("files");
    let path = dir.join("blocks.onnx");
    let bytes = blocks().model(13).encode_to_vec();
    std::fs::write(&path, &bytes).unwrap();
    let model = Model::read(&path).expect("the file reads");
    assert_eq!(model.nodes.len(), 22);
    let err = Model::read_capped(&path, bytes.len() as u64 - 1).expect_err("over the cap");
    assert!(matches!(err, ModelError::TooLarge { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert!(Model::read_capped(&path, bytes.len() as u64).is_ok());

    let garbage = dir.join("garbage.onnx");
    std::fs::write(&garbage, b"\xff\xff\xff\xff not protobuf").unwrap();
    let err = Model::read(&garbage).expect_err("not ONNX");
    assert!(matches!(err, ModelError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("garbage.onnx"), "{err}");

    let missing = dir.join("missing.onnx");
    let err = Model::read(&missing).expect_err("no file");
    assert!(matches!(err, ModelError::Io { .. }), "{err}");
    assert!(err.to_string().contains("missing.onnx"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shapes_that_do_not_fit_are_refused_naming_the_node() {
    // A convolution whose weight does not fit its input's channels.
    let mut g = blocks();
    let c2 = g.proto.node.iter_mut().find(|n| n.name == "c2").unwrap();
    c2.attribute.retain(|a| a.name != "group");
    let model = Model::from_proto(g.model(13)).expect("reads: shapes are checked later");
    let err = Plan::new(&model, 1).expect_err("refused");
    assert!(
        matches!(&err, PlanError::Shape(ShapeError::Node { node, .. }) if node == "c2"),
        "{err}"
    );
    // A node reading a tensor nothing gives.
    let mut g = blocks();
    g.proto.node[1].input[0] = "nowhere".into();
    let model = Model::from_proto(g.model(13)).unwrap();
    let err = Plan::new(&model, 1).expect_err("refused");
    assert!(err.to_string().contains("\"nowhere\""), "{err}");
    // An output declared with another shape than the graph gives.
    let mut g = blocks();
    g.proto.output[0] = g.proto.output[1].clone();
    g.proto.output[0].name = "out_a".into();
    let model = Model::from_proto(g.model(13)).unwrap();
    let err = Plan::new(&model, 1).expect_err("refused");
    assert!(
        matches!(&err, PlanError::Shape(ShapeError::Output { name, .. }) if name == "out_a"),
        "{err}"
    );
    // A node that gives no tensor.
    let mut g = blocks();
    g.proto.node[2].output.clear();
    let model = Model::from_proto(g.model(13)).unwrap();
    let err = Plan::new(&model, 1).expect_err("refused");
    assert!(
        err.to_string()
            .contains("\"a1\" (HardSwish): it gives 0 outputs"),
        "{err}"
    );
    // A batch of 0.
    let model = Model::from_proto(blocks().model(13)).unwrap();
    assert!(matches!(
        Plan::new(&model, 0),
        Err(PlanError::Shape(ShapeError::Batch(0)))
    ));
}

#[test]
fn sizes_past_any_memory_are_refused_naming_the_tensor() {
    // A convolution's dilations and pads of 2^63 - 1: its output size past 64 bits.
    for attr in ["dilations", "pads"] {
        let mut g = blocks();
        let c1 = g.proto.node.iter_mut().find(|n| n.name == "c1").unwrap();
        c1.attribute.retain(|a| a.name != attr);
        let n = if attr == "pads" { 4 } else { 2 };
        c1.attribute.push(ints(attr, &vec![i64::MAX; n]));
        let model = Model::from_proto(g.model(13)).unwrap();
        let err = Plan::new(&model, 1).expect_err("refused").to_string();
        assert!(
            err.contains("node \"c1\" (Conv): its output is empty or past any size on axis 2"),
            "{attr}: {err}"
        );
    }
    // An input of 2^21 x 2^21 pixels of 3 channels (over 2^43 values): refused naming it.
    let mut g = blocks();
    let dims = &mut g.proto.input[0].r#type.as_mut().unwrap();
    let dims = &mut dims
        .tensor_type
        .as_mut()
        .unwrap()
        .shape
        .as_mut()
        .unwrap()
        .dim;
    dims[1].dim_value = Some(1 << 21);
    dims[2].dim_value = Some(1 << 21);
    let model = Model::from_proto(g.model(13)).unwrap();
    let err = Plan::new(&model, 1).expect_err("refused");
    assert!(
        matches!(&err, PlanError::Shape(ShapeError::TooLarge { name, .. }) if name == "x"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("has more than 1099511627776 elements (2^40)"),
        "{err}"
    );
    // A group of 2^62 on a depthwise convolution: its channels past 64 bits.
    let mut g = blocks();
    let c2 = g.proto.node.iter_mut().find(|n| n.name == "c2").unwrap();
    c2.attribute.retain(|a| a.name != "group");
    c2.attribute.push(int("group", 1 << 62));
    let model = Model::from_proto(g.model(13)).unwrap();
    let err = Plan::new(&model, 1).expect_err("refused").to_string();
    assert!(err.contains("node \"c2\" (Conv): input"), "{err}");
}

#[test]
fn typed_fields_and_a_constant_shift_are_read_and_fused() {
    // FP16 weights in int32_data (their bits) beside a bias in raw bytes, and an Add of a
    // per-channel constant after the convolution: a shift in its epilogue.
    let mut g = Graph::default();
    g.input("x", F16, &[-1, 2, 4, 4])
        .weight_f16("b", &[2])
        .node("Conv", "c", &["x", "w", "b"], &["c"], vec![])
        .node("Add", "shift", &["c", "k"], &["s"], vec![])
        .node("Relu", "relu", &["s"], &["out"], vec![])
        .output("out", F16, &[-1, 2, 4, 4]);
    let bits = |v: f32| i32::from(half::f16::from_f32(v).to_bits());
    g.proto
        .initializer
        .push(octopipe_engine::proto::TensorProto {
            dims: vec![2, 2, 1, 1],
            data_type: F16,
            name: "w".into(),
            int32_data: vec![bits(1.0), bits(0.5), bits(-2.0), bits(0.25)],
            ..Default::default()
        });
    g.proto
        .initializer
        .push(octopipe_engine::proto::TensorProto {
            dims: vec![2, 1, 1],
            data_type: F16,
            name: "k".into(),
            int32_data: vec![bits(3.0), bits(-3.0)],
            ..Default::default()
        });
    let model = Model::from_proto(g.model(13)).expect("the model reads");
    assert_eq!(model.weights["w"].data.to_f32(), [1.0, 0.5, -2.0, 0.25]);
    assert_eq!(model.weights["w"].byte_size(), 8);
    let plan = Plan::new(&model, 1).expect("the model plans");
    assert_eq!(plan.steps.len(), 1);
    assert_eq!(plan.steps[0].kind.label(2), "Conv+bias+shift+Relu");
    // One kernel reads x and writes out; unfused, the Add and the Relu each read and write
    // [1, 2, 4, 4] of FP16 (64 bytes) again.
    assert_eq!(plan.unfused.total() - plan.fused.total(), 4 * 64);

    // The same weight stored in an external file is refused naming it.
    let mut g2 = Graph {
        proto: g.proto.clone(),
    };
    let w = g2
        .proto
        .initializer
        .iter_mut()
        .find(|t| t.name == "w")
        .unwrap();
    w.data_location = 1;
    let err = Model::from_proto(g2.model(13)).expect_err("external data");
    assert!(
        err.to_string().contains("\"w\"") && err.to_string().contains("external"),
        "{err}"
    );
    // An element type the engine does not read (double) likewise.
    let mut g3 = Graph {
        proto: g.proto.clone(),
    };
    g3.proto.initializer[0].data_type = 11;
    let err = Model::from_proto(g3.model(13)).expect_err("double");
    assert!(
        err.to_string().contains("\"b\"") && err.to_string().contains("type 11"),
        "{err}"
    );
}

/// One of `from` (not empty), drawn by `rng`.
fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[rng.below(from.len())]
}

/// Integers a hostile or broken file may hold where a size, an index or a count goes.
const ODD_INTS: [i64; 12] = [
    0,
    1,
    2,
    3,
    -1,
    -2,
    7,
    65_535,
    1 << 31,
    1 << 40,
    i64::MAX,
    i64::MIN,
];

/// `blocks()` with 1 to 4 mutations: an input's or an output's axis, an attribute's value, a
/// scale, a node's input or output, a weight's dims, a node repeated or removed.
fn mutated(rng: &mut Rng) -> (octopipe_engine::proto::ModelProto, Vec<String>) {
    let mut model = blocks().model(13);
    let g = model.graph.as_mut().unwrap();
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 => {
                let v = &mut g.input[0];
                let dim = &mut v.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
                let dims = &mut dim.shape.as_mut().unwrap().dim;
                let axis = rng.below(dims.len());
                let n = pick(rng, &ODD_INTS);
                dims[axis].dim_value = Some(n);
                dims[axis].dim_param = None;
                what.push(format!("input axis {axis} = {n}"));
            }
            1 | 2 => {
                let node = rng.below(g.node.len());
                let node = &mut g.node[node];
                if node.attribute.is_empty() {
                    continue;
                }
                let a = rng.below(node.attribute.len());
                let attr = &mut node.attribute[a];
                let n = pick(rng, &ODD_INTS);
                if attr.ints.is_empty() {
                    attr.i = n;
                } else {
                    let at = rng.below(attr.ints.len());
                    attr.ints[at] = n;
                }
                what.push(format!("{} {} = {n}", node.name, attr.name));
            }
            3 => {
                let scales = g
                    .initializer
                    .iter_mut()
                    .find(|t| t.name == "scales")
                    .unwrap();
                let at = rng.below(4);
                let f = pick(rng, &[0.0, -1.0, 0.5, 3.0, 1e9, f32::NAN, f32::INFINITY]);
                scales.float_data[at] = f;
                what.push(format!("scales[{at}] = {f}"));
            }
            4 => {
                let node = rng.below(g.node.len());
                let from = rng.below(g.node.len());
                let name = g.node[from].output[0].clone();
                let node = &mut g.node[node];
                let at = rng.below(node.input.len());
                node.input[at] = name.clone();
                what.push(format!("{} input {at} = {name}", node.name));
            }
            5 => {
                let w = rng.below(g.initializer.len());
                let w = &mut g.initializer[w];
                if w.dims.is_empty() {
                    continue;
                }
                let at = rng.below(w.dims.len());
                let n = pick(rng, &ODD_INTS);
                w.dims[at] = n;
                what.push(format!("weight {} dims[{at}] = {n}", w.name));
            }
            _ => {
                let at = rng.below(g.node.len());
                match rng.below(2) {
                    0 => {
                        let n = g.node.remove(at);
                        what.push(format!("{} removed", n.name));
                    }
                    _ => {
                        let n = g.node[at].clone();
                        what.push(format!("{} repeated", n.name));
                        g.node.insert(at, n);
                    }
                }
            }
        }
    }
    (model, what)
}

/// Everything the engine does with a file without a GPU: read, shapes and plan for batches 1
/// and 3, the kernels' program, and the reference run where every tensor is small.
fn read_plan_and_run(proto: octopipe_engine::proto::ModelProto) {
    let bytes = proto.encode_to_vec();
    let Ok(proto) = octopipe_engine::proto::ModelProto::decode(bytes.as_slice()) else {
        return;
    };
    let Ok(model) = Model::from_proto(proto) else {
        return;
    };
    for batch in [1, 3] {
        let Ok(shapes) = octopipe_engine::shape::infer(&model, batch) else {
            continue;
        };
        if let Ok(plan) = Plan::new(&model, batch) {
            let _ = plan.summary();
            let _ = octopipe_engine::program::Program::new(&model, &plan);
        }
        let total = shapes.tensors.iter().try_fold(0u64, |sum, t| {
            t.shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .and_then(|n| sum.checked_add(n))
        });
        let input = shapes
            .tensors
            .iter()
            .find(|t| t.source == octopipe_engine::shape::Source::Input);
        if let (Some(input), Some(total @ ..=65_536)) = (input, total) {
            let n = input.shape.iter().product::<u64>() as usize;
            let _ = octopipe_engine::reference::run(&model, &vec![0.5; n], batch);
            let _ = total;
        }
    }
}

/// 20,000 mutations of a model that plans every fusion rule (dims of 2^40 or i64::MAX, strides
/// of 0, NaN scales, nodes that read their own output...): each is refused naming what is
/// wrong, or read, planned and run; none panics (an overflow in a size, a slice out of range).
/// The fuzz target `onnx_model` (fuzz/) does the same on any bytes.
#[test]
fn mutated_models_are_refused_or_run_never_a_panic() {
    // Where each panic was, kept by a hook of this test's own (the default one's backtraces
    // would flood the output).
    static WHERE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        *WHERE.lock().unwrap() = format!(
            "{} at {:?}",
            info.payload_as_str().unwrap_or(""),
            info.location()
        );
    }));
    let mut rng = Rng::new(0x5DEE_CE66_D1CE_4E5B);
    let mut panics = Vec::new();
    for _ in 0..20_000 {
        let (proto, what) = mutated(&mut rng);
        if std::panic::catch_unwind(|| read_plan_and_run(proto)).is_err() {
            panics.push(format!("{}: {}", what.join(", "), WHERE.lock().unwrap()));
        }
    }
    std::panic::set_hook(quiet);
    assert!(
        panics.is_empty(),
        "{} mutations panicked:\n{}",
        panics.len(),
        panics[..panics.len().min(20)].join("\n")
    );
}
