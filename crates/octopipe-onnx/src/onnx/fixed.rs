//! Runs at fixed batch sizes on CUDA: one session per size, its input and output bound to device
//! buffers of their own, so that ONNX Runtime plans each size once (when the stage opens) and,
//! with [`CudaOptions::graph`](super::CudaOptions::graph), captures its run once as a CUDA graph
//! and replays it: one launch per run instead of one per node, which is most of the cost of a
//! small batch of a model with hundreds of small nodes. ONNX Runtime keeps a session's graph per
//! thread, so with graphs the sizes ([`Sizes`]) live on one thread of their own
//! ([`super::worker::Worker`]) that makes, warms (captures) and runs them all; without, they run
//! on the caller's.

use std::path::PathBuf;

use cudarc::driver::result as cu;
use cudarc::driver::CudaStream;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{DynTensor, TensorElementType, ValueType};

use super::error::{FixedError, FixedStep, OnnxError};
use super::session::{cuda_session, Cuda, CudaOptions};
use octopipe_stages::preprocess::f16_to_f32;

/// Where a fixed-size run's input rows are: copied into the size's bound input buffer on the
/// sessions' stream (device to device, or host to device). The values are of the model input's
/// element type (f32 or f16).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum FixedInput<'a> {
    /// f32 values in host memory (a float32 input).
    Host(&'a [f32]),
    /// f16 values (IEEE half bits) in host memory (a float16 input).
    Halves(&'a [u16]),
    /// `len` values of the input's element type at `ptr` in the sessions' device memory,
    /// written on a stream the sessions were ordered after
    /// ([`Sessions::after`](super::Sessions::after)).
    Device {
        /// Device address of the first value.
        ptr: u64,
        /// Values there.
        len: usize,
    },
}

/// A fixed-size run's output: `shape` (its first dimension the padded size), where it is on the
/// device, and, when the run brings outputs back ([`Sessions::fix_sizes`](super::Sessions::fix_sizes)
/// with `download`), its f32 values in host memory (an f16 output widened; empty otherwise).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct FixedOutput<'a> {
    /// The output's shape.
    pub shape: &'a [usize],
    /// Its values in host memory, when brought back.
    pub data: &'a [f32],
    /// Its device address (valid until the next run at this size).
    pub device: u64,
    /// Whether it is f16 on the device.
    pub f16: bool,
}

/// One bound output.
struct Out {
    _value: DynTensor,
    ptr: u64,
    shape: Vec<usize>,
    f16: bool,
    /// Values brought back to the host (0 without `download`).
    len: usize,
    /// f16 values brought back, before they are widened into the caller's f32 values.
    halves: Vec<u16>,
}

/// What the caller sees of one bound output: fixed when the size is bound.
#[derive(Debug, Clone)]
pub(super) struct OutInfo {
    /// The output's shape (its first dimension the padded size).
    pub shape: Vec<usize>,
    /// Its device address.
    pub device: u64,
    /// Whether it is f16 on the device.
    pub f16: bool,
    /// Values brought back to the host after each run (0 without `download`).
    pub len: usize,
}

/// One batch size's session with its bound buffers.
pub(super) struct Bound {
    pub rows: usize,
    /// The binding refers to the buffers below (it holds them too).
    binding: IoBinding,
    session: Session,
    _input: DynTensor,
    input_ptr: u64,
    /// Whether the input is f16 (f32 otherwise).
    input_f16: bool,
    /// Input values per row.
    per_row: usize,
    outs: Vec<Out>,
    /// Bring the outputs back to the host after each run.
    download: bool,
}

