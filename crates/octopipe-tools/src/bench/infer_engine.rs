//! `octopipe bench infer --engine octopipe`: the model on the octopipe engine's own kernels
//! (crates/octopipe-engine), rows of the same table as ONNX Runtime's: one engine per batch size
//! on GPU 0, its input on the device, the program replayed as one CUDA graph, each run waited
//! for (as ONNX Runtime's bound rows are).

use std::path::Path;
use std::time::Instant;

use octopipe_engine::gpu::{Engine, EngineError};
use octopipe_engine::Model;

use super::data::Rng;
use super::error::BenchError;

/// One batch size's result: its run times (ms) and a note, or why the engine could not take it.
pub(super) enum EngineRow {
    /// Timed.
    Timed {
        /// Images a run.
        batch: usize,
        /// Each run's milliseconds.
        times: Vec<f64>,
        /// Kernels a run.
        note: String,
    },
    /// The engine refused the model or GPU at this batch size (the first line of its error).
    Failed {
        /// Images a run.
        batch: usize,
        /// Why.
        reason: String,
    },
}

/// The engine's runs, one row per batch size.
pub(super) fn rows(
    model: &Path,
    batches: &[usize],
    runs: usize,
) -> Result<Vec<EngineRow>, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Options(format!("octopipe engine: {e}"));
    let model = Model::read(model).map_err(|e| err(&e))?;
    let mut rows = Vec::with_capacity(batches.len());
    for &batch in batches {
        let mut engine = match Engine::new(&model, batch, 0) {
            Ok(e) => e,
            Err(e) => {
                let reason = e.to_string();
                let reason = reason
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                rows.push(EngineRow::Failed { batch, reason });
                continue;
            }
        };
        let mut rng = Rng::new(batch as u64);
        let input: Vec<u16> = (0..engine.input_len())
            .map(|_| half::f16::from_f32(rng.below(1 << 24) as f32 / (1 << 24) as f32).to_bits())
            .collect();
        engine.run_host(&input).map_err(|e| err(&e))?;
        let times = time_replays(&mut engine, runs).map_err(|e| err(&e))?;
        let times = times.into_iter().map(|s| s * 1e3).collect();
        let note = format!("{} kernels, fused", engine.program().launches());
        rows.push(EngineRow::Timed { batch, times, note });
    }
    Ok(rows)
}

/// Images per second of `model` on the octopipe engine alone at batch `rows` on GPU `device`
/// (the median of `runs` graph replays, each waited for): what [`super::model_throughput`] is
/// for ONNX Runtime, for a detect stage with `engine=octopipe`.
pub fn engine_throughput(
    model: &Path,
    device: usize,
    rows: usize,
    runs: usize,
) -> Result<f64, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Options(format!("octopipe engine: {e}"));
    let model = Model::read(model).map_err(|e| err(&e))?;
    let mut engine = Engine::new(&model, rows.max(1), device).map_err(|e| err(&e))?;
    let mut times = time_replays(&mut engine, runs.max(1)).map_err(|e| err(&e))?;
    times.sort_by(f64::total_cmp);
    Ok(rows.max(1) as f64 / times[times.len() / 2].max(1e-12))
}

/// Capture `engine`'s program as one CUDA graph, replay it three times to warm up, then time
/// `runs` replays, each waited for: their seconds, in order.
fn time_replays(engine: &mut Engine, runs: usize) -> Result<Vec<f64>, EngineError> {
    engine.capture()?;
    for _ in 0..3 {
        engine.launch()?;
    }
    engine.synchronize()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        engine.launch()?;
        engine.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(times)
}
