//! CUDA backend vs the CPU reference: every strategy, format, layout and edge case, on random and
//! real frames. Each test skips with a printed reason where there is no GPU (this machine, CI).
//!
//! Tolerance: max abs difference <= 1.0 on the 0..255 scale before normalization (f16 output: that
//! plus f16 rounding); every output element written (the device output is poisoned with NaN first).
//!
//! The real clip is read from `$OCTOPIPE_DATA` (default `../shared/data` beside the crate).
//!
//! Needs the `bench` feature (the baseline strategies and the benchmark inputs):
//! `cargo test --features bench`.
#![cfg(feature = "bench")]

use crate::common;

use std::path::PathBuf;

use octopipe::batch::{CropBatch, CropMeta};
use octopipe::bench::{
    self, f16_to_f32, frame_from, max_diff_255, synthetic_frame, BenchEngine, Rng, Strategy,
};
use octopipe::frame::{Colorimetry, FrameLayout, PixelFormat};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::cuda::meta::Norm;
use octopipe::preprocess::cuda::{self, CudaBackend, HostFrame, OutType, UploadMode};
use octopipe::preprocess::{Backend, ChannelOrder, DType, Interpolation, Layout, PreprocessConfig};

const TOL: f32 = 1.0;

fn data_dir() -> PathBuf {
    std::env::var_os("OCTOPIPE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
}

/// Push `crops` (with `out_offset` filled in, packed, ragged sizes allowed) and build the blocks.
fn finish(batch: &mut CropBatch, crops: Vec<CropMeta>) {
    let mut off = 0;
    for mut c in crops {
        c.out_offset = off;
        off += c.out_pixels() * 3;
        batch.crops.push(c);
    }
    batch.build_blocks(256, 4);
}

/// A batch holding one 2501x2111 I420 frame and no crops yet.
fn big_frame_batch() -> CropBatch {
    let mut batch = CropBatch::default();
    batch
        .frames
        .push(synthetic_frame(PixelFormat::I420, 2501, 2111, 3));
    batch
}

/// A crop of frame 0 (its output offset is set by [`finish`]).
fn crop(x: u32, y: u32, w: u32, h: u32, out_w: u32, out_h: u32) -> CropMeta {
    CropMeta {
        frame: 0,
        x,
        y,
        w,
        h,
        out_w,
        out_h,
        out_offset: 0,
    }
}

/// Run the CPU backend and the CUDA backend (device output poisoned first); compare.
fn compare_backends(batch: &mut CropBatch, config: &PreprocessConfig, what: &str) -> f32 {
    let mut cpu = CpuBackend::new(config.clone()).unwrap();
    cpu.run(batch).unwrap();
    let reference = batch.tensor.as_f32().unwrap().to_vec();
    let mut gpu = CudaBackend::new(config.clone()).unwrap();
    let len = batch.tensor_len(3);
    gpu.engine()
        .poison_output(OutType::F32, len, f32::NAN.to_bits())
        .unwrap();
    batch
        .tensor
        .as_f32_mut()
        .unwrap()
        .iter_mut()
        .for_each(|v| *v = f32::NAN);
    gpu.run(batch).unwrap();
    let unwritten = batch
        .tensor
        .as_f32()
        .unwrap()
        .iter()
        .filter(|v| !v.is_finite())
        .count();
    assert_eq!(
        unwritten, 0,
        "{what}: {unwritten} output elements not written"
    );
    let d = max_diff_255(batch.tensor.as_f32().unwrap(), &reference, config);
    eprintln!(
        "{what}: {} crops, {} values, max |gpu - cpu| = {d:.4} (0..255 scale)",
        batch.crops.len(),
        len
    );
    assert!(d <= TOL, "{what}: max difference {d} > {TOL}");
    d
}

/// Every strategy (and C with f16) through the engine, against `reference`.
fn compare_strategies(batch: &CropBatch, config: &PreprocessConfig, reference: &[f32], what: &str) {
    let mut e = BenchEngine::new(0).unwrap();
    let frames: Vec<HostFrame<'_>> = batch.frames.iter().map(HostFrame::of).collect();
    let len = batch.tensor_len(3);
    let norm = Norm::from_config(config);
    // Page-locked copies of the frames, for the rectangles the GPU gathers itself.
    let pinned: Vec<_> = frames
        .iter()
        .map(|f| {
            // SAFETY: filled right below, before any copy reads it.
            let mut p = unsafe { e.context().alloc_pinned::<u8>(f.data.len()) }.unwrap();
            p.as_mut_slice().unwrap().copy_from_slice(f.data);
            p
        })
        .collect();
    let pinned_frames: Vec<HostFrame<'_>> = frames
        .iter()
        .zip(&pinned)
        .map(|(f, p)| HostFrame {
            data: p.as_slice().unwrap(),
            ..*f
        })
        .collect();
    let runs = [
        (&frames, UploadMode::Whole, false),
        (&frames, UploadMode::Rows, false),
        (&frames, UploadMode::Rects, false),
        (&pinned_frames, UploadMode::Rects, true),
    ];
    for (frames, mode, device_gather) in runs {
        // SAFETY: the pinned frames outlive every launch here, each waited for by its download.
        unsafe { e.set_device_gather(device_gather) };
        let how = if device_gather { "device gather" } else { "" };
        for s in Strategy::ALL {
            let stats = e.upload_frames(frames, &batch.crops, mode).unwrap();
            assert_eq!(
                stats.device_rects > 0,
                device_gather,
                "{what} {mode:?} {how}"
            );
            e.upload_meta_for(s, &batch.crops, &batch.blocks).unwrap();
            e.poison_output(OutType::F32, len, f32::NAN.to_bits())
                .unwrap();
            e.launch_strategy(
                s,
                OutType::F32,
                norm,
                &batch.crops,
                batch.blocks.len(),
                batch.tile_pixels,
                256,
                len,
            )
            .unwrap();
            let mut out = vec![0f32; len];
            e.download_f32(&mut out).unwrap();
            let unwritten = out.iter().filter(|v| !v.is_finite()).count();
            assert_eq!(
                unwritten, 0,
                "{what} {s:?} {mode:?} {how}: {unwritten} elements not written"
            );
            let d = max_diff_255(&out, reference, config);
            eprintln!("{what} {} {mode:?} {how}: max diff {d:.4}", s.label());
            assert!(d <= TOL, "{what} {s:?} {mode:?} {how}: max difference {d}");
        }
    }
    // The device gather refuses pageable frames, naming the frame.
    let err = e
        .upload_frames(&frames, &batch.crops, UploadMode::Rects)
        .unwrap_err()
        .to_string();
    assert!(err.contains("frame 0 is not page-locked"), "{err}");
    // SAFETY: back to host gathers.
    unsafe { e.set_device_gather(false) };
    compare_f16(&mut e, batch, &frames, config, reference, what);
}

/// Strategy C with f16 output against `reference`: within f16 rounding of the f32 value (half an
/// ulp: |v| * 2^-11, plus the f32 tolerance).
fn compare_f16(
    e: &mut cuda::Engine,
    batch: &CropBatch,
    frames: &[HostFrame<'_>],
    config: &PreprocessConfig,
    reference: &[f32],
    what: &str,
) {
    let len = batch.tensor_len(3);
    e.upload_frames(frames, &batch.crops, UploadMode::Whole)
        .unwrap();
    e.upload_meta(&batch.crops, &batch.blocks).unwrap();
    e.poison_output(OutType::F16, len, 0x7e00).unwrap();
    e.launch(
        OutType::F16,
        Norm::from_config(config),
        &batch.crops,
        batch.blocks.len(),
        batch.tile_pixels,
        256,
        len,
    )
    .unwrap();
    let mut h = vec![0u16; len];
    e.download_f16(&mut h).unwrap();
    let min_a = config
        .affine()
        .iter()
        .map(|a| a.0)
        .fold(f32::INFINITY, f32::min);
    let mut worst = 0f32;
    for (i, (&b, &r)) in h.iter().zip(reference).enumerate() {
        let v = f16_to_f32(b);
        assert!(v.is_finite(), "{what} f16: element {i} not written");
        let allowed = TOL * config.affine().iter().map(|a| a.0).fold(0.0, f32::max)
            + r.abs() * (2.0f32).powi(-11);
        let d = (v - r).abs();
        assert!(d <= allowed, "{what} f16: element {i}: {v} vs {r}");
        worst = worst.max(d / min_a);
    }
    eprintln!("{what} C f16: max diff {worst:.4} (0..255 scale, f16 rounding included)");
}

fn random_batch(format: PixelFormat, rng: &mut Rng) -> CropBatch {
    let mut batch = CropBatch::default();
    let sizes = [(333u32, 251u32), (97, 61)];
    let mut crops = Vec::new();
    for (fi, &(w, h)) in sizes.iter().enumerate() {
        batch
            .frames
            .push(synthetic_frame(format, w, h, rng.next_u64()));
        let fi = fi as u32;
        let mut push = |x, y, bw, bh, ow, oh| {
            crops.push(CropMeta {
                frame: fi,
                x,
                y,
                w: bw,
                h: bh,
                out_w: ow,
                out_h: oh,
                out_offset: 0,
            })
        };
        // 1-pixel boxes, frame edges and corners, the whole frame, up- and downscaling, ragged outputs.
        push(0, 0, 1, 1, 7, 5);
        push(w - 1, h - 1, 1, 1, 3, 3);
        push(0, 0, w, h, 64, 48);
        push(w - 5, 0, 5, h, 9, 31);
        push(0, h - 3, w, 3, 17, 2);
        push(w / 2, h / 2, 2, 2, 1, 1);
        for _ in 0..40 {
            let bw = 1 + rng.below(w as u64) as u32;
            let bh = 1 + rng.below(h as u64) as u32;
            let x = rng.below((w - bw + 1) as u64) as u32;
            let y = rng.below((h - bh + 1) as u64) as u32;
            push(
                x,
                y,
                bw,
                bh,
                1 + rng.below(90) as u32,
                1 + rng.below(90) as u32,
            );
        }
    }
    finish(&mut batch, crops);
    batch
}

fn configs() -> Vec<(PreprocessConfig, &'static str)> {
    vec![
        (PreprocessConfig::default(), "rgb nchw"),
        (
            PreprocessConfig {
                channels: ChannelOrder::Bgr,
                layout: Layout::Nhwc,
                mean: [0.1, 0.2, 0.3],
                std: [0.5, 0.25, 0.125],
                ..PreprocessConfig::default()
            },
            "bgr nhwc",
        ),
    ]
}

#[test]
fn parity_random_frames_every_format_layout_and_strategy() {
    if !common::gpu("parity_random_frames_every_format_layout_and_strategy") {
        return;
    }
    let mut rng = Rng::new(42);
    for format in [
        PixelFormat::I420,
        PixelFormat::Nv12,
        PixelFormat::Rgb,
        PixelFormat::Bgr,
        PixelFormat::Rgba,
        PixelFormat::Bgra,
    ] {
        for (config, name) in configs() {
            let mut batch = random_batch(format, &mut rng);
            let what = format!("{format} {name}");
            compare_backends(&mut batch, &config, &what);
            let reference = batch.tensor.as_f32().unwrap().to_vec();
            compare_strategies(&batch, &config, &reference, &what);
        }
    }
}

/// Strategy C's separable two-stage path (crops whose output rows are multiples of 4),
/// its row chunks (large boxes whose rows do not fit the stages at once), the fallback paths (ragged
/// outputs), persistent and one-block-per-entry grids, whole-frame and crop-rectangle uploads:
/// bit-identical to the CPU backend.
#[test]
fn parity_octopus_separable_persistent_rects() {
    if !common::gpu("parity_octopus_separable_persistent_rects") {
        return;
    }
    let mut rng = Rng::new(2026);
    for format in [
        PixelFormat::I420,
        PixelFormat::Nv12,
        PixelFormat::Rgb,
        PixelFormat::Bgra,
    ] {
        let mut batch = CropBatch::default();
        let mut aligned = Vec::new();
        let mut ragged = Vec::new();
        for (fi, (w, h)) in [(1280u32, 720u32), (333, 251)].into_iter().enumerate() {
            batch
                .frames
                .push(synthetic_frame(format, w, h, rng.next_u64()));
            let fi = fi as u32;
            let c = |x, y, bw, bh, ow, oh| CropMeta {
                frame: fi,
                x,
                y,
                w: bw,
                h: bh,
                out_w: ow,
                out_h: oh,
                out_offset: 0,
            };
            aligned.push(c(0, 0, w, h, 224, 224));
            aligned.push(c(w - 1, h - 1, 1, 1, 64, 64));
            aligned.push(c(0, h - 2, w, 2, 96, 32));
            aligned.push(c(w / 3, 0, (w / 2).min(700), h, 64, 224));
            for i in 0..36 {
                let cap = [48u64, 300, w as u64][i % 3];
                let bw = 1 + rng.below(cap.min(w as u64)) as u32;
                let bh = 1 + rng.below(cap.min(h as u64)) as u32;
                let x = rng.below((w - bw + 1) as u64) as u32;
                let y = rng.below((h - bh + 1) as u64) as u32;
                let (ow, oh) = [(224, 224), (64, 64), (96, 32), (8, 4), (128, 60)][i % 5];
                aligned.push(c(x, y, bw, bh, ow, oh));
            }
            ragged.push(c(3, 2, 50, 40, 31, 17));
            ragged.push(c(0, 0, w, h, 99, 45));
        }
        aligned.extend(ragged);
        finish(&mut batch, aligned);
        for (config, name) in configs() {
            let mut cpu = CpuBackend::new(config.clone()).unwrap();
            cpu.run(&mut batch).unwrap();
            let reference = batch.tensor.as_f32().unwrap().to_vec();
            let mut e = cuda::Engine::new(0).unwrap();
            let frames: Vec<HostFrame<'_>> = batch.frames.iter().map(HostFrame::of).collect();
            let len = batch.tensor_len(3);
            let norm = Norm::from_config(&config);
            let sms = e.multiprocessors();
            for mode in [UploadMode::Whole, UploadMode::Rects] {
                for (tile, per) in [(256u32, 4u32), (512, 1), (256, 8), (128, 2)] {
                    for grid in [0, 2 * sms, 3] {
                        if !e.set_octopus_grid(grid) {
                            continue; // kernels built without -DOCTOPUS_PERSISTENT=1
                        }
                        let mut b = CropBatch::default();
                        b.crops = batch.crops.clone();
                        b.build_blocks(tile, per);
                        e.upload_frames(&frames, &b.crops, mode).unwrap();
                        e.upload_meta(&b.crops, &b.blocks).unwrap();
                        e.poison_output(OutType::F32, len, f32::NAN.to_bits())
                            .unwrap();
                        e.launch(
                            OutType::F32,
                            norm,
                            &b.crops,
                            b.blocks.len(),
                            tile,
                            cuda::octopus_threads(tile, per),
                            len,
                        )
                        .unwrap();
                        let mut out = vec![0f32; len];
                        e.download_f32(&mut out).unwrap();
                        let what =
                            format!("{format} {name} {mode:?} tile {tile}x{per} grid {grid}");
                        assert!(
                            out.iter().all(|v| v.is_finite()),
                            "{what}: elements not written"
                        );
                        let d = max_diff_255(&out, &reference, &config);
                        assert!(d == 0.0, "{what}: max difference {d}");
                    }
                }
            }
            eprintln!("{format} {name}: strategy C paths bit-identical to the CPU backend");
        }
    }
}

/// `CudaBackend::submit` / `flush`: batches come back one call late, in order, each with its own
/// tensor (f32 and f16), equal to `run`'s.
#[test]
fn submit_flush_two_in_flight() {
    if !common::gpu("submit_flush_two_in_flight") {
        return;
    }
    let mut rng = Rng::new(5);
    for dtype in [DType::F32, DType::F16] {
        let config = PreprocessConfig {
            dtype,
            ..PreprocessConfig::default()
        };
        let formats = [
            PixelFormat::I420,
            PixelFormat::Nv12,
            PixelFormat::Rgb,
            PixelFormat::I420,
            PixelFormat::Bgra,
        ];
        let mut expected = Vec::new();
        let mut batches = Vec::new();
        let mut run = CudaBackend::new(config.clone()).unwrap();
        for f in formats {
            let mut b = random_batch(f, &mut rng);
            run.run(&mut b).unwrap();
            expected.push((
                b.tensor.as_f32().map(<[f32]>::to_vec),
                b.tensor.as_f16().map(<[u16]>::to_vec),
            ));
            b.tensor.clear();
            batches.push(b);
        }
        let mut backend = CudaBackend::new(config.clone()).unwrap();
        let mut got = Vec::new();
        for (i, b) in batches.into_iter().enumerate() {
            // Pageable copy back for the first batches, then through the pinned buffers.
            backend.pinned_output = i >= 2;
            let back = backend.submit(b).unwrap();
            assert_eq!(back.is_some(), i > 0, "one call late");
            got.extend(back);
        }
        got.extend(backend.flush().unwrap());
        assert!(backend.flush().unwrap().is_none());
        assert_eq!(got.len(), expected.len());
        for (i, (b, (t32, t16))) in got.iter().zip(&expected).enumerate() {
            assert!(
                b.tensor.as_f32().map(<[f32]>::to_vec) == *t32,
                "{dtype:?} batch {i}: f32 tensor differs from run()"
            );
            assert!(
                b.tensor.as_f16().map(<[u16]>::to_vec) == *t16,
                "{dtype:?} batch {i}: f16 tensor differs from run()"
            );
        }
        eprintln!("submit/flush {dtype:?}: 5 batches back in order, equal to run()");
    }
}

#[test]
fn parity_bt709_left_sited_chroma() {
    if !common::gpu("parity_bt709_left_sited_chroma") {
        return;
    }
    let mut rng = Rng::new(7);
    for format in [PixelFormat::I420, PixelFormat::Nv12] {
        let mut batch = random_batch(format, &mut rng);
        for f in &mut batch.frames {
            f.colorimetry = Colorimetry::BT709;
        }
        compare_backends(
            &mut batch,
            &PreprocessConfig::default(),
            &format!("{format} bt709"),
        );
    }
}

#[test]
fn boxes_larger_than_2000_px() {
    if !common::gpu("boxes_larger_than_2000_px") {
        return;
    }
    let mut batch = big_frame_batch();
    finish(
        &mut batch,
        vec![
            crop(0, 0, 2501, 2111, 64, 64),
            crop(50, 40, 2400, 2050, 224, 224),
            crop(1, 1, 1, 1, 300, 300),
            crop(3, 5, 2100, 7, 640, 16),
        ],
    );
    compare_backends(&mut batch, &PreprocessConfig::default(), "boxes > 2000 px");
}

#[test]
fn zero_crops() {
    if !common::gpu("zero_crops") {
        return;
    }
    let mut batch = CropBatch::default();
    batch
        .frames
        .push(synthetic_frame(PixelFormat::Nv12, 64, 48, 1));
    batch.build_blocks(256, 4);
    let mut gpu = CudaBackend::new(PreprocessConfig::default()).unwrap();
    gpu.run(&mut batch).unwrap();
    assert!(batch.tensor.is_empty());
}

#[test]
fn ten_thousand_crops() {
    if !common::gpu("ten_thousand_crops") {
        return;
    }
    let mut rng = Rng::new(10_000);
    let mut batch = CropBatch::default();
    batch
        .frames
        .push(synthetic_frame(PixelFormat::I420, 1920, 1080, 5));
    let crops = (0..10_000)
        .map(|_| {
            let w = 1 + rng.below(200) as u32;
            let h = 1 + rng.below(200) as u32;
            CropMeta {
                frame: 0,
                x: rng.below((1920 - w + 1) as u64) as u32,
                y: rng.below((1080 - h + 1) as u64) as u32,
                w,
                h,
                out_w: 24,
                out_h: 24,
                out_offset: 0,
            }
        })
        .collect();
    finish(&mut batch, crops);
    let config = PreprocessConfig::default();
    compare_backends(&mut batch, &config, "10,000 crops");
    let reference = batch.tensor.as_f32().unwrap().to_vec();
    compare_strategies(&batch, &config, &reference, "10,000 crops");
}

/// RGB to JPEG-style I420 (BT.601 full range, chroma averaged over 2x2, centre-sited).
fn rgb_to_i420(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = vec![0u8; w * h + 2 * cw * ch];
    let px = |x: usize, y: usize| {
        let i = (y * w + x) * 3;
        (rgb[i] as f32, rgb[i + 1] as f32, rgb[i + 2] as f32)
    };
    for y in 0..h {
        for x in 0..w {
            let (r, g, b) = px(x, y);
            out[y * w + x] = (0.299 * r + 0.587 * g + 0.114 * b)
                .round()
                .clamp(0.0, 255.0) as u8;
        }
    }
    for cy in 0..ch {
        for cx in 0..cw {
            let (mut u, mut v, mut n) = (0.0, 0.0, 0.0);
            for (x, y) in [
                (2 * cx, 2 * cy),
                (2 * cx + 1, 2 * cy),
                (2 * cx, 2 * cy + 1),
                (2 * cx + 1, 2 * cy + 1),
            ] {
                if x < w && y < h {
                    let (r, g, b) = px(x, y);
                    u += 128.0 - 0.168_736 * r - 0.331_264 * g + 0.5 * b;
                    v += 128.0 + 0.5 * r - 0.418_688 * g - 0.081_312 * b;
                    n += 1.0;
                }
            }
            out[w * h + cy * cw + cx] = (u / n).round().clamp(0.0, 255.0) as u8;
            out[w * h + cw * ch + cy * cw + cx] = (v / n).round().clamp(0.0, 255.0) as u8;
        }
    }
    out
}

/// The clip's classifiable boxes (contract of shared/data/README.md), clipped, >= 2 px.
fn clip_boxes(text: &str, fw: u32, fh: u32) -> Vec<(u32, u32, u32, u32)> {
    text.lines()
        .filter_map(|l| {
            let v: Vec<i64> = l.split(',').filter_map(|s| s.trim().parse().ok()).collect();
            if v.len() < 6 || v[4] == 0 || v[5] == 0 || v[5] == 11 {
                return None;
            }
            let (x0, y0) = (v[0].max(0), v[1].max(0));
            let (x1, y1) = ((v[0] + v[2]).min(fw as i64), (v[1] + v[3]).min(fh as i64));
            (x1 - x0 >= 2 && y1 - y0 >= 2)
                .then(|| (x0 as u32, y0 as u32, (x1 - x0) as u32, (y1 - y0) as u32))
        })
        .collect()
}

#[test]
fn parity_on_the_real_clip_rgb_and_i420() {
    if !common::gpu("parity_on_the_real_clip_rgb_and_i420") {
        return;
    }
    let root = data_dir().join("visdrone/clip-9999999");
    if !root.join("images").is_dir() {
        eprintln!(
            "SKIPPED parity_on_the_real_clip: {} not found (set OCTOPIPE_DATA)",
            root.display()
        );
        return;
    }
    let images = common::sorted_files(&root.join("images"));
    let config = PreprocessConfig {
        size: Some((64, 64)),
        ..PreprocessConfig::default()
    };
    let (mut objects, mut worst) = (0usize, [0f32; 2]);
    for chunk in images.chunks(4) {
        for (k, format) in [PixelFormat::Rgb, PixelFormat::I420]
            .into_iter()
            .enumerate()
        {
            let mut batch = CropBatch::default();
            let mut crops = Vec::new();
            for path in chunk {
                let img = image::open(path).unwrap().to_rgb8();
                let (w, h) = img.dimensions();
                let ann = root
                    .join("annotations")
                    .join(path.file_stem().unwrap())
                    .with_extension("txt");
                let text = std::fs::read_to_string(&ann).unwrap();
                let fi = batch.frames.len() as u32;
                for (x, y, bw, bh) in clip_boxes(&text, w, h) {
                    crops.push(CropMeta {
                        frame: fi,
                        x,
                        y,
                        w: bw,
                        h: bh,
                        out_w: 64,
                        out_h: 64,
                        out_offset: 0,
                    });
                }
                let rgb = img.into_raw();
                let (data, col) = match format {
                    PixelFormat::Rgb => (rgb, Colorimetry::JPEG),
                    _ => (rgb_to_i420(&rgb, w as usize, h as usize), Colorimetry::JPEG),
                };
                batch.frames.push(frame_from(
                    FrameLayout::packed(format, w, h),
                    col,
                    data,
                    fi as u64,
                ));
            }
            finish(&mut batch, crops);
            if k == 0 {
                objects += batch.crops.len();
            }
            let d = compare_backends(&mut batch, &config, &format!("clip {format}"));
            worst[k] = worst[k].max(d);
        }
    }
    eprintln!(
        "real clip: {objects} objects; max diff RGB {:.4}, I420 {:.4}",
        worst[0], worst[1]
    );
    assert!(
        objects > 1900,
        "expected about 2,012 objects, found {objects}"
    );
}

/// Area (antialiased, OpenCV INTER_AREA) and letterbox, CPU vs CUDA backend, every format and
/// both layouts, with block sizes weighted by input pixels (and with plain blocks).
#[test]
fn parity_area_and_letterbox() {
    if !common::gpu("parity_area_and_letterbox") {
        return;
    }
    let mut rng = Rng::new(2024);
    for format in [
        PixelFormat::I420,
        PixelFormat::Nv12,
        PixelFormat::Rgb,
        PixelFormat::Bgra,
    ] {
        for (base, name) in configs() {
            for (interpolation, letterbox, what) in [
                (Interpolation::Area, None, "area"),
                (Interpolation::Area, Some(114.0), "area letterbox"),
                (Interpolation::Bilinear, Some(0.0), "bilinear letterbox"),
            ] {
                let config = PreprocessConfig {
                    interpolation,
                    letterbox,
                    ..base.clone()
                };
                let mut batch = random_batch(format, &mut rng);
                let what = format!("{format} {name} {what}");
                compare_backends(&mut batch, &config, &format!("{what} (4 tiles per block)"));
                batch.build_blocks_weighted(256, 4, 16 * 1024);
                let d = compare_backends(&mut batch, &config, &format!("{what} (weighted blocks)"));
                let _ = d; // printed by compare_backends: 0.0000 when bit-identical
            }
        }
    }
    // Large downscales (many taps per output) and a 1-px-high box.
    let mut batch = big_frame_batch();
    finish(
        &mut batch,
        vec![
            crop(0, 0, 2501, 2111, 64, 64),
            crop(50, 40, 2400, 2050, 224, 224),
            crop(3, 5, 2100, 7, 640, 16),
            crop(7, 9, 1000, 1, 224, 224),
        ],
    );
    batch.build_blocks_weighted(256, 4, 16 * 1024);
    for letterbox in [None, Some(0.0)] {
        let config = PreprocessConfig {
            interpolation: Interpolation::Area,
            letterbox,
            ..PreprocessConfig::default()
        };
        compare_backends(
            &mut batch,
            &config,
            &format!("area large boxes, letterbox {letterbox:?}"),
        );
    }
}

/// `dtype=f16` through the `Backend` path: CUDA and CPU give the same half bits, in
/// an f16 tensor, for the bilinear fast path and the area path.
#[test]
fn f16_output_through_the_backend() {
    if !common::gpu("f16_output_through_the_backend") {
        return;
    }
    let mut rng = Rng::new(16);
    for interpolation in [Interpolation::Bilinear, Interpolation::Area] {
        let config = PreprocessConfig {
            dtype: DType::F16,
            interpolation,
            ..PreprocessConfig::default()
        };
        let mut batch = random_batch(PixelFormat::I420, &mut rng);
        CpuBackend::new(config.clone())
            .unwrap()
            .run(&mut batch)
            .unwrap();
        let reference = batch.tensor.as_f16().unwrap().to_vec();
        assert!(batch.tensor.as_f32().is_none());
        batch
            .tensor
            .as_f16_mut()
            .unwrap()
            .iter_mut()
            .for_each(|v| *v = 0x7e00);
        let mut gpu = CudaBackend::new(config.clone()).unwrap();
        gpu.run(&mut batch).unwrap();
        assert!(batch.tensor.as_f32().is_none());
        assert_eq!(batch.tensor.as_f16().unwrap().len(), reference.len());
        let differ = batch
            .tensor
            .as_f16()
            .unwrap()
            .iter()
            .zip(&reference)
            .filter(|(a, b)| a != b)
            .count();
        let worst = batch
            .tensor
            .as_f16()
            .unwrap()
            .iter()
            .zip(&reference)
            .map(|(a, b)| (f16_to_f32(*a) - f16_to_f32(*b)).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "f16 {interpolation:?}: {} values, {differ} differ from the CPU's, max diff {worst} (normalized)",
            reference.len()
        );
        assert_eq!(differ, 0, "f16 {interpolation:?}: {differ} values differ");
    }
}

/// The detector's input: the 12 tiles of a real 2000x1500 clip frame (640x640, overlap 0.15) to
/// 512x512 as the shared CenterNet takes them (NHWC, raw 0..255; and letterboxed NCHW f16 as
/// YOLO exports take them) are one kernel launch, equal to the CPU backend's pass.
#[test]
fn detector_tiles_are_one_launch_and_match_the_cpu() {
    if !common::gpu("detector_tiles_are_one_launch_and_match_the_cpu") {
        return;
    }
    use octopipe::detect::{region_batch, DetectConfig, Fit};
    let path = data_dir().join("visdrone/clip-9999999/images/9999999_00023_d_0000001.jpg");
    let img = image::open(&path).unwrap().to_rgb8();
    let (w, h) = img.dimensions();
    let rgb = img.into_raw();
    let mut cfg = DetectConfig::new("-");
    cfg.tiles = Some((640, 640));
    cfg.overlap = 0.15;
    cfg.scale = 1.0;
    let regions = cfg.regions(w, h);
    assert_eq!(regions.len(), 12);
    for format in [PixelFormat::Rgb, PixelFormat::I420] {
        let data = match format {
            PixelFormat::Rgb => rgb.clone(),
            _ => rgb_to_i420(&rgb, w as usize, h as usize),
        };
        let frame = frame_from(
            FrameLayout::packed(format, w, h),
            Colorimetry::JPEG,
            data,
            0,
        );
        let pool = octopipe::batch::BatchPool::new();
        let mut batch = region_batch(&pool, frame, &regions, (512, 512));
        let config = cfg.preprocess_config((512, 512), Layout::Nhwc, DType::F32);
        let mut gpu = CudaBackend::new(config.clone()).unwrap();
        let before = gpu.engine().launches;
        gpu.run(&mut batch).unwrap();
        assert_eq!(
            gpu.engine().launches - before,
            1,
            "one launch for the 12 tiles"
        );
        compare_backends(&mut batch, &config, &format!("detector tiles {format}"));
        // Letterboxed, f16, NCHW, /255.
        let mut lb = cfg.clone();
        lb.fit = Fit::Letterbox;
        lb.scale = 1.0 / 255.0;
        let config = lb.preprocess_config((640, 384), Layout::Nchw, DType::F16);
        let mut cpu = CpuBackend::new(config.clone()).unwrap();
        let mut batch = region_batch(&pool, batch.frames.pop().unwrap(), &regions, (640, 384));
        cpu.run(&mut batch).unwrap();
        let reference = batch.tensor.as_f16().unwrap().to_vec();
        let mut gpu = CudaBackend::new(config).unwrap();
        gpu.run(&mut batch).unwrap();
        assert_eq!(gpu.engine().launches, 1);
        let worst = batch
            .tensor
            .as_f16()
            .unwrap()
            .iter()
            .zip(&reference)
            .map(|(a, b)| (f16_to_f32(*a) - f16_to_f32(*b)).abs() * 255.0)
            .fold(0.0f32, f32::max);
        eprintln!("detector tiles letterbox f16 {format}: max diff {worst:.3} (0..255)");
        assert!(
            worst <= TOL + 0.5,
            "letterboxed f16 tiles differ by {worst}"
        );
    }
}

/// `octopipe bench detect-tiles` on the device.
#[test]
#[ignore = "benchmark: run explicitly"]
fn detect_tiles_table() {
    println!(
        "{}",
        bench::detect_tiles(&bench::DetectTilesOptions::default()).unwrap()
    );
}

/// The classifier on ONNX Runtime's CUDA execution provider, reading the preprocess output where
/// the CUDA backend left it (`memory=device`: no host copy of the tensor, only logits come back),
/// against the CPU pipeline (CPU backend, CPU execution provider) on every object of the real
/// clip: the same label for >= 99.5% of them. Needs an ONNX Runtime with its CUDA execution
/// provider (`ORT_DYLIB_PATH`; ../shared/tools/pack-ort-cuda.py) and the shared classifier.
#[test]
fn classifier_on_the_cuda_ep_reads_device_tensors_and_matches_the_cpu() {
    use octopipe::classify::{Classifier, ClassifyConfig};
    use octopipe::frame::Detection;
    use octopipe::onnx::Ep;
    let test = "classifier_on_the_cuda_ep_reads_device_tensors_and_matches_the_cpu";
    if !common::gpu(test) {
        return;
    }
    let model = data_dir().join("models/visdrone-crops-64.onnx");
    let root = data_dir().join("visdrone/clip-9999999");
    if !model.is_file() || !root.is_dir() {
        eprintln!("SKIPPED {test}: shared data not found (set OCTOPIPE_DATA)");
        return;
    }
    let config = |ep| {
        let mut c = ClassifyConfig::new(&model);
        c.ep = ep;
        c
    };
    let mut cuda_ep = match Classifier::new(config(Ep::Cuda(0)), Layout::Nchw, Some((64, 64))) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED {test}: no CUDA execution provider in this ONNX Runtime ({e})");
            return;
        }
    };
    let mut cpu_ep = Classifier::new(config(Ep::Cpu), Layout::Nchw, Some((64, 64))).unwrap();
    let host = PreprocessConfig {
        size: Some((64, 64)),
        ..PreprocessConfig::default()
    };
    let device = PreprocessConfig {
        device_output: true,
        ..host.clone()
    };
    let mut cpu = CpuBackend::new(host).unwrap();
    let mut gpu = CudaBackend::new(device).unwrap();
    let images = common::sorted_files(&root.join("images"));
    let (mut objects, mut same) = (0usize, 0usize);
    let (mut t_cpu, mut t_gpu) = (0.0f64, 0.0f64);
    for path in &images {
        let img = image::open(path).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        let text = std::fs::read_to_string(
            root.join("annotations")
                .join(path.file_stem().unwrap())
                .with_extension("txt"),
        )
        .unwrap();
        let labels = |backend: &mut dyn Backend, classifier: &mut Classifier, ms: &mut f64| {
            let mut frame = frame_from(
                FrameLayout::packed(PixelFormat::Rgb, w, h),
                Colorimetry::JPEG,
                img.as_raw().clone(),
                0,
            );
            frame.detections = clip_boxes(&text, w, h)
                .into_iter()
                .map(|(x, y, bw, bh)| Detection::new([x, y, bw, bh]))
                .collect();
            let mut batch = CropBatch::default();
            batch.push_frame(frame, 64, 64, 3);
            batch.build_blocks(256, 4);
            let t = std::time::Instant::now();
            backend.run(&mut batch).unwrap();
            classifier.classify(&mut batch).unwrap();
            *ms += t.elapsed().as_secs_f64() * 1e3;
            batch.frames[0]
                .detections
                .iter()
                .map(|d| d.classification.as_ref().map(|c| c.best.class_id))
                .collect::<Vec<_>>()
        };
        let a = labels(&mut cpu, &mut cpu_ep, &mut t_cpu);
        let b = labels(&mut gpu, &mut cuda_ep, &mut t_gpu);
        assert_eq!(a.len(), b.len());
        assert!(
            b.iter().all(Option::is_some),
            "every crop classified on the GPU"
        );
        objects += a.len();
        same += a.iter().zip(&b).filter(|(x, y)| x == y).count();
    }
    let share = same as f64 / objects as f64;
    eprintln!(
        "CUDA EP on device tensors vs CPU: {same} of {objects} labels equal ({:.2}%); {} frames: preprocess+classify {t_cpu:.1} ms (CPU backend, CPU EP) vs {t_gpu:.1} ms (CUDA backend, CUDA EP, first frame included)",
        share * 100.0,
        images.len()
    );
    assert!(objects > 1900, "{objects} objects");
    assert!(share >= 0.995, "{same} of {objects} labels equal");
}

