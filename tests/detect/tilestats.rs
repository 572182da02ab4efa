//! The satellite tile filter: `tiles`, `tilestats` and `tilesink`.
//!
//! CPU: the per-tile sums against a straightforward per-pixel reference (exact: sums, sums of
//! squares, min, max, counts above), on the synthetic scene and on random grids, edge tiles,
//! 1-pixel tiles, 16-bit grey, YUV luma and packed RGB/BGRA frames; the keep rule and top-k; the
//! pipeline end to end (a 16-bit PNG decoded exactly, tiles written and indexed, nothing
//! overwritten); bad rules and properties as errors naming them.
//!
//! GPU (skipped with a printed reason where there is no GPU): the CUDA backend's sums equal the
//! CPU backend's, exactly, on the 8192x8192 scene's 727 random tiles and on random grids of every
//! frame kind and block size, over repeated launches; the stage keeps the same tiles on both.

use crate::common;

use std::process::Command;
use std::time::Duration;

use octopipe::budget::{Budget, Tally};
use octopipe::frame::{Frame, PixelFormat, PixelSums};
use octopipe::preprocess::BackendKind;
use octopipe::tiles::{random, regular, scene, Edge, Grid, Rect, Tiler, TilesConfig};
use octopipe::tilestats::{
    CpuSums, GpuSums, Property, Rule, Sampling, TileBlocks, TileFilter, TileStatsConfig,
};

/// The seed whose random grid of an 8192x8192 frame (tiles of 128..=512) has the seed scenario's
/// 727 tiles.
const SEED_727: u64 = 22;

/// The straightforward reference: one sample per pixel, read and weighted as the stage documents
/// it, summed in a plain loop.
fn reference(frame: &Frame, band: [u32; 3], rect: Rect, above_from: u32) -> PixelSums {
    let l = &frame.layout;
    let d = frame.data().unwrap();
    let [x0, y0, w, h] = rect;
    let mut s = PixelSums::EMPTY;
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            let row = l.offsets[0] + y as usize * l.strides[0];
            let v = match l.format {
                PixelFormat::Gray16 => {
                    let i = row + x as usize * 2;
                    u32::from(d[i]) | u32::from(d[i + 1]) << 8
                }
                PixelFormat::I420 | PixelFormat::Nv12 => u32::from(d[row + x as usize]),
                f => {
                    let p = &d[row + x as usize * f.packed_bytes()..];
                    let (r, g, b) = match f {
                        PixelFormat::Bgr | PixelFormat::Bgra => (p[2], p[1], p[0]),
                        _ => (p[0], p[1], p[2]),
                    };
                    (band[0] * u32::from(r) + band[1] * u32::from(g) + band[2] * u32::from(b) + 128)
                        >> 8
                }
            };
            s.sum += u64::from(v);
            s.sum_sq += u64::from(v) * u64::from(v);
            s.above += u64::from(v >= above_from);
            s.min = s.min.min(v);
            s.max = s.max.max(v);
        }
    }
    s
}

fn cut(rects: &[Rect], block_pixels: u32) -> TileBlocks {
    TileBlocks::new(rects.iter().copied(), block_pixels)
}

fn cpu_sums(frame: &Frame, sampling: &Sampling, t: &TileBlocks) -> Vec<PixelSums> {
    let mut out = Vec::new();
    CpuSums::new(0)
        .unwrap()
        .sums(frame.data().unwrap(), sampling, t, &mut out);
    out
}

fn config(band: &str, level: f64) -> TileStatsConfig {
    TileStatsConfig {
        band: match band {
            "red" => octopipe::tilestats::BandName::Red,
            "blue" => octopipe::tilestats::BandName::Blue,
            _ => octopipe::tilestats::BandName::Luma,
        },
        level,
        ..TileStatsConfig::default()
    }
}

