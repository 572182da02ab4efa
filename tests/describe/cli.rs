//! The `octopipe` command: clear errors naming the bad input, non-zero exit, never a panic.

use crate::common;

use std::process::{Command, Output};

use common::fails_with;

fn octopipe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn description_errors_show_the_caret() {
    let out = octopipe(&["run", "testsrc ! boxes format=synthetic ! preprocess sise=64x64 ! classify model=m.onnx ! jsonl location=-"]);
    fails_with(
        &out,
        &[
            "<command line>:1:47: stage 'preprocess' has no property 'sise' (did you mean 'size'?)",
            "^^^^",
        ],
    );
}

#[test]
fn a_missing_pipeline_file_is_named() {
    fails_with(
        &octopipe(&["run", "pipelines/nope.pipe"]),
        &["cannot read pipeline file pipelines/nope.pipe"],
    );
}

#[test]
fn a_missing_model_is_named_before_anything_runs() {
    let out = octopipe(&[
        "run",
        "testsrc ! boxes format=synthetic ! classify model=/nowhere/m.onnx ! jsonl location=-",
    ]);
    fails_with(&out, &["model /nowhere/m.onnx: no such file"]);
}

#[test]
fn a_missing_onnx_runtime_says_how_to_fix_it() {
    let dir = common::temp_dir("ort");
    let model = dir.join("m.onnx");
    std::fs::write(&model, b"not a model").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .env("ORT_DYLIB_PATH", "/nowhere/libonnxruntime.so.1.31.1")
        .args([
            "run",
            &format!(
                "testsrc ! boxes format=synthetic ! classify model={} ! jsonl location=-",
                model.display()
            ),
        ])
        .output()
        .unwrap();
    fails_with(
        &out,
        &[
            "ONNX Runtime library /nowhere/libonnxruntime.so.1.31.1",
            "pip install onnxruntime==1.31.1",
        ],
    );
}

#[test]
fn a_file_that_is_not_a_model_is_named() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("notmodel");
    let model = dir.join("m.onnx");
    std::fs::write(&model, b"not a model").unwrap();
    let out = octopipe(&[
        "run",
        &format!(
            "testsrc ! boxes format=synthetic ! classify model={} ! jsonl location=-",
            model.display()
        ),
    ]);
    fails_with(
        &out,
        &[&format!(
            "model {}: not a loadable ONNX model",
            model.display()
        )],
    );
}

#[test]
fn a_missing_image_folder_is_named() {
    if !common::ort_ready() {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    let model = data.join("models/visdrone-crops-64.onnx");
    let out = octopipe(&[
        "run",
        &format!("images location=/nowhere/images ! boxes format=synthetic ! classify model={} ! jsonl location=-", model.display()),
    ]);
    fails_with(&out, &["/nowhere/images"]);
}

#[test]
fn inspect_lists_stages_and_properties() {
    let out = octopipe(&["inspect"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for stage in [
        "images",
        "media",
        "testsrc",
        "app",
        "boxes",
        "batch",
        "preprocess",
        "classify",
        "jsonl",
        "tensors",
        "appsink",
        "queue",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(stage)),
            "{stage} missing:\n{text}"
        );
    }
    let out = octopipe(&["inspect", "preprocess"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("size") && text.contains("0.485,0.456,0.406") && text.contains("nchw|nhwc"),
        "{text}"
    );
    fails_with(
        &octopipe(&["inspect", "preprocss"]),
        &["unknown stage 'preprocss' (did you mean 'preprocess'?)"],
    );
}

/// `inspect` to a pipe is at most 100 columns wide: a long description (batch's `devices`) or
/// doc goes on over the next lines inside its column, the rows still starting with their names.
#[test]
fn inspect_wraps_long_cells_to_100_columns() {
    for args in [
        &["inspect"][..],
        &["inspect", "batch"],
        &["inspect", "tilestats"],
    ] {
        let out = octopipe(args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "{args:?}: {line:?} is longer than 100"
            );
        }
    }
    let text = String::from_utf8_lossy(&octopipe(&["inspect", "batch"]).stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("  devices "))
        .unwrap_or_else(|| panic!("no devices row:\n{text}"));
    assert!(
        lines[at].contains("spread the streams") && lines[at + 1].starts_with(&" ".repeat(66)),
        "the description goes on in its column:\n{text}"
    );
    assert!(lines.iter().any(|l| l.starts_with("  name ")), "{text}");
    // On a terminal, its width: 140 columns under a pseudo-terminal (util-linux `script`).
    let bin = env!("CARGO_BIN_EXE_octopipe");
    let Ok(out) = Command::new("script")
        .args([
            "-qec",
            &format!("stty cols 140; {bin} inspect batch"),
            "/dev/null",
        ])
        .output()
    else {
        return;
    };
    let wide = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let longest = wide.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest > 100 && longest <= 140, "{longest}:\n{wide}");
}

/// Every boolean property takes one set of spellings, letters in any case; anything else is
/// refused naming the property and listing them.
#[test]
fn booleans_take_one_documented_set_of_spellings() {
    let run = |live: &str| {
        octopipe(&[
            "run",
            &format!("testsrc live={live} num-buffers=2 width=64 height=48 ! boxes format=synthetic count=1 ! jsonl location=-"),
        ])
    };
    for live in [
        "true", "false", "yes", "no", "on", "off", "1", "0", "ON", "Off", "TRUE", "No",
    ] {
        let out = run(live);
        assert!(
            out.status.success(),
            "live={live}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for live in ["maybe", "y", "2", "enabled", "t"] {
        fails_with(
            &run(live),
            &[&format!(
                "testsrc: live must be a boolean: true/false, yes/no, on/off, 1/0 (any case), found '{live}'"
            )],
        );
    }
}

#[test]
fn a_model_that_does_not_fit_the_preprocess_settings_is_refused() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let model = data.join("models/visdrone-crops-64.onnx");
    let run = |pre: &str| {
        octopipe(&[
            "run",
            &format!("testsrc ! boxes format=synthetic ! preprocess {pre} ! classify model={} ! jsonl location=-", model.display()),
        ])
    };
    fails_with(
        &run("size=32x32"),
        &[
            "input 'input' is Float32 [-1, 3, 64, 64]",
            "preprocess size=32x32 was asked for",
        ],
    );
    fails_with(
        &run("layout=nhwc"),
        &["[batch, height, width, 3] float32 is needed for layout=nhwc"],
    );
}