/// `octopipe bench preprocess` on the device: `cargo test --release --test cuda -- --ignored --nocapture bench_table`.
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_table() {
    let opts = bench::PreprocessBenchOptions {
        data_dir: Some(data_dir()),
        cpu_seconds: std::env::var("OCTOPIPE_CPU_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0),
        ..Default::default()
    };
    println!("{}", bench::preprocess(&opts).unwrap());
}

/// `octopipe probe` on the device.
#[test]
#[ignore = "benchmark: run explicitly"]
fn probe_table() {
    if !common::gpu("probe_table") {
        return;
    }
    let opts = bench::ProbeOptions {
        data_dir: Some(data_dir()),
    };
    println!("{}", bench::probe(&opts).unwrap());
}

/// One launch each of strategy C on drone28 and crops1000 (224x224 f32 NCHW), for a profiler:
/// `ncu --kernel-name regex:octopus .device/cuda --ignored --exact profile_octopus`.
#[test]
#[ignore = "profiling: run explicitly"]
fn profile_octopus() {
    if !common::gpu("profile_octopus") {
        return;
    }
    let opts = bench::PreprocessBenchOptions {
        data_dir: Some(data_dir()),
        ..Default::default()
    };
    let mut e = cuda::Engine::new(0).unwrap();
    let norm = Norm::from_config(&bench::bench_config(&opts));
    for w in [bench::Workload::Drone28, bench::Workload::Crops1000] {
        let mut p = bench::prepare(w, &opts);
        p.batch.build_blocks(256, 2);
        let frames: Vec<HostFrame<'_>> = p.batch.frames.iter().map(HostFrame::of).collect();
        let len = p.batch.tensor_len(3);
        e.upload_frames(&frames, &p.batch.crops, UploadMode::Whole)
            .unwrap();
        e.upload_meta(&p.batch.crops, &p.batch.blocks).unwrap();
        let threads = cuda::octopus_threads(256, 2);
        e.launch(
            OutType::F32,
            norm,
            &p.batch.crops,
            p.batch.blocks.len(),
            256,
            threads,
            len,
        )
        .unwrap();
        e.stream().synchronize().unwrap();
    }
}

/// Median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|x, y| x.total_cmp(y));
    v[v.len() / 2]
}

