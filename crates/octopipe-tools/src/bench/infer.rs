//! `octopipe bench infer`: a model alone in ONNX Runtime, per execution provider and input memory,
//! as the pipeline's inference stages call it (one run per batch): the time of one run at fixed
//! and at changing batch sizes, and the throughput in items per second.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use ort::session::{Session, SessionInputValue};

use octopipe_onnx::onnx::{CudaOptions, FixedInput, Sessions};
use ort::value::{TensorRef, ValueType};

use super::data::Rng;
use super::error::BenchError;
use super::infer_engine::{self, EngineRow};
use octopipe_onnx::onnx::Ep;

/// A way of running the model on CUDA that `octopipe bench infer --cuda` compares: session
/// options, and whether runs go through buffers bound at fixed batch sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// As written: `plain`, or `+`-joined `bound`, `graph`, `nhwc`, `exhaustive`, `fusebias`.
    pub name: String,
    /// The sessions' CUDA options.
    pub options: CudaOptions,
    /// Runs at fixed batch sizes through bound buffers ([`Sessions::fix_sizes`]); implied by
    /// `graph`.
    pub bound: bool,
}

impl Tuning {
    /// Parse `plain` or `bound+graph+nhwc+exhaustive+fusebias` (any of them, any order).
    pub fn parse(s: &str) -> Result<Tuning, BenchError> {
        let mut t = Tuning {
            name: s.to_string(),
            options: CudaOptions::default(),
            bound: false,
        };
        for part in s.split('+').filter(|p| *p != "plain") {
            match part {
                "bound" => t.bound = true,
                "graph" => {
                    t.options.graph = true;
                    t.bound = true;
                }
                "nhwc" => t.options.nhwc = true,
                "exhaustive" => t.options.exhaustive = true,
                "fusebias" => t.options.fuse_bias = true,
                other => {
                    return Err(BenchError::Options(format!(
                        "--cuda {s}: '{other}' is not one of plain, bound, graph, nhwc, exhaustive, fusebias"
                    )))
                }
            }
        }
        Ok(t)
    }
}

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
    /// Ways of running on CUDA's execution provider, each its own rows.
    pub tunings: Vec<Tuning>,
    /// Leave out the rows of changing batch sizes run as they come (on CUDA each new size plans
    /// anew: seconds a run).
    pub fixed_only: bool,
    /// Copies of the model run at once with a bound tuning on CUDA, each with its own sessions
    /// and CUDA stream, from a thread of its own (1: one copy).
    pub concurrent: usize,
    /// ONNX Runtime's rows (per `eps` and `tunings`).
    pub ort: bool,
    /// The octopipe engine's rows (its own kernels on GPU 0, input on the device, one CUDA
    /// graph per batch): `octopipe | graph | device`.
    pub octopipe: bool,
}

/// Where a row's input lives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    Host,
    Device,
}

/// The model's input: name and per-item shape (the batch dimension left out).
fn input_shape(session: &Session) -> Result<(String, Vec<usize>, bool, bool), BenchError> {
    let input = session
        .inputs()
        .first()
        .ok_or_else(|| BenchError::Options("the model has no inputs".into()))?;
    let ValueType::Tensor { shape, ty, .. } = input.dtype() else {
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
        *ty == ort::value::TensorElementType::Float16,
    ))
}

