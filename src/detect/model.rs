//! The detector model: what its input takes and its output gives, read from the model, and one
//! run of it on some of a frame's regions.

use ort::memory::Allocator;
use ort::session::Session;

use crate::onnx::Sessions;
use ort::value::{DynTensor, DynTensorValueType, TensorElementType, TensorRef, ValueType};

use super::{Decoder, DetectConfig, DetectError};
use crate::preprocess::{f16_to_f32, DType, Layout};
use crate::tensor::TensorData;

/// What the model's input and output are.
#[derive(Debug, Clone)]
pub(super) struct Io {
    /// The input's name.
    pub input: String,
    /// The input's (width, height).
    pub size: (u32, u32),
    /// The input's layout.
    pub layout: Layout,
    /// The input's element type.
    pub dtype: DType,
    /// The fixed batch size, if the model has one.
    pub batch: Option<usize>,
    /// The output read.
    pub output: String,
    /// Its element type.
    pub output_dtype: DType,
    /// How it is read.
    pub decoder: Decoder,
}

/// A loaded detector model.
pub(super) struct Model {
    pub sessions: Sessions,
    /// Its input and output.
    pub io: Io,
}

impl Model {
    /// Load `config.model` and read its input and output.
    pub fn open(config: &DetectConfig) -> Result<Self, DetectError> {
        let sessions = Sessions::open(&config.model, config.ort_threads, config.ep)?;
        let io = model_io(sessions.first(), config).map_err(|reason| DetectError::Model {
            path: config.model.display().to_string(),
            reason,
        })?;
        Ok(Model { sessions, io })
    }

    /// Run regions `start..start + n` of `tensor` (each one model input) through the model and
    /// hand `read` the output's shape and values, f32 whatever the model gives; what `read`
    /// returns is returned.
    pub fn run<R>(
        &mut self,
        tensor: &TensorData,
        start: usize,
        n: usize,
        read: impl FnOnce(&[usize], &[f32]) -> R,
    ) -> Result<R, String> {
        let io = &self.io;
        let (w, h) = (io.size.0 as usize, io.size.1 as usize);
        let per = w * h * 3;
        let shape = match io.layout {
            Layout::Nchw => [n, 3, h, w],
            Layout::Nhwc => [n, h, w, 3],
        };
        let range = start * per..(start + n) * per;
        let name = io.input.as_str();
        // Batches of one size per session: on CUDA a new size would plan every convolution anew.
        let session = self.sessions.get(n).map_err(|e| e.to_string())?;
        let outputs = match tensor {
            TensorData::F32(v) => {
                let t =
                    TensorRef::from_array_view((shape, &v[range])).map_err(|e| e.to_string())?;
                session.run(ort::inputs![name => t])
            }
            TensorData::F16(v) => {
                let mut t =
                    DynTensor::new(&Allocator::default(), TensorElementType::Float16, shape)
                        .map_err(|e| e.to_string())?;
                let src = &v[range];
                // SAFETY: the tensor was just allocated in CPU memory with `src.len()` f16 elements.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        t.data_ptr_mut().cast::<u16>(),
                        src.len(),
                    )
                };
                session.run(ort::inputs![name => t])
            }
            TensorData::Device(d) if io.dtype == DType::F32 && d.len >= range.end => {
                // SAFETY: the tensor holds `range.end` f32 elements on `d.device`, alive (in
                // the caller's batch) for the run.
                let t = unsafe {
                    crate::onnx::cuda_input(d.ptr + range.start as u64 * 4, d.device, &shape)
                }
                .map_err(|e| e.to_string())?;
                session.run(ort::inputs![name => t])
            }
            TensorData::Device(d) => {
                return Err(format!(
                    "the tiles' tensor ({} elements in device memory) does not hold regions {start}..{} as the model's f32 input",
                    d.len,
                    start + n
                ))
            }
        }
        .map_err(|e| e.to_string())?;
        let value = &outputs[io.output.as_str()];
        let (oshape, data): (Vec<usize>, std::borrow::Cow<[f32]>) = match io.output_dtype {
            DType::F32 => {
                let (s, d) = value
                    .try_extract_tensor::<f32>()
                    .map_err(|e| e.to_string())?;
                (s.iter().map(|&x| x as usize).collect(), d.into())
            }
            DType::F16 => {
                let t = value
                    .view()
                    .downcast::<DynTensorValueType>()
                    .map_err(|e| e.to_string())?;
                let s: Vec<usize> = t.shape().iter().map(|&x| x as usize).collect();
                let len: usize = s.iter().product();
                // SAFETY: an f16 CPU tensor of `len` elements, read while `outputs` lives.
                let halves = unsafe { std::slice::from_raw_parts(t.data_ptr().cast::<u16>(), len) };
                (
                    s,
                    halves
                        .iter()
                        .map(|&x| f16_to_f32(x))
                        .collect::<Vec<f32>>()
                        .into(),
                )
            }
        };
        let images = match (io.decoder, oshape.len()) {
            (Decoder::End2End, 2) => 1,
            _ => oshape[0],
        };
        if images != n {
            return Err(format!(
                "output '{}' has shape {oshape:?}: {images} images for a batch of {n}",
                io.output
            ));
        }
        Ok(read(&oshape, &data))
    }
}

