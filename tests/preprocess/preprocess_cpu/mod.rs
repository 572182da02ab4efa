//! CPU preprocess backend against OpenCV-made golden values and a plain f64 reference (for JPEG
//! frames: libjpeg-turbo's row loops written out).

use octopipe::batch::CropBatch;
use octopipe::frame::Detection;
use octopipe::frame::{ChromaSite, Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::{Backend, ChannelOrder, Layout, PreprocessConfig};

mod reference;

use reference::{frame_of, libjpeg_rgb, reference};

/// Settings that leave values on the 0..255 scale.
fn raw_config(layout: Layout, channels: ChannelOrder) -> PreprocessConfig {
    PreprocessConfig {
        mean: [0.0; 3],
        std: [1.0; 3],
        scale: 1.0,
        layout,
        channels,
        threads: 2,
        ..PreprocessConfig::default()
    }
}

fn det(b: [u32; 4]) -> Detection {
    Detection::new(b)
}

/// One-frame batch with the given boxes, each resized to its own size.
fn batch(frame: Frame, boxes: &[([u32; 4], (u32, u32))]) -> CropBatch {
    let mut b = CropBatch::default();
    // Frames of one size per push; ragged sizes go in as separate pushes of the same pixels.
    let mut frame = Some(frame);
    for (i, (bx, (ow, oh))) in boxes.iter().enumerate() {
        let mut f = match frame.take() {
            Some(f) => f,
            None => clone_frame(&b.frames[0], i as u64),
        };
        f.detections = vec![det(*bx)];
        b.push_frame(f, *ow, *oh, 3);
    }
    b.build_blocks(64, 2);
    b
}

/// Largest |out - expected| over the pairs.
fn max_abs_diff(out: &[f32], expected: impl Iterator<Item = f64>) -> f64 {
    out.iter()
        .zip(expected)
        .map(|(a, e)| (*a as f64 - e).abs())
        .fold(0.0, f64::max)
}

fn clone_frame(f: &Frame, seq: u64) -> Frame {
    Frame::new(
        0,
        seq,
        "clone",
        f.layout,
        f.colorimetry,
        PooledBuf::unpooled(f.data().unwrap().to_vec()),
    )
}

#[derive(serde::Deserialize)]
struct Golden {
    image: GoldenImage,
    cases: Vec<GoldenCase>,
}

#[derive(serde::Deserialize)]
struct GoldenImage {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

#[derive(serde::Deserialize)]
struct GoldenCase {
    name: String,
    #[serde(rename = "box")]
    bbox: [u32; 4],
    out: [u32; 2],
    values: Vec<f64>,
    values_u8: Option<Vec<u8>>,
}

#[test]
fn matches_opencv_inter_linear_golden_values() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/golden/resize.json"
    ))
    .unwrap();
    let g: Golden = serde_json::from_str(&text).unwrap();
    let layout = FrameLayout::packed(PixelFormat::Rgb, g.image.width, g.image.height);
    let frame = Frame::new(
        0,
        0,
        "golden",
        layout,
        Colorimetry::default(),
        PooledBuf::unpooled(g.image.data),
    );
    let boxes: Vec<_> = g
        .cases
        .iter()
        .map(|c| (c.bbox, (c.out[0], c.out[1])))
        .collect();
    let mut b = batch(frame, &boxes);
    let mut cpu = CpuBackend::new(raw_config(Layout::Nhwc, ChannelOrder::Rgb)).unwrap();
    cpu.run(&mut b).unwrap();
    for (case, crop) in g.cases.iter().zip(&b.crops) {
        let out = &b.tensor.as_f32().unwrap()[crop.out_offset as usize..][..case.values.len()];
        let worst = max_abs_diff(out, case.values.iter().copied());
        // OpenCV float resize: only float rounding apart.
        assert!(
            worst <= 0.01,
            "{}: max abs difference {worst} vs OpenCV float",
            case.name
        );
        if let Some(u8s) = &case.values_u8 {
            let worst = max_abs_diff(out, u8s.iter().map(|&e| e as f64));
            assert!(
                worst <= 1.0,
                "{}: max abs difference {worst} vs OpenCV uint8",
                case.name
            );
        }
    }
}

