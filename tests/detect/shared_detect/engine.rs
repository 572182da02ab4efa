//! `detect engine=octopipe` (issue 53): octopipe's own CUDA engine in place of ONNX Runtime.
//! Here, without a GPU: what it refuses before anything runs, naming why (the model's input,
//! an op outside its set, no GPU). On a GPU: its boxes and recall on the clip against ONNX
//! Runtime's CUDA provider on the same model.

use super::*;

use std::process::Output;
use std::time::Duration;

/// `make_centernet_heads.py`'s arguments for the six-class FP16 heads model the engine runs (the
/// DeepStream-shaped runs' detector).
const SIX: &[&str] = &[
    "--fp16",
    "--io",
    "fp16",
    "--resize-fp16",
    "--fuse",
    "hardswish",
    "--logits",
    "--keep-classes",
    "0,1,2,3,5,7",
    "--drop-reshapes",
];

/// Its class names.
const SIX_LABELS: &str = "labels=person,bicycle,car,motorcycle,bus,truck";

/// That model: `$OCTOPIPE_CENTERNET_HEADS_SIX` when set (made ahead, as on the device), else
/// made into `dir`.
fn six(dir: &Path) -> Option<PathBuf> {
    made_ahead_or_heads("OCTOPIPE_CENTERNET_HEADS_SIX", dir, "six.onnx", SIX)
}

/// `octopipe run` of the clip's first image through `detect model=MODEL engine=octopipe`.
fn run_engine(model: &Path, dir: &Path) -> Output {
    let data = common::shared_data().unwrap();
    let one = images(dir, "one", &data.join("visdrone/clip-9999999/images"), 1);
    let text = format!(
        "images location={} ! detect model={} engine=octopipe ! jsonl location={}",
        one.display(),
        model.display(),
        dir.join("o.jsonl").display()
    );
    common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
        Duration::from_secs(120),
    )
}

/// The run failed, its error naming the model and saying `want`; nothing written.
fn refused(out: &Output, model: &Path, want: &[&str], dir: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&model.display().to_string()), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "no '{w}' in: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    let written = std::fs::read_to_string(dir.join("o.jsonl")).unwrap_or_default();
    assert!(written.trim().is_empty(), "{written}");
}

/// The heads model as made without `--fp16 --io fp16` takes f32 NCHW... not what the engine
/// runs: refused naming the input's type, before any GPU is looked for.
#[test]
fn the_engine_refuses_a_model_whose_input_is_not_f16() {
    let dir = common::temp_dir("engine-f32");
    let Some(model) = make_heads(&dir, "f32.onnx", &[]) else {
        return;
    };
    let out = run_engine(&model, &dir);
    refused(
        &out,
        &model,
        &[
            "engine=octopipe runs a CenterNet with an f16 NHWC input",
            "not f16",
        ],
        &dir,
    );
}

/// The FP16 heads model with its squeeze-excite Reshapes kept: an op outside the engine's set,
/// refused naming the op and its node (before any GPU is looked for).
#[test]
fn the_engine_refuses_an_op_outside_its_set_naming_it() {
    let dir = common::temp_dir("engine-reshape");
    let args = ["--fp16", "--io", "fp16", "--resize-fp16", "--logits"];
    let Some(model) = make_heads(&dir, "reshapes.onnx", &args) else {
        return;
    };
    let out = run_engine(&model, &dir);
    refused(
        &out,
        &model,
        &["engine=octopipe", "Reshape", "squeeze_excite"],
        &dir,
    );
}

/// Without a GPU the model the engine runs is refused saying so (on a GPU the comparison below
/// runs it).
#[test]
fn without_a_gpu_the_engine_says_it_needs_one() {
    if octopipe::preprocess::cuda::available().is_ok() {
        eprintln!("SKIPPED without_a_gpu_the_engine_says_it_needs_one: this machine has a GPU");
        return;
    }
    let dir = common::temp_dir("engine-no-gpu");
    let Some(model) = six(&dir) else {
        return;
    };
    let out = run_engine(&model, &dir);
    refused(&out, &model, &["engine=octopipe runs on a CUDA GPU"], &dir);
}

/// The clip's 34 frames whole (as the live runs give them) through the six-class FP16 heads
/// model, on ONNX Runtime's CUDA provider and on octopipe's engine: the same number of boxes
/// within 1%, each group's recall against the ground truth within 0.005 (issue 53).
#[test]
fn the_engine_gives_onnx_runtimes_boxes_and_recall_on_the_clip() {
    if !common::gpu("the_engine_gives_onnx_runtimes_boxes_and_recall_on_the_clip") {
        return;
    }
    let dir = common::temp_dir("engine-clip");
    let Some(model) = six(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let images = data.join("visdrone/clip-9999999/images");
    let truth = data.join("visdrone/clip-9999999/annotations");
    let text = |engine: &str| {
        format!(
            "images location={} ! detect model={} {SIX_LABELS} scale=1 ep=cuda backend=cuda max-batch=8 engine={engine}",
            images.display(),
            model.display()
        )
    };
    let (ort, _) = run(&text("ort"), &dir.join("ort"));
    let (own, report) = run(&text("octopipe"), &dir.join("octopipe"));
    assert!(report.contains("ms in octopipe's engine"), "{report}");
    let matched = matched(&ort, &own, 0.8);
    eprintln!(
        "octopipe's engine: {} boxes, ONNX Runtime {}; {matched} of ONNX Runtime's matched at IoU >= 0.8",
        own.len(),
        ort.len()
    );
    assert!(!ort.is_empty());
    let diff = (own.len() as f64 - ort.len() as f64).abs();
    assert!(diff <= 0.01 * ort.len() as f64, "{report}");
    // Scored in the process (the device's copy of the tests has no `octopipe` binary beside).
    use octopipe_tools::eval::detections::{evaluate_files, Group};
    let score = |engine: &str| {
        let objects = dir.join(engine).join("o.jsonl");
        evaluate_files(&objects, &truth, &images, None).unwrap_or_else(|e| panic!("{e}"))
    };
    let (s_ort, s_own) = (score("ort"), score("octopipe"));
    eprintln!("ONNX Runtime:\n{s_ort}\noctopipe's engine:\n{s_own}");
    for group in Group::ALL {
        let recall = |s: &octopipe_tools::eval::detections::Evaluation| {
            s.group(group)
                .recall()
                .unwrap_or_else(|| panic!("no {group:?} truth"))
        };
        let (a, b) = (recall(&s_ort), recall(&s_own));
        assert!(
            (a - b).abs() <= 0.005,
            "{group:?}: ONNX Runtime {a:.4}, engine {b:.4}"
        );
    }
}
