//! Benchmarks and profiles (ignored: run explicitly).

use super::*;

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