#[test]
fn every_format_matches_the_f64_reference() {
    let boxes = [
        ([0, 0, 37, 23], (16, 16)),   // top-left corner, downscale
        ([40, 30, 1, 1], (4, 4)),     // one pixel
        ([60, 44, 17, 13], (64, 64)), // bottom-right corner of a 77x57 frame, upscale
        ([3, 5, 2, 40], (9, 7)),      // thin
        ([10, 9, 67, 48], (31, 29)),  // odd sizes
    ];
    let cases = [
        (PixelFormat::Rgb, Colorimetry::default()),
        (PixelFormat::Bgr, Colorimetry::default()),
        (PixelFormat::Rgba, Colorimetry::default()),
        (PixelFormat::Bgra, Colorimetry::default()),
        (PixelFormat::Gray8, Colorimetry::default()),
        (PixelFormat::Gray16, Colorimetry::default()),
        (PixelFormat::I420, Colorimetry::JPEG),
        (PixelFormat::I420, Colorimetry::BT709),
        (PixelFormat::Nv12, Colorimetry::BT601),
        (PixelFormat::Nv12, Colorimetry::JPEG),
        // BT.601 full range with co-sited chroma is not JPEG: the float path.
        (
            PixelFormat::I420,
            Colorimetry {
                chroma_site: ChromaSite::Left,
                ..Colorimetry::JPEG
            },
        ),
    ];
    for (seed, (format, col)) in cases.into_iter().enumerate() {
        let frame = frame_of(format, 77, 57, col, seed as u64 + 1);
        let refs: Vec<Vec<f64>> = boxes
            .iter()
            .map(|(b, (w, h))| reference(&frame, *b, *w, *h))
            .collect();
        for (layout, channels) in [
            (Layout::Nhwc, ChannelOrder::Rgb),
            (Layout::Nchw, ChannelOrder::Rgb),
            (Layout::Nchw, ChannelOrder::Bgr),
        ] {
            let mut b = batch(clone_frame(&frame, 0), &boxes);
            // Poison: every element must be written.
            let n = b.tensor_len(3);
            b.tensor.host_f32(n).fill(f32::NAN);
            let mut cpu = CpuBackend::new(raw_config(layout, channels)).unwrap();
            cpu.run(&mut b).unwrap();
            assert!(
                b.tensor.as_f32().unwrap().iter().all(|v| v.is_finite()),
                "{format} {layout:?}: unwritten output"
            );
            for ((crop, r), (bx, _)) in b.crops.iter().zip(&refs).zip(&boxes) {
                let n = crop.out_pixels() as usize;
                let out = &b.tensor.as_f32().unwrap()[crop.out_offset as usize..][..3 * n];
                let mut worst = 0.0f64;
                for p in 0..n {
                    for c in 0..3 {
                        let k = if channels == ChannelOrder::Bgr {
                            2 - c
                        } else {
                            c
                        };
                        let v = match layout {
                            Layout::Nhwc => out[p * 3 + k],
                            Layout::Nchw => out[k * n + p],
                        };
                        worst = worst.max((v as f64 - r[p * 3 + c]).abs());
                    }
                }
                assert!(worst <= 1.0, "{format} {col:?} {layout:?} {channels:?} box {bx:?}: max abs difference {worst}");
                assert!(
                    worst <= 0.01,
                    "{format} box {bx:?}: {worst} (f32 vs f64 should agree closely)"
                );
            }
        }
    }
}

