//! `octopipe bench infer`: a model alone in ONNX Runtime, per execution provider and input memory,
//! as the pipeline's inference stages call it (one run per batch): the time of one run at fixed
//! and at changing batch sizes, and the throughput in items per second.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use ort::session::{Session, SessionInputValue};

use crate::onnx::Sessions;
use ort::value::{TensorRef, ValueType};

use super::{BenchError, Rng};
use crate::onnx::Ep;

/// What `octopipe bench infer` runs.
#[derive(Debug, Clone)]
pub struct InferOptions {
    /// The ONNX model (first input: a float tensor with a free batch dimension or batch 1).
    pub model: PathBuf,
    /// Execution providers to compare.
    pub eps: Vec<Ep>,
    /// Batch sizes to time at a fixed size.
    pub batches: Vec<usize>,
    /// Timed runs per row (after one untimed run).
    pub runs: usize,
    /// ONNX Runtime intra-op threads (0: its default).
    pub threads: usize,
}

/// Where a row's input lives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    Host,
    Device,
}

/// The model's input: name and per-item shape (the batch dimension left out).
fn input_shape(session: &Session) -> Result<(String, Vec<usize>, bool), BenchError> {
    let input = session
        .inputs()
        .first()
        .ok_or_else(|| BenchError::Options("the model has no inputs".into()))?;
    let ValueType::Tensor { shape, .. } = input.dtype() else {
        return Err(BenchError::Options(
            "the model's input is not a tensor".into(),
        ));
    };
    let dims: Vec<i64> = shape.iter().copied().collect();
    if dims.len() < 2 || dims[1..].iter().any(|&d| d <= 0) {
        return Err(BenchError::Options(format!(
            "the model's input {dims:?} needs fixed sizes after the batch dimension"
        )));
    }
    Ok((
        input.name().to_string(),
        dims[1..].iter().map(|&d| d as usize).collect(),
        dims[0] > 0,
    ))
}

/// Time `ep` on the model for every batch size, with host and (on CUDA) device inputs.
pub fn infer(opts: &InferOptions) -> Result<String, BenchError> {
    let mut out = String::new();
    writeln!(
        out,
        "| ep | input | batch | runs | p50 ms | p99 ms | items/s | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    .ok();
    for &ep in &opts.eps {
        let mut sessions = Sessions::open(&opts.model, opts.threads, ep)
            .map_err(|e| BenchError::Options(e.to_string()))?;
        let on_cuda = sessions.cuda().is_some();
        let (name, item, fixed) = input_shape(sessions.first())?;
        let per: usize = item.iter().product();
        let label = if on_cuda { "cuda" } else { "cpu" };
        let inputs: &[Input] = if on_cuda {
            &[Input::Host, Input::Device]
        } else {
            &[Input::Host]
        };
        let max = opts.batches.iter().copied().max().unwrap_or(1);
        let room = max.next_power_of_two().max(Sessions::MIN_ROWS);
        let mut rng = Rng::new(7);
        let host: Vec<f32> = (0..room * per)
            .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
            .collect();
        let device = if on_cuda {
            Some(DeviceBuf::new(&host)?)
        } else {
            None
        };
        for &input in inputs {
            let where_ = if input == Input::Host {
                "host"
            } else {
                "device"
            };
            let mut sizes: Vec<(String, Vec<usize>, Sizes)> = opts
                .batches
                .iter()
                .map(|&b| {
                    let b = if fixed { 1 } else { b };
                    (b.to_string(), vec![b; opts.runs + 1], Sizes::Fixed)
                })
                .collect();
            if !fixed && max > 1 {
                // Batches of a live pipeline: a new size almost every run, as they come and
                // padded (on CUDA) to a power of two.
                let changing: Vec<usize> = (0..=opts.runs)
                    .map(|_| 1 + rng.below(max as u64) as usize)
                    .collect();
                sizes.push((
                    format!("1-{max} changing"),
                    changing.clone(),
                    Sizes::Changing,
                ));
                if on_cuda {
                    sizes.push((format!("1-{max} changing, padded"), changing, Sizes::Padded));
                }
            }
            for (label_b, runs, mode) in sizes {
                let mut times = Vec::with_capacity(runs.len());
                let mut items = 0usize;
                // (session, rows run) for a batch of b: its own session at a fixed size, the
                // largest size's for changing sizes, the padded size's when padded.
                let plan = |sessions: &Sessions, b: usize| match mode {
                    Sizes::Fixed => (b, b),
                    Sizes::Changing => (max, b),
                    Sizes::Padded => {
                        let padded = sessions.padded(b, room);
                        (padded, padded)
                    }
                };
                // Every padded size runs once untimed first, as the classify stage warms them
                // when it opens; then each row's first run is untimed too.
                let warm: &[usize] = if mode == Sizes::Padded { &runs } else { &[] };
                for (i, &b) in warm.iter().chain(&runs).enumerate() {
                    let (key, rows) = plan(&sessions, b);
                    let t = Instant::now();
                    run(
                        &mut sessions,
                        key,
                        rows,
                        &item,
                        &name,
                        input,
                        &host,
                        device.as_ref(),
                    )?;
                    if i > warm.len() {
                        times.push(t.elapsed().as_secs_f64() * 1e3);
                        items += b;
                    }
                }
                let total: f64 = times.iter().sum();
                times.sort_by(f64::total_cmp);
                writeln!(
                    out,
                    "| {label} | {where_} | {label_b} | {} | {:.3} | {:.3} | {:.0} | {} |",
                    times.len(),
                    percentile(&times, 50.0),
                    percentile(&times, 99.0),
                    items as f64 / (total / 1e3),
                    if fixed { "model has batch 1" } else { "" }
                )
                .ok();
            }
        }
    }
    Ok(out)
}

/// How a row's batch sizes are run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sizes {
    /// One size, its own session.
    Fixed,
    /// Changing sizes, as they come, on one session.
    Changing,
    /// Changing sizes padded as the pipeline's stages pad them, a session per padded size.
    Padded,
}