/// A build without the `bench` feature names the feature and the build command for `bench` and
/// `probe` (the scores are `octopipe eval`, in every build).
#[cfg(not(feature = "bench"))]
#[test]
fn bench_without_the_feature_says_how_to_build_it() {
    for args in [&["bench", "track"][..], &["probe"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(args)
            .output()
            .unwrap();
        common::fails_with(
            &out,
            &[
                "the `bench` feature",
                "cargo build --release --features bench",
                "octopipe eval",
            ],
        );
    }
}

/// One overwrite rule for every output: an existing output file (a sink's, `--plot`,
/// `--report-file`, `--annotate`'s folder, `tilesink`'s folder) is refused before anything runs,
/// naming it and the way to replace it, and left as it was; `--force` replaces it; a run that
/// fails at its first frame leaves no empty output behind, so the retry is not refused.
#[test]
fn outputs_are_never_overwritten_without_force_and_failures_leave_nothing() {
    let dir = common::temp_dir("cli-overwrite");
    let out = dir.join("o.jsonl");
    let text = format!(
        "videotestsrc num-buffers=2 ! video/x-raw,width=160,height=120 ! boxes format=synthetic count=2 ! jsonl location={}",
        out.display()
    );
    let ok = |o: &Output| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ok(&octopipe(&["run", &text]));
    let first = std::fs::read(&out).unwrap();
    assert!(!first.is_empty());
    fails_with(
        &octopipe(&["run", &text]),
        &[
            &format!("{}: exists already", out.display()),
            "overwrite=true on the sink (octopipe run --force) replaces it",
        ],
    );
    assert_eq!(std::fs::read(&out).unwrap(), first, "left as it was");
    ok(&octopipe(&["run", &text, "--force"]));
    // The command line's outputs: refused while they exist, before the sink writes anything.
    std::fs::remove_file(&out).unwrap();
    let plot = dir.join("p.svg");
    let report = dir.join("r.json");
    let frames = dir.join("frames");
    std::fs::write(&plot, "mine").unwrap();
    std::fs::write(&report, "mine").unwrap();
    std::fs::create_dir_all(&frames).unwrap();
    std::fs::write(frames.join("note.txt"), "mine").unwrap();
    for (flag, path, words) in [
        ("--plot", &plot, "exists already"),
        ("--report-file", &report, "exists already"),
        ("--annotate", &frames, "holds files already"),
    ] {
        fails_with(
            &octopipe(&["run", &text, flag, path.to_str().unwrap()]),
            &[words, "--force to replace it (nothing was written)"],
        );
        assert!(!out.exists(), "{flag}: the sink wrote nothing");
    }
    assert_eq!(std::fs::read_to_string(&plot).unwrap(), "mine");
    ok(&octopipe(&[
        "run",
        &text,
        "--force",
        "--plot",
        plot.to_str().unwrap(),
        "--report-file",
        report.to_str().unwrap(),
    ]));
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
    assert!(std::fs::read_to_string(&report).unwrap().contains("frames"));
    // A tilesink run that fails at its first frame leaves no index.jsonl; the retry runs.
    let images = dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    std::fs::write(images.join("a.jpg"), "not a jpeg").unwrap();
    let kept = dir.join("kept");
    // (on-damaged=fail: the file that is no JPEG fails the run rather than being skipped)
    let tiles = format!(
        "images location={} on-damaged=fail ! tiles size=32x32 ! tilesink location={}",
        images.display(),
        kept.display()
    );
    fails_with(&octopipe(&["run", &tiles]), &["a.jpg"]);
    assert!(!kept.join("index.jsonl").exists(), "no empty leftover");
    image::RgbImage::from_pixel(64, 64, image::Rgb([90, 120, 30]))
        .save(images.join("a.jpg"))
        .unwrap();
    ok(&octopipe(&["run", &tiles]));
    assert_eq!(
        std::fs::read_to_string(kept.join("index.jsonl"))
            .unwrap()
            .lines()
            .count(),
        4
    );
    fails_with(
        &octopipe(&["run", &tiles]),
        &[
            "already holds",
            "overwrite=true on the sink (octopipe run --force)",
        ],
    );
    ok(&octopipe(&["run", &tiles, "--force"]));
}

#[test]
fn cuda_wait_takes_one_of_its_words_and_says_when_there_is_no_gpu() {
    fails_with(
        &octopipe(&["--cuda-wait", "blocking", "inspect", "boxes"]),
        &["`blocking` is not a way to wait for the GPU: one of auto, spin, yield, block"],
    );
    let out = octopipe(&["inspect", "boxes", "--cuda-wait", "block"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("boxes"));
    if common::gpu("cuda_wait_takes_one_of_its_words_and_says_when_there_is_no_gpu") {
        assert!(!stderr.contains("nothing to set"), "{stderr}");
    } else {
        assert!(
            stderr.contains("octopipe: --cuda-wait block has nothing to set: "),
            "{stderr}"
        );
    }
}