/// Time `ep` on the model for every batch size, with host and (on CUDA) device inputs, once per
/// tuning on CUDA.
pub fn infer(opts: &InferOptions) -> Result<String, BenchError> {
    let mut out = String::new();
    writeln!(
        out,
        "| ep | cuda | input | batch | runs | p50 ms | p99 ms | items/s | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    .ok();
    let plain = [Tuning::parse("plain")?];
    let eps = if opts.ort { &opts.eps[..] } else { &[] };
    for &ep in eps {
        let tunings = match ep {
            Ep::Cpu => &plain[..],
            _ if opts.tunings.is_empty() => &plain[..],
            _ => &opts.tunings[..],
        };
        for tuning in tunings {
            // One tuning that ONNX Runtime cannot run (cuDNN may find no engine for a fusion)
            // is a row of its own; the others are still timed.
            match infer_one(opts, ep, tuning, &mut out) {
                Err(e) if tunings.len() > 1 => {
                    let first = e.to_string();
                    let first = first.lines().next().unwrap_or_default();
                    let first: String = first.chars().take(200).collect();
                    writeln!(
                        out,
                        "| cuda | {} | - | - | - | - | - | - | failed: {first} |",
                        tuning.name
                    )
                    .ok();
                }
                r => r?,
            }
        }
    }
    if opts.octopipe {
        for r in infer_engine::rows(&opts.model, &opts.batches, opts.runs)? {
            match r {
                EngineRow::Timed {
                    batch,
                    mut times,
                    note,
                } => row(
                    &mut out,
                    "octopipe",
                    "graph",
                    "device",
                    &batch.to_string(),
                    &mut times,
                    (batch * opts.runs, None),
                    &note,
                ),
                EngineRow::Failed { batch, reason } => {
                    writeln!(
                        out,
                        "| octopipe | graph | device | {batch} | - | - | - | - | failed: {reason} |"
                    )
                    .ok();
                }
            }
        }
    }
    Ok(out)
}

/// The rows of one execution provider and tuning.
fn infer_one(
    opts: &InferOptions,
    ep: Ep,
    tuning: &Tuning,
    out: &mut String,
) -> Result<(), BenchError> {
    {
        let opened = Instant::now();
        let mut sessions = Sessions::open_with(&opts.model, opts.threads, ep, tuning.options)
            .map_err(|e| BenchError::Options(e.to_string()))?;
        let on_cuda = sessions.cuda().is_some();
        let tname = if on_cuda { tuning.name.as_str() } else { "-" };
        let (name, item, fixed, half) = input_shape(sessions.first())?;
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
            Some(DeviceBuf::new(&host, half)?)
        } else {
            None
        };
        if on_cuda && tuning.bound {
            let sizes: Vec<usize> = if fixed { vec![1] } else { opts.batches.clone() };
            fix_on_device(&mut sessions, &sizes, &name)?;
            let mut copies = vec![sessions];
            for _ in 1..opts.concurrent.max(1) {
                let mut more = Sessions::open_with(&opts.model, opts.threads, ep, tuning.options)
                    .map_err(|e| BenchError::Options(e.to_string()))?;
                fix_on_device(&mut more, &sizes, &name)?;
                copies.push(more);
            }
            let ready = opened.elapsed().as_secs_f64();
            let d = device.as_ref().expect("a device buffer on CUDA");
            let mut rows: Vec<(String, Vec<usize>)> = sizes
                .iter()
                .map(|&b| (b.to_string(), vec![b; opts.runs]))
                .collect();
            if sizes.len() > 1 {
                let changing = (0..opts.runs)
                    .map(|_| 1 + rng.below(max as u64) as usize)
                    .collect();
                rows.push((format!("1-{max} changing, padded"), changing));
            }
            let k = copies.len();
            let input = if k > 1 {
                format!("device, bound, {k} at once")
            } else {
                "device, bound".to_string()
            };
            for (label_b, runs) in rows {
                // Each copy runs the row's batches from a thread of its own; the items of all
                // of them over the wall time from the first start to the last end.
                let ptr = d.ptr;
                let started = Instant::now();
                let ran: Vec<Result<Vec<f64>, BenchError>> = std::thread::scope(|scope| {
                    let handles: Vec<_> = copies
                        .iter_mut()
                        .map(|sessions| {
                            let runs = &runs;
                            scope.spawn(move || bound_runs(sessions, runs, ptr, per))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(BenchError::Options("a copy's thread panicked".into()))
                            })
                        })
                        .collect()
                });
                let wall = started.elapsed().as_secs_f64();
                let mut times = Vec::new();
                for r in ran {
                    times.extend(r?);
                }
                let items = k * runs.iter().sum::<usize>();
                let note = format!("ready in {ready:.1} s");
                let wall = (k > 1).then_some(wall);
                row(
                    out,
                    label,
                    tname,
                    &input,
                    &label_b,
                    &mut times,
                    (items, wall),
                    &note,
                );
            }
            return Ok(());
        }
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
            if !fixed && max > 1 && !opts.fixed_only {
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
                let note = if fixed { "model has batch 1" } else { "" };
                row(
                    out,
                    label,
                    tname,
                    where_,
                    &label_b,
                    &mut times,
                    (items, None),
                    note,
                );
            }
        }
    }
    Ok(())
}

