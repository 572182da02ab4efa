//! `octopipe bench tiles`: the satellite scenario of the founding document. One 8192x8192 16-bit
//! scene cut into 727 random tiles of 128..512 px, per-tile statistics and the keep rule, on the
//! CPU backend and (when a GPU is present) on the GPU three ways in the same run: the production
//! kernel in one launch for all tiles (block metadata by tile area), one launch per tile (the same
//! kernel on one tile's blocks at a time), and every tile padded to 512x512 (the same number of
//! blocks for every tile, no metadata). Every GPU row's sums are checked against the CPU's.

use std::fmt::Write as _;
use std::time::Instant;

use octopipe_cuda::{available, CudaError};

use super::error::BenchError;
use super::gpu::timing_event;
use super::measure::{median, time_cpu};
use octopipe_core::budget::{Budget, Tally};
use octopipe_core::frame::PixelSums;
use octopipe_stages::preprocess::BackendKind;
use octopipe_stages::tiles::{random, scene, Grid, Tiler, TilesConfig};
use octopipe_stages::tilestats::{
    GpuSums, Rule, Sampling, TileBlocks, TileFilter, TileStatsConfig,
};

/// The seed scenario's time on a Jetson Orin Nano, ms per scene.
pub const SEED_ORIN_NANO_MS: f64 = 147.0;

/// Options of [`tiles`].
#[derive(Debug, Clone)]
pub struct TilesBenchOptions {
    /// Scene width and height.
    pub size: u32,
    /// The scene's seed.
    pub scene_seed: u64,
    /// Tiles wanted: the grid's seed is the first from 1 whose grid has this many (unless
    /// `grid_seed` is given).
    pub tiles: usize,
    /// The grid's seed, instead of searching for `tiles`.
    pub grid_seed: Option<u64>,
    /// Smallest and largest tile side.
    pub min: u32,
    /// See `min`.
    pub max: u32,
    /// The keep rule.
    pub keep: String,
    /// Pixels per block.
    pub block_pixels: u32,
    /// Seconds spent timing each CPU row.
    pub seconds: f64,
    /// Timed repetitions of each GPU row (the median is reported).
    pub gpu_reps: usize,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
    /// Also run the GPU rows when a GPU is present.
    pub gpu: bool,
}

impl Default for TilesBenchOptions {
    /// The seed scenario: 8192x8192, 727 tiles of 128..512, `mean>0.535`.
    fn default() -> Self {
        TilesBenchOptions {
            size: 8192,
            scene_seed: 1,
            tiles: 727,
            grid_seed: None,
            min: 128,
            max: 512,
            keep: "mean>0.535".into(),
            block_pixels: octopipe_stages::tilestats::DEFAULT_BLOCK_PIXELS,
            seconds: 3.0,
            gpu_reps: 30,
            threads: 0,
            gpu: true,
        }
    }
}

