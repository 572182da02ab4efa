//! `octopipe bench pipeline` on real GStreamer (x264enc, decodebin) and the real ONNX Runtime
//! CPU build, kept small for a 2-core machine: 1 and 2 streams of 1 s of 320x192 video. The
//! table has a row per run in order, every frame of every stream is counted with none dropped,
//! a combination that cannot run here is a row with its error, the temporary video is removed,
//! the preamble's description reruns with `octopipe run`, and the live search reports its tries.
//! Issue 41's workload: two classifier stages, H.265 at a chosen bitrate, each row against the
//! decode-only ceiling of its streams. Issue 42's: image streams of the clip, the CPU decode and
//! nvJPEG in one run (nvJPEG's row says why it cannot run where it is missing).
#![cfg(feature = "bench")]

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use octopipe_tools::bench::pipeline::{self, Compute, PipelineBenchOptions};

/// Small options on the shared clip and classifier, when they, ONNX Runtime and x264enc are here.
fn small() -> Option<PipelineBenchOptions> {
    let data = common::shared_data()?;
    if !common::ort_ready() || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return None;
    }
    let mut opts = PipelineBenchOptions::new(
        data.join("visdrone/clip-9999999"),
        data.join("models/visdrone-crops-64.onnx"),
    );
    opts.seconds = 1.0;
    opts.size = (320, 192);
    opts.streams = vec![1, 2];
    Some(opts)
}

/// The table's rows, split into trimmed cells (the header and the rule left out).
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| streams"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// Folders the benchmark made in the temporary folder from this process.
fn our_temp_folders() -> Vec<PathBuf> {
    let prefix = format!("octopipe-bench-pipeline-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&prefix))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_frame_of_every_stream_is_counted_and_a_failing_combination_is_its_row() {
    let _serial = common::serial();
    let Some(mut opts) = small() else { return };
    opts.eps = vec![Compute::Cpu, Compute::Cuda];
    let mut progress = Vec::new();
    let table = pipeline::pipeline(&opts, &mut |l| progress.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let rows = rows(&table);
    let order: Vec<(&str, &str)> = rows.iter().map(|r| (&*r[0], &*r[2])).collect();
    assert_eq!(
        order,
        [("1", "cpu"), ("1", "cuda"), ("2", "cpu"), ("2", "cuda")],
        "{table}"
    );
    for row in rows.iter().filter(|r| r[2] == "cpu") {
        let streams: u64 = row[0].parse().unwrap();
        assert_eq!(row[1], "cpu", "{table}");
        assert_eq!(row[3], "cpu", "preprocess on the CPU with ep=cpu: {table}");
        assert_eq!(row[4], (30 * streams).to_string(), "frames: {table}");
        assert_eq!(row[11], "0", "dropped: {table}");
        // When every frame entered, the note names the stage that held the frames longest
        // (and the share of the decoders' steady state where the decoder is the limit).
        let notes: Vec<&str> = row[14].split("; ").collect();
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("bound: ") && n.ends_with(" ms a frame)"))
                && notes
                    .iter()
                    .all(|n| n.starts_with("bound: ")
                        || n.ends_with("of the decoders' steady state")),
            "only the bounding stage when every frame entered: {table}"
        );
        let fps: f64 = row[5].parse().unwrap();
        let p50: f64 = row[6].parse().unwrap();
        let p99: f64 = row[7].parse().unwrap();
        let cores: f64 = row[8].parse().unwrap();
        assert!(
            fps > 0.0 && p50 > 0.0 && p99 >= p50 && cores > 0.0,
            "{table}"
        );
    }
    let no_gpu = octopipe::preprocess::cuda::available().is_err();
    for row in rows.iter().filter(|r| r[2] == "cuda") {
        assert_eq!(
            row[3], "cuda",
            "preprocess on the GPU with ep=cuda: {table}"
        );
        if no_gpu {
            assert!(row[14].starts_with("failed: "), "{table}");
            assert!(
                row[14].contains("CUDA"),
                "the error says what is missing: {table}"
            );
        }
    }
    // Progress went to the callback, the table has its preamble, and the video is gone.
    assert!(progress.iter().any(|l| l.starts_with("encoding 30 frames")));
    assert_eq!(
        progress.iter().filter(|l| l.starts_with("run: ")).count(),
        4
    );
    assert!(table.contains("30 frames per stream (1 s at 30 fps) of 320x192 H.264"));
    assert!(table.contains("    octopipe run --set video=clip.mp4"));
    assert_eq!(our_temp_folders(), Vec::<PathBuf>::new());
}

