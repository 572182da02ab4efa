//! What a run writes is what it says, and never costs the user an input: each test is a class of
//! fault of `docs/bad-inputs.md` (Outputs, Models), run through the real binary.
//!
//! - An output (a sink's file or folder, `--plot`, `--annotate`, `--mosaic`, `--report-file`)
//!   that resolves to an input of the run, however it is spelled, is refused before anything
//!   starts, naming both, and the input stays byte for byte as it was.
//! - A write that fails part-way (here: a real file-size limit, `RLIMIT_FSIZE`) leaves a JSONL
//!   whose every line parses, and the run fails naming the file, with its report.
//! - Non-finite logits fail the run naming the model and the frame, or (`non-finite=flag`) are
//!   written flagged and counted; class names must match the model's classes.
//! - `--report json` never mixes into a JSONL on stdout; `--report-file` takes the report.

use crate::common;

use common::fails_with;

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

fn succeeds(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "should succeed:\n{stderr}");
    stderr
}

fn model(name: &str) -> PathBuf {
    common::root().join("tests/data/models").join(name)
}

/// A clip in `dir`: 2 JPEGs in `images/`, their DET files in `annotations/`, a copy of the
/// valid model `m.onnx` and `labels.txt` with its 4 classes.
fn clip(dir: &Path) {
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    for i in 0..2 {
        image::RgbImage::from_fn(64, 48, |x, y| {
            image::Rgb([(x * 4) as u8, (y * 5) as u8, 90])
        })
        .save(dir.join(format!("images/frame_{i:05}.jpg")))
        .unwrap();
        std::fs::write(
            dir.join(format!("annotations/frame_{i:05}.txt")),
            "1,2,30,20,1,4,0,0\n",
        )
        .unwrap();
    }
    std::fs::copy(model("valid-64.onnx"), dir.join("m.onnx")).unwrap();
    std::fs::write(
        dir.join("labels.txt"),
        "person\ntwo-wheeler\ncar\nlarge-vehicle\n",
    )
    .unwrap();
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                todo.push(p);
            } else if meta.is_file() {
                let bytes = std::fs::read(&p).unwrap();
                files.push((p, bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn an_output_that_resolves_to_an_input_is_refused_and_the_input_untouched() {
    let dir = common::temp_dir("fidelity-output-on-input");
    clip(&dir);
    std::os::unix::fs::symlink(dir.join("m.onnx"), dir.join("link.jsonl")).unwrap();
    std::fs::hard_link(dir.join("labels.txt"), dir.join("hard.txt")).unwrap();
    let head = "images location=images ! boxes format=det location=annotations \
                ! classify model=m.onnx labels-file=labels.txt";
    let jsonl = |location: &str| format!("{head} ! jsonl location={location}");
    // (description, options, words of the message: the output and the input it meets)
    let cases: Vec<(String, Vec<&str>, Vec<&str>)> = vec![
        (
            jsonl("./m.onnx"),
            vec![],
            vec![
                "octopipe: error: jsonl location=./m.onnx would overwrite classify model=m.onnx (both are ",
                "m.onnx), an input of this run: choose another path (nothing was written)",
            ],
        ),
        (
            jsonl("link.jsonl"),
            vec![],
            vec!["jsonl location=link.jsonl would overwrite classify model=m.onnx (both are "],
        ),
        (
            jsonl("hard.txt"),
            vec![],
            vec!["jsonl location=hard.txt would overwrite classify labels-file=labels.txt"],
        ),
        (
            jsonl("annotations/frame_00000.txt"),
            vec![],
            vec!["jsonl location=annotations/frame_00000.txt is inside boxes location=annotations, a folder this run reads"],
        ),
        (
            jsonl("o.jsonl"),
            vec!["--plot", "images/../m.onnx"],
            vec!["--plot images/../m.onnx would overwrite classify model=m.onnx"],
        ),
        (
            jsonl("o.jsonl"),
            vec!["--mosaic", "labels.txt"],
            vec!["--mosaic labels.txt would overwrite classify labels-file=labels.txt"],
        ),
        (
            jsonl("o.jsonl"),
            vec!["--annotate", "images"],
            vec!["--annotate images would write into images location=images, a folder this run reads"],
        ),
        (
            jsonl("o.jsonl"),
            vec!["--report-file", "annotations/frame_00001.txt"],
            vec!["--report-file annotations/frame_00001.txt is inside boxes location=annotations"],
        ),
        (
            "images location=images ! boxes format=det location=annotations \
             ! preprocess size=64x64 ! tensors location=images"
                .to_string(),
            vec![],
            vec!["tensors location=images would write into images location=images"],
        ),
    ];
    let before = snapshot(&dir);
    for (text, options, words) in &cases {
        let out = output(
            octopipe()
                .current_dir(&dir)
                .args(["run", text])
                .args(options),
        );
        fails_with(&out, words);
        assert_eq!(snapshot(&dir), before, "{text} {options:?} changed a file");
    }
    // A glob's files are inputs one by one: writing beside them into their folder is refused.
    let glob = "images location=images/*.jpg ! boxes format=synthetic count=2 \
                ! classify model=m.onnx ! jsonl location=o.jsonl";
    let out = output(
        octopipe()
            .current_dir(&dir)
            .args(["run", glob, "--annotate", "images"]),
    );
    fails_with(
        &out,
        &["--annotate images would write its files into the folder of images location=images/frame_0000"],
    );
    // Media files too, also as a file:// URI.
    let mp4 = dir.join("flight.mp4");
    std::fs::write(&mp4, b"not really a video").unwrap();
    let media = format!(
        "media location=file://{} ! boxes format=synthetic ! classify model=m.onnx ! jsonl location=flight.mp4",
        mp4.display()
    );
    let out = output(octopipe().current_dir(&dir).args(["run", &media]));
    fails_with(
        &out,
        &["jsonl location=flight.mp4 would overwrite media location="],
    );
    assert_eq!(std::fs::read(&mp4).unwrap(), b"not really a video");
}

#[test]
fn two_outputs_on_one_file_are_refused() {
    let dir = common::temp_dir("fidelity-two-outputs");
    let text = format!(
        "testsrc num-buffers=2 ! boxes format=synthetic ! classify model={} ! jsonl location=o.jsonl",
        model("valid-64.onnx").display()
    );
    let out =
        output(
            octopipe()
                .current_dir(&dir)
                .args(["run", &text, "--report-file", "./o.jsonl"]),
        );
    fails_with(
        &out,
        &["--report-file ./o.jsonl would overwrite jsonl location=o.jsonl (both are "],
    );
    assert!(!dir.join("o.jsonl").exists(), "nothing is created");
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
        // Each model's run replaces the file the one before wrote.
        let stderr = succeeds(&output(octopipe().args(["run", &text, "--force"])));
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
        let json = output(octopipe().args(["run", &text, "--report", "json", "--force"]));
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

#[test]
fn a_json_report_never_mixes_into_jsonl_on_stdout() {
    if !common::ort_ready() {
        return;
    }
    let text = classify_run(&model("valid-64.onnx"), "", "-");
    let out = output(octopipe().args(["run", &text, "--report", "json"]));
    let stderr = succeeds(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let objects: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(objects.len(), 9);
    assert!(objects.iter().all(|o| o["bbox"].is_array()), "{stdout}");
    let report = stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report on stderr:\n{stderr}"));
    let report: serde_json::Value = serde_json::from_str(report).unwrap();
    assert_eq!(report["processed"], 3);
}

#[test]
fn a_report_file_takes_the_report() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("fidelity-report-file");
    let text = classify_run(&model("valid-64.onnx"), "", "-");
    let file = dir.join("report.json");
    let out = output(octopipe().args([
        "run",
        &text,
        "--report",
        "json",
        "--report-file",
        file.to_str().unwrap(),
    ]));
    let stderr = succeeds(&out);
    assert!(!stderr.contains("budget_ms"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 9, "stdout holds the JSONL only");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(report["processed"], 3);
    // The text table, to a file (replacing the JSON one: --force).
    let out = output(octopipe().args([
        "run",
        &text,
        "--force",
        "--report-file",
        file.to_str().unwrap(),
    ]));
    let stderr = succeeds(&out);
    assert!(!stderr.contains("stage (ms)"), "{stderr}");
    let table = std::fs::read_to_string(&file).unwrap();
    assert!(
        table.contains("frames: 3 in = 3 processed + 0 dropped"),
        "{table}"
    );
    // A report file that cannot be made fails before the run, not after it.
    let out = output(octopipe().args(["run", &text, "--report-file", "/nowhere/r.json"]));
    let stderr = fails_with(
        &out,
        &["octopipe: error: --report-file /nowhere/r.json: its folder /nowhere does not exist: create it, or choose another path (nothing was written)"],
    );
    assert!(!stderr.contains("frames: "), "{stderr}");
    assert!(out.stdout.is_empty());
}