/// Run the benchmark; one printed table.
pub fn tiles(opts: &TilesBenchOptions) -> Result<String, BenchError> {
    let (w, min, max) = (opts.size, opts.min, opts.max);
    let grid_seed = match opts.grid_seed {
        Some(s) => s,
        None => (1..=100_000u64)
            .find(|&s| random(w, w, min, max, s).len() == opts.tiles)
            .ok_or_else(|| {
                BenchError::Options(format!(
                    "no grid seed up to 100000 gives {} tiles of {min}..={max} on {w}x{w}: choose --grid-seed",
                    opts.tiles
                ))
            })?,
    };
    let keep = Rule::parse(&opts.keep).map_err(|e| BenchError::Options(format!("--keep: {e}")))?;
    let t = Instant::now();
    let frame = scene::frame(w, w, opts.scene_seed);
    let scene_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut tiler = Tiler::new(TilesConfig {
        grid: Grid::Random {
            min,
            max,
            seed: grid_seed,
        },
    });
    let mut batch = tiler
        .cut(frame)
        .map_err(|e| BenchError::Options(e.to_string()))?;
    let n = batch.crops.len();
    let config = |backend, threads| TileStatsConfig {
        keep: Some(keep.clone()),
        backend,
        threads,
        block_pixels: opts.block_pixels,
        ..TileStatsConfig::default()
    };
    let tally = || {
        Tally::new(Budget::new(
            std::time::Duration::from_millis(33),
            Vec::new(),
        ))
    };
    let stage = |backend, threads| {
        TileFilter::new(config(backend, threads), tally())
            .map_err(|e| BenchError::Options(e.to_string()))
    };

    let mut cpu = stage(BackendKind::Cpu, opts.threads)?;
    let cpu_ms = time_cpu(opts.seconds, || {
        cpu.run(&mut batch)
            .map_err(|e| BenchError::Options(e.to_string()))
    })?;
    let reference = sums_of(&batch);
    let kept = batch.frames[0]
        .detections
        .iter()
        .filter(|d| d.stats.is_some_and(|s| s.kept))
        .count();
    let mut one = stage(BackendKind::Cpu, 1)?;
    let one_ms = time_cpu(opts.seconds, || {
        one.run(&mut batch)
            .map_err(|e| BenchError::Options(e.to_string()))
    })?;
    let one_ok = equal(&reference, &sums_of(&batch));

    let mut out = String::new();
    let blocks = batch
        .crops
        .iter()
        .map(|c| (u64::from(c.w) * u64::from(c.h)).div_ceil(u64::from(opts.block_pixels)))
        .sum::<u64>();
    let _ = writeln!(
        out,
        "{w}x{w} 16-bit synthetic scene (scene seed {}, made in {scene_ms:.0} ms), {n} random tiles of {min}..={max} px (grid seed {grid_seed}), {blocks} blocks of {} px; keep \"{}\": {kept} of {n} kept",
        opts.scene_seed, opts.block_pixels, opts.keep
    );
    out.push_str(
        "| row | ms per frame (median) | kernel launches per frame | sums equal cpu | note |\n",
    );
    out.push_str("|---|---:|---:|---|---|\n");
    let _ = writeln!(
        out,
        "| cpu | {cpu_ms:.2} | - | reference | {} threads: one rayon pass over the tiles' blocks, then statistics and the keep rule (the tilestats stage's work per frame) |",
        match opts.threads {
            0 => rayon::current_num_threads(),
            n => n,
        }
    );
    let _ = writeln!(
        out,
        "| cpu, 1 thread | {one_ms:.2} | - | {one_ok} | the same on one thread |"
    );
    let _ = writeln!(
        out,
        "| seed: Jetson Orin Nano | {SEED_ORIN_NANO_MS:.0} | 1 | - | the founding document's figure (Sentinel-2 L2A red band, 727 tiles), for reference |"
    );
    if !opts.gpu {
        return Ok(out);
    }
    if let Err(why) = available() {
        let _ = writeln!(out, "GPU rows skipped: {why}");
        return Ok(out);
    }
    gpu_rows(opts, &mut batch, &reference, stage, &mut out)?;
    Ok(out)
}

