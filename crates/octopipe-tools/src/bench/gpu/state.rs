//! The GPU state of one preprocess benchmark run and its strategy rows.

use std::time::Instant;

use cudarc::driver::PinnedHostSlice;
use octopipe_cuda::{available, CudaError};
use octopipe_stages::batch::build_blocks_into;
use octopipe_stages::preprocess::cuda::meta::Norm;
use octopipe_stages::preprocess::cuda::{octopus_threads, HostFrame, OutType, UploadMode};
use octopipe_stages::preprocess::PreprocessConfig;

use super::input::{read_bytes, GpuInput};
use super::timing::{copy_bandwidth, time_kernel, time_kernel_queued, write_bandwidth};
use super::tuner::{tune, TuneChoice};
use super::upload::upload_times;
use crate::bench::error::BenchError;
use crate::bench::measure::max_diff_255;
use crate::bench::table::Row;
use crate::bench::workload::{Prepared, PreprocessBenchOptions, Workload};
use crate::bench::{BenchEngine, Strategy};

/// The GPU state of one benchmark run.
pub(crate) struct GpuBench {
    pub(super) engines: [BenchEngine; 2],
    pub(super) copy_gbps: f64,
    pub(super) write_gbps: f64,
    pub(super) reps: usize,
    /// Tile pixels and tiles per block for strategy C, chosen by [`tune`](super::tune).
    pub(super) tile: TuneChoice,
    pub(super) tune_ms: f64,
}

