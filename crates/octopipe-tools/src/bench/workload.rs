//! The preprocess benchmark's workloads and options, and building a workload's crop batch.

use std::path::PathBuf;

use octopipe_core::frame::PixelFormat;
use octopipe_stages::batch::{CropBatch, CropMeta};
use octopipe_stages::preprocess::PreprocessConfig;

use super::data::{box_sizes, synthetic_frame, Rng};

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
