//! Runs at fixed batch sizes on CUDA: one session per size, its input and output bound to device
//! buffers of their own, so that ONNX Runtime plans each size once (when the stage opens) and,
//! with [`CudaOptions::graph`](super::CudaOptions::graph), captures its run once as a CUDA graph
//! and replays it: one launch per run instead of one per node, which is most of the cost of a
//! small batch of a model with hundreds of small nodes.

use cudarc::driver::result as cu;
use cudarc::driver::CudaStream;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{DynTensor, TensorElementType, ValueType};

use crate::preprocess::f16_to_f32;

/// Where a fixed-size run's input rows are: copied into the size's bound input buffer on the
/// sessions' stream (device to device, or host to device).
#[derive(Debug, Clone, Copy)]
pub enum FixedInput<'a> {
    /// f32 values in host memory.
    Host(&'a [f32]),
    /// `len` f32 values at `ptr` in the sessions' device memory, written on a stream the
    /// sessions were ordered after ([`Sessions::after`](super::Sessions::after)).
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
    host: Vec<f32>,
    halves: Vec<u16>,
}

/// One batch size's session with its bound buffers.
pub(super) struct Bound {
    pub rows: usize,
    /// The binding refers to the buffers below (it holds them too).
    binding: IoBinding,
    session: Session,
    _input: DynTensor,
    input_ptr: u64,
    /// Input values per row.
    per_row: usize,
    outs: Vec<Out>,
    /// Bring the outputs back to the host after each run.
    download: bool,
}

impl Bound {
    /// Bind `session`'s input `input` (f32) and `outputs` (f32 or f16, every dimension but the
    /// batch fixed) to buffers of `rows` rows on CUDA device `device`.
    pub fn new(
        session: Session,
        device: i32,
        rows: usize,
        input: &str,
        outputs: &[&str],
        download: bool,
    ) -> Result<Bound, String> {
        let item =
            |name: &str, ty: &ValueType| -> Result<(TensorElementType, Vec<usize>), String> {
                let ValueType::Tensor { ty, shape, .. } = ty else {
                    return Err(format!("'{name}' is not a tensor"));
                };
                let dims: Vec<i64> = shape.iter().copied().collect();
                if dims.is_empty() || dims[1..].iter().any(|&d| d <= 0) {
                    return Err(format!(
                    "'{name}' {dims:?}: fixed batch sizes need every dimension but the batch fixed"
                ));
                }
                let mut s = vec![rows];
                s.extend(dims[1..].iter().map(|&d| d as usize));
                Ok((*ty, s))
            };
        let find = |list: Vec<(String, ValueType)>, name: &str| {
            list.into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t)
                .ok_or_else(|| format!("no tensor '{name}'"))
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
        if in_ty != TensorElementType::Float32 {
            return Err(format!(
                "input '{input}' is {in_ty:?}: bound runs take float32"
            ));
        }
        let e = |e: ort::Error| e.to_string();
        let info = MemoryInfo::new(
            AllocationDevice::CUDA,
            device,
            AllocatorType::Device,
            MemoryType::Default,
        )
        .map_err(e)?;
        let alloc = Allocator::new(&session, info).map_err(e)?;
        let mut input_t =
            DynTensor::new(&alloc, TensorElementType::Float32, in_shape.clone()).map_err(e)?;
        let input_ptr = input_t.data_ptr_mut() as u64;
        let mut binding = session.create_binding().map_err(e)?;
        binding.bind_input(input, &input_t).map_err(e)?;
        let mut bound = Vec::with_capacity(outputs.len());
        for &name in outputs {
            let (ty, shape) = item(name, &find(outs.clone(), name)?)?;
            let f16 = match ty {
                TensorElementType::Float32 => false,
                TensorElementType::Float16 => true,
                t => {
                    return Err(format!(
                        "output '{name}' is {t:?}: float32 or float16 needed"
                    ))
                }
            };
            let mut value = DynTensor::new(&alloc, ty, shape.clone()).map_err(e)?;
            let ptr = value.data_ptr_mut() as u64;
            binding.bind_output(name, &mut value).map_err(e)?;
            let len: usize = if download { shape.iter().product() } else { 0 };
            bound.push(Out {
                _value: value,
                ptr,
                shape,
                f16,
                host: vec![0.0; len],
                halves: if f16 { vec![0; len] } else { Vec::new() },
            });
        }
        Ok(Bound {
            rows,
            binding,
            session,
            _input: input_t,
            input_ptr,
            per_row: in_shape[1..].iter().product(),
            outs: bound,
            download,
        })
    }

    /// Run the first `n` rows of `input` (the rest of the size's rows hold what they held) and,
    /// with `download`, bring the outputs back to the host; otherwise they are left on the
    /// device, written on `stream`.
    pub fn run(
        &mut self,
        stream: &CudaStream,
        n: usize,
        input: FixedInput<'_>,
    ) -> Result<Vec<FixedOutput<'_>>, String> {
        let len = n * self.per_row;
        if n > self.rows {
            return Err(format!("{n} rows for a batch of {}", self.rows));
        }
        let cu_err = |e: cudarc::driver::DriverError| format!("CUDA: {e:?}");
        stream.context().bind_to_thread().map_err(cu_err)?;
        let s = stream.cu_stream();
        match input {
            _ if len == 0 => {}
            FixedInput::Host(v) => {
                let src = v.get(..len).ok_or_else(|| {
                    format!("the input holds {} values, {n} rows need {len}", v.len())
                })?;
                // SAFETY: the bound input holds `rows * per_row >= len` f32 values; the copy is
                // queued on the stream the run follows, and `src` outlives it (pageable host
                // memory: the call returns once the values are staged).
                unsafe { cu::memcpy_htod_async(self.input_ptr, src, s) }.map_err(cu_err)?;
            }
            FixedInput::Device { ptr, len: have } => {
                if have < len {
                    return Err(format!(
                        "the input holds {have} values, {n} rows need {len}"
                    ));
                }
                // SAFETY: both buffers hold at least `len` f32 values on this device; the
                // copy is queued on the stream the run follows.
                unsafe { cu::memcpy_dtod_async(self.input_ptr, ptr, len * 4, s) }
                    .map_err(cu_err)?;
            }
        }
        // ONNX Runtime runs on `stream` (the sessions' compute stream), after the copy.
        self.session
            .run_binding(&self.binding)
            .map_err(|e| e.to_string())?;
        if self.download {
            for o in &mut self.outs {
                if o.f16 {
                    // SAFETY: the bound output holds `halves.len()` f16 values; synchronized
                    // below before they are read.
                    unsafe { cu::memcpy_dtoh_async(&mut o.halves, o.ptr, s) }.map_err(cu_err)?;
                } else {
                    // SAFETY: as above, f32.
                    unsafe { cu::memcpy_dtoh_async(&mut o.host, o.ptr, s) }.map_err(cu_err)?;
                }
            }
            stream.synchronize().map_err(cu_err)?;
            for o in self.outs.iter_mut().filter(|o| o.f16) {
                for (d, &h) in o.host.iter_mut().zip(&o.halves) {
                    *d = f16_to_f32(h);
                }
            }
        }
        Ok(self
            .outs
            .iter()
            .map(|o| FixedOutput {
                shape: &o.shape,
                data: &o.host,
                device: o.ptr,
                f16: o.f16,
            })
            .collect())
    }
}