impl GpuBench {
    pub(crate) fn new(opts: &PreprocessBenchOptions) -> Result<Self, BenchError> {
        available()?;
        let mut e0 = BenchEngine::new(0)?;
        let e1 = BenchEngine::new(0)?;
        let copy_gbps = copy_bandwidth(&mut e0)?;
        let write_gbps = write_bandwidth(&mut e0)?;
        let t = Instant::now();
        let (tile, _) = tune(&mut e0, opts.data_dir.clone())?;
        Ok(GpuBench {
            engines: [e0, e1],
            copy_gbps,
            write_gbps,
            reps: opts.gpu_reps.max(5),
            tile,
            tune_ms: t.elapsed().as_secs_f64() * 1e3,
        })
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "GPU: {} ({}); device-to-device copy {:.0} GB/s (read + write, 256 MiB); device write (memset) {:.0} GB/s (bytes written, 256 MiB); strategy C tuned to tile-pixels={} tiles-per-block={} below {} output pixels, else {} x {}, in {:.1} ms",
            self.engines[0].device_name(),
            self.engines[0].arch(),
            self.copy_gbps,
            self.write_gbps,
            self.tile.small.0,
            self.tile.small.1,
            self.tile.threshold,
            self.tile.large.0,
            self.tile.large.1,
            self.tune_ms
        )
    }

    /// Every GPU row of workload `p`: strategies A to E, C with f16 output, for streams16 the two
    /// streams, then the area / letterbox rows and the `CudaBackend` rows.
    pub(crate) fn run(
        &mut self,
        p: &Prepared,
        reference: &[f32],
        config: &PreprocessConfig,
    ) -> Result<Vec<Row>, BenchError> {
        let batch = &p.batch;
        let out_len = batch.tensor_len(3);
        // Frames in pinned host memory, as a decoder writing to pinned buffers would leave them.
        let ctx = self.engines[0].context().clone();
        let mut pinned: Vec<PinnedHostSlice<u8>> = Vec::new();
        for f in &batch.frames {
            let d = f.data().unwrap_or(&[]);
            // SAFETY: filled completely right below.
            let mut ph = unsafe { ctx.alloc_pinned_with_flags::<u8>(d.len(), 0) }
                .map_err(CudaError::from)?;
            ph.as_mut_slice()
                .map_err(CudaError::from)?
                .copy_from_slice(d);
            pinned.push(ph);
        }
        let mut host_out = unsafe { ctx.alloc_pinned_with_flags::<f32>(out_len.max(1), 0) }
            .map_err(CudaError::from)?;
        let slices: Vec<&[u8]> = pinned
            .iter()
            .map(|p| p.as_slice())
            .collect::<Result<_, _>>()
            .map_err(CudaError::from)?;
        let frames: Vec<HostFrame<'_>> = batch
            .frames
            .iter()
            .zip(&slices)
            .map(|(f, d)| HostFrame {
                layout: f.layout,
                colorimetry: f.colorimetry,
                data: d,
                device: None,
            })
            .collect();
        let (tile, per_block) = self.tile.for_pixels((out_len / 3) as u64);
        let input = GpuInput {
            frames: &frames,
            crops: &batch.crops,
            norm: Norm::from_config(config),
            out_len,
            tile,
            per_block,
            threads: octopus_threads(tile, per_block),
            read_bytes: read_bytes(batch),
        };
        let w = p.workload;
        let mut rows = Vec::new();
        for s in Strategy::ALL {
            rows.push(self.strategy_row(w, s, &input, &mut host_out, reference, config)?);
        }
        rows.push(self.f16_row(w, &input, reference, config)?);
        if w == Workload::Streams16 {
            for back in [false, true] {
                rows.push(self.overlap_row(
                    &frames,
                    &batch.crops,
                    input.norm,
                    reference,
                    config,
                    back,
                )?);
            }
        }
        rows.extend(self.resample_rows(p, &frames, config)?);
        if w != Workload::Streams16 {
            rows.extend(self.backend_rows(p, reference, config)?);
        }
        Ok(rows)
    }

    /// Strategy `s` on one workload: parity with the CPU, the kernel alone (one launch, and
    /// queued), and one batch end to end with each way of moving the frames (see [`UploadTimes`](super::upload::UploadTimes)).
    fn strategy_row(
        &mut self,
        w: Workload,
        s: Strategy,
        inp: &GpuInput<'_>,
        host_out: &mut PinnedHostSlice<f32>,
        reference: &[f32],
        config: &PreprocessConfig,
    ) -> Result<Row, BenchError> {
        let &GpuInput {
            frames,
            crops,
            norm,
            out_len,
            tile,
            per_block,
            threads,
            read_bytes,
        } = inp;
        let heavy = matches!(s, Strategy::Lut | Strategy::Pad) || crops.len() > 100;
        let reps = if heavy { self.reps.min(20) } else { self.reps };
        let out_bytes = (out_len * 4) as u64;
        let e = &mut self.engines[0];
        let mut blocks = Vec::new();
        build_blocks_into(crops, tile, per_block, &mut blocks);
        let whole = e.upload_frames(frames, crops, UploadMode::Whole)?;
        let meta_bytes = e.upload_meta_for(s, crops, &blocks)?;
        e.poison_output(OutType::F32, out_len, f32::NAN.to_bits())?;
        let nb = blocks.len();
        let go = |e: &mut BenchEngine| {
            e.launch_strategy(s, OutType::F32, norm, crops, nb, tile, threads, out_len)
        };
        go(e)?;
        let mut out = vec![0f32; out_len];
        e.download_f32(&mut out)?;
        let diff = max_diff_255(&out, reference, config);
        let single = time_kernel(e, reps, go)?;
        let queued = if s == Strategy::PerCrop {
            reps.min(20)
        } else {
            reps
        };
        let kernel = time_kernel_queued(e, queued, 10, go)?;
        let t = upload_times(e, s, inp, reps, host_out)?;
        let gbps = out_bytes as f64 / (kernel * 1e-3) / 1e9;
        Ok(Row {
            workload: w.name().into(),
            name: s.label().into(),
            kernel_ms: Some(kernel),
            e2e_ms: Some(t.e2e),
            e2e_upload_ms: Some(t.whole.min(t.rows).min(t.rects).min(t.gpu)),
            e2e_back_ms: Some(t.back),
            bytes: Some(out_bytes + read_bytes + meta_bytes as u64),
            meta_bytes: Some(meta_bytes as u64),
            gbps: Some(gbps),
            of_copy: Some(gbps / self.copy_gbps),
            max_diff: Some(diff),
            note: format!(
                "{:.0}% of memset write; one launch alone {single:.4} ms; upload whole {:.4} ms ({} B, {} copies), rows {:.4} ms ({} B, {} copies), crop rects {:.4} ms ({} B, 1 copy after a host gather), crop rects gathered by the GPU {:.4} ms (no copy; the gather step alone {:.4} ms by events, {:.4} ms host clock)",
                gbps / self.write_gbps * 100.0,
                t.whole,
                whole.frame_bytes,
                whole.frame_copies,
                t.rows,
                t.rows_stats.frame_bytes,
                t.rows_stats.frame_copies,
                t.rects,
                t.rects_stats.frame_bytes,
                t.gpu,
                t.gather_dev,
                t.gather_host,
            ),
        })
    }

    /// Strategy C with f16 output: parity (within f16 rounding) and the queued kernel time.
    fn f16_row(
        &mut self,
        w: Workload,
        inp: &GpuInput<'_>,
        reference: &[f32],
        config: &PreprocessConfig,
    ) -> Result<Row, BenchError> {
        let &GpuInput {
            frames,
            crops,
            norm,
            out_len,
            tile,
            per_block,
            threads,
            read_bytes,
        } = inp;
        let e = &mut self.engines[0];
        let mut blocks = Vec::new();
        build_blocks_into(crops, tile, per_block, &mut blocks);
        e.upload_frames(frames, crops, UploadMode::Whole)?;
        let meta_bytes = e.upload_meta(crops, &blocks)?;
        let nb = blocks.len();
        let go =
            |e: &mut BenchEngine| e.launch(OutType::F16, norm, crops, nb, tile, threads, out_len);
        e.poison_output(OutType::F16, out_len, 0x7e00)?;
        go(e)?;
        let mut h = vec![0u16; out_len];
        e.download_f16(&mut h)?;
        let as32: Vec<f32> = h
            .iter()
            .map(|&b| octopipe_stages::preprocess::f16_to_f32(b))
            .collect();
        let diff = max_diff_255(&as32, reference, config);
        let kernel = time_kernel_queued(e, self.reps, 10, go)?;
        let bytes = (out_len * 2) as u64;
        let gbps = bytes as f64 / (kernel * 1e-3) / 1e9;
        Ok(Row {
            workload: w.name().into(),
            name: "C octopus f16".into(),
            kernel_ms: Some(kernel),
            bytes: Some(bytes + read_bytes + meta_bytes as u64),
            meta_bytes: Some(meta_bytes as u64),
            gbps: Some(gbps),
            of_copy: Some(gbps / self.copy_gbps),
            max_diff: Some(diff),
            note: "f16 output (diff includes f16 rounding)".into(),
            ..Row::default()
        })
    }
}
