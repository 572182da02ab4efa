//! The engine's execution on the six-class heads model of the shared CenterNet: the plan mapped
//! to the engine's kernels (CPU), the f32 reference interpreter against ONNX Runtime's CPU
//! provider (CPU), and the GPU engine's heads against the reference (GPU; skipped with a printed
//! reason without one).

mod common;

use std::path::{Path, PathBuf};

use octopipe_engine::gpu::{Engine, Kernels};
use octopipe_engine::program::{ConvKind, Kernel, Program};
use octopipe_engine::{reference, Model, Plan};

/// A deterministic input in [0, 1): `n` values of a fixed pseudo-random sequence.
fn input(n: usize) -> Vec<f32> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The heads model: $OCTOPIPE_ENGINE_MODEL (FP16, already made: the device has no converter),
/// else made from the shared CenterNet into `dir`.
fn model(dir: &Path, fp16: bool) -> Option<PathBuf> {
    if let (true, Some(p)) = (fp16, std::env::var_os("OCTOPIPE_ENGINE_MODEL")) {
        return Some(PathBuf::from(p));
    }
    let source = common::shared_centernet()?;
    common::heads_model(&source, dir, fp16).map(|(p, _, _)| p)
}

/// The greatest absolute difference, and the greatest magnitude of the reference.
fn max_diff(got: &[f32], want: &[f32]) -> (f32, f32) {
    assert_eq!(got.len(), want.len());
    let d = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    (d, want.iter().map(|v| v.abs()).fold(0.0, f32::max))
}

#[test]
fn the_heads_model_maps_to_the_engine_kernels() {
    let dir = common::temp_dir("program");
    let Some(path) = model(&dir, true) else {
        return;
    };
    let model = Model::read(&path).expect("the heads model reads");
    let plan = Plan::new(&model, 8).expect("plans");
    let program = Program::new(&model, &plan).expect("every step has a kernel");
    assert_eq!(program.kernels.len(), plan.steps.len());
    // The input's Transpose is no kernel: its output is the input's buffer.
    assert!(matches!(program.kernels[0], Kernel::Alias { .. }));
    assert_eq!(program.launches(), plan.steps.len() - 1);
    let count = |kind: ConvKind| {
        program
            .kernels
            .iter()
            .filter(|k| matches!(k, Kernel::Conv { kind: c, .. } if *c == kind))
            .count()
    };
    // 89 convolutions: the stem (3 x 3, dense), 26 depthwise, the rest 1 x 1.
    assert_eq!(
        (
            count(ConvKind::Direct),
            count(ConvKind::Depthwise),
            count(ConvKind::Pointwise)
        ),
        (1, 26, 62)
    );
    // Both heads are written NCHW, as the model declares them; nothing else is.
    let nchw: Vec<&str> = program
        .kernels
        .iter()
        .filter_map(|k| match k {
            Kernel::Conv { epi, out, .. } if epi.nchw => {
                Some(plan.shapes.tensors[*out].name.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(nchw, ["wh", "heatmap"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_reference_equals_onnx_runtime_on_the_fp32_heads_model() {
    let dir = common::temp_dir("reference");
    let Some(path) = model(&dir, false) else {
        return;
    };
    let model = Model::read(&path).expect("the FP32 heads model reads");
    let x = input(512 * 512 * 3);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let raw = dir.join("input.f32");
    std::fs::write(&raw, bytes).unwrap();
    let script = "import sys, numpy as np, onnxruntime as ort\n\
                  s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n\
                  x = np.fromfile(sys.argv[2], dtype=np.float32).reshape(1, 512, 512, 3)\n\
                  for i, o in enumerate(s.run(None, {s.get_inputs()[0].name: x})):\n\
                  \x20   o.astype(np.float32).tofile(sys.argv[2] + f'.out{i}')\n\
                  \x20   print(o.shape)";
    let (p, r) = (path.to_str().unwrap(), raw.to_str().unwrap());
    let Some(shapes) = common::python(&["-c", script, p, r]) else {
        return;
    };
    assert_eq!(shapes.trim(), "(1, 6, 128, 128)\n(1, 4, 128, 128)");
    let ours = reference::run(&model, &x, 1).expect("the reference runs");
    for (i, got) in ours.iter().enumerate() {
        let want: Vec<f32> = std::fs::read(format!("{r}.out{i}"))
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let (d, scale) = max_diff(got, &want);
        println!(
            "output {i}: reference vs ONNX Runtime CPU max abs diff {d:.3e} (|ort| max {scale:.3})"
        );
        assert!(d <= 1e-3 * scale.max(1.0), "output {i}: {d} of {scale}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_gpu_engine_equals_the_reference_on_the_fp16_heads_model() {
    if let Err(e) = octopipe_cuda::available() {
        eprintln!(
            "SKIPPED: no GPU ({e}); the engine's kernels are compile-checked by the unit test"
        );
        return;
    }
    let dir = common::temp_dir("gpu");
    let Some(path) = model(&dir, true) else {
        return;
    };
    let model = Model::read(&path).expect("the FP16 heads model reads");
    // 3 images: the squeeze-excite products' 3 pixels fill part of a tile.
    let batch = 3;
    let x = input(batch * 512 * 512 * 3);
    let bits: Vec<u16> = x
        .iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect();
    let x16: Vec<f32> = bits
        .iter()
        .map(|&b| half::f16::from_bits(b).to_f32())
        .collect();
    let want = reference::run(&model, &x16, batch as u64).expect("the reference runs");
    for kernels in [Kernels::Tuned, Kernels::Simple] {
        let mut engine =
            Engine::with_kernels(&model, batch, 0, kernels).expect("the engine builds");
        let plain = engine.run_host(&bits).expect("runs");
        engine.capture().expect("captures a CUDA graph");
        let graphed = engine.run_host(&bits).expect("replays");
        assert_eq!(
            plain, graphed,
            "{kernels:?}: the CUDA graph's heads equal the plain launches'"
        );
        for (i, (got, want)) in plain.iter().zip(&want).enumerate() {
            let got: Vec<f32> = got
                .iter()
                .map(|&b| half::f16::from_bits(b).to_f32())
                .collect();
            let (d, scale) = max_diff(&got, want);
            let mean = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .sum::<f32>()
                / got.len() as f32;
            println!(
                "{}: {kernels:?} kernels: output {i}: engine (FP16) vs reference (f32) max abs diff {d:.4} mean {mean:.5} (|ref| max {scale:.3})",
                engine.device_name()
            );
            assert!(
                d <= 0.05 * scale.max(1.0),
                "{kernels:?}: output {i}: {d} of {scale}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
