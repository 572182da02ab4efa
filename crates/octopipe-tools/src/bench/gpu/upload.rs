//! One batch end to end by the host clock with each way of moving the frames to the GPU.

use cudarc::driver::PinnedHostSlice;
use octopipe_cuda::CudaError;

use super::input::GpuInput;
use super::timing::{time_host, time_kernel};
use crate::bench::{BenchEngine, Strategy};
use octopipe_stages::batch::build_blocks_into;
use octopipe_stages::preprocess::cuda::{OutType, TransferStats, UploadMode};

/// Host-clock times (ms) of one batch through one strategy with each way of moving the frames.
pub(super) struct UploadTimes {
    /// Metadata + metadata upload + kernel, the frames already on the device.
    pub(super) e2e: f64,
    /// The same plus the frames uploaded whole, as touched rows, as crop rectangles gathered on
    /// the host, and as crop rectangles gathered by the GPU.
    pub(super) whole: f64,
    pub(super) rows: f64,
    pub(super) rects: f64,
    pub(super) gpu: f64,
    /// The GPU gather step alone, by events and by the host clock.
    pub(super) gather_dev: f64,
    pub(super) gather_host: f64,
    /// The cheapest upload plus the copy back to pinned memory.
    pub(super) back: f64,
    pub(super) rows_stats: TransferStats,
    pub(super) rects_stats: TransferStats,
}

/// Strategy `s` over one workload's batch (`inp`) timed by the host clock with each way of moving
/// the frames (see [`UploadTimes`]), the frames in pinned memory; `host_out` takes the copy back.
pub(super) fn upload_times(
    e: &mut BenchEngine,
    s: Strategy,
    inp: &GpuInput<'_>,
    reps: usize,
    host_out: &mut PinnedHostSlice<f32>,
) -> Result<UploadTimes, CudaError> {
    let &GpuInput {
        frames,
        crops,
        norm,
        out_len,
        tile,
        per_block,
        threads,
        ..
    } = inp;
    let mut blocks = Vec::new();
    // One batch: the frame upload (`None`: frames left from before), metadata, kernel, and with
    // `back` the copy back to pinned memory.
    let mut once = |e: &mut BenchEngine, up: Option<UploadMode>, back: bool| {
        if let Some(mode) = up {
            e.upload_frames(frames, crops, mode)?;
        }
        build_blocks_into(crops, tile, per_block, &mut blocks);
        e.upload_meta_for(s, crops, &blocks)?;
        e.launch_strategy(
            s,
            OutType::F32,
            norm,
            crops,
            blocks.len(),
            tile,
            threads,
            out_len,
        )?;
        if back {
            // SAFETY: `time_host` synchronizes the stream after each run; `host_out` outlives
            // the loop.
            unsafe { e.download_f32_pinned(host_out, out_len) }?;
        }
        Ok(())
    };
    let e2e = time_host(e, reps, |e| once(e, None, false))?;
    // `gpu`: the GPU gathers the crop rectangles from the pinned frames itself.
    let mut upload = |mode: UploadMode, gpu: bool, back: bool, e: &mut BenchEngine| {
        // SAFETY: the pinned frames outlive every run, and `time_host` synchronizes after each.
        unsafe { e.set_device_gather(gpu) };
        let t = time_host(e, reps, |e| once(e, Some(mode), back));
        // SAFETY: host gathers again.
        unsafe { e.set_device_gather(false) };
        t
    };
    let whole = upload(UploadMode::Whole, false, false, e)?;
    let rows_stats = e.upload_frames(frames, crops, UploadMode::Rows)?;
    let rows = upload(UploadMode::Rows, false, false, e)?;
    let rects_stats = e.upload_frames(frames, crops, UploadMode::Rects)?;
    let rects = upload(UploadMode::Rects, false, false, e)?;
    let gpu = upload(UploadMode::Rects, true, false, e)?;
    // The GPU gather step alone: by events (host listing + launch + gather) and by the host
    // clock (with a synchronize).
    // SAFETY: the pinned frames outlive the runs; both timers synchronize after each.
    unsafe { e.set_device_gather(true) };
    let gather_step = |e: &mut BenchEngine| e.upload_frames(frames, crops, UploadMode::Rects);
    let gather_dev = time_kernel(e, reps, |e| gather_step(e).map(drop))?;
    let gather_host = time_host(e, reps, |e| gather_step(e).map(drop))?;
    // SAFETY: host gathers again.
    unsafe { e.set_device_gather(false) };
    let best = [
        (whole, UploadMode::Whole, false),
        (rows, UploadMode::Rows, false),
        (rects, UploadMode::Rects, false),
        (gpu, UploadMode::Rects, true),
    ]
    .into_iter()
    .min_by(|a, b| a.0.total_cmp(&b.0))
    .map(|b| (b.1, b.2))
    .unwrap_or((UploadMode::Whole, false));
    let back = upload(best.0, best.1, true, e)?;
    Ok(UploadTimes {
        e2e,
        whole,
        rows,
        rects,
        gpu,
        gather_dev,
        gather_host,
        back,
        rows_stats,
        rects_stats,
    })
}
