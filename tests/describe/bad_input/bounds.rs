//! Sizes, counts and threads past their bounds (issue 38, docs/security.md "Round 2"): each was an
//! abort of the whole process (SIGABRT from a failed allocation, or thousands of threads); now an
//! error naming the stage, the property and its range, or the input, with exit status 1.

use super::*;

use std::os::unix::process::ExitStatusExt;

/// Fails with exit status 1 (not a signal), no panic, and every one of `words` on stderr.
fn refused(out: &Output, words: &[&str]) -> String {
    assert_eq!(
        out.status.signal(),
        None,
        "killed by a signal: {:?}",
        out.status
    );
    assert_eq!(out.status.code(), Some(1), "{:?}", out.status);
    fails_with(out, words)
}

#[test]
fn counts_sizes_and_threads_past_their_bounds_are_refused_naming_the_property() {
    let m = model("valid-64.onnx");
    let m = m.display();
    let d = model("det-e2e.onnx");
    let d = d.display();
    let cases: Vec<(String, &str)> = vec![
        (
            "testsrc num-buffers=1 ! boxes format=synthetic count=4294967295 ! jsonl location=-"
                .into(),
            "boxes: count must be an integer from 0 to 100000, found '4294967295'",
        ),
        (
            "testsrc num-buffers=1 ! queue size=100000000000000 ! boxes format=synthetic ! jsonl location=-"
                .into(),
            "queue: size must be an integer from 1 to 1024, found '100000000000000'",
        ),
        (
            format!("testsrc num-buffers=1 ! detect model={d} size=100000x100000 ! jsonl location=-"),
            "detect: size must be WIDTHxHEIGHT with both from 1 to 4096, e.g. 64x64, found '100000x100000'",
        ),
        (
            format!("testsrc num-buffers=1 ! detect model={d} tiles=100000x8 ! jsonl location=-"),
            "detect: tiles must be WIDTHxHEIGHT with both from 1 to 16384, e.g. 64x64, found '100000x8'",
        ),
        (
            format!("testsrc num-buffers=1 ! boxes format=synthetic ! classify model={m} ort-threads=5000 ! jsonl location=-"),
            "classify: ort-threads must be an integer from 0 to 256, found '5000'",
        ),
        (
            format!("testsrc num-buffers=1 ! detect model={d} ort-threads=5000 ! jsonl location=-"),
            "detect: ort-threads must be an integer from 0 to 256, found '5000'",
        ),
        (
            format!("testsrc num-buffers=1 ! boxes format=synthetic ! preprocess threads=100000 ! classify model={m} ! jsonl location=-"),
            "preprocess: threads must be an integer from 0 to 256, found '100000'",
        ),
        (
            format!("testsrc num-buffers=1 ! boxes format=synthetic ! preprocess size=100000x100000 ! classify model={m} ! jsonl location=-"),
            "preprocess: size must be WIDTHxHEIGHT with both from 1 to 4096, e.g. 64x64, found '100000x100000'",
        ),
        (
            format!("testsrc num-buffers=1 ! boxes format=synthetic ! batch max-crops=1000000000 ! classify model={m} ! jsonl location=-"),
            "batch: max-crops must be an integer from 1 to 4096, found '1000000000'",
        ),
        (
            "testsrc width=16000 height=16000 num-buffers=1 ! boxes format=synthetic ! jsonl location=-"
                .into(),
            "testsrc: width x height: 16000x16000 is 256000000 pixels; a frame may have at most 67108864 (8192x8192)",
        ),
        (
            "testsrc width=100000 num-buffers=1 ! boxes format=synthetic ! jsonl location=-".into(),
            "testsrc: width must be an integer from 1 to 16384, found '100000'",
        ),
    ];
    for (text, words) in &cases {
        refused(&run(text), &[words]);
    }
}

#[test]
fn a_model_input_past_the_bound_is_refused_when_the_model_opens() {
    if !common::ort_ready() {
        return;
    }
    let m = model("size-50000.onnx");
    refused(
        &run(&testsrc_with("", &m)),
        &[&format!(
            "model {}: input 'input' is Float32 [-1, 3, 50000, 50000], but at most 4096x4096 pixels a model input may be",
            m.display()
        )],
    );
}

#[test]
fn tiles_too_small_for_the_frame_are_refused_naming_tiles() {
    if !common::ort_ready() {
        return;
    }
    let d = model("det-e2e.onnx");
    let out = run(&format!(
        "testsrc width=2500 height=2500 num-buffers=2 ! detect model={} tiles=1x1 backend=cpu ! jsonl location=-",
        d.display()
    ));
    refused(
        &out,
        &["detect: tiles=1x1 cuts frame 0 of stream 0 (2500x2500) into 6250000 tiles; a frame may be cut into at most 4096: make the tiles larger"],
    );
}