impl Bound {
    /// Bind `session`'s input `input` and `outputs` (f32 or f16, every dimension but the
    /// batch fixed) to buffers of `rows` rows on CUDA device `device`.
    pub fn new(
        session: Session,
        device: i32,
        rows: usize,
        input: &str,
        outputs: &[&str],
        download: bool,
    ) -> Result<Bound, FixedError> {
        let item =
            |name: &str, ty: &ValueType| -> Result<(TensorElementType, Vec<usize>), FixedError> {
                let ValueType::Tensor { ty, shape, .. } = ty else {
                    return Err(FixedError::NotTensor(name.into()));
                };
                let dims: Vec<i64> = shape.iter().copied().collect();
                if dims.is_empty() || dims[1..].iter().any(|&d| d <= 0) {
                    return Err(FixedError::Unfixed {
                        name: name.into(),
                        dims,
                    });
                }
                let mut s = vec![rows];
                s.extend(dims[1..].iter().map(|&d| d as usize));
                Ok((*ty, s))
            };
        let find = |list: Vec<(String, ValueType)>, name: &str| {
            list.into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t)
                .ok_or_else(|| FixedError::NoTensor(name.into()))
        };
        let ins: Vec<(String, ValueType)> = session
            .inputs()
            .iter()
            .map(|i| (i.name().to_string(), i.dtype().clone()))
            .collect();
        let outs: Vec<(String, ValueType)> = session
            .outputs()
            .iter()
            .map(|o| (o.name().to_string(), o.dtype().clone()))
            .collect();
        let (in_ty, in_shape) = item(input, &find(ins, input)?)?;
        let input_f16 = match in_ty {
            TensorElementType::Float32 => false,
            TensorElementType::Float16 => true,
            t => {
                return Err(FixedError::InputType {
                    name: input.into(),
                    ty: format!("{t:?}"),
                })
            }
        };
        let info = MemoryInfo::new(
            AllocationDevice::CUDA,
            device,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        let alloc = Allocator::new(&session, info)?;
        let mut input_t = DynTensor::new(&alloc, in_ty, in_shape.clone())?;
        let input_ptr = input_t.data_ptr_mut() as u64;
        let mut binding = session.create_binding()?;
        binding.bind_input(input, &input_t)?;
        let mut bound = Vec::with_capacity(outputs.len());
        for &name in outputs {
            let (ty, shape) = item(name, &find(outs.clone(), name)?)?;
            let f16 = match ty {
                TensorElementType::Float32 => false,
                TensorElementType::Float16 => true,
                t => {
                    return Err(FixedError::OutputType {
                        name: name.into(),
                        ty: format!("{t:?}"),
                    })
                }
            };
            let mut value = DynTensor::new(&alloc, ty, shape.clone())?;
            let ptr = value.data_ptr_mut() as u64;
            binding.bind_output(name, &mut value)?;
            let len: usize = if download { shape.iter().product() } else { 0 };
            bound.push(Out {
                _value: value,
                ptr,
                shape,
                f16,
                len,
                halves: if f16 { vec![0; len] } else { Vec::new() },
            });
        }
        Ok(Bound {
            rows,
            binding,
            session,
            _input: input_t,
            input_ptr,
            input_f16,
            per_row: in_shape[1..].iter().product(),
            outs: bound,
            download,
        })
    }

    /// Each output as the caller sees it.
    pub fn outputs(&self) -> Vec<OutInfo> {
        self.outs
            .iter()
            .map(|o| OutInfo {
                shape: o.shape.clone(),
                device: o.ptr,
                f16: o.f16,
                len: o.len,
            })
            .collect()
    }