/// Every case: (what, frame, tiles, block pixels, band).
fn cases() -> Vec<(String, Frame, Vec<Rect>, u32, &'static str)> {
    let mut v = Vec::new();
    for (seed, bp) in [(1, 16384), (2, 4096), (3, 1000), (4, 32)] {
        v.push((
            format!("scene 2048 random grid seed {seed}, blocks of {bp}"),
            scene::frame(2048, 2048, 3),
            random(2048, 2048, 128, 512, seed),
            bp,
            "luma",
        ));
    }
    v.push((
        "noise GRAY16 1000x700, clipped 512x512 grid".into(),
        common::random_frame(PixelFormat::Gray16, 1000, 700, 5),
        regular(1000, 700, 512, 512, 0.0, Edge::Clip),
        16384,
        "luma",
    ));
    v.push((
        "noise GRAY16 37x23, 1-pixel tiles".into(),
        common::random_frame(PixelFormat::Gray16, 37, 23, 6),
        regular(37, 23, 1, 1, 0.0, Edge::Clip),
        32,
        "luma",
    ));
    v.push((
        "noise I420 1283x721 (luma plane), random grid 1..=300".into(),
        common::random_frame(PixelFormat::I420, 1283, 721, 7),
        random(1283, 721, 1, 300, 7),
        333,
        "luma",
    ));
    v.push((
        "noise NV12 640x480, overlapping grid".into(),
        common::random_frame(PixelFormat::Nv12, 640, 480, 8),
        regular(640, 480, 200, 150, 0.3, Edge::Clip),
        4096,
        "luma",
    ));
    for (format, band) in [
        (PixelFormat::Rgb, "luma"),
        (PixelFormat::Bgr, "red"),
        (PixelFormat::Rgba, "blue"),
        (PixelFormat::Bgra, "luma"),
    ] {
        v.push((
            format!("noise {format} 999x517 band {band}, random grid"),
            common::random_frame(format, 999, 517, 9),
            random(999, 517, 64, 256, 9),
            2048,
            band,
        ));
    }
    v
}

fn weights(band: &str) -> [u32; 3] {
    match band {
        "red" => [256, 0, 0],
        "blue" => [0, 0, 256],
        _ => [77, 150, 29],
    }
}

#[test]
fn cpu_sums_equal_a_straightforward_reference() {
    for (what, frame, rects, bp, band) in cases() {
        let cfg = config(band, 0.5);
        let sampling = Sampling::of(&frame, &cfg).unwrap();
        let c = cut(&rects, bp);
        // Blocks by area: a tile gets ceil(pixels / block pixels) blocks.
        for (t, r) in rects.iter().enumerate() {
            let blocks = c.first[t + 1] - c.first[t];
            assert_eq!(
                u64::from(blocks),
                (u64::from(r[2]) * u64::from(r[3])).div_ceil(u64::from(bp)),
                "{what}"
            );
        }
        let sums = cpu_sums(&frame, &sampling, &c);
        assert_eq!(sums.len(), rects.len(), "{what}");
        for (t, r) in rects.iter().enumerate() {
            let want = reference(&frame, weights(band), *r, sampling.band.above_from);
            assert_eq!(sums[t], want, "{what}: tile {t} {r:?}");
        }
        eprintln!("{what}: {} tiles equal the reference", rects.len());
    }
}

#[test]
fn one_pixel_tiles_are_their_pixel() {
    let frame = common::random_frame(PixelFormat::Gray16, 9, 7, 11);
    let rects = random(9, 7, 1, 1, 0);
    assert_eq!(rects.len(), 63);
    let cfg = config("luma", 0.5);
    let sampling = Sampling::of(&frame, &cfg).unwrap();
    let sums = cpu_sums(&frame, &sampling, &cut(&rects, 32));
    let (d, stride) = (frame.data().unwrap(), frame.layout.strides[0]);
    for (t, s) in sums.iter().enumerate() {
        // Tile t is pixel (t % 9, t / 9); rows are padded.
        let i = (t / 9) * stride + (t % 9) * 2;
        let v = u32::from(u16::from_le_bytes([d[i], d[i + 1]]));
        assert_eq!(
            (s.sum, s.sum_sq, s.min, s.max),
            (v.into(), u64::from(v).pow(2), v, v)
        );
        let stats = sampling.stats(*s, 1);
        assert_eq!(stats.std, 0.0);
        assert_eq!(stats.mean, f64::from(v) / 65535.0);
    }
}

