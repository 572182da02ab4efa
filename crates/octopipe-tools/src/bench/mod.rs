//! Benchmarks and the GPU auto-tuner: `octopipe bench preprocess` and `octopipe probe`. Built only
//! with the cargo feature `bench` (off by default).
//!
//! [`preprocess`] times the CPU backend, a naive CPU baseline, and (when a GPU is present) the CUDA
//! strategies A to E on three workloads, and returns one printed table. The baseline strategies
//! A, B, D and E live here ([`Strategy`], [`BenchEngine`]), beside the production strategy C of
//! [`octopipe_stages::preprocess::cuda`]. [`probe`] picks the strategy and tile size for the present GPU with
//! a few micro-benchmarks. [`detect_tiles`] times the detector's input (a frame's tiles as one
//! batch) per backend; [`pipeline`] runs the whole pipeline on N streams of H.264
//! (`octopipe bench pipeline`); [`tiles`] times the satellite tile filter (`octopipe bench tiles`)
//! against a per-tile and a padded baseline; [`messages`] measures the broker sinks' messages
//! (`octopipe bench messages`); [`mot`] runs the tracker on the VisDrone MOT ground truth
//! (`octopipe bench track`). Scoring a run's output is not a benchmark: [`crate::eval`]
//! (`octopipe eval`, in every build; `eval` here is its `detections` module, kept by that name).

mod data;
mod detect;
mod gpu;
mod infer;
pub mod messages;
pub mod mot;
pub mod pipeline;
mod tiles;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use octopipe_core::frame::PixelFormat;
use octopipe_stages::batch::{CropBatch, CropMeta};
use octopipe_stages::preprocess::cpu::CpuBackend;
use octopipe_stages::preprocess::{Backend, PreprocessConfig, PreprocessError};

pub use crate::eval::detections as eval;
pub use data::{box_sizes, frame_from, synthetic_frame, Rng};
pub use detect::{detect_tiles, DetectTilesOptions};
pub use gpu::{probe, tune, ProbeOptions, TuneChoice};
pub use infer::{infer, model_throughput, InferOptions, Tuning};
pub use octopipe_stages::preprocess::cuda::baselines::{BenchEngine, Strategy, FLAT_THREADS};
pub use octopipe_stages::preprocess::f16_to_f32;
pub use tiles::{tiles, TilesBenchOptions, SEED_ORIN_NANO_MS};

