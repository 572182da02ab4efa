//! The resampling rows of the GPU benchmark: each interpolation and scale variant against the CPU.

use std::time::Instant;

use super::super::BenchEngine;
use super::input::clone_frame;
use super::state::GpuBench;
use super::timing::time_kernel_queued;
use crate::bench::error::BenchError;
use crate::bench::measure::max_diff_255;
use crate::bench::table::Row;
use crate::bench::workload::Prepared;
use octopipe_stages::batch::{CropBatch, CropMeta, AREA_INPUT_PER_BLOCK};
use octopipe_stages::preprocess::cpu::CpuBackend;
use octopipe_stages::preprocess::cuda::meta::Norm;
use octopipe_stages::preprocess::cuda::{octopus_threads, HostFrame, OutType, UploadMode};
use octopipe_stages::preprocess::{Backend, Interpolation, PreprocessConfig};

/// The area and letterbox rows: name, filter, letterbox pad, blocks weighted by input pixels.
const RESAMPLE_VARIANTS: [(&str, Interpolation, Option<f32>, bool); 6] = [
    ("C area, uniform blocks", Interpolation::Area, None, false),
    ("C area, weighted blocks", Interpolation::Area, None, true),
    (
        "C letterbox bilinear",
        Interpolation::Bilinear,
        Some(114.0),
        false,
    ),
    (
        "C letterbox area, weighted",
        Interpolation::Area,
        Some(114.0),
        true,
    ),
    // Every crop to 64x64 (the shared classifier's input): most boxes shrink, the large ones by
    // far, so their blocks read far more source pixels than a small box's; this is where blocks
    // sized by the input they read should pay.
    (
        "C area 64x64, uniform blocks",
        Interpolation::Area,
        None,
        false,
    ),
    (
        "C area 64x64, weighted blocks",
        Interpolation::Area,
        None,
        true,
    ),
];

impl GpuBench {
    /// Area (uniform and input-weighted blocks) and letterbox rows, each against the CPU backend
    /// with the same settings.
    pub(super) fn resample_rows(
        &mut self,
        p: &Prepared,
        frames: &[HostFrame<'_>],
        config: &PreprocessConfig,
    ) -> Result<Vec<Row>, BenchError> {
        let mut rows = Vec::new();
        let mut batch = CropBatch::default();
        for (name, interpolation, letterbox, weighted) in RESAMPLE_VARIANTS {
            batch.crops.clear();
            batch
                .crops
                .extend(p.batch.crops.iter().enumerate().map(|(i, c)| {
                    if name.contains("64x64") {
                        CropMeta {
                            out_w: 64,
                            out_h: 64,
                            out_offset: i as u32 * 64 * 64 * 3,
                            ..*c
                        }
                    } else {
                        *c
                    }
                }));
            let cfg = PreprocessConfig {
                interpolation,
                letterbox,
                ..config.clone()
            };
            rows.push(self.resample_row(p, frames, &mut batch, name, &cfg, weighted)?);
        }
        Ok(rows)
    }

    /// One row of [`RESAMPLE_VARIANTS`]: `batch`'s crops (over `p`'s frames) with settings `cfg`
    /// on the GPU, against the CPU backend with the same settings.
    pub(super) fn resample_row(
        &mut self,
        p: &Prepared,
        frames: &[HostFrame<'_>],
        batch: &mut CropBatch,
        name: &str,
        cfg: &PreprocessConfig,
        weighted: bool,
    ) -> Result<Row, BenchError> {
        let out_len = batch.tensor_len(3);
        let out_bytes = (out_len * 4) as u64;
        let (tile, per_block) = self.tile.for_pixels((out_len / 3) as u64);
        let threads = octopus_threads(tile, per_block);
        // CPU reference with the same settings (a fresh batch over the same frames).
        let mut cpu_batch = CropBatch::default();
        cpu_batch.frames = p.batch.frames.iter().map(clone_frame).collect();
        cpu_batch.crops.clone_from(&batch.crops);
        cpu_batch.build_blocks(256, 4);
        let t = Instant::now();
        CpuBackend::new(cfg.clone())?.run(&mut cpu_batch)?;
        let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
        if weighted {
            batch.build_blocks_weighted(tile, per_block, AREA_INPUT_PER_BLOCK);
        } else {
            batch.build_blocks(tile, per_block);
        }
        let crops = &batch.crops;
        let e = &mut self.engines[0];
        e.upload_frames(frames, crops, UploadMode::Whole)?;
        let meta_bytes = e.upload_meta(crops, &batch.blocks)?;
        let nb = batch.blocks.len();
        e.poison_output(OutType::F32, out_len, f32::NAN.to_bits())?;
        let norm = Norm::from_config(cfg);
        let go = |e: &mut BenchEngine| {
            e.launch_resample(
                cfg.interpolation,
                cfg.letterbox,
                OutType::F32,
                norm,
                crops,
                nb,
                tile,
                threads,
                out_len,
            )
        };
        go(e)?;
        let mut out = vec![0f32; out_len];
        e.download_f32(&mut out)?;
        let diff = max_diff_255(&out, cpu_batch.tensor.as_f32().unwrap_or(&[]), cfg);
        let reps = if crops.len() > 100 { 20 } else { self.reps };
        let kernel = time_kernel_queued(e, reps, 10, go)?;
        let gbps = out_bytes as f64 / (kernel * 1e-3) / 1e9;
        Ok(Row {
            workload: p.workload.name().into(),
            name: name.into(),
            kernel_ms: Some(kernel),
            meta_bytes: Some(meta_bytes as u64),
            gbps: Some(gbps),
            of_copy: Some(gbps / self.copy_gbps),
            max_diff: Some(diff),
            note: format!(
                "{nb} blocks; vs CPU with the same settings (CPU one run {cpu_ms:.1} ms); {:.0}% of memset write",
                gbps / self.write_gbps * 100.0
            ),
            ..Row::default()
        })
    }
}