/// The device's copy (read + write) and memset (write) rates in GB/s on 256 MiB, timed with the
/// events `a` and `b` (medians of 20 runs after one warm-up).
fn device_rates(
    e: &cuda::Engine,
    a: &cudarc::driver::CudaEvent,
    b: &cudarc::driver::CudaEvent,
) -> (f64, f64) {
    let n = 256usize << 20;
    let src: cudarc::driver::CudaSlice<u8> = e.stream().alloc_zeros(n).unwrap();
    let mut dst: cudarc::driver::CudaSlice<u8> = e.stream().alloc_zeros(n).unwrap();
    let mut tc = Vec::new();
    let mut tw = Vec::new();
    for i in 0..21 {
        a.record(e.stream()).unwrap();
        e.stream().memcpy_dtod(&src, &mut dst).unwrap();
        b.record(e.stream()).unwrap();
        let c = a.elapsed_ms(b).unwrap() as f64;
        a.record(e.stream()).unwrap();
        e.stream().memset_zeros(&mut dst).unwrap();
        b.record(e.stream()).unwrap();
        let w = a.elapsed_ms(b).unwrap() as f64;
        if i > 0 {
            tc.push(c);
            tw.push(w);
        }
    }
    let copy = 2.0 * n as f64 / (median(tc) * 1e-3) / 1e9;
    let write = n as f64 / (median(tw) * 1e-3) / 1e9;
    (copy, write)
}