/// JPEG frames of every small size, odd and even, including planes of 1 and 2 chroma samples a row
/// (replicated, not filtered, by libjpeg): `frame_to_rgb` (the row converter) and 1x1 crops of 3x1
/// boxes (the per-pixel sampler) both give libjpeg-turbo's bytes at every pixel.
#[test]
fn jpeg_frames_are_libjpegs_bytes_at_every_size() {
    use octopipe::frame::Detection;
    use octopipe::preprocess::cpu::frame_to_rgb;
    for (seed, (w, h)) in [
        (1, 1),
        (2, 3),
        (3, 2),
        (4, 7),
        (5, 4),
        (6, 6),
        (9, 5),
        (16, 11),
    ]
    .into_iter()
    .enumerate()
    {
        for format in [PixelFormat::I420, PixelFormat::Nv12] {
            let frame = frame_of(format, w, h, Colorimetry::JPEG, 40 + seed as u64);
            let want = libjpeg_rgb(&frame);
            let rows: Vec<[u8; 3]> = frame_to_rgb(&frame)
                .unwrap()
                .chunks(3)
                .map(|p| [p[0], p[1], p[2]])
                .collect();
            assert_eq!(rows, want, "{format} {w}x{h} by row");
            if w < 3 {
                continue;
            }
            let mut f = clone_frame(&frame, 0);
            let points: Vec<(u32, u32)> = (0..h)
                .flat_map(|y| (1..w - 1).map(move |x| (x, y)))
                .collect();
            f.detections = points
                .iter()
                .map(|&(x, y)| Detection::new([x - 1, y, 3, 1]))
                .collect();
            let mut b = CropBatch::default();
            b.push_frame(f, 1, 1, 3);
            b.build_blocks(64, 2);
            CpuBackend::new(raw_config(Layout::Nhwc, ChannelOrder::Rgb))
                .unwrap()
                .run(&mut b)
                .unwrap();
            let out = b.tensor.as_f32().unwrap();
            for ((x, y), crop) in points.iter().zip(&b.crops) {
                let got = &out[crop.out_offset as usize..][..3];
                let want = want[(y * w + x) as usize].map(f32::from);
                assert_eq!(got, want, "{format} {w}x{h} pixel ({x}, {y}) by 1x1 crop");
            }
        }
    }
}

