//! Measuring helpers shared by the benchmarks: timing a CPU run, medians, parity on the 0..255
//! scale.

use std::time::Instant;

use octopipe_stages::preprocess::PreprocessConfig;

use super::error::BenchError;

/// Largest difference between two tensors on the 0..255 scale (undoing the normalization).
pub fn max_diff_255(a: &[f32], b: &[f32], config: &PreprocessConfig) -> f32 {
    let scale = config.scale / config.std.iter().cloned().fold(f32::INFINITY, f32::min);
    let m = a
        .iter()
        .zip(b)
        .map(|(x, y)| {
            if x.is_finite() && y.is_finite() {
                (x - y).abs()
            } else {
                f32::INFINITY
            }
        })
        .fold(0.0f32, f32::max);
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    m / scale
}

/// Median of `v` (sorts it; NaN when empty).
pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Median ms of `f` over `seconds` (at most 50 runs, at least one), after one warm-up run.
pub(super) fn time_cpu(
    seconds: f64,
    mut f: impl FnMut() -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    f()?; // warm-up
    let mut t = Vec::new();
    let start = Instant::now();
    while t.is_empty() || (start.elapsed().as_secs_f64() < seconds && t.len() < 50) {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&mut t))
}
