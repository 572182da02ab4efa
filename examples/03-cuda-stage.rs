//! A stage of the application's own, with its own CUDA kernel: `brightness` measures the mean
//! luma of every box and drops the boxes darker than `min`. Its kernel (`brightness.cu`, beside
//! this file) is declared here as a kernel module and compiled by octopipe's CUDA crate by name,
//! like the built-in stages' kernels; without a GPU the stage runs its CPU path, which computes
//! the same sums. The stage is registered with one line.
//!
//! ```text
//! testsrc (videotestsrc, smpte bars, 640x360 I420, 30 frames)
//!   ! boxes (synthetic, 16 per frame)
//!   ! brightness min=100          <- this file: box_luma_sums of brightness.cu, or the CPU
//!   ! appsink --> Receiver<Object>   (no file written)
//! ```
//!
//! ```sh
//! . scripts/env.sh
//! cargo run --release --example 03-cuda-stage            # min=100
//! cargo run --release --example 03-cuda-stage -- 50      # another threshold
//! ```
//!
//! Where NVRTC is found (the CUDA toolkit, or pip's `nvidia-cuda-nvrtc`), the program first
//! compiles `brightness.cu` with it and checks that it defines its kernel, GPU or not.

use std::collections::HashMap;

use anyhow::{Context, Result};
use cudarc::driver::{CudaSlice, PushKernelArg};
use octopipe::budget::Tally;
use octopipe::cuda::kernels::{self, KernelModule};
use octopipe::cuda::{launch_config, CudaError, Gpu};
use octopipe::describe::{self, DescribeError};
use octopipe::stage::{
    Element, Item, OpenContext, Properties, Props, Registry, Role, Running, Stage, StageDecl,
};
use octopipe::{Builtin, Error, Frame, Pipeline, PixelFormat};

/// The stage's kernels: `brightness.cu`, compiled by name once per process.
const BRIGHTNESS_KERNELS: KernelModule = KernelModule {
    name: "brightness",
    source: include_str!("brightness.cu"),
    functions: &["box_luma_sums"],
};

/// Threads per CUDA block (`BRIGHTNESS_THREADS` in `brightness.cu`).
const THREADS: u32 = 256;

/// The stage's properties, declared once: parsing, checking and `inspect` read them.
#[derive(Debug, Clone, Properties)]
struct BrightnessProps {
    /// boxes whose mean luma is under this are dropped (0 keeps every box)
    #[prop(default = 0, range = 0..=255)]
    min: u32,
    /// the GPU that runs the kernel, where there is one
    #[prop(default = 0, range = ..=octopipe::stage::limits::MAX_DEVICE)]
    device: usize,
}

/// `brightness min=N device=N`: a filter of frames, anywhere frames travel after their boxes.
const BRIGHTNESS: StageDecl = StageDecl {
    name: "brightness",
    role: Role::Filter(Item::FRAMES),
    doc: "drops the boxes whose mean luma is under min (a CUDA kernel of its own, or the CPU)",
    props: BrightnessProps::PROPS,
    needs: &[Role::Boxes],
    provides: &[],
    make: make_brightness,
};

fn make_brightness(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    Ok(Box::new(BrightnessProps::from_props(p)?))
}

impl Element for BrightnessProps {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        // The GPU path where a GPU (and NVRTC) is here; the CPU path otherwise, saying why.
        let gpu = match Gpu::new(self.device, &[&BRIGHTNESS_KERNELS]) {
            Ok(gpu) => Some(GpuSums { gpu }),
            Err(e) => {
                eprintln!("brightness: CPU path ({e})");
                None
            }
        };
        Ok(Running::stage(Box::new(Brightness {
            min: self.min,
            gpu,
            tally: ctx.tally.clone(),
            boxes: 0,
            dropped: 0,
        })))
    }
}

/// The running stage.
struct Brightness {
    min: u32,
    gpu: Option<GpuSums>,
    tally: Tally,
    boxes: u64,
    dropped: u64,
}

/// The kernel on one GPU.
struct GpuSums {
    gpu: Gpu,
}

impl GpuSums {
    /// The sum of each box's samples of `plane` (rows `stride` bytes apart): one launch of
    /// `box_luma_sums`, one CUDA block per box.
    fn sums(&mut self, plane: &[u8], stride: usize, boxes: &[u32]) -> Result<Vec<u64>, CudaError> {
        let f = self.gpu.func(&BRIGHTNESS_KERNELS, "box_luma_sums")?;
        let stream = self.gpu.stream().clone();
        let plane_d = stream.clone_htod(plane)?;
        let boxes_d = stream.clone_htod(boxes)?;
        let mut sums: CudaSlice<u64> = stream.alloc_zeros(boxes.len() / 4)?;
        let stride = stride as u32;
        let mut b = stream.launch_builder(&f);
        b.arg(&plane_d).arg(&stride).arg(&boxes_d).arg(&mut sums);
        // SAFETY: the arguments match `box_luma_sums`; every box lies inside the plane (the
        // frame's boxes are clipped to it) and `sums` holds one value per box.
        unsafe { b.launch(launch_config((boxes.len() as u32 / 4, 1), THREADS)) }?;
        Ok(stream.clone_dtoh(&sums)?)
    }
}