/// A PNG whose header says 30000x30000 (2.7 GB of RGB once decoded) in a few dozen bytes: a
/// well-formed IHDR, one IDAT of a short zlib stream (a stored block of zeros: not the whole
/// picture, which the size check must refuse before it matters) and IEND.
fn png_bomb(path: &Path) {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(png: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        png.extend((data.len() as u32).to_be_bytes());
        let start = png.len();
        png.extend(kind);
        png.extend(data);
        let crc = crc32(&png[start..]);
        png.extend(crc.to_be_bytes());
    }
    let mut ihdr = Vec::new();
    ihdr.extend(30000u32.to_be_bytes());
    ihdr.extend(30000u32.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]); // 8-bit RGB, no interlace
                                  // zlib: header, one final stored block of 16 zeros, Adler-32 of them (a = 1, b = 16).
    let mut idat = vec![0x78, 0x01, 0x01, 16, 0, !16, 0xFF];
    idat.extend([0u8; 16]);
    idat.extend([0, 16, 0, 1]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &idat);
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(path, png).unwrap();
}

#[test]
fn an_image_that_decodes_too_large_is_refused_before_it_is_decoded() {
    let dir = common::temp_dir("bounds-png-bomb");
    let bomb = dir.join("bomb.png");
    png_bomb(&bomb);
    let out = run(&format!(
        "images location={} ! boxes format=synthetic ! jsonl location=-",
        bomb.display()
    ));
    refused(
        &out,
        &[&format!(
            "{}: its picture is too large to decode: 30000x30000 is 900000000 pixels; a frame may have at most 67108864 (8192x8192) and 16384 a side",
            bomb.display()
        )],
    );
}

#[test]
fn media_that_decodes_too_large_is_refused_from_its_caps() {
    if !common::element_or_skip("pngdec", "gstreamer1.0-plugins-good") {
        return;
    }
    // The same bomb through decodebin (`media`, as a URI over HTTP would be): refused from the
    // caps the typefinder gives the decoder, before a picture is allocated.
    let dir = common::temp_dir("bounds-media-bomb");
    let bomb = dir.join("bomb.png");
    png_bomb(&bomb);
    let out = run(&format!(
        "media location={} ! boxes format=synthetic ! jsonl location=-",
        bomb.display()
    ));
    refused(
        &out,
        &["its pictures are too large to decode: 30000x30000 is 900000000 pixels"],
    );
}

/// `octopipe run TEXT` under an address-space cap of 3 GiB (`ulimit -v`), within the test's
/// time limit.
fn run_capped(text: &str) -> std::process::Output {
    let script = format!("ulimit -v {}; exec \"$0\" run \"$1\"", 3 * 1024 * 1024);
    common::output_within(
        std::process::Command::new("bash").args([
            "-c",
            &script,
            env!("CARGO_BIN_EXE_octopipe"),
            text,
        ]),
        TIMEOUT,
    )
}

#[test]
fn a_batch_tensor_the_system_refuses_is_an_error_not_an_abort() {
    // 2 frames of 32 boxes in one batch, each crop 4096x4096x3 f32 (200 MB): a tensor of about
    // 13 GB, under an address-space cap of 3 GiB (`ulimit -v`): the allocation is refused and
    // the run ends with the preprocess stage's error and exit status 1 (it was a SIGABRT).
    let text = "testsrc width=640 height=480 num-buffers=2 ! boxes format=synthetic count=32 \
                ! batch max-crops=4096 max-frames=2 ! preprocess size=4096x4096 backend=cpu \
                ! jsonl location=/dev/null";
    let out = run_capped(text);
    refused(
        &out,
        &[
            "preprocess: the tensor of a batch of ",
            "bytes, more than the memory this process may still take: lower max-crops or the output size",
        ],
    );
}

#[test]
fn a_frame_copy_the_system_refuses_is_the_sources_error_not_an_abort() {
    // 8192x8192 I420 frames (96 MiB each) held by a batch that waits for 60 of them, under an
    // address-space cap of 3 GiB (`ulimit -v`): the source's copy of a frame out of the decoder
    // is refused, and the run ends with the source's error naming the frame and its bytes and
    // exit status 1 (it was a SIGABRT).
    let text = "testsrc width=8192 height=8192 pattern=black num-buffers=60 \
                ! boxes format=synthetic count=1 ! batch max-frames=60 max-wait-ms=60000 \
                ! jsonl location=/dev/null";
    let out = run_capped(text);
    refused(
        &out,
        &[
            "videotestsrc pattern=black: frame ",
            "(8192x8192 I420) needs 100663296 bytes, more than the memory this process may still take",
        ],
    );
}

#[test]
fn a_batch_whose_blocks_the_system_refuses_is_an_error_not_an_abort() {
    // 64 crops of 4096x4096 cut into blocks of one pixel: a billion blocks (12 GB of block
    // metadata, before any tensor), under an address-space cap of 3 GiB: refused, the batch
    // stage's error and exit status 1 (it was a SIGABRT).
    let text = "testsrc width=640 height=480 num-buffers=2 ! boxes format=synthetic count=32 \
                ! batch max-crops=4096 max-frames=2 tile-pixels=1 tiles-per-block=1 \
                ! preprocess size=4096x4096 backend=cpu ! jsonl location=/dev/null";
    let out = run_capped(text);
    refused(
        &out,
        &["batch: the blocks of a batch of 64 crops in tiles of 1 pixels needs 12884901888 bytes, more than the memory this process may still take: raise tile-pixels or tiles-per-block, or lower max-crops or the output size"],
    );
}
