//! The documentation as a newcomer meets it: every command block of README.md and of the pages
//! of docs/ either runs as written or says why not (docs/contributing.md, "Checked
//! documentation").

use crate::common;

use std::process::Command;

/// The runnable blocks of a Markdown text: each ```sh fence right after a line
/// `<!-- runnable -->`, with the line number of the marker.
fn runnable_blocks(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "<!-- runnable -->" {
            assert_eq!(
                lines.get(i + 1).map(|l| l.trim()),
                Some("```sh"),
                "line {}: the runnable marker stands right before a ```sh fence",
                i + 1
            );
            let start = i + 2;
            let len = lines[start..]
                .iter()
                .position(|l| l.trim() == "```")
                .unwrap_or_else(|| panic!("line {}: the fence is not closed", i + 2));
            blocks.push((i + 1, lines[start..start + len].join("\n")));
            i = start + len;
        }
        i += 1;
    }
    blocks
}

#[test]
fn runnable_blocks_are_the_marked_sh_fences() {
    let text = "a\n<!-- runnable -->\n```sh\necho 1\necho 2\n```\n```sh\nnot marked\n```\n";
    assert_eq!(runnable_blocks(text), [(2, "echo 1\necho 2".to_string())]);
}

/// The pages of docs/ whose ```sh blocks are not yet marked runnable or not (their authors
/// mark them when they next edit them): every other page, and README.md, says for each block.
const DOCS_NOT_YET_MARKED: &[&str] = &["gstreamer.md", "scale.md", "security.md"];

