//! The auto-tuner (`octopipe probe`): strategy C's tile size and tiles per block for the present
//! GPU.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use octopipe_cuda::available;

use super::timing::time_kernel_queued;
use crate::bench::error::BenchError;
use crate::bench::workload::{bench_config, prepare, PreprocessBenchOptions, Workload};
use crate::bench::{BenchEngine, Strategy};
use octopipe_onnx::detect::CENTERNET_KERNELS;
use octopipe_stages::batch::build_blocks_into;
use octopipe_stages::preprocess::cuda::baselines::BASELINE_KERNELS;
use octopipe_stages::preprocess::cuda::meta::Norm;
use octopipe_stages::preprocess::cuda::{octopus_threads, HostFrame, OutType, UploadMode};
use octopipe_stages::preprocess::cuda::{GATHER_KERNELS, OCTOPUS_KERNELS, RESAMPLE_KERNELS};
use octopipe_stages::tilestats::TILESTATS_KERNELS;

/// Options of `octopipe probe`.
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// Shared data root (real box sizes).
    pub data_dir: Option<PathBuf>,
}

/// The auto-tuner's choice for strategy C: one (tile pixels, tiles per block) for small batches
/// and one for large ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuneChoice {
    /// For batches of fewer than `threshold` output pixels.
    pub small: (u32, u32),
    /// For larger batches.
    pub large: (u32, u32),
    /// Output pixels where `large` takes over.
    pub threshold: u64,
}

impl TuneChoice {
    /// The (tile pixels, tiles per block) for a batch of `pixels` output pixels.
    pub fn for_pixels(&self, pixels: u64) -> (u32, u32) {
        if pixels < self.threshold {
            self.small
        } else {
            self.large
        }
    }
}

/// Micro-benchmarks of strategy C at several tile sizes and tiles per block (and of strategy B for
/// comparison) on a drone28-shaped batch and a crops1000-shaped one (224x224, I420; a 200-crop
/// slice stands in for crops1000). Returns the fastest configuration for each (the threshold
/// between them halfway, in output pixels) and a report.
pub fn tune(
    e: &mut BenchEngine,
    data_dir: Option<PathBuf>,
) -> Result<(TuneChoice, String), BenchError> {
    let bopts = PreprocessBenchOptions {
        data_dir,
        ..Default::default()
    };
    let mut report = String::new();
    let start = Instant::now();
    let norm = Norm::from_config(&bench_config(&bopts));
    let mut picks: Vec<((u32, u32), u64)> = Vec::new();
    for w in [Workload::Drone28, Workload::Crops1000] {
        let mut p = prepare(w, &bopts);
        p.batch.crops.truncate(200);
        let frames: Vec<HostFrame<'_>> = p.batch.frames.iter().map(HostFrame::of).collect();
        let crops = &p.batch.crops;
        let out_len = p.batch.tensor_len(3);
        e.upload_frames(&frames, crops, UploadMode::Whole)?;
        let mut blocks = Vec::new();
        let mut best: Option<((u32, u32), f64)> = None;
        for tile in [128u32, 256, 512] {
            for per in [1u32, 2, 4, 8] {
                build_blocks_into(crops, tile, per, &mut blocks);
                e.upload_meta(crops, &blocks)?;
                let nb = blocks.len();
                let threads = octopus_threads(tile, per);
                let ms = time_kernel_queued(e, 3, 5, |e| {
                    e.launch(OutType::F32, norm, crops, nb, tile, threads, out_len)
                })?;
                if best.is_none_or(|(_, b)| ms < b) {
                    best = Some(((tile, per), ms));
                }
                let _ = writeln!(
                    report,
                    "{:>9} C tile {tile:>3} x {per} per block ({threads} threads): {ms:.4} ms",
                    w.name()
                );
            }
        }
        e.upload_meta_for(Strategy::Bsearch, crops, &[])?;
        let ms = time_kernel_queued(e, 3, 5, |e| {
            e.launch_strategy(
                Strategy::Bsearch,
                OutType::F32,
                norm,
                crops,
                0,
                256,
                256,
                out_len,
            )
        })?;
        let _ = writeln!(report, "{:>9} B bsearch: {ms:.4} ms", w.name());
        let (cfg, _) = best.unwrap_or(((256, 4), 0.0));
        picks.push((cfg, (out_len / 3) as u64));
    }
    let choice = TuneChoice {
        small: picks[0].0,
        large: picks[1].0,
        threshold: (picks[0].1 + picks[1].1) / 2,
    };
    let _ = writeln!(
        report,
        "timed part took {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let _ = writeln!(
        report,
        "choice: strategy C, tile-pixels={} tiles-per-block={} below {} output pixels, else tile-pixels={} tiles-per-block={}",
        choice.small.0, choice.small.1, choice.threshold, choice.large.0, choice.large.1
    );
    Ok((choice, report))
}

/// `octopipe probe`: open the GPU, compile the kernels (or take them from the cache), and run
/// [`tune`]. Returns the report; its last line is the choice.
pub fn probe(opts: &ProbeOptions) -> Result<String, BenchError> {
    available().map_err(|e| BenchError::Options(format!("no GPU to probe: {e}")))?;
    let t0 = Instant::now();
    let mut e = BenchEngine::new(0)?;
    // Every kernel module octopipe has, loaded before the clock stops.
    let modules = [
        &OCTOPUS_KERNELS,
        &BASELINE_KERNELS,
        &RESAMPLE_KERNELS,
        &GATHER_KERNELS,
        &TILESTATS_KERNELS,
        &CENTERNET_KERNELS,
    ];
    for m in modules {
        e.load(m)?;
    }
    let setup = t0.elapsed();
    let mut resources = String::new();
    for m in modules {
        for f in m.functions {
            let (regs, local, shared) = e.kernel_resources(m, f)?;
            let _ = writeln!(
                resources,
                "{f:>28}: {regs} registers, {local} B local, {shared} B shared"
            );
        }
    }
    let (_, report) = tune(&mut e, opts.data_dir.clone())?;
    Ok(format!(
        "GPU: {} ({}), kernels ready in {:.1} ms\n{resources}{report}",
        e.device_name(),
        e.arch(),
        setup.as_secs_f64() * 1e3
    ))
}