/// One run of `rows` rows on the session for `key` rows; the outputs are read back to host
/// memory as the stages do.
#[allow(clippy::too_many_arguments)]
fn run(
    sessions: &mut Sessions,
    key: usize,
    rows: usize,
    item: &[usize],
    name: &str,
    input: Input,
    host: &[f32],
    device: Option<&DeviceBuf>,
) -> Result<(), BenchError> {
    let mut shape = vec![rows];
    shape.extend(item);
    let host = &host[..rows * item.iter().product::<usize>()];
    let session = sessions
        .get(key)
        .map_err(|e| BenchError::Options(e.to_string()))?;
    let err = |e: ort::Error| BenchError::Options(format!("ONNX Runtime: {e}"));
    let value: SessionInputValue = match (input, device) {
        (Input::Device, Some(d)) => {
            // SAFETY: `d.ptr` holds at least `shape`'s f32 elements (the largest padded batch),
            // alive for the run.
            unsafe { crate::onnx::cuda_input(d.ptr, 0, &shape) }
                .map_err(err)?
                .into()
        }
        _ => TensorRef::from_array_view((shape, host))
            .map_err(err)?
            .into(),
    };
    let outputs = session.run(ort::inputs![name => value]).map_err(err)?;
    for (_, v) in outputs.iter() {
        let _ = v.try_extract_tensor::<f32>().map_err(err)?;
    }
    Ok(())
}

/// The input's values in device memory (device 0).
struct DeviceBuf {
    ptr: u64,
    _buf: cudarc::driver::CudaSlice<f32>,
}

impl DeviceBuf {
    fn new(host: &[f32]) -> Result<Self, BenchError> {
        let ctx = cudarc::driver::CudaContext::new(0)
            .map_err(crate::preprocess::cuda::CudaError::from)?;
        let stream = ctx.default_stream();
        let buf = stream
            .clone_htod(host)
            .map_err(crate::preprocess::cuda::CudaError::from)?;
        stream
            .synchronize()
            .map_err(crate::preprocess::cuda::CudaError::from)?;
        let ptr = cudarc::driver::DevicePtr::device_ptr(&buf, &stream).0;
        Ok(DeviceBuf { ptr, _buf: buf })
    }
}

/// The `q`-th percentile (nearest rank) of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