#[test]
fn the_preamble_reruns_with_octopipe_run_on_the_kept_video() {
    let Some(opts) = small() else { return };
    let dir = std::env::temp_dir().join(format!("octopipe-bench-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let video = dir.join("clip.mp4");
    let bench = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(["bench", "pipeline", "--streams", "2", "--seconds", "1"])
            .args(["--width", "320", "--height", "192", "--clip"])
            .arg(&opts.clip)
            .arg("--model")
            .arg(&opts.model)
            .arg("--keep-video")
            .arg(&video)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = bench(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("encoded in"),
        "progress on stderr: {stderr}"
    );
    assert_eq!(rows(&stdout).len(), 1, "{stdout}");
    assert!(video.is_file());
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("octopipe run "))
        .expect("a description in the preamble");
    let description = line
        .split_once(" '")
        .and_then(|(_, d)| d.strip_suffix('\''))
        .expect("the description in single quotes");
    let run = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", description, "--set"])
        .arg(format!("video={}", video.display()))
        .arg("--set")
        .arg(format!("model={}", opts.model.display()))
        .output()
        .unwrap();
    let report =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{report}");
    assert!(
        report.contains("frames: 60 in = 60 processed + 0 dropped"),
        "{report}"
    );
    // The kept video is never written over.
    let again = bench(&[]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("something is there already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_live_search_reports_each_try_and_its_answer() {
    let _serial = common::serial();
    let Some(mut opts) = small() else { return };
    opts.live = true;
    opts.max_streams = 2;
    let mut progress = Vec::new();
    let table = pipeline::pipeline(&opts, &mut |l| progress.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let rows = rows(&table);
    assert!(!rows.is_empty() && rows.len() <= 2, "{table}");
    assert_eq!(rows[0][0], "1", "the search starts at 1 stream: {table}");
    for row in &rows {
        assert!(row[14].ends_with("held"), "held or not held: {table}");
        assert!(table.contains("live=true"), "{table}");
        // Next to the decoder alone: the rate the streams need (30 fps each) over its ceiling.
        let streams: f64 = row[0].parse().unwrap();
        let ceiling: f64 = cell(&table, row, "decode-only fps").parse().unwrap();
        let share: f64 = cell(&table, row, "% of decode-only").parse().unwrap();
        assert!(
            ceiling > 0.0 && (share - 100.0 * streams * 30.0 / ceiling).abs() <= 1.0,
            "{share} against {streams} x 30 / {ceiling}: {table}"
        );
    }
    // Each run says when its frames came through, and where its late frames lost their time,
    // GPU 0 holding every stream.
    let through = progress
        .iter()
        .filter(|l| l.starts_with("  through: first frame at the end ") && l.contains("GPU 0 "))
        .count();
    assert_eq!(through, rows.len(), "{progress:?}");
    let late: Vec<&String> = progress
        .iter()
        .filter(|l| l.starts_with("  late: "))
        .collect();
    assert_eq!(late.len(), rows.len(), "{progress:?}");
    for (line, row) in late.iter().zip(&rows) {
        let frames: u64 = cell(&table, row, "frames").parse().unwrap();
        assert!(
            line.contains(&format!(" of {frames} frames over 33 ms")) && line.contains("GPU 0 "),
            "{line}"
        );
    }
    // The note ends with the row's answer, after the stage that bound it.
    let held = rows
        .iter()
        .take_while(|r| r[14] == "held" || r[14].ends_with("; held"))
        .count();
    let answer = format!("decoder=cpu ep=cpu preprocess=cpu: {held}");
    assert!(table.contains(&answer), "{answer} in {table}");
}

/// The cell of `row` under `column` of `table`'s header.
fn cell<'a>(table: &str, row: &'a [String], column: &str) -> &'a str {
    let header = table
        .lines()
        .find(|l| l.starts_with("| streams"))
        .expect("a header");
    let at = header
        .trim_matches('|')
        .split(" | ")
        .position(|c| c.trim() == column)
        .unwrap_or_else(|| panic!("no column {column} in {header}"));
    &row[at]
}

#[test]
fn two_classifiers_on_h265_with_the_decode_only_ceiling() {
    let _serial = common::serial();
    let Some(mut opts) = small() else { return };
    if !common::element_or_skip("x265enc", "gstreamer1.0-plugins-bad")
        || !common::element_or_skip("avdec_h265", "gstreamer1.0-libav")
    {
        return;
    }
    opts.codec = pipeline::Codec::H265;
    opts.bitrate = 4000;
    opts.classifiers = 2;
    opts.streams = vec![2];
    let dir = common::temp_dir("bench-h265");
    let kept = dir.join("clip.mp4");
    opts.keep_video = Some(kept.clone());
    let mut progress = Vec::new();
    let table = pipeline::pipeline(&opts, &mut |l| progress.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    // H.265 at 4000 kbit/s, decoded on the CPU: every frame of both streams.
    assert!(
        table.contains("of 320x192 H.265 (")
            && table.contains("x265enc Main 4:2:0")
            && table.contains(", 4000 kbit/s,"),
        "{table}"
    );
    let video = std::fs::read(&kept).unwrap();
    assert!(
        video.windows(4).any(|w| w == b"hvc1" || w == b"hev1"),
        "an H.265 track in the mp4"
    );
    let rows = rows(&table);
    assert_eq!(rows.len(), 1, "{table}");
    let row = &rows[0];
    assert_eq!(cell(&table, row, "frames"), "60", "{table}");
    assert_eq!(cell(&table, row, "dropped"), "0", "{table}");
    // Two classifier stages ran, each with its own labels.
    assert!(
        table.contains("2 classifier stages one after the other"),
        "{table}"
    );
    assert!(
        table.contains("labels=person,two-wheeler,car,large-vehicle")
            && table.contains("labels=c2:person,c2:two-wheeler,c2:car,c2:large-vehicle"),
        "{table}"
    );
    let stages = progress
        .iter()
        .find(|l| l.contains("stage p50/p99 ms"))
        .expect("the stage times");
    assert!(
        stages.contains("classify ") && stages.contains("classify#2 "),
        "{stages}"
    );
    // The decode-only ceiling of the same two streams, and the row's share of it.
    assert!(progress
        .iter()
        .any(|l| l.starts_with("decode only: streams=2 decoder=cpu")));
    let fps: f64 = cell(&table, row, "fps").parse().unwrap();
    let ceiling: f64 = cell(&table, row, "decode-only fps").parse().unwrap();
    let share: f64 = cell(&table, row, "% of decode-only").parse().unwrap();
    assert!(ceiling > 0.0 && fps > 0.0, "{table}");
    assert!(
        (share - 100.0 * fps / ceiling).abs() <= 1.0,
        "{share} against {fps} / {ceiling}: {table}"
    );
    assert_eq!(
        cell(&table, row, "note").contains("of the decoders' steady state"),
        share >= 90.0,
        "{table}"
    );
    // The decoders' start is reported apart from their steady state.
    assert!(
        progress.iter().any(
            |l| l.contains("in steady state") && l.contains("every stream's first frame after")
        ),
        "{progress:?}"
    );
    assert!(table.contains("decode-only fps = the same streams decoded by GStreamer alone"));
}

#[test]
fn image_streams_give_a_cpu_row_and_an_nvjpeg_row_in_one_run() {
    let _serial = common::serial();
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let clip = data.join("visdrone/clip-9999999");
    let out = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["bench", "pipeline", "--streams", "2", "--seconds", "1"])
        .args(["--decoders", "cpu,nvjpeg", "--images"])
        .arg(&clip)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        table.contains("the 34 JPEG files of") && table.contains("their VisDrone annotations"),
        "{table}"
    );
    let rows = rows(&table);
    let decoders: Vec<&str> = rows.iter().map(|r| &*r[1]).collect();
    assert_eq!(decoders, ["cpu", "nvjpeg"], "{table}");
    // The CPU decode: every frame of both streams, with real numbers.
    let cpu = &rows[0];
    assert_eq!(cell(&table, cpu, "frames"), "68", "{table}");
    assert_eq!(cell(&table, cpu, "dropped"), "0", "{table}");
    let fps: f64 = cell(&table, cpu, "fps").parse().unwrap();
    let cores: f64 = cell(&table, cpu, "CPU cores busy").parse().unwrap();
    assert!(fps > 0.0 && cores > 0.0, "{table}");
    assert_eq!(cell(&table, cpu, "decode-only fps"), "-", "{table}");
    // nvJPEG: its row, run where it is here, else the reason.
    let nvjpeg = &rows[1];
    let note = cell(&table, nvjpeg, "note");
    match octopipe::source::nvjpeg_available(0) {
        Ok(_) => {
            assert_eq!(cell(&table, nvjpeg, "frames"), "68", "{table}");
            assert!(note.contains("0 nvJPEG fallbacks"), "{table}");
        }
        Err(_) => {
            assert_eq!(cell(&table, nvjpeg, "frames"), "-", "{table}");
            assert!(
                note.starts_with("failed: nvJPEG needs a GPU: ")
                    || note.starts_with("failed: no nvJPEG on cuda:0: "),
                "{table}"
            );
        }
    }
    // The preamble's description reruns as written.
    assert!(
        table.contains("octopipe run --set images=")
            && table.contains("images location=${images} loop=1 decoder=cpu ! boxes format=det location=${annotations}"),
        "{table}"
    );
}

/// `octopipe bench decode` (issue 53): each way of starting the streams is its row, every frame
/// of every stream counted, the start (each stream's first frame) apart from the steady state.
#[test]
fn the_decoders_alone_give_their_start_and_steady_state_per_way_of_starting() {
    let _serial = common::serial();
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let mut opts = pipeline::DecodeBenchOptions::new(data.join("visdrone/clip-9999999"));
    opts.seconds = 1.0;
    opts.streams = vec![2];
    opts.decoders = vec!["cpu".into()];
    opts.starts = pipeline::DecodeStart::ALL.to_vec();
    let mut progress = Vec::new();
    let table = pipeline::decode_bench(&opts, &mut |l| progress.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<Vec<String>> = rows(&table)
        .into_iter()
        .filter(|r| r[0] != "codec")
        .collect();
    let starts: Vec<&str> = rows.iter().map(|r| &*r[3]).collect();
    assert_eq!(
        starts,
        [
            "one-pipeline",
            "serial",
            "threads",
            "threads-own-context",
            "threads-4-contexts"
        ],
        "{table}"
    );
    for row in &rows {
        assert_eq!(row[4], "60", "two streams of 30 frames: {table}");
        let firsts: Vec<f64> = row[5].split(" / ").map(|v| v.parse().unwrap()).collect();
        let wall: f64 = row[6].parse().unwrap();
        assert!(
            firsts.len() == 3
                && firsts[0] <= firsts[1]
                && firsts[1] <= firsts[2]
                && firsts[2] < wall,
            "{table}"
        );
        // The wall time is printed to 10 ms: the frames over it lie between what its ends give.
        let wall_fps: f64 = row[7].parse().unwrap();
        assert!(
            60.0 / (wall + 0.005) - 0.05 <= wall_fps && wall_fps <= 60.0 / (wall - 0.005) + 0.05,
            "{table}"
        );
        // Both streams decode at once for most of a run: a steady state is found.
        let steady: f64 = row[8]
            .parse()
            .unwrap_or_else(|_| panic!("a steady state: {table}"));
        assert!(steady > 0.0, "{table}");
    }
    assert!(progress.iter().any(|l| l.starts_with("encoding 30 frames")));
}

/// `--motion pan` with the real detector, `track` and `--reinfer 10`: the video's preamble says
/// it pans, and the row says how many boxes were cropped and how many took their track's label
/// (tracks last across a panning shot, so most do).
#[test]
fn a_panning_video_lets_tracks_reuse_their_labels_and_the_row_says_how_many() {
    let _serial = common::serial();
    let Some(mut opts) = small() else { return };
    let data = common::shared_data().expect("small() found it");
    opts.motion = pipeline::Motion::Pan;
    opts.size = (960, 544);
    opts.streams = vec![1];
    opts.reinfer = 10;
    opts.decode_only = false;
    opts.detector_alone = false;
    opts.detector = Some(pipeline::DetectBench {
        model: data.join("models/coco-centernet-512.onnx"),
        tiles: (960, 544),
        interval: 1,
        max_batch: 1,
        per_stream: false,
        queue: None,
        props: "labels=coco".into(),
    });
    let mut progress = Vec::new();
    let table = pipeline::pipeline(&opts, &mut |l| progress.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        table.contains(
            "each a 30-frame shot of a camera panning across it, 8 px right and 4 px down a frame"
        ),
        "{table}"
    );
    assert!(table.contains("reinfer-interval=10"), "{table}");
    let rows = rows(&table);
    assert_eq!(rows.len(), 1, "{table}");
    let note = cell(&table, &rows[0], "note");
    let numbers: Vec<u64> = note
        .split("crops for ")
        .nth(1)
        .unwrap_or_else(|| panic!("no crop count in {note}"))
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .take(3)
        .map(|w| w.parse().unwrap())
        .collect();
    let [cropped, boxes, reused] = numbers[..] else {
        panic!("{note}")
    };
    assert_eq!(cropped + reused, boxes, "{note}");
    assert!(
        reused * 2 > boxes,
        "most boxes of a panning shot reuse a label: {note}"
    );
}
