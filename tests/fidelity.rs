//! What a run writes is what it says, and never costs the user an input: each test is a class of
//! fault of `docs/bad-inputs.md` (Outputs, Models), run through the real binary.
//!
//! - A write that fails part-way (here: a real file-size limit, `RLIMIT_FSIZE`) leaves a JSONL
//!   whose every line parses, and the run fails naming the file, with its report.
//! - Non-finite logits fail the run naming the model and the frame, or (`non-finite=flag`) are
//!   written flagged and counted; class names must match the model's classes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

fn octopipe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_octopipe"))
}

fn output(cmd: &mut Command) -> Output {
    common::output_within(cmd, TIMEOUT)
}

/// Fails with a non-zero exit, no panic, and every one of `words` on stderr; returns stderr.
fn fails_with(out: &Output, words: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "should fail:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for w in words {
        assert!(stderr.contains(w), "expected {w:?} in:\n{stderr}");
    }
    stderr
}

fn succeeds(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "should succeed:\n{stderr}");
    stderr
}

fn model(name: &str) -> PathBuf {
    common::root().join("tests/data/models").join(name)
}

#[test]
fn a_write_that_fails_part_way_leaves_only_whole_jsonl_lines() {
    use std::os::unix::process::CommandExt;
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("fidelity-fsize");
    let out_path = dir.join("o.jsonl");
    let text = format!(
        "testsrc width=160 height=120 num-buffers=30 ! boxes format=synthetic count=5 \
         ! classify model={} ! jsonl location={}",
        model("valid-64.onnx").display(),
        out_path.display()
    );
    // A real file-size limit: writes past 3000 bytes fail with EFBIG (octopipe ignores the
    // SIGXFSZ that comes with it), after a short write that ends mid-line.
    const LIMIT: u64 = 3000;
    let mut cmd = octopipe();
    cmd.args(["run", &text]);
    // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let stderr = fails_with(
        &output(&mut cmd),
        &[
            &format!(
                "octopipe: error: {}: write failed: File too large (os error 27); the file was cut back to its last complete line (",
                out_path.display()
            ),
            "frames: ",
        ],
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    let bytes = std::fs::read(&out_path).unwrap();
    assert!(
        !bytes.is_empty() && bytes.len() as u64 <= LIMIT,
        "{}",
        bytes.len()
    );
    assert_eq!(bytes.last(), Some(&b'\n'), "ends with a complete line");
    let lines = common::read_jsonl(&out_path);
    let said: usize = stderr
        .split("last complete line (")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(lines.len(), said, "{stderr}");
    assert!(lines.iter().all(|o| o["bbox"].is_array()));
}

/// `testsrc` (3 frames, 3 boxes each) classified by `model` with `props`, to `location`.
fn classify_run(model: &Path, props: &str, location: &str) -> String {
    format!(
        "testsrc width=160 height=120 num-buffers=3 ! boxes format=synthetic count=3 \
         ! classify model={} {props} ! jsonl location={location}",
        model.display()
    )
}

#[test]
fn non_finite_logits_fail_the_run_naming_the_model_and_the_frame() {
    if !common::ort_ready() {
        return;
    }
    for (name, kind) in [("nan-logits.onnx", "NaN"), ("inf-logits.onnx", "infinite")] {
        let m = model(name);
        let stderr = fails_with(
            &output(octopipe().args(["run", &classify_run(&m, "", "-")])),
            &[
                &format!(
                    "octopipe: error: model {}: {kind} logits for stream 0 frame 0, box [",
                    m.display()
                ),
                "] (batch 0, crop 0): no class can be given (classify non-finite=flag writes such objects flagged instead)",
            ],
        );
        let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
        assert_eq!(frames_in, processed + dropped, "{stderr}");
    }
}

#[test]
fn non_finite_logits_can_be_flagged_and_counted() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("fidelity-flag");
    for name in ["nan-logits.onnx", "inf-logits.onnx"] {
        let o = dir.join("o.jsonl");
        let text = classify_run(&model(name), "non-finite=flag", &o.display().to_string());
        let stderr = succeeds(&output(octopipe().args(["run", &text])));
        assert!(
            stderr.contains("objects: 9 in = 0 classified + 9 non-finite + 0 skipped"),
            "{stderr}"
        );
        let objects = common::read_jsonl(&o);
        assert_eq!(objects.len(), 9);
        for obj in &objects {
            assert_eq!(obj["non_finite"], true, "{obj}");
            for key in ["label", "class_id", "score"] {
                assert!(
                    obj.get(key).is_none(),
                    "no {key} for a non-finite crop: {obj}"
                );
            }
        }
        let json = output(octopipe().args(["run", &text, "--report", "json"]));
        succeeds(&json);
        let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(report["non_finite"], 9);
        assert_eq!(report["objects"], 0);
    }
    // Finite logits are never flagged.
    let o = dir.join("valid.jsonl");
    let text = classify_run(
        &model("valid-64.onnx"),
        "non-finite=flag",
        &o.display().to_string(),
    );
    succeeds(&output(octopipe().args(["run", &text])));
    assert!(common::read_jsonl(&o)
        .iter()
        .all(|obj| obj.get("non_finite").is_none() && obj["score"].is_number()));
}

#[test]
fn labels_must_name_every_class_of_the_model() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("fidelity-labels");
    let m = model("valid-64.onnx");
    fails_with(
        &output(octopipe().args(["run", &classify_run(&m, "labels=person,car,bus", "-")])),
        &[&format!(
            "octopipe: error: model {} has 4 classes but labels=person,car,bus names 3: give one name per class, in class-index order",
            m.display()
        )],
    );
    let five = dir.join("five.txt");
    std::fs::write(&five, "a\nb\nc\nd\ne\n").unwrap();
    fails_with(
        &output(octopipe().args([
            "run",
            &classify_run(&m, &format!("labels-file={}", five.display()), "-"),
        ])),
        &[&format!(
            "octopipe: error: model {} has 4 classes but labels-file={} names 5: give one name per class, in class-index order",
            m.display(),
            five.display()
        )],
    );
    let out = output(octopipe().args(["run", &classify_run(&m, "labels=a,b,c,d", "-")]));
    succeeds(&out);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let object: serde_json::Value = serde_json::from_str(line).unwrap();
        let label = object["label"].as_str().unwrap();
        assert!(["a", "b", "c", "d"].contains(&label), "{line}");
    }
}