    /// Run the first `n` rows of `input` (the rest of the size's rows hold what they held) and,
    /// with `download`, bring the outputs back to the host into `host` (one buffer per output,
    /// each [`OutInfo::len`] values); otherwise they are left on the device, written on
    /// `stream`.
    pub fn run(
        &mut self,
        stream: &CudaStream,
        n: usize,
        input: FixedInput<'_>,
        host: &mut [Vec<f32>],
    ) -> Result<(), FixedError> {
        let len = n * self.per_row;
        if n > self.rows {
            return Err(FixedError::TooManyRows { n, rows: self.rows });
        }
        if self.download
            && (host.len() != self.outs.len()
                || host.iter().zip(&self.outs).any(|(h, o)| h.len() != o.len))
        {
            return Err(FixedError::HostBuffers);
        }
        stream.context().bind_to_thread()?;
        let s = stream.cu_stream();
        let short = |have: usize| FixedError::ShortInput { have, n, need: len };
        let ty = if self.input_f16 { "float16" } else { "float32" };
        match input {
            _ if len == 0 => {}
            FixedInput::Host(v) if !self.input_f16 => {
                let src = v.get(..len).ok_or_else(|| short(v.len()))?;
                // SAFETY: the bound input holds `rows * per_row >= len` f32 values; the copy is
                // queued on the stream the run follows, and `src` outlives it (pageable host
                // memory: the call returns once the values are staged).
                unsafe { cu::memcpy_htod_async(self.input_ptr, src, s) }?;
            }
            FixedInput::Halves(v) if self.input_f16 => {
                let src = v.get(..len).ok_or_else(|| short(v.len()))?;
                // SAFETY: as above, with `len` f16 values.
                unsafe { cu::memcpy_htod_async(self.input_ptr, src, s) }?;
            }
            FixedInput::Host(_) | FixedInput::Halves(_) => return Err(FixedError::HostType(ty)),
            FixedInput::Device { ptr, len: have } => {
                if have < len {
                    return Err(short(have));
                }
                let bytes = len * if self.input_f16 { 2 } else { 4 };
                // SAFETY: both buffers hold at least `len` values of the input's type on this
                // device; the copy is queued on the stream the run follows.
                unsafe { cu::memcpy_dtod_async(self.input_ptr, ptr, bytes, s) }?;
            }
        }
        // ONNX Runtime runs on `stream` (the sessions' compute stream), after the copy.
        self.session.run_binding(&self.binding)?;
        if self.download {
            for (o, h) in self.outs.iter_mut().zip(host.iter_mut()) {
                if o.f16 {
                    // SAFETY: the bound output holds `halves.len()` f16 values; synchronized
                    // below before they are read.
                    unsafe { cu::memcpy_dtoh_async(&mut o.halves, o.ptr, s) }?;
                } else {
                    // SAFETY: as above, f32 (`h` holds `o.len` values, checked above).
                    unsafe { cu::memcpy_dtoh_async(&mut h[..], o.ptr, s) }?;
                }
            }
            stream.synchronize()?;
            for (o, h) in self.outs.iter().zip(host.iter_mut()).filter(|(o, _)| o.f16) {
                for (d, &x) in h.iter_mut().zip(&o.halves) {
                    *d = f16_to_f32(x);
                }
            }
        }
        Ok(())
    }
}

/// How each fixed size's session is made and bound ([`Sessions::fix_sizes`](super::Sessions::fix_sizes)).
pub(super) struct Spec {
    /// The model file.
    pub model: PathBuf,
    /// ONNX Runtime intra-op threads (0: its default).
    pub threads: usize,
    /// The sessions' CUDA options (with a graph: see [`Sizes::open`] for when it fails).
    pub options: CudaOptions,
    /// The input bound.
    pub input: String,
    /// The outputs bound.
    pub outputs: Vec<String>,
    /// Bring the outputs back to the host after each run.
    pub download: bool,
    /// Runs of each size when it is bound.
    pub warm: usize,
}

/// The caller's side of one fixed size: its rows, its outputs and the host buffers their values
/// come back into (lent to the size's run and given back after it).
pub(super) struct Held {
    /// The size's rows.
    pub rows: usize,
    /// Its outputs.
    pub outs: Vec<OutInfo>,
    /// One buffer per output, [`OutInfo::len`] values (empty while lent to a run).
    pub host: Vec<Vec<f32>>,
}

/// The fixed sizes' bound sessions with the device and stream they run on: the state of the
/// thread that runs them ([`super::worker::Worker`], with CUDA graphs), or the caller's.
pub(super) struct Sizes {
    /// Smallest first. Declared before `cuda`: the sessions are dropped before the stream they
    /// queue work on.
    bound: Vec<Bound>,
    cuda: Cuda,
}

impl Sizes {
    /// No sizes yet, on `cuda`'s device and stream.
    pub fn new(cuda: Cuda) -> Sizes {
        Sizes {
            bound: Vec::new(),
            cuda,
        }
    }