/// The same sums on the CPU.
fn cpu_sums(plane: &[u8], stride: usize, boxes: &[u32]) -> Vec<u64> {
    boxes
        .chunks(4)
        .map(|b| {
            let (x, y, w, h) = (b[0] as usize, b[1] as usize, b[2] as usize, b[3] as usize);
            (y..y + h)
                .map(|r| {
                    plane[r * stride + x..][..w]
                        .iter()
                        .map(|&v| v as u64)
                        .sum::<u64>()
                })
                .sum()
        })
        .collect()
}

impl Stage<Frame, Frame> for Brightness {
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        let luma_first = frame.layout.format.is_yuv() || frame.layout.format == PixelFormat::Gray8;
        // Host frames with a luma plane are measured; others pass with their boxes.
        if let (true, Some(data), false) = (luma_first, frame.data(), frame.detections.is_empty()) {
            let plane = &data[frame.layout.offsets[0]..];
            let stride = frame.layout.strides[0];
            let boxes: Vec<u32> = frame.detections.iter().flat_map(|d| d.bbox).collect();
            let sums = match &mut self.gpu {
                Some(gpu) => gpu.sums(plane, stride, &boxes).map_err(Error::stage)?,
                None => cpu_sums(plane, stride, &boxes),
            };
            let before = frame.detections.len();
            let mut sums = sums.into_iter();
            frame.detections.retain(|d| {
                let pixels = d.bbox[2] as u64 * d.bbox[3] as u64;
                sums.next()
                    .is_none_or(|sum| sum >= self.min as u64 * pixels)
            });
            self.boxes += before as u64;
            self.dropped += (before - frame.detections.len()) as u64;
        }
        out.push(frame);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        let path = match &self.gpu {
            Some(g) => format!("kernel box_luma_sums on {}", g.gpu.device_name()),
            None => "CPU".into(),
        };
        let line = format!(
            "brightness: {} of {} boxes dropped under mean luma {} ({path})",
            self.dropped, self.boxes, self.min
        );
        self.tally.with(|t| t.add_line(line));
        Ok(())
    }
}

fn main() -> Result<()> {
    let min: u32 = match std::env::args().nth(1) {
        Some(v) => v
            .parse()
            .with_context(|| format!("usage: 03-cuda-stage [MIN 0..=255], not {v:?}"))?,
        None => 100,
    };
    if octopipe::cuda::find_nvrtc() {
        let bytes = kernels::check_module(&BRIGHTNESS_KERNELS, "compute_75")?;
        println!("brightness.cu compiles under NVRTC ({bytes} bytes of PTX for compute_75)");
    } else {
        println!("NVRTC not found: brightness.cu not compile-checked");
    }

    let mut registry = Registry::builtin();
    registry.register(BRIGHTNESS); // the one line that adds the stage

    let vars = HashMap::from([("min".to_string(), min.to_string())]);
    let desc = describe::parse(
        "<03-cuda-stage>",
        "testsrc pattern=smpte width=640 height=360 num-buffers=30 \
         ! boxes format=synthetic count=16 seed=1 \
         ! brightness min=${min} \
         ! appsink",
        &vars,
    )?;
    let mut pipeline = Pipeline::build(describe::build_with(&desc, &registry)?)?;
    let objects = pipeline.results(256);
    let run = std::thread::spawn(move || pipeline.run());
    let kept = objects.into_iter().count();
    let outcome = run
        .join()
        .map_err(|_| anyhow::anyhow!("pipeline thread panicked"))?;
    if let Some(e) = outcome.error {
        return Err(e.into());
    }
    println!("{}", outcome.report);
    println!("objects kept: {kept}");
    Ok(())
}

/// Run by `cargo test` (the example is built as a test too: Cargo.toml's `[[example]]`).
#[cfg(test)]
mod tests {
    use super::*;

    /// `brightness.cu` compiles under NVRTC and defines `box_luma_sums`: no GPU needed.
    #[test]
    fn the_kernel_compiles_under_nvrtc() {
        match kernels::check_modules(&[&BRIGHTNESS_KERNELS]) {
            None => eprintln!("SKIPPED: libnvrtc not found; brightness.cu not compile-checked"),
            Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
            Some(Err(failures)) => panic!("{failures}"),
        }
    }

    /// A box's sum is the sum of its samples, read with the plane's stride; on a GPU the kernel
    /// gives the CPU's sums.
    #[test]
    fn box_sums_are_the_boxes_samples() {
        // 5 x 3 plane, stride 6 (one byte of padding per row).
        let plane: Vec<u8> = (0..18)
            .map(|i| if i % 6 == 5 { 255 } else { i * 10 })
            .collect();
        let boxes = [0, 0, 5, 3, 1, 1, 2, 2, 4, 2, 1, 1];
        let cpu = cpu_sums(&plane, 6, &boxes);
        assert_eq!(cpu, vec![1200, 70 + 80 + 130 + 140, 160]);
        match Gpu::new(0, &[&BRIGHTNESS_KERNELS]) {
            Ok(gpu) => assert_eq!(GpuSums { gpu }.sums(&plane, 6, &boxes).unwrap(), cpu),
            Err(e) => eprintln!("SKIPPED (GPU part): {e}"),
        }
    }
}
