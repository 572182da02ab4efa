//! Damaged input is counted and named (`on-damaged=keep|skip|fail`, docs/bad-inputs.md): a
//! VisDrone frame cut to its first 30 KB (made here, in a temp folder, from the shared clip),
//! and an H.264 stream whose first keyframe is gone (the decoder marks the frames after it
//! corrupted), through the real binary.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common;

const TIMEOUT: Duration = Duration::from_secs(120);

/// The first three images of the shared clip and their annotations in `dir`, the second image
/// cut to its first 30,000 bytes; the cut file's name.
fn clip_with_a_cut_frame(data: &Path, dir: &Path) -> String {
    let clip = data.join("visdrone/clip-9999999");
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    let images = common::sorted_files(&clip.join("images"));
    for image in &images[..3] {
        let name = image.file_name().unwrap();
        std::fs::copy(image, dir.join("images").join(name)).unwrap();
        let txt = Path::new(name).with_extension("txt");
        std::fs::copy(
            clip.join("annotations").join(&txt),
            dir.join("annotations").join(&txt),
        )
        .unwrap();
    }
    let cut = images[1]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let bytes = std::fs::read(&images[1]).unwrap();
    std::fs::write(dir.join("images").join(&cut), &bytes[..30_000]).unwrap();
    cut
}

/// The clip through the shared classifier into `out`, `extra` on the images source.
fn classify(data: &Path, dir: &Path, extra: &str, out: &Path, args: &[&str]) -> Output {
    let text = format!(
        "images location={0}/images {extra} ! boxes format=det location={0}/annotations \
         ! batch ! preprocess channels=rgb layout=nchw mean=0.485,0.456,0.406 std=0.229,0.224,0.225 \
         ! classify model={1} labels=person,two-wheeler,car,large-vehicle ! jsonl location={2}",
        dir.display(),
        data.join("models/visdrone-crops-64.onnx").display(),
        out.display()
    );
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(["run", &text, "--force"])
            .args(args),
        TIMEOUT,
    )
}

/// The JSONL's lines whose `source` is the file `name`.
fn lines_of(out: &Path, name: &str) -> usize {
    let end = format!("/{name}");
    common::read_jsonl(out)
        .iter()
        .filter(|o| o["source"].as_str().is_some_and(|s| s.ends_with(&end)))
        .count()
}

#[test]
fn a_cut_jpeg_is_counted_named_and_skipped_by_default() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("damaged-jpeg");
    let cut = clip_with_a_cut_frame(&data, &dir);
    let cut_path = dir.join("images").join(&cut);
    let out = dir.join("objects.jsonl");

    // The default for images: skip. The frame is named once, counted, never classified, and
    // its place is not called lost.
    let run = classify(&data, &dir, "", &out, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let line = format!(
        "octopipe: warning: {}: damaged, skipped (on-damaged=skip): premature end of the JPEG data: no end-of-image marker in its 30000 bytes",
        cut_path.display()
    );
    assert_eq!(stderr.matches(&line).count(), 1, "{stderr}");
    assert!(
        stderr.contains("damaged input: 1 frame (0 kept, 1 skipped: not among the frames in; on-damaged=keep|skip|fail on the source)"),
        "{stderr}"
    );
    assert_eq!(common::frame_accounting(&stderr), (2, 2, 0), "{stderr}");
    assert!(!stderr.contains("lost by the decoder"), "{stderr}");
    assert_eq!(lines_of(&out, &cut), 0, "the skipped frame was classified");
    let names = common::sorted_files(&dir.join("images"));
    let others =
        [&names[0], &names[2]].map(|p| p.file_name().unwrap().to_string_lossy().into_owned());
    assert!(
        others.iter().all(|n| lines_of(&out, n) > 0),
        "the whole frames were classified"
    );

    // keep: decoded as far as it goes and classified, counted in the JSON report.
    let run = classify(&data, &dir, "on-damaged=keep", &out, &["--report", "json"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: damaged, kept (on-damaged=keep): premature end of the JPEG data",
            cut_path.display()
        )),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON report");
    assert_eq!(
        (
            &report["damaged"],
            &report["damaged_skipped"],
            &report["frames_in"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(0),
            &serde_json::json!(3)
        ),
        "{report}"
    );
    assert_eq!(report["streams"][0]["damaged"], 1, "{report}");
    assert!(
        lines_of(&out, &cut) > 0,
        "the kept frame was not classified"
    );

    // fail: an error naming the file, exit 1.
    let run = classify(&data, &dir, "on-damaged=fail", &out, &[]);
    common::fails_with(
        &run,
        &[&format!(
            "octopipe: error: {}: premature end of the JPEG data: no end-of-image marker in its 30000 bytes",
            cut_path.display()
        )],
    );
}

/// A file that is not an image in an image folder gets the same choice: skipped by default,
/// with the run going on.
#[test]
fn a_file_that_is_no_image_is_skipped_by_default() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let dir = common::temp_dir("damaged-not-image");
    clip_with_a_cut_frame(&data, &dir);
    let fake = dir.join("images/9999999_00000_d_0000000.jpg");
    std::fs::write(&fake, "this is a text file").unwrap();
    let out = dir.join("boxes.jsonl");
    let text = format!(
        "images location={0}/images ! boxes format=det location={0}/annotations ! jsonl location={1}",
        dir.display(),
        out.display()
    );
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
        TIMEOUT,
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "octopipe: warning: {}: damaged, skipped (on-damaged=skip): not a JPEG file",
            fake.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("damaged input: 2 frames (0 kept, 2 skipped"),
        "{stderr}"
    );
    assert_eq!(common::frame_accounting(&stderr), (2, 2, 0), "{stderr}");
}

