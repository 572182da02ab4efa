//! The shared detector on a GPU: the CUDA path (fixed batch sizes, CUDA graphs, CenterNet's
//! peaks found on the GPU), with f32 and float16 heads, gives the CPU's boxes.

use super::*;

/// On a GPU with ONNX Runtime's CUDA build: the heads model on CUDA (fixed batch sizes, CUDA
/// graphs, the peaks found by the onnx crate's `detect/centernet.cu`) against the CPU on the
/// clip's frames: the same boxes up to TF32 convolution rounding (matched at IoU >= 0.9, same
/// class).
#[test]
fn the_gpu_path_gives_the_cpu_boxes() {
    if !common::gpu("the_gpu_path_gives_the_cpu_boxes") {
        return;
    }
    let dir = common::temp_dir("detect-gpu");
    let Some(model) = heads_model(&dir) else {
        return;
    };
    let data = common::shared_data().unwrap();
    let clip = data.join("visdrone/clip-9999999/images");
    let text = |ep: &str| {
        format!(
            "images location={} ! detect model={} {DETECT} ep={ep} backend={ep}",
            clip.display(),
            model.display()
        )
    };
    let (cpu, _) = run(&text("cpu"), &dir.join("cpu"));
    let (gpu, report) = run(&text("cuda"), &dir.join("cuda"));
    assert!(report.contains("cuda preprocessing, centernet"), "{report}");
    let matched = matched(&cpu, &gpu, 0.9);
    eprintln!(
        "GPU path: {} boxes, CPU {}; {matched} of the CPU's matched",
        gpu.len(),
        cpu.len()
    );
    assert!(matched as f64 >= 0.97 * cpu.len() as f64, "{report}");
    assert!((gpu.len() as f64 - cpu.len() as f64).abs() <= 0.03 * cpu.len() as f64);
}

/// The GPU path with a float16 model end to end (float16 tiles into the bound input, float16
/// heads holding logits read by the peak kernel) gives the CPU's boxes of the float32 model.
#[test]
fn the_gpu_path_with_float16_heads_gives_the_cpu_boxes() {
    if !common::gpu("the_gpu_path_with_float16_heads_gives_the_cpu_boxes") {
        return;
    }
    let dir = common::temp_dir("detect-gpu-f16");
    let Some(cut) = heads_model(&dir) else {
        return;
    };
    let half = match std::env::var_os("OCTOPIPE_CENTERNET_HEADS_F16") {
        Some(made) => PathBuf::from(made),
        None => {
            let args = ["--fp16", "--io", "fp16", "--resize-fp16", "--logits"];
            let Some(made) = make_heads(&dir, "f16.onnx", &args) else {
                return;
            };
            made
        }
    };
    let data = common::shared_data().unwrap();
    let clip = data.join("visdrone/clip-9999999/images");
    let text = |model: &Path, ep: &str| {
        format!(
            "images location={} ! detect model={} {DETECT} ep={ep} backend={ep}",
            clip.display(),
            model.display()
        )
    };
    let (cpu, _) = run(&text(&cut, "cpu"), &dir.join("cpu"));
    let (gpu, report) = run(&text(&half, "cuda"), &dir.join("cuda"));
    assert!(report.contains("cuda preprocessing, centernet"), "{report}");
    let matched = matched(&cpu, &gpu, 0.8);
    eprintln!(
        "float16 GPU path: {} boxes, CPU (float32) {}; {matched} of the CPU's matched",
        gpu.len(),
        cpu.len()
    );
    assert!(matched as f64 >= 0.95 * cpu.len() as f64, "{report}");
    assert!((gpu.len() as f64 - cpu.len() as f64).abs() <= 0.05 * cpu.len() as f64);
}
