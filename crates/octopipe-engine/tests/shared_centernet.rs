//! The engine on the shared CenterNet ($OCTOPIPE_DATA/models/coco-centernet-512.onnx): the file
//! as shipped is refused at its first op outside the set, and the six-class FP16 heads model
//! that scripts/make_centernet_heads.py makes of it is read and planned.

mod common;

use octopipe_engine::model::Op;
use octopipe_engine::plan::StepKind;
use octopipe_engine::{Model, ModelError, Plan};

#[test]
fn the_shipped_centernet_is_refused_at_its_first_op_outside_the_set() {
    let Some(path) = common::shared_centernet() else {
        return;
    };
    let err = Model::read(&path).expect_err("the shipped model has Reshape, TopK, ...");
    eprintln!("{err}");
    match err {
        ModelError::UnsupportedOp { op_type, node, .. } => {
            assert_eq!(op_type, "Reshape");
            assert_eq!(
                node,
                "tower_0/MobilenetV3/expanded_conv_3/squeeze_excite/Conv/Relu_BiasAdd__30__155"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_fp16_heads_model_is_read_and_planned() {
    let Some(source) = common::shared_centernet() else {
        return;
    };
    let dir = common::temp_dir("heads");
    let Some((path, initializer_bytes, onnx_convs)) = common::heads_model(&source, &dir, true)
    else {
        return;
    };
    let model = Model::read(&path).expect("the heads model is in the engine's set");
    let convs = model.nodes.iter().filter(|n| n.op == Op::Conv).count();
    assert_eq!((convs, onnx_convs), (89, 89));
    assert_eq!(model.weight_bytes(), initializer_bytes);

    for batch in [1, 8, 64] {
        let plan = Plan::new(&model, batch).expect("the heads model plans");
        let outputs: Vec<(&str, &[u64])> = plan
            .shapes
            .outputs
            .iter()
            .map(|&t| {
                let t = &plan.shapes.tensors[t];
                (t.name.as_str(), t.shape.as_slice())
            })
            .collect();
        assert_eq!(
            outputs,
            [
                ("heatmap", &[batch, 6, 128, 128][..]),
                ("wh", &[batch, 4, 128, 128][..])
            ]
        );
        // Every node in exactly one step.
        let mut all: Vec<usize> = plan.steps.iter().flat_map(|s| s.nodes.clone()).collect();
        all.sort();
        assert_eq!(all, (0..model.nodes.len()).collect::<Vec<_>>());
        // Every elementwise node is in a convolution's step but the head's squeeze-excite gate,
        // whose product two depthwise convolutions read.
        let alone: Vec<&str> = plan
            .steps
            .iter()
            .filter_map(|s| match s.kind {
                StepKind::Single(op)
                    if !matches!(
                        op,
                        Op::GlobalAveragePool | Op::Resize | Op::Concat | Op::Transpose
                    ) =>
                {
                    Some(model.nodes[s.nodes[0]].name.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(alone, ["tower_0/CenternetHead/mul"]);
        let conv_steps = plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Conv { .. }))
            .count();
        assert_eq!(conv_steps, 89);
        if batch == 64 {
            println!("{}", plan.summary());
        }
        let ratio = plan.ratio();
        println!("batch {batch}: unfused / fused traffic {ratio:.3}x");
        assert!((1.4..3.0).contains(&ratio), "ratio {ratio}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
