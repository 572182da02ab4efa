//! The backend rows of the GPU benchmark: the whole CUDA backend, and two engines overlapping.

use std::time::Instant;

use cudarc::driver::PinnedHostSlice;
use octopipe_cuda::CudaError;

use super::super::BenchEngine;
use super::input::{clone_frame, per_frame_crops};
use super::state::GpuBench;
use crate::bench::error::BenchError;
use crate::bench::measure::{max_diff_255, median};
use crate::bench::table::Row;
use crate::bench::workload::Prepared;
use octopipe_stages::batch::{build_blocks_into, CropBatch, CropMeta};
use octopipe_stages::preprocess::cuda::meta::Norm;
use octopipe_stages::preprocess::cuda::{
    octopus_threads, CudaBackend, HostFrame, OutType, UploadMode,
};
use octopipe_stages::preprocess::{Backend, PreprocessConfig};

impl GpuBench {
    /// The `Backend` path (what the pipeline runs), host clock: frame upload from pageable memory,
    /// metadata, kernel and copy back into `batch.tensor`; `run` with pageable and with pinned
    /// output, then `submit` / `flush` with two batches in flight.
    pub(super) fn backend_rows(
        &mut self,
        p: &Prepared,
        reference: &[f32],
        config: &PreprocessConfig,
    ) -> Result<Vec<Row>, BenchError> {
        let w = p.workload;
        let (tile, per_block) = self.tile.for_pixels((p.batch.tensor_len(3) / 3) as u64);
        let copy = || {
            let mut b = CropBatch::default();
            b.frames = p.batch.frames.iter().map(clone_frame).collect();
            b.crops = p.batch.crops.clone();
            b.build_blocks(tile, per_block);
            b
        };
        let mut rows = Vec::new();
        for pinned in [false, true] {
            let mut b = copy();
            let mut backend = CudaBackend::new(config.clone())?;
            backend.pinned_output = pinned;
            backend.run(&mut b)?;
            let mut t = Vec::new();
            for _ in 0..self.reps.min(30) {
                let s = Instant::now();
                backend.run(&mut b)?;
                t.push(s.elapsed().as_secs_f64() * 1e3);
            }
            rows.push(Row {
                workload: w.name().into(),
                name: format!(
                    "CudaBackend::run, {} output",
                    if pinned { "pinned" } else { "pageable" }
                ),
                e2e_back_ms: Some(median(&mut t)),
                note: "host clock; pageable frames in, whole tensor back into batch.tensor".into(),
                ..Row::default()
            });
        }
        // Pipelined: submit(k + 1) then complete k, three batches recycled.
        let mut backend = CudaBackend::new(config.clone())?;
        let mut pool: Vec<CropBatch> = (0..3).map(|_| copy()).collect();
        let n = self.reps.clamp(10, 60);
        let go = |backend: &mut CudaBackend,
                  pool: &mut Vec<CropBatch>,
                  n: usize|
         -> Result<f64, BenchError> {
            let s = Instant::now();
            for _ in 0..n {
                let b = pool.pop().expect("three batches, at most two in flight");
                if let Some(done) = backend.submit(b)? {
                    pool.push(done);
                }
            }
            if let Some(done) = backend.flush()? {
                pool.push(done);
            }
            Ok(s.elapsed().as_secs_f64() * 1e3 / n as f64)
        };
        go(&mut backend, &mut pool, 4)?;
        let ms = go(&mut backend, &mut pool, n)?;
        // The last batch pushed back is the last one completed (one of the three never left).
        let diff = max_diff_255(
            pool[pool.len() - 1].tensor.as_f32().unwrap_or(&[]),
            reference,
            config,
        );
        rows.push(Row {
            workload: w.name().into(),
            name: "CudaBackend::submit/flush, 2 in flight".into(),
            e2e_back_ms: Some(ms),
            max_diff: Some(diff),
            note: format!("host clock, ms per batch over {n} batches (submit k+1, then batch k comes back); pageable frames in, copy back straight into batch.tensor (pageable)"),
            ..Row::default()
        });
        Ok(rows)
    }