/// An H.264 stream without its first keyframe: the decoder gives nothing for the frame it lost
/// (a gap: `lost by the decoder: 1 frame`) and marks the 29 frames that refer to it corrupted
/// (errors concealed). `media` keeps them by default, counted; `skip` leaves them out without
/// calling them lost (the same loss line as with `keep`).
#[test]
fn video_frames_the_decoder_marks_corrupted_are_counted() {
    let dir = common::temp_dir("damaged-h264");
    let whole = dir.join("whole.h264");
    common::encode(&format!(
        "videotestsrc num-buffers=60 pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc key-int-max=30 ! h264parse config-interval=-1 \
         ! video/x-h264,stream-format=byte-stream ! filesink location={}",
        whole.display()
    ));
    let damaged = dir.join("no-first-keyframe.h264");
    std::fs::write(&damaged, without_first_idr(&std::fs::read(&whole).unwrap())).unwrap();
    let run = |extra: &str| {
        let text = format!(
            "media location={} {extra} ! boxes format=synthetic count=1 ! jsonl location=/dev/null",
            damaged.display()
        );
        common::output_within(
            Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
            TIMEOUT,
        )
    };
    let kept = run("");
    let stderr = String::from_utf8_lossy(&kept.stderr);
    assert!(kept.status.success(), "{stderr}");
    let n = common::line_numbers(&stderr, "damaged input: ");
    assert!(n[0] >= 20 && n[1] == n[0] && n[2] == 0, "{stderr}");
    assert!(
        stderr.contains(
            "damaged frame at pts 0.033 s, kept (on-damaged=keep): the decoder marked it corrupted"
        ),
        "{stderr}"
    );
    let (frames_in, _, _) = common::frame_accounting(&stderr);
    let lost = common::line_numbers(&stderr, "lost by the decoder: ");

    let skipped = run("on-damaged=skip");
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{stderr}");
    let s = common::line_numbers(&stderr, "damaged input: ");
    assert_eq!((s[0], s[1], s[2]), (n[0], 0, n[0]), "{stderr}");
    let (skip_in, processed, _) = common::frame_accounting(&stderr);
    assert_eq!(
        (skip_in, processed),
        (frames_in - n[0], frames_in - n[0]),
        "{stderr}"
    );
    assert_eq!(
        common::line_numbers(&stderr, "lost by the decoder: "),
        lost,
        "skipped frames are not lost ones: {stderr}"
    );
}

/// An Annex B H.264 stream with its first IDR slice (NAL type 5) removed.
fn without_first_idr(stream: &[u8]) -> Vec<u8> {
    let starts: Vec<usize> = stream
        .windows(3)
        .enumerate()
        .filter(|(_, w)| *w == [0, 0, 1])
        .map(|(i, _)| i)
        .collect();
    let idr = starts
        .iter()
        .position(|&i| stream[i + 3] & 0x1f == 5)
        .expect("an IDR slice");
    let end = starts.get(idr + 1).copied().unwrap_or(stream.len());
    [&stream[..starts[idr]], &stream[end..]].concat()
}

/// A JPEG whose inside was overwritten (64 KiB of zeros: every marker still in place) is
/// damaged as libjpeg warns of it (GStreamer's jpegdec drops the warning and gives a smeared
/// frame); none of the clip's whole frames is.
#[test]
fn a_jpeg_overwritten_inside_is_counted_as_libjpeg_warns() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let dir = common::temp_dir("damaged-inside");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    let clip = common::sorted_files(&data.join("visdrone/clip-9999999/images"));
    for image in &clip[..3] {
        std::fs::copy(image, images.join(image.file_name().unwrap())).unwrap();
    }
    let name = clip[1].file_name().unwrap().to_string_lossy().into_owned();
    let mut bytes = std::fs::read(&clip[1]).unwrap();
    assert!(bytes.len() > 3 * 65536, "{} bytes", bytes.len());
    let middle = bytes.len() / 2 - 32768;
    bytes[middle..middle + 65536].fill(0);
    std::fs::write(images.join(&name), &bytes).unwrap();
    let run = |location: &Path, extra: &str| {
        common::output_within(
            Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
                "run",
                &format!(
                    "images location={} {extra} ! boxes format=synthetic count=1 ! batch ! jsonl location=/dev/null",
                    location.display()
                ),
            ]),
            TIMEOUT,
        )
    };
    let out = run(&images, "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = format!(
        "octopipe: warning: {}: damaged, skipped (on-damaged=skip): corrupt JPEG data: ",
        images.join(&name).display()
    );
    assert_eq!(stderr.matches(&line).count(), 1, "{stderr}");
    assert!(stderr.contains("libjpeg: "), "{stderr}");
    assert!(
        stderr.contains("damaged input: 1 frame (0 kept, 1 skipped"),
        "{stderr}"
    );
    assert_eq!(common::frame_accounting(&stderr), (2, 2, 0), "{stderr}");
    // Every whole frame of the clip decodes to its blocks: none is called damaged.
    let whole = run(
        &data.join("visdrone/clip-9999999/images"),
        "on-damaged=fail",
    );
    let stderr = String::from_utf8_lossy(&whole.stderr);
    assert!(whole.status.success(), "{stderr}");
    assert!(!stderr.contains("damaged"), "{stderr}");
}
