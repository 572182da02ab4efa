//! The tile filter through the octopipe command: the scene pipeline end to end (a 16-bit PNG
//! decoded exactly, tiles kept, written and indexed), colour frames, and bad rules and
//! properties as errors naming them.

use super::*;

fn octopipe(args: &[&str]) -> std::process::Output {
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(args),
        Duration::from_secs(120),
    )
}

/// (tiles kept, tiles) from the report's tilestats line.
fn kept_of(stderr: &str) -> (u64, u64) {
    let n = common::line_numbers(stderr, "tilestats (");
    (n[0], n[1])
}

/// A scene the system refuses to store (`/dev/full`: every write fails, here at the last
/// buffered bytes: a 1x1 PNG is all in the buffer) is an error naming the file, not "wrote"; the
/// device is left in place.
#[test]
fn a_scene_that_cannot_be_written_is_an_error_naming_the_file() {
    if !common::dev_full() {
        return;
    }
    let out = octopipe(&["scene", "--out", "/dev/full", "--force", "--size", "1"]);
    let stderr = common::fails_with(&out, &["/dev/full: write failed: No space left on device"]);
    assert!(!stderr.contains("wrote"), "{stderr}");
    assert!(common::dev_full(), "the device is left in place");
}

#[test]
fn the_scene_pipeline_decodes_16_bit_png_exactly_and_writes_the_kept_tiles() {
    let dir = common::temp_dir("satellite");
    // `scene` makes the folder (the README's `--out scene/scene.png`).
    let images = dir.join("scene");
    let png = images.join("scene.png");
    let out = octopipe(&[
        "scene",
        "--out",
        png.to_str().unwrap(),
        "--size",
        "1024",
        "--seed",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = octopipe(&["scene", "--out", png.to_str().unwrap(), "--size", "8"]);
    common::fails_with(
        &again,
        &["scene.png: exists already: give a new name, or --force replaces it"],
    );
    let samples = scene::scene(1024, 1024, 3);
    let tiles = dir.join("tiles");
    let run = |keep: &str, tiles: &std::path::Path| {
        octopipe(&[
            "run",
            &format!(
                "images location={} ! tiles min=100 max=300 seed=4 ! tilestats backend=cpu keep=\"{keep}\" \
                 ! tilesink location={}",
                images.display(),
                tiles.display()
            ),
        ])
    };
    let out = run("mean > 0.535", &tiles);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let index = common::read_jsonl(&tiles.join("index.jsonl"));
    let rects = random(1024, 1024, 100, 300, 4);
    assert_eq!(index.len(), rects.len());
    let (kept, total) = kept_of(&stderr);
    assert_eq!(total as usize, rects.len(), "{stderr}");
    let mut files = 0;
    for (line, r) in index.iter().zip(&rects) {
        assert_eq!(line["bbox"], serde_json::json!(r));
        // The decoded samples are the scene's, exactly: the sums say so.
        let mut want = (0u64, 0u64, u32::MAX, 0u32);
        let mut tile = Vec::new();
        for y in r[1]..r[1] + r[3] {
            for x in r[0]..r[0] + r[2] {
                let v = samples[(y * 1024 + x) as usize];
                tile.push(v);
                let w = u64::from(v);
                want = (
                    want.0 + w,
                    want.1 + w * w,
                    want.2.min(v.into()),
                    want.3.max(v.into()),
                );
            }
        }
        let s = &line["stats"]["sums"];
        let got = (
            s["sum"].as_u64().unwrap(),
            s["sum_sq"].as_u64().unwrap(),
            s["min"].as_u64().unwrap() as u32,
            s["max"].as_u64().unwrap() as u32,
        );
        assert_eq!(got, want, "{line}");
        let mean = line["stats"]["mean"].as_f64().unwrap();
        assert_eq!(line["kept"].as_bool().unwrap(), mean > 0.535, "{line}");
        // A kept tile's file is its 16-bit samples.
        match line["file"].as_str() {
            Some(name) => {
                assert!(line["kept"].as_bool().unwrap());
                let img = image::open(tiles.join(name)).unwrap().into_luma16();
                assert_eq!(img.dimensions(), (r[2], r[3]));
                assert_eq!(img.into_raw(), tile, "{name}");
                files += 1;
            }
            None => assert!(!line["kept"].as_bool().unwrap()),
        }
    }
    assert_eq!(files, kept);
    assert!(kept > 0 && kept < total, "{stderr}");
    // Nothing is overwritten: the same folder again is refused before anything runs.
    let again = run("mean > 0.535", &tiles);
    common::fails_with(&again, &["already holds", "give an empty or new folder"]);
    // Raw tiles: .npy of the little-endian samples.
    let npy = dir.join("npy");
    let out = octopipe(&[
        "run",
        &format!(
            "images location={} ! tiles size=300x200 ! tilestats backend=cpu keep=\"max >= 0\" top-k=2 score=std \
             ! tilesink location={} format=npy",
            images.display(),
            npy.display()
        ),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<_> = common::sorted_files(&npy)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    assert_eq!(written.len(), 2);
    let bytes = std::fs::read(&written[0]).unwrap();
    let header = String::from_utf8_lossy(&bytes[10..128]);
    assert!(header.contains("'descr': '<u2'"), "{header}");
}

#[test]
fn zero_kept_and_all_kept_through_the_pipeline() {
    let dir = common::temp_dir("keep-none-all");
    for (keep, want_files) in [("mean < 0", 0usize), ("mean >= 0", 8)] {
        let out_dir = dir.join(if want_files == 0 { "none" } else { "all" });
        let out = octopipe(&[
            "run",
            &format!(
                "testsrc format=gray16 width=1000 height=700 num-buffers=2 pattern=snow \
                 ! tiles size=512x512 ! tilestats backend=cpu keep=\"{keep}\" ! tilesink location={}",
                out_dir.display()
            ),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(kept_of(&stderr), (want_files as u64, 8), "{stderr}");
        let pngs = common::sorted_files(&out_dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "png"))
            .count();
        assert_eq!(pngs, want_files);
        assert_eq!(common::read_jsonl(&out_dir.join("index.jsonl")).len(), 8);
    }
}

#[test]
fn colour_frames_are_tiled_and_written_as_rgb() {
    let dir = common::temp_dir("rgb-tiles");
    let out = octopipe(&[
        "run",
        &format!(
            "testsrc format=rgb width=640 height=480 num-buffers=1 ! tiles size=256x256 \
             ! tilestats backend=cpu band=green keep=\"std >= 0\" ! tilesink location={}",
            dir.display()
        ),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index = common::read_jsonl(&dir.join("index.jsonl"));
    assert_eq!(index.len(), 6);
    let last = &index[5];
    assert_eq!(last["bbox"], serde_json::json!([512, 256, 128, 224]));
    let img = image::open(dir.join(last["file"].as_str().unwrap())).unwrap();
    assert_eq!(img.color(), image::ColorType::Rgb8);
    assert_eq!((img.width(), img.height()), (128, 224));
    // Green of the written tile: the same sums as the stage measured.
    let green: u64 = img.to_rgb8().pixels().map(|p| u64::from(p[1])).sum();
    assert_eq!(last["stats"]["sums"]["sum"].as_u64().unwrap(), green);
}

#[test]
fn bad_rules_and_bad_properties_are_errors_naming_them() {
    let run = |stages: &str| {
        octopipe(&[
            "run",
            &format!("testsrc format=gray16 num-buffers=1 ! {stages} ! jsonl location=-"),
        ])
    };
    common::fails_with(
        &run("tiles ! tilestats keep=\"meen > 0.5\""),
        &[
            "<command line>:1:63: tilestats: keep: unknown property 'meen' (did you mean 'mean'? \
             properties: mean, std, min, max, above, pixels, width, height) (column 1 of the rule)",
            "tilestats keep=\"meen > 0.5\" ! jsonl location=-\n",
            "                  ^^^^\n",
        ],
    );
    common::fails_with(
        &run("tiles ! tilestats keep=\"mean > 0.5 std < 1\""),
        &["1:74: tilestats: keep: 'std' is left over after a complete rule: join comparisons with and/or (column 12 of the rule)"],
    );
    common::fails_with(
        &run("tiles ! tilestats keep=\"(mean > 0.5\""),
        &["this '(' is never closed"],
    );
    common::fails_with(
        &run("tiles ! tilestats score=brightness"),
        &["tilestats: score must be one of mean, std, min, max, above, pixels, found 'brightness'"],
    );
    common::fails_with(
        &run("tiles ! tilestats levl=0.3"),
        &["stage 'tilestats' has no property 'levl' (did you mean 'level'?)"],
    );
    common::fails_with(
        &run("tiles min=600 max=512 ! tilestats"),
        &["tiles: min=600 is larger than max=512"],
    );
    common::fails_with(
        &run("tiles size=256x256 seed=3 ! tilestats"),
        &["tiles: seed is a setting of the random grid, and size=WxH makes a regular one"],
    );
    common::fails_with(
        &run("tiles overlap=0.2 ! tilestats"),
        &["tiles: overlap is a setting of the regular grid: set size=WxH too"],
    );
    common::fails_with(
        &run("tiles ! tilestats block-pixels=8"),
        &["tilestats: block-pixels must be an integer from 32 to 16777216, found '8'"],
    );
    // Known only once a frame comes: a colour band of a grey frame.
    common::fails_with(
        &run("tiles ! tilestats band=red"),
        &["tilestats: band=red needs a packed RGB frame; frame 0 of stream 0 is GRAY16_LE"],
    );
    // A 16-bit frame sent to the classifier's preprocessing: the CPU backend reads it (each
    // value / 257 in every channel; the CUDA backend refuses it, naming the frame).
    let dir = common::temp_dir("gray16-preprocess");
    let out = octopipe(&[
        "run",
        &format!(
            "testsrc format=gray16 num-buffers=1 width=64 height=48 ! tiles size=32x24 \
             ! preprocess backend=cpu size=8x8 ! tensors location={}",
            dir.join("t").display()
        ),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("t/index.jsonl").is_file());
}