    /// streams16 as 16 one-frame (drone28-like) batches on two engines (two streams): the upload
    /// of batch k+1 overlaps the kernel of batch k, and the host builds batch k+1's metadata while
    /// the GPU works. Upload `Auto` with the GPU gathering the crop rectangles from the pinned
    /// frames. Reports ms per frame, with the copy of each output back to pinned memory (`back`)
    /// or without it (the output stays on the device for a device-side consumer).
    pub(super) fn overlap_row(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
        norm: Norm,
        reference: &[f32],
        config: &PreprocessConfig,
        back: bool,
    ) -> Result<Row, BenchError> {
        let n = frames.len();
        let (per, lens) = per_frame_crops(n, crops);
        let maxlen = lens.iter().copied().max().unwrap_or(1).max(1);
        let ctx = self.engines[0].context().clone();
        let mut outs: Vec<PinnedHostSlice<f32>> = (0..n)
            .map(|_| unsafe { ctx.alloc_pinned_with_flags::<f32>(maxlen, 0) })
            .collect::<Result<_, _>>()
            .map_err(CudaError::from)?;
        let (tile, per_block) = self.tile.for_pixels((maxlen / 3) as u64);
        let threads = octopus_threads(tile, per_block);
        let mut blocks = [Vec::new(), Vec::new()];
        for e in &mut self.engines {
            e.reserve_output(OutType::F32, maxlen)?;
            // SAFETY: the frames outlive the runs below, each of which synchronizes both streams.
            unsafe { e.set_device_gather(true) };
        }
        let mut run = |engines: &mut [BenchEngine; 2]| -> Result<f64, CudaError> {
            let s = Instant::now();
            for k in 0..n {
                let e = &mut engines[k % 2];
                let b = &mut blocks[k % 2];
                e.upload_frames(&frames[k..k + 1], &per[k], UploadMode::Auto)?;
                build_blocks_into(&per[k], tile, per_block, b);
                e.upload_meta(&per[k], b)?;
                e.launch(OutType::F32, norm, &per[k], b.len(), tile, threads, lens[k])?;
                if back {
                    // SAFETY: both streams are synchronized below before `outs` is read or dropped.
                    unsafe { e.download_f32_pinned(&mut outs[k], lens[k]) }?;
                }
            }
            for e in engines.iter() {
                e.stream().synchronize()?;
            }
            Ok(s.elapsed().as_secs_f64() * 1e3)
        };
        run(&mut self.engines)?;
        let mut t: Vec<f64> = (0..self.reps.min(50))
            .map(|_| run(&mut self.engines))
            .collect::<Result<_, _>>()?;
        let total = median(&mut t);
        for e in &mut self.engines {
            // SAFETY: host gathers again.
            unsafe { e.set_device_gather(false) };
        }
        if !back {
            return Ok(Row {
                workload: "streams16".into(),
                name: "C octopus 2 streams, per frame".into(),
                e2e_upload_ms: Some(total / n as f64),
                note: format!("16 one-frame batches alternating on 2 streams, total {total:.4} ms; ms per frame: metadata + crop rects gathered by the GPU + kernel, output left on the device"),
                ..Row::default()
            });
        }
        // Parity of the last run.
        let mut got = Vec::with_capacity(reference.len());
        for (k, o) in outs.iter().enumerate() {
            got.extend_from_slice(&o.as_slice().map_err(CudaError::from)?[..lens[k]]);
        }
        Ok(Row {
            workload: "streams16".into(),
            name: "C octopus 2 streams, per frame".into(),
            e2e_back_ms: Some(total / n as f64),
            max_diff: Some(max_diff_255(&got, reference, config)),
            note: format!("16 one-frame batches alternating on 2 streams, total {total:.4} ms; ms per frame: metadata + crop rects gathered by the GPU + kernel + copy back to pinned memory"),
            ..Row::default()
        })
    }
}