    /// Make, bind and warm up the session of `rows` rows (the next size, larger than the
    /// previous ones). With a CUDA graph, a warm-up that fails (a capture broken by another
    /// thread's CUDA calls) makes the size anew without one, with a warning.
    pub fn open(&mut self, spec: &Spec, rows: usize) -> Result<Vec<OutInfo>, OnnxError> {
        let err = |step, source| OnnxError::Fixed {
            path: spec.model.display().to_string(),
            rows,
            step,
            source,
        };
        let mut bound = self.bind(spec, rows, spec.options)?;
        if let Err(e) = self.warm(spec, &mut bound) {
            if !spec.options.graph {
                return Err(err(FixedStep::Warm, e));
            }
            tracing::warn!(
                "{}: batch {rows}: capturing its CUDA graph failed ({e}): this size runs without one",
                spec.model.display()
            );
            // The failed session (and its buffers) go before the new one is made.
            drop(bound);
            let plain = CudaOptions {
                graph: false,
                ..spec.options
            };
            bound = self.bind(spec, rows, plain)?;
            self.warm(spec, &mut bound)
                .map_err(|e| err(FixedStep::WarmPlain, e))?;
        }
        let outs = bound.outputs();
        self.bound.push(bound);
        Ok(outs)
    }

    /// A session of `rows` rows with `options`, bound to buffers of its own.
    fn bind(&self, spec: &Spec, rows: usize, options: CudaOptions) -> Result<Bound, OnnxError> {
        let session = cuda_session(&spec.model, spec.threads, &self.cuda, options)?;
        let outputs: Vec<&str> = spec.outputs.iter().map(String::as_str).collect();
        Bound::new(
            session,
            self.cuda.device,
            rows,
            &spec.input,
            &outputs,
            spec.download,
        )
        .map_err(|source| OnnxError::Fixed {
            path: spec.model.display().to_string(),
            rows,
            step: FixedStep::Bind,
            source,
        })
    }

    /// Run `bound` `spec.warm` times (on whatever its input holds): ONNX Runtime plans its
    /// shape at the first run and, with a CUDA graph, captures it at the second.
    fn warm(&self, spec: &Spec, bound: &mut Bound) -> Result<(), FixedError> {
        let mut host: Vec<Vec<f32>> = bound.outs.iter().map(|o| vec![0.0; o.len]).collect();
        for _ in 0..spec.warm {
            bound.run(&self.cuda.stream, 0, FixedInput::Host(&[]), &mut host)?;
        }
        Ok(())
    }

    /// Run the `i`-th size ([`Bound::run`]).
    pub fn run(
        &mut self,
        i: usize,
        n: usize,
        input: FixedInput<'_>,
        host: &mut [Vec<f32>],
    ) -> Result<(), FixedError> {
        let bound = self.bound.get_mut(i).ok_or(FixedError::NoSize)?;
        bound.run(&self.cuda.stream, n, input, host)
    }
}

/// A [`FixedInput`] on its way to the thread that runs the sizes: host values as their address
/// and length, for the time of one blocking call.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sent {
    /// [`FixedInput::Host`]: the slice's address and length.
    Host { ptr: *const f32, len: usize },
    /// [`FixedInput::Halves`]: the slice's address and length.
    Halves { ptr: *const u16, len: usize },
    /// [`FixedInput::Device`], as it is.
    Device { ptr: u64, len: usize },
}

// SAFETY: `Host` and `Halves` are shared borrows of plain values (`Sync`) whose lifetime was erased; `Sent::input`
// is where the lifetime is vouched for again.
unsafe impl Send for Sent {}

impl Sent {
    /// `input`, to cross to another thread for the time of a call that borrows it.
    pub fn new(input: FixedInput<'_>) -> Sent {
        match input {
            FixedInput::Host(v) => Sent::Host {
                ptr: v.as_ptr(),
                len: v.len(),
            },
            FixedInput::Halves(v) => Sent::Halves {
                ptr: v.as_ptr(),
                len: v.len(),
            },
            FixedInput::Device { ptr, len } => Sent::Device { ptr, len },
        }
    }

    /// The input again.
    ///
    /// # Safety
    /// The host values given to [`Sent::new`] must be alive and unchanged for as long as the
    /// returned input is used.
    pub unsafe fn input<'a>(self) -> FixedInput<'a> {
        match self {
            // SAFETY: `ptr` and `len` came from a slice alive for as long (the caller's promise).
            Sent::Host { ptr, len } => {
                FixedInput::Host(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
            // SAFETY: as above.
            Sent::Halves { ptr, len } => {
                FixedInput::Halves(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
            Sent::Device { ptr, len } => FixedInput::Device { ptr, len },
        }
    }
}
