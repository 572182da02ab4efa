//! `octopipe bench detect-tiles`: the detector's input for one frame, its tiles preprocessed as
//! one ragged batch, on the CPU backend and (when a GPU is present) the CUDA backend.

use std::fmt::Write as _;
use std::time::Instant;

use super::data::synthetic_frame;
use super::error::BenchError;
use super::measure::{max_diff_255, median, time_cpu};
use octopipe_core::frame::PixelFormat;
use octopipe_onnx::detect::{region_batch, DetectConfig};
use octopipe_stages::batch::BatchPool;
use octopipe_stages::preprocess::cpu::CpuBackend;
use octopipe_stages::preprocess::cuda::CudaBackend;
use octopipe_stages::preprocess::{Backend, BackendKind, DType, Layout};

/// Options of [`detect_tiles`].
#[derive(Debug, Clone)]
pub struct DetectTilesOptions {
    /// Frame (width, height).
    pub frame: (u32, u32),
    /// Tile (width, height).
    pub tile: (u32, u32),
    /// Tile overlap.
    pub overlap: f64,
    /// Model input (width, height).
    pub input: (u32, u32),
    /// Seconds spent timing each row.
    pub seconds: f64,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
    /// Also time the CUDA backend when a GPU is present.
    pub gpu: bool,
}

impl Default for DetectTilesOptions {
    /// The shared CenterNet on a VisDrone clip frame: 2000x1500, 640x640 tiles with 15% overlap
    /// (12 tiles), 512x512 input.
    fn default() -> Self {
        DetectTilesOptions {
            frame: (2000, 1500),
            tile: (640, 640),
            overlap: 0.15,
            input: (512, 512),
            seconds: 2.0,
            threads: 0,
            gpu: true,
        }
    }
}

/// Time the detector's preprocessing of one I420 frame's tiles (NHWC, raw 0..255 as the shared
/// CenterNet takes it), host frame to host tensor, per backend; one table.
pub fn detect_tiles(opts: &DetectTilesOptions) -> Result<String, BenchError> {
    let (fw, fh) = opts.frame;
    let mut cfg = DetectConfig::new("-");
    cfg.tiles = Some(opts.tile);
    cfg.overlap = opts.overlap;
    cfg.scale = 1.0;
    cfg.threads = opts.threads;
    cfg.backend = BackendKind::Cpu;
    let regions = cfg.regions(fw, fh);
    let config = cfg.preprocess_config(opts.input, Layout::Nhwc, DType::F32);
    let frame = synthetic_frame(PixelFormat::I420, fw, fh, 3);
    let mut batch = region_batch(&BatchPool::new(), frame, &regions, opts.input);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{fw}x{fh} I420 frame, {} tiles of {}x{} (overlap {}) -> {}x{} NHWC f32, host frame to host tensor",
        regions.len(),
        opts.tile.0,
        opts.tile.1,
        opts.overlap,
        opts.input.0,
        opts.input.1
    );
    out.push_str("| backend | ms per frame (median) | kernel launches per frame | max abs diff vs cpu (0..255) | note |\n");
    out.push_str("|---|---:|---:|---:|---|\n");
    let mut cpu = CpuBackend::new(config.clone())?;
    let cpu_ms = time_cpu(opts.seconds, || Ok(cpu.run(&mut batch)?))?;
    let reference = batch.tensor.as_f32().unwrap_or(&[]).to_vec();
    let _ = writeln!(
        out,
        "| cpu | {cpu_ms:.3} | - | 0 | {} threads, one parallel pass over the tiles' blocks |",
        rayon::current_num_threads()
    );
    if !opts.gpu {
        return Ok(out);
    }
    if let Err(why) = octopipe_cuda::available() {
        let _ = writeln!(out, "GPU row skipped: {why}");
        return Ok(out);
    }
    let mut gpu = CudaBackend::new(config.clone())?;
    gpu.run(&mut batch)?;
    let before = gpu.engine().launches;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 20 || (start.elapsed().as_secs_f64() < opts.seconds && times.len() < 200) {
        let t = Instant::now();
        gpu.run(&mut batch)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let launches = (gpu.engine().launches - before) as f64 / times.len() as f64;
    let diff = max_diff_255(batch.tensor.as_f32().unwrap_or(&[]), &reference, &config);
    let _ = writeln!(
        out,
        "| cuda | {:.3} | {launches} | {diff:.3} | frame upload + one kernel + tensor download |",
        median(&mut times)
    );
    Ok(out)
}
