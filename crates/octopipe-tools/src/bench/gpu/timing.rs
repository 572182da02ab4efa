//! Timing on the GPU: device events, host-clock runs, and the copy and write bandwidths the rows
//! are compared with.

use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};
use octopipe_cuda::{CudaError, Gpu};

use crate::bench::measure::median;
use crate::bench::BenchEngine;

/// A device event that records timing (for the benchmarks' device clocks).
pub(in crate::bench) fn timing_event(e: &Gpu) -> Result<CudaEvent, CudaError> {
    // Timing must be asked for: cudarc's default event disables it.
    Ok(e.context()
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Median ms of `reps` runs of `f` on the engine's stream, timed with device events.
pub(super) fn time_kernel(
    e: &mut BenchEngine,
    reps: usize,
    f: impl FnMut(&mut BenchEngine) -> Result<(), CudaError>,
) -> Result<f64, CudaError> {
    time_kernel_queued(e, reps, 1, f)
}

/// Median over `reps` samples of the time of `n` back-to-back runs of `f` divided by `n`, timed
/// with device events: the kernel's own duration, with the host's launch latency hidden behind the
/// queue (what a profiler reports as the kernel's duration, plus the small gap between kernels).
pub(super) fn time_kernel_queued(
    e: &mut BenchEngine,
    reps: usize,
    n: usize,
    mut f: impl FnMut(&mut BenchEngine) -> Result<(), CudaError>,
) -> Result<f64, CudaError> {
    let (a, b) = (timing_event(e.gpu())?, timing_event(e.gpu())?);
    f(e)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        a.record(e.stream())?;
        for _ in 0..n {
            f(e)?;
        }
        b.record(e.stream())?;
        t.push(a.elapsed_ms(&b)? as f64 / n as f64);
    }
    Ok(median(&mut t))
}

/// Median ms of `reps` runs of `f` by the host clock, each ending with a stream synchronize.
pub(super) fn time_host(
    e: &mut BenchEngine,
    reps: usize,
    mut f: impl FnMut(&mut BenchEngine) -> Result<(), CudaError>,
) -> Result<f64, CudaError> {
    f(e)?;
    e.stream().synchronize()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f(e)?;
        e.stream().synchronize()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&mut t))
}

/// Device-to-device copy bandwidth in GB/s (bytes read + bytes written), 256 MiB buffers.
pub(super) fn copy_bandwidth(e: &mut BenchEngine) -> Result<f64, CudaError> {
    let n = 256usize << 20;
    let src: CudaSlice<u8> = e.stream().alloc_zeros(n)?;
    let mut dst: CudaSlice<u8> = e.stream().alloc_zeros(n)?;
    let ms = time_kernel(e, 20, |e| Ok(e.stream().memcpy_dtod(&src, &mut dst)?))?;
    Ok(2.0 * n as f64 / (ms * 1e-3) / 1e9)
}

/// Device write bandwidth in GB/s (bytes written only): `cuMemsetD8Async` of 256 MiB.
pub(super) fn write_bandwidth(e: &mut BenchEngine) -> Result<f64, CudaError> {
    let n = 256usize << 20;
    let mut dst: CudaSlice<u8> = e.stream().alloc_zeros(n)?;
    let ms = time_kernel(e, 20, |e| Ok(e.stream().memset_zeros(&mut dst)?))?;
    Ok(n as f64 / (ms * 1e-3) / 1e9)
}