#[test]
fn normalization_is_applied_per_channel() {
    let frame = frame_of(PixelFormat::Rgb, 20, 10, Colorimetry::default(), 3);
    let r = reference(&frame, [2, 2, 8, 6], 5, 5);
    let cfg = PreprocessConfig {
        threads: 1,
        ..PreprocessConfig::default()
    };
    let mut b = batch(frame, &[([2, 2, 8, 6], (5, 5))]);
    CpuBackend::new(cfg.clone()).unwrap().run(&mut b).unwrap();
    for p in 0..25 {
        for c in 0..3 {
            let want = (r[p * 3 + c] / 255.0 - cfg.mean[c] as f64) / cfg.std[c] as f64;
            let got = b.tensor.as_f32().unwrap()[c * 25 + p] as f64;
            assert!(
                (got - want).abs() < 1e-4,
                "pixel {p} channel {c}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn blocks_tile_every_crop_exactly_once() {
    let frame = frame_of(PixelFormat::Rgb, 64, 48, Colorimetry::default(), 9);
    let boxes = [
        ([0, 0, 10, 10], (7, 3)),
        ([5, 5, 30, 30], (64, 64)),
        ([1, 1, 2, 2], (1, 1)),
    ];
    let mut b = batch(frame, &boxes);
    for (tile, per_block) in [(1, 1), (7, 3), (256, 4), (5000, 1)] {
        b.build_blocks(tile, per_block);
        let mut covered: Vec<u32> = vec![0; b.crops.len()];
        for blk in &b.blocks {
            let (p0, p1) = b.block_pixels(blk);
            assert_eq!(
                p0, covered[blk.crop as usize],
                "tile {tile}: blocks must be contiguous"
            );
            assert!(p1 > p0);
            covered[blk.crop as usize] = p1;
        }
        for (c, crop) in covered.iter().zip(&b.crops) {
            assert_eq!(*c, crop.out_pixels(), "tile {tile}: crop not fully covered");
        }
        let total_tiles: u32 = b.crops.iter().map(|c| c.out_pixels().div_ceil(tile)).sum();
        assert_eq!(
            b.blocks.len() as u32,
            b.crops
                .iter()
                .map(|c| c.out_pixels().div_ceil(tile).div_ceil(per_block))
                .sum::<u32>()
        );
        assert!(total_tiles >= b.blocks.len() as u32);
    }
}

#[test]
fn inconsistent_batches_are_errors_not_panics() {
    let frame = frame_of(PixelFormat::Rgb, 16, 16, Colorimetry::default(), 1);
    let mut b = batch(frame, &[([0, 0, 8, 8], (4, 4))]);
    b.crops[0].w = 40;
    let e = CpuBackend::new(raw_config(Layout::Nchw, ChannelOrder::Rgb))
        .unwrap()
        .run(&mut b)
        .unwrap_err();
    assert!(e.to_string().contains("does not fit frame 16x16"), "{e}");
    let mut b = batch(
        frame_of(PixelFormat::Rgb, 16, 16, Colorimetry::default(), 1),
        &[([0, 0, 8, 8], (4, 4))],
    );
    b.release_pixels();
    let e = CpuBackend::new(raw_config(Layout::Nchw, ChannelOrder::Rgb))
        .unwrap()
        .run(&mut b)
        .unwrap_err();
    assert!(e.to_string().contains("has no pixels"), "{e}");
}

/// `interpolation=area` against OpenCV `INTER_AREA` (scripts/make_golden.py writes
/// `resize_area.json`): integer and non-integer downscales, identity, and OpenCV's upscale
/// fallback on one or both axes; also letterbox and f16 output built on the same cases.
#[test]
fn matches_opencv_inter_area_golden_values() {
    use octopipe::preprocess::{f32_to_f16, letterbox_rect, DType, Interpolation};
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/golden/resize_area.json"
    ))
    .unwrap();
    let g: Golden = serde_json::from_str(&text).unwrap();
    let layout = FrameLayout::packed(PixelFormat::Rgb, g.image.width, g.image.height);
    let frame = || {
        Frame::new(
            0,
            0,
            "golden",
            layout,
            Colorimetry::default(),
            PooledBuf::unpooled(g.image.data.clone()),
        )
    };
    let boxes: Vec<_> = g
        .cases
        .iter()
        .map(|c| (c.bbox, (c.out[0], c.out[1])))
        .collect();
    let area = PreprocessConfig {
        interpolation: Interpolation::Area,
        ..raw_config(Layout::Nhwc, ChannelOrder::Rgb)
    };
    let mut b = batch(frame(), &boxes);
    CpuBackend::new(area.clone()).unwrap().run(&mut b).unwrap();
    for (case, crop) in g.cases.iter().zip(&b.crops) {
        let out = &b.tensor.as_f32().unwrap()[crop.out_offset as usize..][..case.values.len()];
        let worst = max_abs_diff(out, case.values.iter().copied());
        assert!(
            worst <= 0.01,
            "{}: max abs difference {worst} vs OpenCV INTER_AREA float",
            case.name
        );
    }

    // f16 output: the f32 values rounded to nearest even, in an f16 tensor.
    let f32_values = b.tensor.as_f32().unwrap().to_vec();
    let mut h = batch(frame(), &boxes);
    let f16 = PreprocessConfig {
        dtype: DType::F16,
        ..area.clone()
    };
    CpuBackend::new(f16).unwrap().run(&mut h).unwrap();
    assert!(h.tensor.as_f32().is_none());
    assert_eq!(h.tensor.as_f16().unwrap().len(), f32_values.len());
    assert!(h
        .tensor
        .as_f16()
        .unwrap()
        .iter()
        .zip(&f32_values)
        .all(|(a, b)| *a == f32_to_f16(*b)));

    // Letterbox: the inner rectangle is the same area resize of the crop to the letterboxed size,
    // the rest is the pad value.
    let pad = 114.0;
    let mut lb = batch(frame(), &boxes);
    let lb_cfg = PreprocessConfig {
        letterbox: Some(pad),
        ..area.clone()
    };
    CpuBackend::new(lb_cfg).unwrap().run(&mut lb).unwrap();
    let inner_boxes: Vec<_> = g
        .cases
        .iter()
        .map(|c| {
            let (_, _, nw, nh) = letterbox_rect(c.bbox[2], c.bbox[3], c.out[0], c.out[1]);
            (c.bbox, (nw, nh))
        })
        .collect();
    let mut inner = batch(frame(), &inner_boxes);
    CpuBackend::new(area).unwrap().run(&mut inner).unwrap();
    for ((case, crop), ic) in g.cases.iter().zip(&lb.crops).zip(&inner.crops) {
        let (ox, oy, nw, nh) = letterbox_rect(crop.w, crop.h, crop.out_w, crop.out_h);
        assert!(nw == crop.out_w || nh == crop.out_h, "{}", case.name);
        for y in 0..crop.out_h {
            for x in 0..crop.out_w {
                for k in 0..3 {
                    let got = lb.tensor.as_f32().unwrap()
                        [(crop.out_offset + (y * crop.out_w + x) * 3 + k) as usize];
                    let inside = x >= ox && x < ox + nw && y >= oy && y < oy + nh;
                    let want = if inside {
                        inner.tensor.as_f32().unwrap()
                            [(ic.out_offset + ((y - oy) * nw + (x - ox)) * 3 + k) as usize]
                    } else {
                        pad
                    };
                    assert_eq!(got, want, "{} letterbox ({x}, {y}) channel {k}", case.name);
                }
            }
        }
    }
}

#[test]
fn letterbox_rect_keeps_the_aspect_and_centres() {
    use octopipe::preprocess::letterbox_rect;
    assert_eq!(letterbox_rect(100, 50, 64, 64), (0, 16, 64, 32));
    assert_eq!(letterbox_rect(50, 100, 64, 64), (16, 0, 32, 64));
    assert_eq!(letterbox_rect(30, 30, 64, 64), (0, 0, 64, 64));
    // 1000x1 -> 224x224: the short side never rounds to 0.
    assert_eq!(letterbox_rect(1000, 1, 224, 224), (0, 111, 224, 1));
    // Odd spare: the extra pixel goes after the image.
    assert_eq!(letterbox_rect(3, 2, 8, 8), (0, 1, 8, 5));
}

#[test]
fn weighted_blocks_balance_input_pixels() {
    use octopipe::batch::CropMeta;
    let mut b = CropBatch::default();
    for (i, (w, h)) in [(20u32, 20u32), (1000, 800), (224, 224)].iter().enumerate() {
        b.crops.push(CropMeta {
            frame: 0,
            x: 0,
            y: 0,
            w: *w,
            h: *h,
            out_w: 224,
            out_h: 224,
            out_offset: i as u32 * 224 * 224 * 3,
        });
    }
    b.build_blocks_weighted(256, 8, 16 * 1024);
    // Every tile of every crop once, in order.
    for (i, c) in b.crops.iter().enumerate() {
        let mine: Vec<_> = b.blocks.iter().filter(|x| x.crop == i as u32).collect();
        assert_eq!(mine[0].tile_begin, 0);
        assert_eq!(mine.last().unwrap().tile_end, c.out_pixels().div_ceil(256));
        assert!(mine.windows(2).all(|w| w[0].tile_end == w[1].tile_begin));
    }
    let per = |i: u32| {
        let mine: Vec<_> = b.blocks.iter().filter(|x| x.crop == i).collect();
        mine[0].tile_end - mine[0].tile_begin
    };
    // Upscaled and same-size crops: 16 Ki input / 256 = 64 tiles, capped at 8.
    assert_eq!(per(0), 8);
    assert_eq!(per(2), 8);
    // 1000x800 -> 224x224 reads ~15.9 source pixels per output: 4 tiles per block.
    assert_eq!(per(1), 4);
}