/// Strategy C kernel variants on drone28 and crops1000 (224x224 f32 NCHW): parity with the CPU
/// backend and the queued kernel time per tile setting, against the device copy and write rates of
/// the same process. Variants come from the environment: `OCTOPIPE_NVRTC_DEFINES` (kernel
/// defines, e.g. `-DOCTOPUS_SEPARABLE=0 -DOCTOPUS_STCS=1`) and `OCTOPIPE_OCTOPUS_GRID_PER_SM`.
/// `scripts/device-run.sh variants` runs it once per variant.
#[test]
#[ignore = "benchmark: run explicitly"]
fn octopus_variants() {
    use cudarc::driver::sys::CUevent_flags;
    if !common::gpu("octopus_variants") {
        return;
    }
    let label = format!(
        "defines [{}] grid/SM {}",
        std::env::var("OCTOPIPE_NVRTC_DEFINES").unwrap_or_default(),
        std::env::var("OCTOPIPE_OCTOPUS_GRID_PER_SM").unwrap_or_else(|_| "default".into())
    );
    let opts = bench::PreprocessBenchOptions {
        data_dir: Some(data_dir()),
        ..Default::default()
    };
    let config = bench::bench_config(&opts);
    let mut e = cuda::Engine::new(0).unwrap();
    let ctx = e.context().clone();
    let ev = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap()
    };
    let (a, b) = (ev(), ev());
    let (copy, write) = device_rates(&e, &a, &b);
    println!(
        "{} | {label} | copy {copy:.0} GB/s (r+w), memset {write:.0} GB/s",
        e.device_name()
    );
    for w in [bench::Workload::Drone28, bench::Workload::Crops1000] {
        let mut p = bench::prepare(w, &opts);
        let mut cpu = CpuBackend::new(config.clone()).unwrap();
        cpu.run(&mut p.batch).unwrap();
        let reference = p.batch.tensor.as_f32().unwrap().to_vec();
        let frames: Vec<HostFrame<'_>> = p.batch.frames.iter().map(HostFrame::of).collect();
        let len = p.batch.tensor_len(3);
        let norm = Norm::from_config(&config);
        e.upload_frames(&frames, &p.batch.crops, UploadMode::Whole)
            .unwrap();
        for (tile, per) in [(512u32, 1u32), (256, 2), (256, 4), (512, 4), (256, 8)] {
            p.batch.build_blocks(tile, per);
            let nb = p.batch.blocks.len();
            let threads = cuda::octopus_threads(tile, per);
            e.upload_meta(&p.batch.crops, &p.batch.blocks).unwrap();
            e.poison_output(OutType::F32, len, f32::NAN.to_bits())
                .unwrap();
            let crops = p.batch.crops.clone();
            let go = |e: &mut cuda::Engine| {
                e.launch(OutType::F32, norm, &crops, nb, tile, threads, len)
                    .unwrap()
            };
            go(&mut e);
            let mut out = vec![0f32; len];
            e.download_f32(&mut out).unwrap();
            let unwritten = out.iter().filter(|v| !v.is_finite()).count();
            let d = max_diff_255(&out, &reference, &config);
            let mut t = Vec::new();
            for _ in 0..30 {
                a.record(e.stream()).unwrap();
                for _ in 0..10 {
                    go(&mut e);
                }
                b.record(e.stream()).unwrap();
                t.push(a.elapsed_ms(&b).unwrap() as f64 / 10.0);
            }
            let ms = median(t);
            let gbps = (len * 4) as f64 / (ms * 1e-3) / 1e9;
            println!(
                "{} | {label} | {:>9} | tile {tile:>3} x {per} ({nb} blocks) | {ms:.4} ms | {gbps:.0} GB/s written | {:.0}% of copy | {:.0}% of memset | diff {d:.4} | unwritten {unwritten}",
                e.device_name(),
                w.name(),
                100.0 * gbps / copy,
                100.0 * gbps / write
            );
            assert_eq!(unwritten, 0);
            assert!(d == 0.0, "{label} {} tile {tile}x{per}: diff {d}", w.name());
        }
    }
}