/// Errors of the benchmarks.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A preprocess backend failed.
    #[error(transparent)]
    Preprocess(#[from] PreprocessError),
    /// The CUDA layer failed.
    #[error(transparent)]
    Cuda(#[from] octopipe_cuda::CudaError),
    /// No GPU can be used here (the GPU rows are skipped).
    #[error(transparent)]
    NoGpu(#[from] octopipe_cuda::NoGpu),
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// Making the benchmark's video failed (GStreamer, x264enc, the clip's files).
    #[error("making the benchmark video: {0}")]
    Encode(String),
}

/// One benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// One 1920x1080 frame, 28 boxes.
    Drone28,
    /// One 1920x1080 frame, 1000 boxes.
    Crops1000,
    /// 16 frames of 1920x1080, 28 boxes each.
    Streams16,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 3] = [Workload::Drone28, Workload::Crops1000, Workload::Streams16];

    /// Name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Drone28 => "drone28",
            Workload::Crops1000 => "crops1000",
            Workload::Streams16 => "streams16",
        }
    }

    /// (frames, boxes per frame).
    pub fn shape(self) -> (usize, usize) {
        match self {
            Workload::Drone28 => (1, 28),
            Workload::Crops1000 => (1, 1000),
            Workload::Streams16 => (16, 28),
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<Self> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// Options of `octopipe bench preprocess`.
#[derive(Debug, Clone)]
pub struct PreprocessBenchOptions {
    /// Shared data root (`../shared/data`): box sizes come from `visdrone/det-val-annotations`.
    pub data_dir: Option<PathBuf>,
    /// Workloads to run (empty: all).
    pub workloads: Vec<Workload>,
    /// Input pixel format of the frames (the decoder's output).
    pub format: PixelFormat,
    /// Output size.
    pub size: (u32, u32),
    /// Timed repetitions of each GPU measurement (the median is reported).
    pub gpu_reps: usize,
    /// Time budget in seconds for each CPU row (at least one run is made).
    pub cpu_seconds: f64,
    /// Run the GPU rows when a GPU is present.
    pub gpu: bool,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
}

impl Default for PreprocessBenchOptions {
    fn default() -> Self {
        PreprocessBenchOptions {
            data_dir: None,
            workloads: Vec::new(),
            format: PixelFormat::I420,
            size: (224, 224),
            gpu_reps: 200,
            cpu_seconds: 2.0,
            gpu: true,
            threads: 0,
        }
    }
}

/// A workload's frames and crop batch (blocks built with the default tile settings).
pub struct Prepared {
    /// The workload.
    pub workload: Workload,
    /// The batch with every frame's crops.
    pub batch: CropBatch,
    /// Whether the box sizes came from the real VisDrone annotations.
    pub real_sizes: bool,
}

/// Build a workload's batch: 1920x1080 frames of noise in `format`, boxes of real VisDrone sizes at
/// random places (fixed seed), each resized to `size`.
pub fn prepare(workload: Workload, opts: &PreprocessBenchOptions) -> Prepared {
    let (nframes, nboxes) = workload.shape();
    let (sizes, real_sizes) = box_sizes(opts.data_dir.as_deref());
    let mut rng = Rng::new(0x0c70_9123 ^ nboxes as u64);
    let mut batch = CropBatch::default();
    let (fw, fh) = (1920u32, 1080u32);
    for fi in 0..nframes {
        let frame = synthetic_frame(opts.format, fw, fh, fi as u64 + 1);
        let first = batch.crops.len();
        let mut offset = batch.tensor_len(3) as u32;
        for _ in 0..nboxes {
            let (w, h) = sizes[rng.below(sizes.len() as u64) as usize];
            let (w, h) = (w.clamp(1, fw), h.clamp(1, fh));
            let x = rng.below((fw - w + 1) as u64) as u32;
            let y = rng.below((fh - h + 1) as u64) as u32;
            batch.crops.push(CropMeta {
                frame: fi as u32,
                x,
                y,
                w,
                h,
                out_w: opts.size.0,
                out_h: opts.size.1,
                out_offset: offset,
            });
            offset += opts.size.0 * opts.size.1 * 3;
        }
        debug_assert!(batch.crops.len() - first == nboxes);
        batch.frames.push(frame);
    }
    batch.build_blocks(
        octopipe_stages::batch::DEFAULT_TILE_PIXELS,
        octopipe_stages::batch::DEFAULT_TILES_PER_BLOCK,
    );
    Prepared {
        workload,
        batch,
        real_sizes,
    }
}

/// The benchmark's preprocess configuration: `size`, ImageNet mean/std, RGB, NCHW, f32.
pub fn bench_config(opts: &PreprocessBenchOptions) -> PreprocessConfig {
    PreprocessConfig {
        size: Some(opts.size),
        threads: opts.threads,
        ..PreprocessConfig::default()
    }
}

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

/// One table row.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Workload name.
    pub workload: String,
    /// Implementation.
    pub name: String,
    /// Kernel median ms (GPU: 10 back-to-back launches / 10; CPU: one run).
    pub kernel_ms: Option<f64>,
    /// Metadata + metadata upload + kernel, frames already on the device, ms per batch.
    pub e2e_ms: Option<f64>,
    /// The same plus moving the frames' pixels to the device: the cheapest of whole frames,
    /// touched rows, crop rectangles gathered on the host, and crop rectangles gathered by the GPU
    /// from the pinned frames, ms.
    pub e2e_upload_ms: Option<f64>,
    /// The same plus the copy of the output back to pinned host memory, ms.
    pub e2e_back_ms: Option<f64>,
    /// Bytes the kernel moves: output written + crop pixels read + metadata.
    pub bytes: Option<u64>,
    /// Metadata bytes.
    pub meta_bytes: Option<u64>,
    /// Achieved GB/s on the bytes written.
    pub gbps: Option<f64>,
    /// Share of the measured device-to-device copy bandwidth.
    pub of_copy: Option<f64>,
    /// Largest difference from the CPU backend on the 0..255 scale.
    pub max_diff: Option<f32>,
    /// Free-form remark.
    pub note: String,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn time_cpu(
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

/// The naive CPU baseline: per crop, convert the box to an RGB image, resize it with the `image`
/// crate's bilinear (triangle) filter, then normalize into NCHW.
pub fn naive_cpu(batch: &CropBatch, config: &PreprocessConfig, out: &mut Vec<f32>) {
    use image::{imageops, ImageBuffer, Rgb};
    out.resize(batch.tensor_len(3), 0.0);
    let aff = config.affine();
    for c in &batch.crops {
        let f = &batch.frames[c.frame as usize];
        let img: ImageBuffer<Rgb<u8>, Vec<u8>> =
            ImageBuffer::from_fn(c.w, c.h, |x, y| Rgb(data::rgb_at(f, c.x + x, c.y + y)));
        let r = imageops::resize(&img, c.out_w, c.out_h, imageops::FilterType::Triangle);
        let plane = c.out_pixels() as usize;
        for (i, p) in r.pixels().enumerate() {
            for k in 0..3 {
                out[c.out_offset as usize + k * plane + i] = p.0[k] as f32 * aff[k].0 + aff[k].1;
            }
        }
    }
}

/// Run the preprocess benchmark and return the table (CPU rows always; GPU rows when a GPU is
/// present, otherwise one line saying why they are skipped).
pub fn preprocess(opts: &PreprocessBenchOptions) -> Result<String, BenchError> {
    let workloads = if opts.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        opts.workloads.clone()
    };
    let config = bench_config(opts);
    let mut cpu = CpuBackend::new(config.clone())?;
    let mut rows = Vec::new();
    let mut header = String::new();
    let mut gpu_state = if opts.gpu {
        Some(gpu::GpuBench::new(opts))
    } else {
        None
    };
    if let Some(Err(why)) = &gpu_state {
        let _ = writeln!(header, "GPU rows skipped: {why}");
    }
    if let Some(Ok(g)) = &gpu_state {
        let _ = writeln!(header, "{}", g.describe());
    }
    for w in workloads {
        let mut p = prepare(w, opts);
        if !p.real_sizes {
            let _ = writeln!(
                header,
                "{}: VisDrone annotations not found: synthetic box sizes",
                w.name()
            );
        }
        // CPU reference (also the parity baseline for every other row).
        let cpu_ms = time_cpu(opts.cpu_seconds, || Ok(cpu.run(&mut p.batch)?))?;
        let reference = p.batch.tensor.as_f32().unwrap_or(&[]).to_vec();
        let out_bytes = (reference.len() * 4) as u64;
        rows.push(Row {
            workload: w.name().into(),
            name: "cpu".into(),
            kernel_ms: Some(cpu_ms),
            bytes: Some(out_bytes),
            max_diff: Some(0.0),
            note: format!("{} threads", rayon::current_num_threads().max(1)),
            ..Row::default()
        });
        let mut naive = Vec::new();
        let naive_ms = time_cpu(opts.cpu_seconds, || {
            naive_cpu(&p.batch, &config, &mut naive);
            Ok(())
        })?;
        rows.push(Row {
            workload: w.name().into(),
            name: "cpu-naive".into(),
            kernel_ms: Some(naive_ms),
            bytes: Some(out_bytes),
            max_diff: Some(max_diff_255(&naive, &reference, &config)),
            note: "image crate triangle filter, 1 thread".into(),
            ..Row::default()
        });
        if let Some(Ok(g)) = gpu_state.as_mut() {
            rows.extend(g.run(&p, &reference, &config)?);
        }
    }
    Ok(format_table(&header, &rows))
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// Render rows as one Markdown table.
pub fn format_table(header: &str, rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(header);
    s.push_str("| workload | impl | kernel ms (queued) | e2e ms (meta+upload meta+kernel) | +frame upload ms | +copy back ms | bytes moved | meta bytes | GB/s written | % of d2d copy | max abs diff vs cpu (0..255) | note |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.name,
            opt(r.kernel_ms, 4),
            opt(r.e2e_ms, 4),
            opt(r.e2e_upload_ms, 4),
            opt(r.e2e_back_ms, 4),
            r.bytes.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
            r.meta_bytes
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
            opt(r.gbps, 1),
            r.of_copy
                .map(|x| format!("{:.0}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            r.max_diff
                .map(|d| format!("{d:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.note
        );
    }
    s
}
