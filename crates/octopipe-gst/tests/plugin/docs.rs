//! Every `gst-launch-1.0` example of docs/gstreamer.md runs as written, or says why it cannot
//! here: each is marked by the line before its block, `<!-- example: runs -->` or
//! `<!-- example: not run here: REASON -->`. The runnable ones are run by `bash` with the
//! built plugin, under a time limit (a hung pipeline fails the test), in a folder holding the
//! inputs the examples name (`frames/%05d.jpg`: the clip's images; `flight.mp4`, `a.mp4` ...
//! `d.mp4`: the clip's first frames as H.264), and what each writes is checked.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// The marker of a block that runs.
const RUNS: &str = "<!-- example: runs -->";
/// The start of the marker of a block that cannot run here.
const NOT_RUN: &str = "<!-- example: not run here: ";
/// How long one example may take (debug build, two cores).
const LIMIT: Duration = Duration::from_secs(300);

/// A `gst-launch-1.0` block of the docs: its text, and whether it is marked runnable.
struct Example {
    line: usize,
    text: String,
    runs: bool,
}

/// The `gst-launch-1.0` blocks of `markdown`; fails on a block with no marker.
fn examples(markdown: &str) -> Vec<Example> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```sh") {
            i += 1;
            continue;
        }
        let start = i;
        let end = (start + 1..lines.len())
            .find(|&k| lines[k].starts_with("```"))
            .unwrap_or_else(|| panic!("docs/gstreamer.md:{}: the block never ends", start + 1));
        let text = lines[start + 1..end].join("\n");
        i = end + 1;
        if !text.contains("gst-launch-1.0") {
            continue;
        }
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .copied()
            .unwrap_or("");
        let runs = match marker {
            RUNS => true,
            m if m.starts_with(NOT_RUN) && m.len() > NOT_RUN.len() + 8 => false,
            m => panic!(
                "docs/gstreamer.md:{}: a gst-launch-1.0 example without `{RUNS}` or \
                 `{NOT_RUN}REASON -->` on the line before it (found {m:?})",
                start + 1
            ),
        };
        out.push(Example {
            line: start + 1,
            text,
            runs,
        });
    }
    out
}

/// The values of `key=` in `text` after each `element`.
fn locations(text: &str, element: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut found = Vec::new();
    for (k, w) in words.iter().enumerate() {
        if *w != element {
            continue;
        }
        let props = words[k + 1..].iter().take_while(|w| **w != "!");
        for p in props {
            if let Some(v) = p.strip_prefix("location=") {
                found.push(v.to_string());
            }
        }
    }
    found
}

/// The inputs the examples name, made once in `dir`.
fn inputs(data: &Path, dir: &Path) -> PathBuf {
    let inputs = dir.join("inputs");
    numbered_clip(data, &inputs.join("frames"));
    // 12 frames: more than the detector branch's queue holds (10 MB), so the recorder example
    // deadlocks at preroll unless x264enc outputs frames as they come.
    let flight = clip_h264(&inputs, 12);
    std::fs::rename(&flight, inputs.join("flight.mp4")).unwrap();
    let short = clip_h264(&inputs, 4);
    for name in ["a.mp4", "b.mp4", "c.mp4", "d.mp4"] {
        std::fs::copy(&short, inputs.join(name)).unwrap();
    }
    inputs
}

#[test]
fn every_gst_launch_example_of_the_docs_runs_or_says_why_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let markdown = std::fs::read_to_string(root.join("docs/gstreamer.md")).unwrap();
    let examples = examples(&markdown);
    assert!(
        examples.iter().filter(|e| e.runs).count() >= 4,
        "runnable examples"
    );
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let Some(plugins) = plugin_dir() else { return };
    init();
    let dir = tmp("docs");
    let inputs = inputs(&data, &dir);
    for (k, example) in examples.iter().enumerate() {
        if !example.runs {
            eprintln!("docs/gstreamer.md:{}: not run here (marked)", example.line);
            continue;
        }
        let work = dir.join(format!("example-{k}"));
        std::fs::create_dir_all(&work).unwrap();
        for entry in std::fs::read_dir(&inputs).unwrap() {
            let entry = entry.unwrap();
            std::os::unix::fs::symlink(entry.path(), work.join(entry.file_name())).unwrap();
        }
        let started = Instant::now();
        let out = std::process::Command::new("timeout")
            .args(["-k", "10", &LIMIT.as_secs().to_string(), "bash", "-e", "-c"])
            .arg(&example.text)
            .current_dir(&work)
            .env("GST_PLUGIN_PATH", &plugins)
            .env("GST_REGISTRY", plugins.join("registry.bin"))
            .env("OCTOPIPE_DATA", &data)
            .env_remove("GST_DEBUG")
            .output()
            .unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(124),
            "docs/gstreamer.md:{}: still running after {LIMIT:?} (a hung pipeline)\n{}",
            example.line,
            example.text
        );
        assert!(
            out.status.success(),
            "docs/gstreamer.md:{}: {}\n{stderr}\n{}",
            example.line,
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        eprintln!(
            "docs/gstreamer.md:{}: ran in {:.1} s",
            example.line,
            took.as_secs_f64()
        );
        let jsonl = locations(&example.text, "octojsonl");
        let files = locations(&example.text, "filesink");
        assert!(!jsonl.is_empty() || !files.is_empty(), "writes something");
        for f in &jsonl {
            let objects = objects(&work.join(f));
            assert!(!objects.is_empty(), "{f}: no objects");
        }
        for f in &files {
            let len = std::fs::metadata(work.join(f)).map_or(0, |m| m.len());
            assert!(len > 1000, "{f}: {len} bytes");
        }
    }
}