/// README.md and the Markdown pages of docs/ (the pages moved out of the README among them),
/// README.md first.
fn docs_pages() -> Vec<std::path::PathBuf> {
    let root = common::root();
    let mut docs = vec![root.join("README.md")];
    docs.extend(
        common::sorted_files(&root.join("docs"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    docs
}

/// The ```sh fences of a Markdown text that say neither `<!-- runnable -->` nor
/// `<!-- not runnable: REASON -->` (a reason given) on the line right before them: their line
/// numbers.
fn unmarked_sh_blocks(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut unmarked = Vec::new();
    let mut in_fence = false;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        if in_fence {
            in_fence = line != "```";
            continue;
        }
        if !line.starts_with("```") {
            continue;
        }
        in_fence = true;
        if line != "```sh" {
            continue;
        }
        let before = if i == 0 { "" } else { lines[i - 1].trim() };
        let says_why = before
            .strip_prefix("<!-- not runnable:")
            .and_then(|r| r.strip_suffix("-->"))
            .is_some_and(|reason| !reason.trim().is_empty());
        if before != "<!-- runnable -->" && !says_why {
            unmarked.push(i + 1);
        }
    }
    unmarked
}

#[test]
fn unmarked_sh_blocks_are_those_that_say_nothing() {
    let text =
        "<!-- runnable -->\n```sh\na\n```\n<!-- not runnable: it builds -->\n```sh\nb\n```\n\
                <!-- not runnable: -->\n```sh\nc\n```\n```text\n```sh\n```\n```sh\nd\n```\n";
    assert_eq!(unmarked_sh_blocks(text), [10, 16]);
}

/// Every command block of README.md and of the docs pages (those moved out of the README among
/// them) is either run by `every_runnable_command_of_the_docs_runs` or says why not
/// (docs/contributing.md, "Checked documentation").
#[test]
fn every_sh_block_of_the_docs_is_runnable_or_says_why_not() {
    let mut unmarked = Vec::new();
    let mut pages = 0;
    for doc in docs_pages() {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        if DOCS_NOT_YET_MARKED.contains(&name.as_str()) {
            continue;
        }
        pages += 1;
        let text = std::fs::read_to_string(&doc).unwrap();
        unmarked.extend(
            unmarked_sh_blocks(&text)
                .into_iter()
                .map(|line| format!("{name}:{line}")),
        );
    }
    assert!(pages >= 10, "only {pages} pages checked");
    assert!(
        unmarked.is_empty(),
        "```sh blocks neither `<!-- runnable -->` nor `<!-- not runnable: REASON -->`: {unmarked:?}"
    );
}

/// Every block of README.md and docs/*.md marked runnable (docs/contributing.md, "Checked
/// documentation") runs and succeeds, as written, so the docs cannot drift from what octopipe
/// does. Each document's blocks run in order with bash -euo pipefail in a fresh folder that
/// stands for a checkout after `cargo build --release` (its pipelines/, scripts/, tests/data/
/// and target/release/octopipe, which is this build's binary), with the environment of
/// `. scripts/env.sh`. The README's and the moved pages' blocks are among them.
#[test]
fn every_runnable_command_of_the_docs_runs() {
    if common::shared_data().is_none() || !common::ort_ready() {
        return;
    }
    let mut ran = Vec::new();
    for doc in docs_pages() {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let blocks = runnable_blocks(&std::fs::read_to_string(&doc).unwrap());
        if blocks.is_empty() {
            continue;
        }
        let dir = docs_folder(&format!("docs-{name}"));
        for (line, block) in blocks {
            let started = std::time::Instant::now();
            let out = common::output_within(
                Command::new("bash")
                    .args(["-euo", "pipefail", "-c", &block])
                    .current_dir(&dir),
                std::time::Duration::from_secs(600),
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "{name}:{line}: the block failed:\n{block}\n{stderr}"
            );
            println!(
                "{name}:{line}: ran in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            ran.push(name.clone());
        }
    }
    for page in ["README.md", "satellite.md", "stations.md"] {
        assert!(
            ran.iter().any(|n| n == page),
            "no runnable block of {page} ran: {ran:?}"
        );
    }
    assert!(
        ran.len() >= 5,
        "only {} runnable blocks: {ran:?}",
        ran.len()
    );
}

/// A fresh folder that stands for a checkout after `cargo build --release`, where a runnable
/// block of the docs runs: this checkout's pipelines/, scripts/, tests/ and this build's binary
/// as target/release/octopipe.
fn docs_folder(name: &str) -> std::path::PathBuf {
    let root = common::root();
    let dir = common::temp_dir(name);
    for part in ["pipelines", "scripts", "tests"] {
        std::os::unix::fs::symlink(root.join(part), dir.join(part)).unwrap();
    }
    std::fs::create_dir_all(dir.join("target/release")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_octopipe"),
        dir.join("target/release/octopipe"),
    )
    .unwrap();
    dir
}

/// docs/stations.md's streams example, as written there (a station, a live test stream added, listed
/// and removed over HTTP, the station stopped), is a runnable block and runs to its end within
/// a minute: a live `testsrc` or a station left running would never end.
#[test]
fn the_stations_streams_example_runs_to_its_end() {
    if common::shared_data().is_none() || !common::ort_ready() {
        return;
    }
    let page = std::fs::read_to_string(common::root().join("docs/stations.md")).unwrap();
    let (line, block) = runnable_blocks(&page)
        .into_iter()
        .find(|(_, b)| b.contains("--streams"))
        .expect("docs/stations.md: the streams example (octopipe run --streams) is not a runnable block");
    let dir = docs_folder("docs-streams");
    let started = std::time::Instant::now();
    let out = common::output_within(
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", &block])
            .current_dir(&dir),
        std::time::Duration::from_secs(60),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && started.elapsed().as_secs() < 60,
        "docs/stations.md:{line}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    for said in [r#"{"id":7}"#, r#""state":"running""#, r#""streams":0"#] {
        assert!(
            stdout.contains(said),
            "docs/stations.md:{line}: no {said} in\n{stdout}"
        );
    }
    let objects = std::fs::read_to_string(dir.join("streams.jsonl")).unwrap();
    assert!(
        objects.lines().any(|l| l.contains(r#""stream":7"#)),
        "no object of stream 7: {objects}"
    );
}
