//! `octopipe bench infer --engine octopipe`: the model on the octopipe engine's own kernels
//! (crates/octopipe-engine), rows of the same table as ONNX Runtime's: one engine per batch size
//! on GPU 0, its input on the device, the program replayed as one CUDA graph, each run waited
//! for (as ONNX Runtime's bound rows are).

use std::fmt::Write as _;
use std::time::Instant;

use octopipe_engine::gpu::Engine;
use octopipe_engine::Model;

use super::data::Rng;
use super::error::BenchError;
use super::infer::{row, InferOptions};

/// The engine's rows, one per batch size; a model or GPU the engine cannot take is one row
/// saying why.
pub(super) fn rows(opts: &InferOptions, out: &mut String) -> Result<(), BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Options(format!("octopipe engine: {e}"));
    let model = Model::read(&opts.model).map_err(|e| err(&e))?;
    for &batch in &opts.batches {
        let mut engine = match Engine::new(&model, batch, 0) {
            Ok(e) => e,
            Err(e) => {
                let first = e.to_string();
                let first: String = first
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                writeln!(
                    out,
                    "| octopipe | graph | device | {batch} | - | - | - | - | failed: {first} |"
                )
                .ok();
                continue;
            }
        };
        let mut rng = Rng::new(batch as u64);
        let input: Vec<u16> = (0..engine.input_len())
            .map(|_| half::f16::from_f32(rng.below(1 << 24) as f32 / (1 << 24) as f32).to_bits())
            .collect();
        engine.run_host(&input).map_err(|e| err(&e))?;
        engine.capture().map_err(|e| err(&e))?;
        for _ in 0..3 {
            engine.launch().map_err(|e| err(&e))?;
        }
        engine.synchronize().map_err(|e| err(&e))?;
        let mut times = Vec::with_capacity(opts.runs);
        for _ in 0..opts.runs {
            let t = Instant::now();
            engine.launch().map_err(|e| err(&e))?;
            engine.synchronize().map_err(|e| err(&e))?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let note = format!("{} kernels, fused", engine.program().launches());
        row(
            out,
            "octopipe",
            "graph",
            "device",
            &batch.to_string(),
            &mut times,
            (batch * opts.runs, None),
            &note,
        );
    }
    Ok(())
}