/// Read the model's input (rank 4, 3 channels, f32 or f16; the layout from where the 3 is) and
/// pick its output and decoder.
fn model_io(session: &Session, config: &DetectConfig) -> Result<Io, String> {
    let input = session.inputs().first().ok_or("has no inputs")?;
    let name = input.name().to_string();
    let ValueType::Tensor { ty, shape, .. } = input.dtype() else {
        return Err(format!("input '{name}' is not a tensor"));
    };
    let dtype = element(*ty)
        .ok_or_else(|| format!("input '{name}' is {ty:?}: a float32 or float16 image is needed"))?;
    let layout = match &shape[..] {
        [_, 3, _, _] => Layout::Nchw,
        [_, _, _, 3] => Layout::Nhwc,
        _ => {
            return Err(format!(
                "input '{name}' is {:?}: an image [batch, 3, height, width] or [batch, height, width, 3] is needed",
                &shape[..]
            ))
        }
    };
    let (h, w) = match layout {
        Layout::Nchw => (shape[2], shape[3]),
        Layout::Nhwc => (shape[1], shape[2]),
    };
    let fixed = (w > 0 && h > 0).then_some((w as u32, h as u32));
    let size = match (fixed, config.size) {
        (Some(m), Some(s)) if m != s => {
            return Err(format!(
                "input '{name}' is {}x{}, but size={}x{} was given (leave size unset)",
                m.0, m.1, s.0, s.1
            ))
        }
        (Some(m), _) => m,
        (None, Some(s)) => s,
        (None, None) => {
            return Err(format!(
                "input '{name}' has a dynamic size {:?}: set detect size=WxH",
                &shape[..]
            ))
        }
    };
    let outputs: Vec<(String, Vec<i64>, Option<DType>)> = session
        .outputs()
        .iter()
        .map(|o| match o.dtype() {
            ValueType::Tensor { ty, shape, .. } => {
                (o.name().to_string(), shape.to_vec(), element(*ty))
            }
            _ => (o.name().to_string(), Vec::new(), None),
        })
        .collect();
    let listed = || {
        outputs
            .iter()
            .map(|(n, s, _)| format!("'{n}' {s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fits = |s: &[i64]| match config.decoder {
        Some(d) => d.check(s).is_ok(),
        None => Decoder::detect(s).is_some(),
    };
    let (out_name, out_shape, out_dtype) = match &config.output {
        Some(want) => outputs
            .iter()
            .find(|(n, _, _)| n == want)
            .ok_or_else(|| format!("has no output '{want}' (outputs: {})", listed()))?,
        None => outputs.iter().find(|(_, s, _)| fits(s)).ok_or_else(|| {
            format!(
                "no output reads as detections with decoder={} (outputs: {}); set decoder= and output=",
                config.decoder.map_or("auto", Decoder::name),
                listed()
            )
        })?,
    };
    let decoder = match config.decoder {
        Some(d) => d,
        None => Decoder::detect(out_shape).ok_or_else(|| {
            format!("output '{out_name}' {out_shape:?} fits no decoder: set decoder=end2end|yolov8|yolov5")
        })?,
    };
    decoder
        .check(out_shape)
        .map_err(|e| format!("output '{out_name}' is {out_shape:?}: {e}"))?;
    let output_dtype = out_dtype
        .ok_or_else(|| format!("output '{out_name}' is not a float32 or float16 tensor"))?;
    Ok(Io {
        input: name,
        size,
        layout,
        dtype,
        batch: (shape[0] > 0).then_some(shape[0] as usize),
        output: out_name.clone(),
        output_dtype,
        decoder,
    })
}

fn element(ty: TensorElementType) -> Option<DType> {
    match ty {
        TensorElementType::Float32 => Some(DType::F32),
        TensorElementType::Float16 => Some(DType::F16),
        _ => None,
    }
}
