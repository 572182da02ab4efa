//! The engine's throughput on a model, per batch: one call's time with each kernel launched, and
//! replayed as one CUDA graph (benchmark-only; `octopipe bench infer` is the product's bench).
//!
//!     cargo run --release -p octopipe-engine --example engine_bench -- MODEL.onnx 8,32,64,128 [RUNS]

use std::time::Instant;

use octopipe_engine::gpu::Engine;
use octopipe_engine::Model;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: engine_bench MODEL.onnx BATCHES [RUNS]")?;
    let batches: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "8,32,64,128".into())
        .split(',')
        .map(|b| b.parse())
        .collect::<Result<_, _>>()?;
    let runs: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(30);
    let model = Model::read(path.as_ref())?;
    println!("| batch | launches | per call, kernels (ms) | per call, CUDA graph (ms) | images/s (graph) | build (s) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for batch in batches {
        let t0 = Instant::now();
        let mut e = Engine::new(&model, batch, 0)?;
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
        e.capture()?;
        let graph = time(&mut e)?;
        println!(
            "| {batch} | {} | {plain:.3} | {graph:.3} | {:.0} | {build:.2} |",
            e.program().launches(),
            batch as f64 / graph * 1e3
        );
        if batch == 1 || std::env::var_os("ENGINE_BENCH_DEVICE").is_some() {
            eprintln!("{}", e.device_name());
        }
    }
    Ok(())
}