/// The times (ms) of runs at the batch sizes `runs` on fixed sizes bound on the device, input at
/// `ptr` (`per` values an item), each waited for.
fn bound_runs(
    sessions: &mut Sessions,
    runs: &[usize],
    ptr: u64,
    per: usize,
) -> Result<Vec<f64>, BenchError> {
    let err = |e: octopipe_onnx::onnx::OnnxError| BenchError::Options(e.to_string());
    let mut times = Vec::with_capacity(runs.len());
    for &b in runs {
        let t = Instant::now();
        let input = FixedInput::Device { ptr, len: b * per };
        sessions.run_fixed(b, input).map_err(err)?;
        sessions.synchronize().map_err(err)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(times)
}

/// One table row from the run times (ms) of `items` items: items/s over the times' sum, or over
/// `wall` seconds where runs overlapped.
#[allow(clippy::too_many_arguments)]
fn row(
    out: &mut String,
    ep: &str,
    tuning: &str,
    input: &str,
    batch: &str,
    times: &mut [f64],
    (items, wall): (usize, Option<f64>),
    note: &str,
) {
    let seconds = wall.unwrap_or_else(|| times.iter().sum::<f64>() / 1e3);
    times.sort_by(f64::total_cmp);
    writeln!(
        out,
        "| {ep} | {tuning} | {input} | {batch} | {} | {:.3} | {:.3} | {:.0} | {note} |",
        times.len(),
        percentile(times, 50.0),
        percentile(times, 99.0),
        items as f64 / seconds,
    )
    .ok();
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
            unsafe { octopipe_onnx::onnx::cuda_input(d.ptr, 0, &shape) }
                .map_err(err)?
                .into()
        }
        _ => TensorRef::from_array_view((shape, host))
            .map_err(err)?
            .into(),
    };
    let outputs = session.run(ort::inputs![name => value]).map_err(err)?;
    for (_, v) in outputs.iter() {
        // Read in host memory as the stages read it, whatever its element type.
        let t = v
            .view()
            .downcast::<ort::value::DynTensorValueType>()
            .map_err(err)?;
        std::hint::black_box(t.data_ptr());
    }
    Ok(())
}

/// The input's values in device memory (device 0).
struct DeviceBuf {
    ptr: u64,
    _buf: Box<dyn std::any::Any>,
}

impl DeviceBuf {
    /// `host` in device memory, as f16 values with `half` (a float16 model input).
    fn new(host: &[f32], half: bool) -> Result<Self, BenchError> {
        use octopipe_cuda::CudaError;
        let ctx = cudarc::driver::CudaContext::new(0).map_err(CudaError::from)?;
        let stream = ctx.default_stream();
        let (ptr, buf): (u64, Box<dyn std::any::Any>) = if half {
            let halves: Vec<u16> = host
                .iter()
                .map(|&v| octopipe_stages::preprocess::f32_to_f16(v))
                .collect();
            let buf = stream.clone_htod(&halves).map_err(CudaError::from)?;
            let ptr = cudarc::driver::DevicePtr::device_ptr(&buf, &stream).0;
            (ptr, Box::new(buf))
        } else {
            let buf = stream.clone_htod(host).map_err(CudaError::from)?;
            let ptr = cudarc::driver::DevicePtr::device_ptr(&buf, &stream).0;
            (ptr, Box::new(buf))
        };
        stream.synchronize().map_err(CudaError::from)?;
        Ok(DeviceBuf { ptr, _buf: buf })
    }
}

/// Run `sessions` at the fixed batch `sizes` with input `input` and every output left on the
/// device: the model alone, as a consumer on the GPU reads it.
fn fix_on_device(sessions: &mut Sessions, sizes: &[usize], input: &str) -> Result<(), BenchError> {
    let outputs: Vec<String> = sessions
        .first()
        .outputs()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    sessions
        .fix_sizes(sizes, input, &outputs, false, 3)
        .map_err(|e| BenchError::Options(e.to_string()))
}

/// The `q`-th percentile (nearest rank) of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Items per second of `model` alone at batch `rows` (median of `runs` runs after a warm-up),
/// run as the detect stage runs it: on CUDA at a fixed size bound on the device (its outputs
/// left there) with `options`, on the CPU from host memory. The comparison the pipeline
/// benchmark makes for its detector.
pub fn model_throughput(
    model: &std::path::Path,
    ep: Ep,
    options: CudaOptions,
    rows: usize,
    runs: usize,
) -> Result<f64, BenchError> {
    let err = |e: octopipe_onnx::onnx::OnnxError| BenchError::Options(e.to_string());
    let mut sessions = Sessions::open_with(model, 0, ep, options).map_err(err)?;
    let (name, item, fixed, half) = input_shape(sessions.first())?;
    let rows = if fixed { 1 } else { rows.max(1) };
    let per: usize = item.iter().product();
    let mut rng = Rng::new(11);
    let host: Vec<f32> = (0..rows * per).map(|_| rng.below(256) as f32).collect();
    let mut times = Vec::with_capacity(runs);
    if sessions.cuda().is_some() {
        fix_on_device(&mut sessions, &[rows], &name)?;
        let d = DeviceBuf::new(&host, half)?;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let input = FixedInput::Device {
                ptr: d.ptr,
                len: rows * per,
            };
            sessions.run_fixed(rows, input).map_err(err)?;
            sessions.synchronize().map_err(err)?;
            times.push(t.elapsed().as_secs_f64());
        }
    } else {
        for _ in 0..=runs.max(1) {
            let t = Instant::now();
            run(
                &mut sessions,
                rows,
                rows,
                &item,
                &name,
                Input::Host,
                &host,
                None,
            )?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.remove(0);
    }
    times.sort_by(f64::total_cmp);
    Ok(rows as f64 / percentile(&times, 50.0).max(1e-12))
}
