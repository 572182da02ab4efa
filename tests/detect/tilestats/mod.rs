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

mod cli;

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
