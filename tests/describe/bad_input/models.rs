//! Models and ONNX Runtime, property values and empty input, sinks, and each stage failing mid-run.

use super::*;

#[test]
fn a_missing_model() {
    fails_with(
        &run(&testsrc_with("", Path::new("/nowhere/m.onnx"))),
        &["octopipe: error: model /nowhere/m.onnx: no such file"],
    );
}

#[test]
fn a_file_that_is_not_onnx() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-notonnx");
    let m = dir.join("m.onnx");
    std::fs::write(&m, "not a model").unwrap();
    fails_with(
        &run(&testsrc_with("", &m)),
        &[&format!(
            "octopipe: error: model {}: not a loadable ONNX model: ",
            m.display()
        )],
    );
}

#[test]
fn a_model_of_the_wrong_rank() {
    if !common::ort_ready() {
        return;
    }
    let m = model("rank3.onnx");
    fails_with(
        &run(&testsrc_with("", &m)),
        &[&format!(
            "octopipe: error: model {}: input 'input' is Float32 [-1, 64, 64], but [batch, 3, height, width] float32 is needed for layout=nchw",
            m.display()
        )],
    );
}

#[test]
fn a_model_of_the_wrong_dtype() {
    if !common::ort_ready() {
        return;
    }
    let m = model("int64.onnx");
    fails_with(
        &run(&testsrc_with("", &m)),
        &[&format!(
            "octopipe: error: model {}: input 'input' is Int64 [-1, 3, 64, 64], but [batch, 3, height, width] float32 is needed for layout=nchw",
            m.display()
        )],
    );
}

#[test]
fn a_model_with_one_channel() {
    if !common::ort_ready() {
        return;
    }
    let m = model("gray-64.onnx");
    fails_with(
        &run(&testsrc_with("", &m)),
        &[&format!(
            "octopipe: error: model {}: input 'input' is Float32 [-1, 1, 64, 64], but [batch, 3, height, width] float32 is needed for layout=nchw",
            m.display()
        )],
    );
}

#[test]
fn a_model_of_another_crop_size() {
    if !common::ort_ready() {
        return;
    }
    let m = model("size-32.onnx");
    fails_with(
        &run(&testsrc_with("preprocess size=64x64 !", &m)),
        &[&format!(
            "octopipe: error: model {}: input 'input' is Float32 [-1, 3, 32, 32], but preprocess size=64x64 was asked for (leave size unset to take the model's 32x32)",
            m.display()
        )],
    );
}

#[test]
fn onnx_runtime_missing() {
    let out = common::output_within(
        octopipe()
            .env("ORT_DYLIB_PATH", "/nowhere/libonnxruntime.so.1.31.1")
            .args(["run", &testsrc_with("", &model("valid-64.onnx"))]),
        TIMEOUT,
    );
    fails_with(
        &out,
        &[
            "octopipe: error: ONNX Runtime library /nowhere/libonnxruntime.so.1.31.1: ",
            "hint: pip install onnxruntime==1.31.1 and set ORT_DYLIB_PATH to its onnxruntime/capi/libonnxruntime.so.1.31.1 (scripts/setup.sh does both)",
        ],
    );
}

#[test]
fn classify_ep_cuda_without_a_cuda_execution_provider_is_named() {
    // ep=cuda insists; ep=auto (the default) falls back to the CPU (every other test).
    if !common::ort_ready() {
        return;
    }
    if octopipe::preprocess::cuda::available().is_ok() {
        eprintln!("SKIPPED: a GPU is present (the CUDA execution provider may load)");
        return;
    }
    let m = model("valid-64.onnx");
    let desc = format!(
        "testsrc width=160 height=120 num-buffers=3 ! boxes format=synthetic count=3 ! classify model={} ep=cuda ! jsonl location=-",
        m.display()
    );
    let out = common::output_within(octopipe().args(["run", &desc]), TIMEOUT);
    fails_with(
        &out,
        &[&format!("model {}: CUDA execution provider: ", m.display())],
    );
}