#[test]
fn edge_tiles_are_clipped_to_the_frame() {
    // 1000x700 in 512x512 tiles: the right column 488 wide, the bottom row 188 high.
    let frame = common::random_frame(PixelFormat::Gray16, 1000, 700, 12);
    let mut tiler = Tiler::new(TilesConfig {
        grid: Grid::Regular {
            size: (512, 512),
            overlap: 0.0,
        },
    });
    let batch = tiler.cut(frame).unwrap();
    let rects: Vec<Rect> = batch.frames[0].detections.iter().map(|d| d.bbox).collect();
    assert_eq!(
        rects,
        [
            [0, 0, 512, 512],
            [512, 0, 488, 512],
            [0, 512, 512, 188],
            [512, 512, 488, 188]
        ]
    );
    // Each tile is a crop at its own size, its box the frame's box of the same index.
    for (i, c) in batch.crops.iter().enumerate() {
        assert_eq!([c.x, c.y, c.w, c.h], rects[i]);
        assert_eq!((c.out_w, c.out_h), (c.w, c.h));
        assert_eq!(batch.origins[i].detection, i as u32);
    }
    let mut filter = TileFilter::new(
        TileStatsConfig {
            backend: BackendKind::Cpu,
            ..TileStatsConfig::default()
        },
        tally(),
    )
    .unwrap();
    let mut batch = batch;
    filter.run(&mut batch).unwrap();
    let frame = &batch.frames[0];
    for d in &frame.detections {
        let s = d.stats.unwrap();
        assert_eq!(s.pixels, u64::from(d.bbox[2]) * u64::from(d.bbox[3]));
        assert_eq!(s.sums, reference(frame, [0; 3], d.bbox, 32768));
    }
}

fn tally() -> Tally {
    Tally::new(Budget::new(
        Duration::from_millis(33),
        vec!["tilestats".into()],
    ))
}

/// Run the filter with `keep` / `top_k` on the 2048 scene's random grid; the kept flags.
fn kept(keep: Option<&str>, top_k: Option<usize>, score: Property) -> (Vec<bool>, String) {
    let mut tiler = Tiler::new(TilesConfig::default());
    let mut batch = tiler.cut(scene::frame(2048, 2048, 3)).unwrap();
    let mut filter = TileFilter::new(
        TileStatsConfig {
            keep: keep.map(|k| Rule::parse(k).unwrap()),
            top_k,
            score,
            backend: BackendKind::Cpu,
            ..TileStatsConfig::default()
        },
        tally(),
    )
    .unwrap();
    filter.run(&mut batch).unwrap();
    let flags = batch.frames[0]
        .detections
        .iter()
        .map(|d| d.stats.unwrap().kept)
        .collect();
    (flags, filter.report_line())
}

#[test]
fn zero_some_or_all_tiles_are_kept_as_the_rule_says() {
    let (none, line) = kept(Some("mean > 1"), None, Property::Mean);
    let n = none.len();
    assert!(none.iter().all(|k| !k));
    assert!(
        line.contains(&format!(
            "0 of {n} tiles kept (0.0%), 0.0 of 8.0 MiB (0.0%)"
        )),
        "{line}"
    );
    assert!(
        line.contains("downlink at 2 Mbps: 33.6 s -> 0.0 s"),
        "{line}"
    );
    let (all, line) = kept(None, None, Property::Mean);
    assert!(all.iter().all(|k| *k));
    assert!(
        line.contains(&format!("{n} of {n} tiles kept (100.0%)")),
        "{line}"
    );
    let (bright, _) = kept(Some("mean > 0.535"), None, Property::Mean);
    let share = bright.iter().filter(|k| **k).count() as f64 / n as f64;
    // Ocean, ice and clouds: about half the tiles are bright.
    assert!((0.25..0.75).contains(&share), "{share}");
    let (top, _) = kept(Some("mean > 0.535"), Some(5), Property::Std);
    assert_eq!(top.iter().filter(|k| **k).count(), 5);
    assert!(
        top.iter().zip(&bright).all(|(t, b)| !t || *b),
        "top-k keeps passing tiles only"
    );
}

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

