//! The defaults that give `octopipe run`'s results: `octotrack` follows the detector before it,
//! `octojsonl location=-` writes to stdout, a frame's `source` is the URI upstream and its
//! `stream` the first element's `stream` property.

use gstreamer as gst;
use gstreamer::prelude::*;

use super::clip::same_objects_detected;
use super::*;

/// `detect score=0.3 ! track` and `octodetect score=0.3 ! octotrack` on a continuous video (the
/// camera panning over a clip frame, as `octopipe pan` makes it, shorter and smaller here):
/// the same boxes get the same track ids, and the boxes scoring under track's own `high=0.5`
/// are tracked too.
#[test]
fn octotrack_after_octodetect_tracks_what_track_after_detect_does_on_the_pan_video() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    if lacks_element("x264enc", "apt-get install gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = tmp("pan-track");
    let pan = octopipe_tools::pan::PanOptions {
        size: (640, 360),
        frames: 8,
        ..octopipe_tools::pan::PanOptions::shared(&data, &dir.join("pan"))
    };
    octopipe_tools::pan::make(&pan).unwrap();
    let video = dir.join("pan/video.mp4");
    let ours = same_objects_detected(
        &data,
        &dir,
        (
            &format!("media location={}", video.display()),
            &format!(
                "filesrc location={} ! qtdemux ! h264parse ! avdec_h264",
                video.display()
            ),
        ),
        "",
        "track",
    );
    let tracked: Vec<_> = ours.iter().filter(|o| o["track"].is_u64()).collect();
    let low = tracked
        .iter()
        .filter(|o| o["detection"]["score"].as_f64().unwrap() < 0.5)
        .count();
    eprintln!(
        "{} objects, {} tracked, {low} of them scoring under 0.5",
        ours.len(),
        tracked.len()
    );
    assert!(low > 0, "boxes scoring under 0.5 are tracked");
    // Ids persist: some track is on more than one frame.
    let mut frames_of = std::collections::HashMap::<u64, usize>::new();
    for o in &tracked {
        *frames_of.entry(o["track"].as_u64().unwrap()).or_default() += 1;
    }
    assert!(frames_of.values().any(|&n| n > 1), "{frames_of:?}");
}

/// `octojsonl location=-` writes the objects to stdout (gst-launch-1.0 -q prints nothing else
/// there), as `jsonl location=-` does.
#[test]
fn octojsonl_location_dash_writes_the_objects_to_stdout() {
    let Some(plugins) = plugin_dir() else { return };
    let out = gst_command("gst-launch-1.0", &plugins)
        .args([
            "-q",
            "videotestsrc",
            "num-buffers=3",
            "!",
            "video/x-raw,width=320,height=240,framerate=30/1",
            "!",
            "octoboxes",
            "format=synthetic",
            "count=5",
            "!",
            "octojsonl",
            "location=-",
            "!",
            "fakesink",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 15, "3 frames of 5 boxes: {stdout}");
    assert_eq!(lines[14]["frame"], 2);
    assert!(!std::path::Path::new("-").exists(), "no file named -");
}

/// Two files in two branches of one pipeline: each branch's objects name its own file as
/// `source` (the URI query's answer, through the demuxer and the decoder) and carry the
/// `stream` set on its first octopipe element, which the elements after it keep.
#[test]
fn each_branch_names_its_file_and_its_stream() {
    let _serial = serial();
    init();
    let dir = tmp("branches");
    let Some((mp4, mot)) = six_frames_with_boxes(&dir) else {
        return;
    };
    let other = dir.join("other.mp4");
    std::fs::copy(&mp4, &other).unwrap();
    let branch = |file: &Path, stream: u32, out: &str| {
        format!(
            "filesrc location={} ! qtdemux ! h264parse ! avdec_h264 \
             ! octoboxes format=mot location={} stream={stream} ! octotrack \
             ! octojsonl location={} ! fakesink",
            file.display(),
            mot.display(),
            dir.join(out).display()
        )
    };
    let launch = format!(
        "{} {}",
        branch(&mp4, 0, "a.jsonl"),
        branch(&other, 3, "b.jsonl")
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).unwrap();
    for (file, stream, out) in [(&mp4, 0, "a.jsonl"), (&other, 3, "b.jsonl")] {
        let objects = objects(&dir.join(out));
        let uri = gst::glib::filename_to_uri(file, None).unwrap();
        assert_eq!(objects.len(), 6, "one box a frame: {objects:?}");
        for o in &objects {
            assert_eq!(o["source"], uri.as_str(), "{o}");
            assert_eq!(o["stream"], stream, "{o}");
        }
    }
}
