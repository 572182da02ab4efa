//! The comparisons the parity tests make: the CPU backend against the CUDA backend, every
//! strategy against the reference, and f16 output against f32.

use super::*;

/// Run the CPU backend and the CUDA backend (device output poisoned first); compare.
pub(super) fn compare_backends(
    batch: &mut CropBatch,
    config: &PreprocessConfig,
    what: &str,
) -> f32 {
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
pub(super) fn compare_strategies(
    batch: &CropBatch,
    config: &PreprocessConfig,
    reference: &[f32],
    what: &str,
) {
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
