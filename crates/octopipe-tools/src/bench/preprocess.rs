//! `octopipe bench preprocess`: the CPU backend, the naive CPU baseline and the GPU rows per
//! workload.

use std::fmt::Write as _;

use octopipe_stages::batch::CropBatch;
use octopipe_stages::preprocess::cpu::CpuBackend;
use octopipe_stages::preprocess::{Backend, PreprocessConfig};

use super::data;
use super::error::BenchError;
use super::gpu;
use super::measure::{max_diff_255, time_cpu};
use super::table::{format_table, Row};
use super::workload::{bench_config, prepare, PreprocessBenchOptions, Workload};

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