#[test]
fn a_library_that_is_not_onnx_runtime() {
    let Some(lib) = [
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists()) else {
        common::skip("no libz.so.1 to stand in for a wrong library");
        return;
    };
    let out = common::output_within(
        octopipe()
            .env("ORT_DYLIB_PATH", lib)
            .args(["run", &testsrc_with("", &model("valid-64.onnx"))]),
        TIMEOUT,
    );
    fails_with(
        &out,
        &[
            &format!("octopipe: error: ONNX Runtime library {lib}: {lib} does not export `OrtGetApiBase`"),
            "hint: pip install onnxruntime==1.31.1",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Properties and empty input

#[test]
fn invalid_property_values() {
    let m = model("valid-64.onnx");
    for (pre, message) in [
        (
            "preprocess size=0x0 !",
            "preprocess: size must be WIDTHxHEIGHT with both from 1 to 4096, e.g. 64x64, found '0x0'",
        ),
        (
            "preprocess layout=chw !",
            "preprocess: layout must be nchw or nhwc, found 'chw'",
        ),
        (
            "batch max-crops=-3 !",
            "batch: max-crops must be an integer from 1 to 4096, found '-3'",
        ),
    ] {
        fails_with(&run(&testsrc_with(pre, &m)), &[message, "^"]);
    }
    fails_with(
        &run(&testsrc_free("testsrc width=-640")),
        &["testsrc: width must be an integer from 1 to 16384, found '-640'"],
    );
    fails_with(
        &run(&testsrc_free("testsrc framerate=0")),
        &["testsrc: framerate must be a positive number, found '0'"],
    );
}

#[test]
fn zero_frames() {
    fails_with(
        &run(&testsrc_free("testsrc num-buffers=0")),
        &["testsrc: num-buffers must be an integer from 1 to 2147483647, found '0'"],
    );
}

#[test]
fn zero_boxes_is_a_valid_run() {
    if !common::ort_ready() {
        return;
    }
    let out = run(&format!(
        "testsrc width=160 height=120 num-buffers=4 ! boxes format=synthetic count=0 ! classify model={} ! jsonl location=-",
        model("valid-64.onnx").display()
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("frames: 4 in = 4 processed + 0 dropped"),
        "{stderr}"
    );
    assert!(
        stderr.contains("objects: 0 in = 0 classified + 0 skipped"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn tiny_frames_with_synthetic_boxes() {
    // Every frame size works: boxes are as large as the frame allows; those under 2 px are
    // skipped and counted.
    if !common::ort_ready() {
        return;
    }
    for (w, h, skipped) in [(1, 1, true), (3, 1, true), (1, 3, true), (2, 2, false)] {
        let out = run(&format!(
            "testsrc width={w} height={h} num-buffers=2 ! boxes format=synthetic count=5 ! classify model={} ! jsonl location=-",
            model("valid-64.onnx").display()
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{w}x{h}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let (objects, classified, skip) = common::object_accounting(&stderr);
        assert_eq!(objects, 10, "{w}x{h}: {stderr}");
        if skipped {
            assert_eq!((classified, skip), (0, 10), "{w}x{h}: {stderr}");
            assert!(stderr.contains("(under-2px: 10)"), "{stderr}");
        } else {
            assert_eq!((classified, skip), (10, 0), "{w}x{h}: {stderr}");
            assert_eq!(out.stdout.iter().filter(|b| **b == b'\n').count(), 10);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sinks

#[test]
fn an_output_folder_that_does_not_exist() {
    if !common::ort_ready() {
        return;
    }
    fails_with(
        &run(&format!(
            "testsrc num-buffers=2 ! boxes format=synthetic ! classify model={} ! jsonl location=/nowhere/o.jsonl",
            model("valid-64.onnx").display()
        )),
        &["octopipe: error: jsonl location=/nowhere/o.jsonl: its folder /nowhere does not exist: create it, or choose another path (nothing was written)"],
    );
}

// ---------------------------------------------------------------------------------------------
// Each stage failing mid-run: the run ends with its error, no hang, every frame accounted for.

// Source: a_truncated_mp4_keeps_the_frames_before_the_cut and a_broken_jpeg_after_good_ones.
// Preprocess: no input makes the CPU backend fail from outside (its errors are internal checks).

#[test]
fn boxes_failing_mid_run() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("mid-boxes");
    jpeg_clip(&dir, 6);
    for i in [0, 1, 2, 4, 5] {
        write_det(&dir, i, "1,2,30,20,1,4,0,0\n5,5,10,10,1,1,0,0\n");
    }
    let out = dir.join("o.jsonl");
    let stderr = fails_with(
        &run(&images_det(&dir, "", &out.display().to_string())),
        &["frame_00003.txt: no annotation file for frame 'frame_00003.jpg'"],
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert_eq!(processed, 3, "frames before the failure are kept: {stderr}");
    assert_eq!(jsonl_frames(&out), [0, 0, 1, 1, 2, 2]);
}

#[test]
fn classify_failing_mid_run() {
    if !common::ort_ready() {
        return;
    }
    // Passes the start-up check and the one-crop warm-up; the first batch of 3 crops fails.
    let m = model("batch-reshape.onnx");
    let stderr = fails_with(
        &run(&testsrc_with("", &m)),
        &[
            &format!(
                "octopipe: error: model {}: inference failed: output shape [1, ",
                m.display()
            ),
            ", classes]",
        ],
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert_eq!(processed, 0, "{stderr}");
}

#[test]
fn sink_failing_mid_run() {
    if !common::ort_ready() {
        return;
    }
    if !Path::new("/dev/full").exists() {
        common::skip("no /dev/full");
        return;
    }
    let stderr = fails_with(
        &run(&format!(
            "testsrc width=160 height=120 num-buffers=200 ! boxes format=synthetic count=5 ! classify model={} ! jsonl location=/dev/full",
            model("valid-64.onnx").display()
        )),
        &["octopipe: error: /dev/full: write failed: No space left on device (os error 28)"],
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert!(frames_in < 200 || dropped > 0, "{stderr}");
}
