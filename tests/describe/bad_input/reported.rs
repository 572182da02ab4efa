//! What a run says about its outputs, its errors and its time (issue 39): outputs checked before
//! the start under one rule, an output not written failing the run, a `--set` the description
//! never uses, an error said once in plain words (GStreamer's detail only with `-v`), the JSON
//! report's `error`, and the budget report naming the stage that bounds the run.

use super::*;

/// `octopipe ARGS...`, killed after [`TIMEOUT`].
fn octopipe_args(args: &[&str]) -> Output {
    common::output_within(octopipe().args(args), TIMEOUT)
}

/// `testsrc ... ! classify (the tiny model) ! jsonl location=OUT`.
fn small_run(out: &Path) -> String {
    format!(
        "testsrc width=160 height=120 num-buffers=3 ! boxes format=synthetic count=3 ! classify model={} ! jsonl location={}",
        model("valid-64.onnx").display(),
        out.display()
    )
}

#[test]
fn every_output_in_a_missing_folder_is_refused_before_the_start() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("reported-missing-folder");
    let out = dir.join("o.jsonl");
    let missing = dir.join("missing");
    for (option, name) in [
        ("--plot", "p.svg"),
        ("--mosaic", "m.png"),
        ("--report-file", "r.json"),
        ("--annotate", "frames"),
    ] {
        let path = missing.join(name);
        let stderr = fails_with(
            &octopipe_args(&["run", &small_run(&out), option, path.to_str().unwrap()]),
            &[&format!(
                "octopipe: error: {option} {}: its folder {} does not exist: create it, or choose another path (nothing was written)",
                path.display(),
                missing.display()
            )],
        );
        assert!(!report_printed(&stderr), "nothing ran: {stderr}");
        assert!(!out.exists(), "{option}: nothing ran, nothing was written");
        assert!(!missing.exists(), "{option}: no folder made");
    }
    // A sink's file, the same rule.
    let stderr = fails_with(
        &run(&small_run(&missing.join("o.jsonl"))),
        &[&format!(
            "octopipe: error: jsonl location={}/o.jsonl: its folder {} does not exist",
            missing.display(),
            missing.display()
        )],
    );
    assert!(!report_printed(&stderr), "{stderr}");
}

/// Whether `stderr` holds a report's frame accounting (`frames: N in = ...`).
fn report_printed(stderr: &str) -> bool {
    stderr.lines().any(|l| l.starts_with("frames: "))
}

#[test]
fn an_output_asked_for_and_not_written_fails_the_run() {
    if !common::ort_ready() || !common::dev_full() {
        return;
    }
    let dir = common::temp_dir("reported-not-written");
    // The plot's file is a link to a full disk: the check passes (no earlier output), the
    // plot fails when it is written at the end.
    let plot = dir.join("p.png");
    std::os::unix::fs::symlink("/dev/full", &plot).unwrap();
    let out = dir.join("o.jsonl");
    let stderr = fails_with(
        &octopipe_args(&["run", &small_run(&out), "--plot", plot.to_str().unwrap()]),
        &[&format!(
            "octopipe: error: --plot {}: cannot draw the plot: ",
            plot.display()
        )],
    );
    assert_eq!(common::frame_accounting(&stderr), (3, 3, 0), "{stderr}");
    assert_eq!(
        common::read_jsonl(&out).len(),
        9,
        "the run's own output is whole"
    );
}

#[test]
fn a_set_the_description_never_uses_is_refused_and_missing_variables_are_listed_at_once() {
    let text = "testsrc num-buffers=1 ! boxes format=synthetic ! classify model=${model} ! jsonl location=${out}";
    fails_with(
        &octopipe_args(&[
            "run",
            text,
            "--set",
            "modle=m.onnx",
            "--set",
            "out=o.jsonl",
        ]),
        &["octopipe: error: <command line>:1:65: --set modle=...: the description never uses ${modle} (did you mean 'model'? it uses model, out)"],
    );
    fails_with(
        &octopipe_args(&["run", text]),
        &["<command line>:1:65: variables 'model', 'out' are not set (give them with --set model=VALUE --set out=VALUE, or set them in the environment)"],
    );
}

#[test]
fn a_text_file_is_said_once_in_plain_words_with_gstreamers_detail_only_with_v() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("reported-text");
    let path = dir.join("flight.mp4");
    std::fs::write(&path, "this is not a video\n".repeat(100)).unwrap();
    let text = testsrc_free(&format!("media location={}", path.display()));
    let said = format!(
        "octopipe: error: {}: not a video (GStreamer found plain text)",
        path.display()
    );
    let stderr = fails_with(&octopipe_args(&["run", &text]), &[&said]);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines, [said.as_str()], "one line, nothing else:\n{stderr}");
    let stderr = fails_with(&octopipe_args(&["run", "-v", &text]), &[&said]);
    assert!(
        stderr.contains("octopipe: GStreamer's detail: ") && stderr.contains(".c("),
        "-v gives GStreamer's detail:\n{stderr}"
    );
    // The JSON report: the error, and no headroom with no frame processed.
    let out = octopipe_args(&[
        "run",
        &text.replace("location=-", "location=/dev/null"),
        "--report",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(report["version"], 3, "{report}");
    assert_eq!(
        report["error"],
        serde_json::json!({
            "kind": "input",
            "message": format!("{}: not a video (GStreamer found plain text)", path.display()),
            "input": path.display().to_string(),
        }),
        "{report}"
    );
    assert!(report["headroom_ms"].is_null(), "{report}");
}

#[test]
fn the_budget_report_names_a_slow_classifier_as_the_bottleneck() {
    if !common::ort_ready() {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    // 150 crops a frame through the shared classifier on one thread: classify does nearly all
    // of the work, and every stage before it waits on it.
    let text = format!(
        "testsrc width=640 height=480 num-buffers=20 ! boxes format=synthetic count=150 \
         ! classify model={} ort-threads=1 ! jsonl location=/dev/null",
        data.join("models/visdrone-crops-64.onnx").display()
    );
    let out = octopipe_args(&["run", "--force", &text]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("bottleneck: "))
        .unwrap_or_else(|| panic!("no bottleneck line:\n{stderr}"));
    assert!(line.starts_with("bottleneck: classify: "), "{stderr}");
    let busy = line_numbers_of(line)[0];
    assert!(busy >= 80, "{stderr}");
    assert!(line.contains("% busy; frames waited "), "{stderr}");
    assert!(!stderr.contains("late-frame policy"), "file mode: {stderr}");
    // The JSON report: the classify row's time apart, and its busy share.
    let json = octopipe_args(&["run", "--force", &text, "--report", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = report["stages"].as_array().unwrap();
    let classify = rows.iter().find(|r| r["stage"] == "classify").unwrap();
    assert!(
        classify["busy_percent"].as_f64().unwrap() >= 80.0,
        "{report}"
    );
    assert!(classify["queued"]["p50_ms"].as_f64().is_some(), "{report}");
    assert!(
        classify["work"]["p50_ms"].as_f64().unwrap() > 0.0,
        "{report}"
    );
}

/// The numbers in `line`, in order.
fn line_numbers_of(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}
