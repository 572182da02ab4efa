//! Any bytes as an ONNX file given to `detect engine=octopipe`: decoded, read into the engine's
//! model, its shapes inferred, planned and turned into kernels for batches 1 and 3, and, where
//! every tensor is small, run by the CPU reference interpreter. A refusal naming what is wrong
//! is fine; a panic (an overflow in a shape's size among them) is not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use octopipe_engine::{program::Program, proto, reference, shape, Model, Plan};
use prost::Message;

/// The most elements of all tensors together for a reference run (bounded work per input).
const SMALL: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(proto) = proto::ModelProto::decode(data) else {
        return;
    };
    let Ok(model) = Model::from_proto(proto) else {
        return;
    };
    for batch in [1, 3] {
        let Ok(shapes) = shape::infer(&model, batch) else {
            continue;
        };
        let _ = Plan::new(&model, batch).map(|plan| Program::new(&model, &plan));
        let total = shapes.tensors.iter().try_fold(0u64, |sum, t| {
            t.shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .and_then(|n| sum.checked_add(n))
        });
        let Some(input) = shapes.tensors.iter().find(|t| t.source == shape::Source::Input) else {
            continue;
        };
        if total.is_some_and(|t| t <= SMALL) {
            let n: u64 = input.shape.iter().product();
            let _ = reference::run(&model, &vec![0.5; n as usize], batch);
        }
    }
});