// ---- GPU: the CUDA backend against the CPU backend ----

fn gpu_sums(g: &mut GpuSums, frame: &Frame, s: &Sampling, t: &TileBlocks) -> Vec<PixelSums> {
    let mut out = Vec::new();
    g.sums(frame.data().unwrap(), s, t, &mut out).unwrap();
    out
}

#[test]
fn gpu_sums_equal_cpu_sums_on_the_scene_and_random_grids() {
    if !common::gpu("gpu_sums_equal_cpu_sums_on_the_scene_and_random_grids") {
        return;
    }
    let mut g = GpuSums::new(0).unwrap();
    eprintln!("GPU: {}", g.engine().device_name());
    // The seed scenario: the 8192x8192 scene, 727 random tiles of 128..=512.
    let frame = scene::frame(8192, 8192, 1);
    let rects = random(8192, 8192, 128, 512, SEED_727);
    assert_eq!(rects.len(), 727);
    let mut all = vec![(
        "scene 8192 seed-scenario grid".to_string(),
        frame,
        rects,
        16384,
        "luma",
    )];
    all.extend(cases());
    for (what, frame, rects, bp, band) in all {
        let s = Sampling::of(&frame, &config(band, 0.535)).unwrap();
        let c = cut(&rects, bp);
        let cpu = cpu_sums(&frame, &s, &c);
        let before = g.launches;
        for round in 0..3 {
            let gpu = gpu_sums(&mut g, &frame, &s, &c);
            assert_eq!(gpu, cpu, "{what}, launch {round}");
        }
        assert_eq!(g.launches - before, 3, "{what}: one launch per frame");
        // Identical sums give identical statistics.
        let stats = |v: &[PixelSums]| -> Vec<_> {
            v.iter()
                .zip(&rects)
                .map(|(x, r)| s.stats(*x, u64::from(r[2]) * u64::from(r[3])))
                .collect()
        };
        assert_eq!(stats(&cpu), stats(&gpu_sums(&mut g, &frame, &s, &c)));
        eprintln!("{what}: {} tiles, GPU sums equal CPU sums", rects.len());
    }
}

#[test]
fn gpu_and_cpu_stages_keep_the_same_tiles() {
    if !common::gpu("gpu_and_cpu_stages_keep_the_same_tiles") {
        return;
    }
    for (keep, top_k) in [
        ("mean > 0.535", None),
        ("mean > 0.3 and std < 0.05 or above >= 0.9", None),
        ("mean > 2", None),
        ("mean >= 0", Some(100)),
    ] {
        let run = |backend| {
            let mut tiler = Tiler::new(TilesConfig {
                grid: Grid::Random {
                    min: 128,
                    max: 512,
                    seed: SEED_727,
                },
            });
            let mut batch = tiler.cut(scene::frame(8192, 8192, 1)).unwrap();
            let mut filter = TileFilter::new(
                TileStatsConfig {
                    keep: Some(Rule::parse(keep).unwrap()),
                    top_k,
                    score: Property::Std,
                    backend,
                    ..TileStatsConfig::default()
                },
                tally(),
            )
            .unwrap();
            filter.run(&mut batch).unwrap();
            let stats: Vec<_> = batch.frames[0]
                .detections
                .iter()
                .map(|d| d.stats.unwrap())
                .collect();
            (stats, filter.report_line())
        };
        let (cpu, cpu_line) = run(BackendKind::Cpu);
        let (gpu, gpu_line) = run(BackendKind::Cuda);
        assert_eq!(gpu, cpu, "{keep}");
        eprintln!("{keep}: {gpu_line}\n  cpu: {cpu_line}");
    }
}