/// The real COCO detector on ONNX Runtime's CUDA execution provider, its 12 tiles a frame
/// preprocessed by the CUDA backend and read where they are (device memory), against the CPU
/// backend and execution provider, on the clip's first frames (pipelines/visdrone-detect.pipe's
/// settings): the same boxes (a box of one matches a box of the other of its class at IoU >= 0.9)
/// for >= 99% of them. Needs the ONNX Runtime CUDA build and the shared detector.
#[test]
fn detector_on_the_cuda_ep_reads_device_tiles_and_matches_the_cpu() {
    use octopipe::detect::{DetectConfig, Detector};
    use octopipe::onnx::Ep;
    use octopipe::preprocess::BackendKind;
    use octopipe::track::iou_u32;
    let test = "detector_on_the_cuda_ep_reads_device_tiles_and_matches_the_cpu";
    if !common::gpu(test) {
        return;
    }
    let model = data_dir().join("models/coco-centernet-512.onnx");
    let root = data_dir().join("visdrone/clip-9999999/images");
    if !model.is_file() || !root.is_dir() {
        eprintln!("SKIPPED {test}: shared data not found (set OCTOPIPE_DATA)");
        return;
    }
    let config = |ep, backend| {
        let mut c = DetectConfig::new(&model);
        c.scale = 1.0;
        c.tiles = Some((640, 640));
        c.overlap = 0.15;
        c.score = 0.3;
        c.ep = ep;
        c.backend = backend;
        c
    };
    let mut cuda = match Detector::new(config(Ep::Cuda(0), BackendKind::Cuda)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED {test}: no CUDA execution provider in this ONNX Runtime ({e})");
            return;
        }
    };
    let mut cpu = Detector::new(config(Ep::Cpu, BackendKind::Cpu)).unwrap();
    let images = common::sorted_files(&root);
    let (mut boxes, mut matched) = (0usize, 0usize);
    let (mut t_cpu, mut t_gpu) = (0.0f64, 0.0f64);
    for path in images.iter().take(6) {
        let img = image::open(path).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        let run = |d: &mut Detector, ms: &mut f64| {
            let frame = frame_from(
                FrameLayout::packed(PixelFormat::Rgb, w, h),
                Colorimetry::JPEG,
                img.as_raw().clone(),
                0,
            );
            let t = std::time::Instant::now();
            let frame = d.detect(frame).unwrap();
            *ms += t.elapsed().as_secs_f64() * 1e3;
            frame
                .detections
                .iter()
                .map(|d| (d.bbox, d.label.clone()))
                .collect::<Vec<_>>()
        };
        let a = run(&mut cpu, &mut t_cpu);
        let b = run(&mut cuda, &mut t_gpu);
        for (x, y) in [(&a, &b), (&b, &a)] {
            boxes += x.len();
            matched += x
                .iter()
                .filter(|(p, l)| y.iter().any(|(q, m)| l == m && iou_u32(*p, *q) >= 0.9))
                .count();
        }
    }
    let share = matched as f64 / boxes as f64;
    eprintln!(
        "detector on the CUDA EP (device tiles) vs CPU: {matched} of {boxes} boxes matched ({:.2}%); 6 frames of 12 tiles: {t_cpu:.1} ms (CPU backend, CPU EP) vs {t_gpu:.1} ms (CUDA backend, CUDA EP)",
        share * 100.0
    );
    assert!(boxes > 100, "{boxes} boxes");
    assert!(share >= 0.99, "{matched} of {boxes} boxes matched");
}
