//! The engine's throughput on a model, per kernel set and batch: one call's time with each kernel
//! launched, and replayed as one CUDA graph; optionally each kernel's time at one batch
//! (benchmark-only; `octopipe bench infer --engine` is the product's bench).
//!
//!     cargo run --release -p octopipe-engine --example engine_bench -- MODEL.onnx 8,32,64,128 \
//!         [RUNS] [tuned,simple] [PROFILE_BATCH]
//!
//! With `ENGINE_BENCH_LAYERS=FILE`, each profile is also written to FILE as CSV in launch order
//! (`kernels,index,label,ms,bytes,flops`, one kernel set after the other): what
//! `scripts/ncu_layers.py` joins with Nsight Compute's per-kernel counters, launch by launch.

use std::time::Instant;

use octopipe_engine::gpu::{Engine, Kernels};
use octopipe_engine::Model;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: engine_bench MODEL.onnx BATCHES [RUNS] [KERNELS] [PROFILE_BATCH]")?;
    let batches: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "8,32,64,128".into())
        .split(',')
        .map(|b| b.parse())
        .collect::<Result<_, _>>()?;
    let runs: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(30);
    let sets = args
        .next()
        .unwrap_or_else(|| "tuned".into())
        .split(',')
        .map(|k| match k {
            "tuned" => Ok(Kernels::Tuned),
            "simple" => Ok(Kernels::Simple),
            other => Err(format!("kernels {other:?}: tuned or simple")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let profile: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(0);
    let layers = std::env::var("ENGINE_BENCH_LAYERS").ok();
    if let Some(path) = &layers {
        std::fs::write(path, "kernels,index,label,ms,bytes,flops\n")
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let model = Model::read(path.as_ref())?;
    println!("| kernels | batch | launches | per call, kernels (ms) | per call, CUDA graph (ms) | images/s (graph) | build (s) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for &kernels in &sets {
        for &batch in &batches {
            let t0 = Instant::now();
            let mut e = Engine::with_kernels(&model, batch, 0, kernels)?;
            let input = vec![0x3800u16; e.input_len()]; // 0.5
            e.run_host(&input)?;
            let build = t0.elapsed().as_secs_f64();
            let time = |e: &mut Engine| -> Result<f64, Box<dyn std::error::Error>> {
                for _ in 0..3 {
                    e.launch()?;
                }
                e.synchronize()?;
                let t = Instant::now();
                for _ in 0..runs {
                    e.launch()?;
                }
                e.synchronize()?;
                Ok(t.elapsed().as_secs_f64() * 1e3 / runs as f64)
            };
            let plain = time(&mut e)?;
            if batch == profile {
                print_profile(&e, kernels, runs, layers.as_deref())?;
            }
            e.capture()?;
            let graph = time(&mut e)?;
            println!(
                "| {kernels:?} | {batch} | {} | {plain:.3} | {graph:.3} | {:.0} | {build:.2} |",
                e.program().launches(),
                batch as f64 / graph * 1e3
            );
        }
    }
    Ok(())
}

/// Each kernel's time, the slowest first, with the rates it reached; appended to the CSV file
/// `layers` in launch order too.
fn print_profile(
    e: &Engine,
    kernels: Kernels,
    runs: usize,
    layers: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut times = e.profile(runs)?;
    if let Some(path) = layers {
        use std::io::Write;
        let mut csv = String::new();
        for (i, t) in times.iter().enumerate() {
            let (ms, bytes, flops) = (t.ms, t.bytes, t.flops);
            csv += &format!(
                "{kernels:?},{i},{},{ms:.5},{bytes:.0},{flops:.0}\n",
                t.label
            );
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(csv.as_bytes()))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let total: f64 = times.iter().map(|t| t.ms).sum();
    times.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    eprintln!(
        "{kernels:?} kernels, batch {}: {total:.3} ms in {} kernels",
        e.batch(),
        times.len()
    );
    eprintln!("| kernel | ms | share | GB/s | TFLOP/s |");
    eprintln!("|---|---:|---:|---:|---:|");
    for t in &times {
        eprintln!(
            "| {} | {:.3} | {:.1}% | {:.0} | {:.1} |",
            t.label,
            t.ms,
            100.0 * t.ms / total,
            t.bytes / t.ms / 1e6,
            t.flops / t.ms / 1e9
        );
    }
    Ok(())
}
