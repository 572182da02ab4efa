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
use octopipe::frame::{Colorimetry, FrameLayout, PixelFormat};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::cuda::meta::Norm;
use octopipe::preprocess::cuda::{self, CudaBackend, HostFrame, OutType, UploadMode};
use octopipe::preprocess::{Backend, ChannelOrder, DType, Interpolation, Layout, PreprocessConfig};
use octopipe_tools::bench::{
    self, f16_to_f32, frame_from, max_diff_255, synthetic_frame, BenchEngine, Rng, Strategy,
};

mod benches;
mod clip;
mod compare;
mod models;

use compare::{compare_backends, compare_strategies};

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