/// The GPU rows: the stage, the upload, the one launch, one launch per tile, padded.
fn gpu_rows(
    opts: &TilesBenchOptions,
    batch: &mut octopipe_stages::batch::CropBatch,
    reference: &[PixelSums],
    stage: impl Fn(BackendKind, usize) -> Result<TileFilter, BenchError>,
    out: &mut String,
) -> Result<(), BenchError> {
    let equal = |v: &[PixelSums]| equal(reference, v);
    // The stage on CUDA: upload of the frame's band, one launch, download, statistics, keep.
    let mut cuda = stage(BackendKind::Cuda, 0)?;
    let stage_ms = time_cpu(opts.seconds, || {
        cuda.run(batch)
            .map_err(|e| BenchError::Options(e.to_string()))
    })?;
    let stage_sums = sums_of(batch);

    let frame = &batch.frames[0];
    let cfg = TileStatsConfig {
        block_pixels: opts.block_pixels,
        ..TileStatsConfig::default()
    };
    let sampling = Sampling::of(frame, &cfg).map_err(|e| BenchError::Options(e.to_string()))?;
    let data = frame.data().unwrap_or(&[]);
    let tiles = TileBlocks::new(frame.detections.iter().map(|d| d.bbox), opts.block_pixels);
    let mut g = GpuSums::new(0)?;
    let name = g.engine().device_name();
    let reps = opts.gpu_reps.max(1);
    let bp = opts.block_pixels;

    // The upload alone (host clock: a pageable copy returns when it is done).
    let mut t = Vec::new();
    for _ in 0..reps.min(10) {
        let s = Instant::now();
        g.upload(data, &sampling, &tiles)?;
        g.engine().stream().synchronize().map_err(CudaError::from)?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    let upload_ms = median(&mut t);

    let mut sums = Vec::new();
    let (one_dev, one_host) = time_gpu(&mut g, reps, |g| g.launch(&sampling))?;
    g.download(&mut sums)?;
    let one_ok = equal(&sums);

    let per_tile = |g: &mut GpuSums| -> Result<(), CudaError> {
        for w in tiles.first.windows(2) {
            g.launch_blocks(&sampling, w[0]..w[1])?;
        }
        Ok(())
    };
    let (per_dev, per_host) = time_gpu(&mut g, reps, per_tile)?;
    g.download(&mut sums)?;
    let per_ok = equal(&sums);

    let (pad_w, pad_h) = (opts.max, opts.max);
    let per_pad = (pad_w * pad_h).div_ceil(bp);
    let (pad_dev, pad_host) = time_gpu(&mut g, reps, |g| {
        g.launch_padded(&sampling, (pad_w, pad_h), bp)
    })?;
    g.download(&mut sums)?;
    let pad_ok = equal(&sums);

    let n = tiles.tiles.len();
    let _ = writeln!(
        out,
        "| cuda stage ({name}) | {stage_ms:.2} | 1 | {} | host frame to kept tiles: the band's upload, one launch, the sums back, statistics and keep |",
        equal(&stage_sums)
    );
    let _ = writeln!(
        out,
        "| cuda upload | {upload_ms:.2} | - | - | the {:.0} MiB band, pageable host memory to the device, with the tiles' metadata |",
        sampling.plane_bytes() as f64 / (1024.0 * 1024.0)
    );
    let _ = writeln!(
        out,
        "| cuda one launch | {one_dev:.3} | 1 | {one_ok} | every tile in one launch, {} blocks by tile area, two-level reduction (device time by events; {one_host:.3} ms launch to sync) |",
        tiles.blocks.len()
    );
    let _ = writeln!(
        out,
        "| cuda per-tile | {per_dev:.3} | {n} | {per_ok} | baseline: the same kernel launched once per tile ({per_host:.3} ms launch to sync) |"
    );
    let _ = writeln!(
        out,
        "| cuda padded | {pad_dev:.3} | 1 | {pad_ok} | baseline: every tile padded to {pad_w}x{pad_h}, {per_pad} blocks each, {} in all ({pad_host:.3} ms launch to sync) |",
        per_pad as usize * n
    );
    Ok(())
}

/// Each tile's sums, as the stage left them on the frame's boxes.
fn sums_of(batch: &octopipe_stages::batch::CropBatch) -> Vec<PixelSums> {
    batch.frames[0]
        .detections
        .iter()
        .map(|d| d.stats.map_or(PixelSums::EMPTY, |s| s.sums))
        .collect()
}

/// `yes` when `v` equals the reference sums.
fn equal(reference: &[PixelSums], v: &[PixelSums]) -> &'static str {
    if v == reference {
        "yes"
    } else {
        "NO"
    }
}

/// Median device time (events around one run of `f`) and median host time (from before `f` to
/// the stream's end), ms, over `reps` runs after a warm-up.
fn time_gpu(
    g: &mut GpuSums,
    reps: usize,
    mut f: impl FnMut(&mut GpuSums) -> Result<(), CudaError>,
) -> Result<(f64, f64), CudaError> {
    let (a, b) = (timing_event(g.engine())?, timing_event(g.engine())?);
    f(g)?;
    g.engine().stream().synchronize()?;
    let (mut dev, mut host) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let stream = g.engine().stream().clone();
        let s = Instant::now();
        a.record(&stream)?;
        f(g)?;
        b.record(&stream)?;
        stream.synchronize()?;
        host.push(s.elapsed().as_secs_f64() * 1e3);
        dev.push(f64::from(a.elapsed_ms(&b)?));
    }
    Ok((median(&mut dev), median(&mut host)))
}
