//! A video whose picture size changes mid-way (an encoder that restarted, files joined): every
//! frame keeps its number and gets its own boxes, in MPEG-TS as in an H.264 elementary stream.
//! Joined MPEG-TS files are re-based by the demuxer with a gap a frame wide at the join: the
//! change of picture size is a splice, and frames are numbered on across it.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `frames` frames of `w`x`h` H.264, as MPEG-TS or an elementary stream (`ts`).
fn encode(path: &Path, w: u32, h: u32, frames: u32, ts: bool) {
    let mux = match ts {
        true => "mpegtsmux",
        false => "h264parse ! video/x-h264,stream-format=byte-stream",
    };
    common::encode(&format!(
        "videotestsrc num-buffers={frames} pattern=ball ! video/x-raw,width={w},height={h},framerate=30/1 \
         ! x264enc key-int-max=10 ! {mux} ! filesink location={}",
        path.display()
    ));
}

/// The box of MOT frame `k` (1-based): inside the first part's 320x240 for its 30 frames,
/// beyond it (in the second part's 480x360) after.
fn truth(k: u64) -> [u64; 4] {
    match k <= 30 {
        true => [2 + 5 * (k - 1), 10, 20, 20],
        false => [330 + 3 * (k - 31), 250, 24, 30],
    }
}

fn joined(dir: &Path, ts: bool) -> std::path::PathBuf {
    let ext = if ts { "ts" } else { "h264" };
    let (a, b) = (dir.join(format!("a.{ext}")), dir.join(format!("b.{ext}")));
    encode(&a, 320, 240, 30, ts);
    encode(&b, 480, 360, 30, ts);
    let out = dir.join(format!("joined.{ext}"));
    let mut bytes = std::fs::read(&a).unwrap();
    bytes.extend(std::fs::read(&b).unwrap());
    std::fs::write(&out, bytes).unwrap();
    out
}

#[test]
fn boxes_and_numbers_follow_a_picture_size_change_in_every_container() {
    if !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly")
        || !common::element_or_skip("mpegtsmux", "gstreamer1.0-plugins-bad")
    {
        return;
    }
    let dir = common::temp_dir("resolution");
    let gt = dir.join("gt.txt");
    let rows: String = (1..=60)
        .map(|k| {
            let [x, y, w, h] = truth(k);
            format!("{k},1,{x},{y},{w},{h},1,4,0,0\n")
        })
        .collect();
    std::fs::write(&gt, rows).unwrap();
    for ts in [true, false] {
        let video = joined(&dir, ts);
        let out = dir.join("out.jsonl");
        let _ = std::fs::remove_file(&out);
        let run = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
                "run",
                &format!(
                    "media location={} ! boxes format=mot location={} ! jsonl location={}",
                    video.display(),
                    gt.display(),
                    out.display()
                ),
                "--progress",
                "off",
            ]),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        let objects = common::read_jsonl(&out);
        assert_eq!(objects.len(), 60, "{}: {stderr}", video.display());
        // The i-th picture decoded is frame i, with MOT frame i + 1's box.
        let wrong: Vec<(usize, u64, Vec<u64>)> = objects
            .iter()
            .enumerate()
            .filter_map(|(i, o)| {
                let frame = o["frame"].as_u64().unwrap();
                let bbox: Vec<u64> = o["bbox"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                (frame != i as u64 || bbox != truth(i as u64 + 1)).then_some((i, frame, bbox))
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{}: pictures with another frame's number or box: {wrong:?}\n{stderr}",
            video.display()
        );
        assert!(!stderr.contains("lost by the decoder"), "{stderr}");
    }
}
