//! A pushed image as the pipeline's frame: a host array (NumPy's `__array_interface__`, or any
//! CPU `__dlpack__` producer) is copied once into the frame; a CUDA tensor (`__dlpack__`, or
//! `__cuda_array_interface__`) is taken where it is, without a copy, and kept alive until the
//! pipeline is done with it.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use dlpark::ffi::{DLDataTypeCode, DLDeviceType};
use dlpark::python::consumer::stream as dl_stream;
use dlpark::python::{DlpackStream, ImportRequest, ImportedDlpack, StreamArg};
use octopipe::{AppFrame, DeviceBuffer, DeviceFrame, FrameLayout, PixelFormat};

/// The shapes an image may have, for messages.
const SHAPES: &str = "an HxWx3 (RGB, BGR) or HxWx4 (RGBA, BGRA) uint8 array, or a 2-D one with \
                      format= (gray8: HxW; gray16: HxW uint16; nv12, i420: (H*3/2)xW)";

/// Where a pipeline takes device images: its preprocess stage's GPU, or why it takes none.
pub type DevicePolicy = Result<usize, String>;

/// Make the frame of `image` (in `format`, or the one its shape says).
pub fn app_frame(
    image: &Bound<'_, PyAny>,
    format: Option<&str>,
    device: &DevicePolicy,
) -> PyResult<AppFrame> {
    if let Some((kind, id)) = dlpack_device(image)? {
        match kind {
            DLDeviceType::CPU | DLDeviceType::CUDAHOST => {}
            DLDeviceType::CUDA | DLDeviceType::CUDAMANAGED => {
                return dlpack_device_frame(image, format, device, id)
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "image is on a {} device (DLPack device type {}): push host memory \
                     (a NumPy array) or a CUDA tensor",
                    device_name(other),
                    other.0
                )))
            }
        }
    } else if let Ok(cai) = image.getattr("__cuda_array_interface__") {
        return cai_frame(image, &cai, format, device);
    }
    if let Ok(ai) = image.getattr("__array_interface__") {
        return host_frame(&Interface::read(&ai, "__array_interface__")?, format);
    }
    if image.hasattr("__dlpack__")? {
        return dlpack_host_frame(image, format);
    }
    Err(PyTypeError::new_err(format!(
        "image must be {SHAPES} (a NumPy array, or a CUDA tensor with __dlpack__ or \
         __cuda_array_interface__), found {}",
        type_name(image)
    )))
}

/// `type(obj).__name__`.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The object's `__dlpack_device__()`, if it has one.
fn dlpack_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<(DLDeviceType, i32)>> {
    let Ok(f) = obj.getattr("__dlpack_device__") else {
        return Ok(None);
    };
    let (kind, id): (u32, i32) = f.call0()?.extract()?;
    Ok(Some((DLDeviceType(kind), id)))
}

fn device_name(kind: DLDeviceType) -> &'static str {
    match kind {
        DLDeviceType::OPENCL => "OpenCL",
        DLDeviceType::VULKAN => "Vulkan",
        DLDeviceType::METAL => "Metal",
        DLDeviceType::ROCM | DLDeviceType::ROCMHOST => "ROCm",
        DLDeviceType::ONEAPI => "oneAPI",
        DLDeviceType::WEBGPU => "WebGPU",
        _ => "non-CUDA",
    }
}

/// The frame layout of an image of `shape` (uint8 elements), in `format` or the one its shape
/// implies.
fn layout_of(shape: &[usize], format: Option<&str>) -> PyResult<FrameLayout> {
    let named = match format.map(|f| f.to_ascii_lowercase()) {
        None => None,
        Some(f) => Some(match f.as_str() {
            "rgb" => PixelFormat::Rgb,
            "bgr" => PixelFormat::Bgr,
            "rgba" => PixelFormat::Rgba,
            "bgra" => PixelFormat::Bgra,
            "nv12" => PixelFormat::Nv12,
            "i420" => PixelFormat::I420,
            "gray8" => PixelFormat::Gray8,
            "gray16" => PixelFormat::Gray16,
            other => {
                return Err(PyValueError::new_err(format!(
                    "format '{other}' is not one of rgb, bgr, rgba, bgra, nv12, i420, gray8, gray16"
                )))
            }
        }),
    };
    let bad = || {
        PyValueError::new_err(format!(
            "image must be {SHAPES}{}, found shape {}",
            named
                .map(|f| format!(" (format {f:?})"))
                .unwrap_or_default(),
            shape_text(shape)
        ))
    };
    let dim = |v: usize| u32::try_from(v).map_err(|_| bad());
    let (format, w, h) = match *shape {
        [h, w, c] => {
            let format = match (c, named) {
                (3, None | Some(PixelFormat::Rgb)) => PixelFormat::Rgb,
                (3, Some(PixelFormat::Bgr)) => PixelFormat::Bgr,
                (4, None | Some(PixelFormat::Rgba)) => PixelFormat::Rgba,
                (4, Some(PixelFormat::Bgra)) => PixelFormat::Bgra,
                (1, Some(f @ (PixelFormat::Gray8 | PixelFormat::Gray16))) => f,
                _ => return Err(bad()),
            };
            (format, dim(w)?, dim(h)?)
        }
        // A 2-D array is a grey frame or stacked YUV planes: which, only `format` says.
        [h, w] if matches!(named, Some(PixelFormat::Gray8 | PixelFormat::Gray16)) => {
            (named.expect("matched"), dim(w)?, dim(h)?)
        }
        [rows, w] => {
            let format = match named {
                Some(PixelFormat::Nv12) => PixelFormat::Nv12,
                Some(PixelFormat::I420) => PixelFormat::I420,
                None => {
                    return Err(PyValueError::new_err(format!(
                        "a 2-D image (shape {}) is read only as format= says, never guessed: \
                         pass format=\"gray8\" for a greyscale frame {w} wide and {rows} high, or \
                         format=\"nv12\" or \"i420\" for YUV 4:2:0 planes stacked as \
                         (H*3/2)xW rows",
                        shape_text(shape)
                    )))
                }
                _ => return Err(bad()),
            };
            if rows % 3 != 0 || (rows / 3 * 2) % 2 != 0 || w % 2 != 0 {
                return Err(PyValueError::new_err(format!(
                    "a {format:?} image is a (H*3/2)xW uint8 array with H and W even, found \
                     shape {}",
                    shape_text(shape)
                )));
            }
            (format, dim(w)?, dim(rows / 3 * 2)?)
        }
        _ => return Err(bad()),
    };
    if w == 0 || h == 0 {
        return Err(PyValueError::new_err(format!(
            "image has no pixels (shape {})",
            shape_text(shape)
        )));
    }
    Ok(FrameLayout::packed(format, w, h))
}

fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

/// Refuse strides that are not C order (`strides` in units of `unit` bytes).
fn check_contiguous(shape: &[usize], strides: Option<&[i64]>, unit: &str) -> PyResult<()> {
    let Some(strides) = strides else {
        return Ok(());
    };
    let mut want = vec![0i64; shape.len()];
    let mut step = 1i64;
    for i in (0..shape.len()).rev() {
        want[i] = step;
        step = step.saturating_mul(shape[i] as i64);
    }
    // A dimension of 1 may carry any stride.
    let fits = shape
        .iter()
        .zip(strides.iter().zip(&want))
        .all(|(&n, (s, w))| n <= 1 || s == w);
    if fits && strides.len() == shape.len() {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "image is not C-contiguous (strides {strides:?} {unit}; a contiguous array of shape {} \
         has {want:?}): pass numpy.ascontiguousarray(image) (torch: image.contiguous())",
        shape_text(shape)
    )))
}

/// A type string's NumPy name (`<f4` is float32).
fn dtype_name(typestr: &str) -> String {
    let bytes: u32 = typestr.get(2..).and_then(|b| b.parse().ok()).unwrap_or(0);
    match typestr.chars().nth(1) {
        Some('b') => "bool".into(),
        Some('i') => format!("int{}", bytes * 8),
        Some('u') => format!("uint{}", bytes * 8),
        Some('f') => format!("float{}", bytes * 8),
        Some('c') => format!("complex{}", bytes * 8),
        _ => format!("'{typestr}'"),
    }
}

/// A DLPack element type's name.
fn dl_dtype_name(code: DLDataTypeCode, bits: u8, lanes: u16) -> String {
    let base = match code {
        DLDataTypeCode::INT => format!("int{bits}"),
        DLDataTypeCode::UINT => format!("uint{bits}"),
        DLDataTypeCode::FLOAT => format!("float{bits}"),
        DLDataTypeCode::BFLOAT => format!("bfloat{bits}"),
        DLDataTypeCode::BOOL => "bool".into(),
        DLDataTypeCode::COMPLEX => format!("complex{bits}"),
        other => format!("DLPack type code {} ({bits} bits)", other.0),
    };
    match lanes {
        1 => base,
        n => format!("{base}x{n}"),
    }
}

/// The fields of an `__array_interface__` or `__cuda_array_interface__` dict.
pub struct Interface {
    pub ptr: usize,
    pub shape: Vec<usize>,
    /// Byte strides, when not C order.
    pub strides: Option<Vec<i64>>,
    pub typestr: String,
    /// `__cuda_array_interface__`'s stream (v3): the stream the producer wrote on.
    pub stream: Option<u64>,
}

impl Interface {
    pub fn read(d: &Bound<'_, PyAny>, what: &str) -> PyResult<Interface> {
        let d = d
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err(format!("{what} is not a dict")))?;
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            d.get_item(key)?
                .ok_or_else(|| PyTypeError::new_err(format!("{what} has no '{key}'")))
        };
        let data = get("data")?;
        let ptr: usize = match data.cast::<PyTuple>() {
            Ok(t) if t.len() == 2 => t.get_item(0)?.extract()?,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "{what}: 'data' must be a (pointer, read-only) tuple"
                )))
            }
        };
        let strides = match d.get_item("strides")? {
            Some(s) if !s.is_none() => Some(s.extract::<Vec<i64>>()?),
            _ => None,
        };
        let stream = match d.get_item("stream")? {
            Some(s) if !s.is_none() => Some(s.extract::<u64>()?),
            _ => None,
        };
        Ok(Interface {
            ptr,
            shape: get("shape")?.extract()?,
            strides,
            typestr: get("typestr")?.extract()?,
            stream,
        })
    }

    /// Check it is a C-contiguous uint8 image (little-endian uint16 for `gray16`); its layout.
    fn image_layout(&self, format: Option<&str>) -> PyResult<FrameLayout> {
        if is_gray16(format) {
            if self.typestr != "<u2" {
                return Err(PyTypeError::new_err(format!(
                    "format gray16 takes a little-endian uint16 array, found {} ({})",
                    dtype_name(&self.typestr),
                    self.typestr
                )));
            }
        } else if self.typestr != "|u1" && self.typestr != "<u1" && self.typestr != ">u1" {
            return Err(PyTypeError::new_err(format!(
                "image must be uint8, found {} (convert with image.astype(numpy.uint8) after \
                 scaling to 0..255)",
                dtype_name(&self.typestr)
            )));
        }
        let layout = layout_of(&self.shape, format)?;
        let unit = if is_gray16(format) { 2 } else { 1 };
        let strides = self
            .strides
            .as_ref()
            // A stride that is not a whole number of elements is never contiguous.
            .map(|s| {
                s.iter()
                    .map(|b| if b % unit == 0 { b / unit } else { -1 })
                    .collect::<Vec<i64>>()
            });
        check_contiguous(&self.shape, strides.as_deref(), "elements")?;
        Ok(layout)
    }
}

/// Whether `format` names 16-bit grey.
fn is_gray16(format: Option<&str>) -> bool {
    format.is_some_and(|f| f.eq_ignore_ascii_case("gray16"))
}

/// A host image copied from the memory its array interface describes.
fn host_frame(ai: &Interface, format: Option<&str>) -> PyResult<AppFrame> {
    let layout = ai.image_layout(format)?;
    // The array's bytes: its elements (checked above to be the layout's pixels) times their size.
    let len = layout.size();
    // SAFETY: the array interface promises `len` bytes at `ptr` (C order, checked above), and
    // the caller holds the array (and the GIL) while they are copied.
    let data = copy(unsafe { std::slice::from_raw_parts(ai.ptr as *const u8, len) })?;
    Ok(AppFrame::host(layout, data))
}

/// Check an imported DLPack tensor is a C-contiguous uint8 image; its layout, data pointer and
/// byte count.
fn dlpack_image(t: &ImportedDlpack, format: Option<&str>) -> PyResult<(FrameLayout, u64, usize)> {
    let r = t
        .validate()
        .map_err(|e| PyValueError::new_err(format!("image: {e}")))?;
    let dt = r.dtype();
    let bits = if is_gray16(format) { 16 } else { 8 };
    if (dt.code, dt.bits, dt.lanes) != (DLDataTypeCode::UINT, bits, 1) {
        return Err(PyTypeError::new_err(format!(
            "image must be uint{bits}, found {}",
            dl_dtype_name(dt.code, dt.bits, dt.lanes)
        )));
    }
    let shape: Vec<usize> = r.shape().iter().map(|&d| d.max(0) as usize).collect();
    let layout = layout_of(&shape, format)?;
    check_contiguous(&shape, r.strides(), "elements")?;
    let ptr = r.data_ptr() as u64 + r.byte_offset();
    Ok((layout, ptr, r.num_bytes()))
}

/// A host image from a CPU `__dlpack__` producer (a torch CPU tensor), copied.
fn dlpack_host_frame(image: &Bound<'_, PyAny>, format: Option<&str>) -> PyResult<AppFrame> {
    let t = dlpark::python::from_dlpack(image.as_borrowed(), None, None)?;
    let (layout, ptr, len) = dlpack_image(&t, format)?;
    // SAFETY: the validated tensor holds `len` bytes at `ptr` in host memory, alive while `t`.
    let data = copy(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })?;
    Ok(AppFrame::host(layout, data))
}

/// A copy of an image's bytes, allocated fallibly: memory the system refuses is a
/// `MemoryError` naming the bytes, not an abort of the interpreter.
fn copy(bytes: &[u8]) -> PyResult<Vec<u8>> {
    let mut data = Vec::new();
    data.try_reserve_exact(bytes.len()).map_err(|_| {
        let e = octopipe::alloc::AllocError::of::<u8>(bytes.len());
        pyo3::exceptions::PyMemoryError::new_err(format!("image: its copy {e}"))
    })?;
    data.extend_from_slice(bytes);
    Ok(data)
}

/// Check the pipeline takes device images and the image's GPU is there.
fn check_device(policy: &DevicePolicy, id: i32) -> PyResult<usize> {
    let at = format!("image is on cuda:{id}");
    let want = policy
        .as_ref()
        .map_err(|why| PyValueError::new_err(format!("{at}, but {why}")))?;
    let count = octopipe_cuda::device_count().map_err(|why| {
        PyValueError::new_err(format!(
            "{at}, but this machine has no usable GPU ({why}): push a host (NumPy) array"
        ))
    })?;
    let id =
        usize::try_from(id).map_err(|_| PyValueError::new_err(format!("{at}: no such GPU")))?;
    if id >= count {
        return Err(PyValueError::new_err(format!(
            "{at}, but the driver reports {count} GPUs"
        )));
    }
    if id != *want {
        return Err(PyValueError::new_err(format!(
            "{at}, but the pipeline's preprocess stage runs on cuda:{want} (preprocess device=)"
        )));
    }
    Ok(id)
}

/// The consumer stream asked for in `__dlpack__(stream=...)`: CUDA's legacy default stream,
/// which the frame then names as the stream its planes were written on; the preprocess engine
/// orders its reads after an event recorded there.
struct LegacyStream;

// SAFETY: the legacy default stream sentinel (1) is always a valid CUDA stream argument.
unsafe impl DlpackStream for LegacyStream {
    fn as_python_arg(
        &self,
        _py: Python<'_>,
        _device: dlpark::ffi::DLDevice,
    ) -> PyResult<StreamArg> {
        Ok(dl_stream::cuda(std::ptr::null_mut()))
    }
}

/// CUDA's legacy default stream handle (`CU_STREAM_LEGACY`).
const CU_STREAM_LEGACY: u64 = 1;

/// Keeps a DLPack tensor alive while the pipeline reads it; its deleter runs when the frame
/// releases its planes.
struct DlpackOwner(#[allow(dead_code)] ImportedDlpack);

/// Keeps a `__cuda_array_interface__` object alive while the pipeline reads it.
struct ObjectOwner(#[allow(dead_code)] Py<PyAny>);

/// A CUDA image from a `__dlpack__` producer (a torch CUDA tensor), without a copy.
fn dlpack_device_frame(
    image: &Bound<'_, PyAny>,
    format: Option<&str>,
    policy: &DevicePolicy,
    id: i32,
) -> PyResult<AppFrame> {
    let device = check_device(policy, id)?;
    let request = ImportRequest::new(image.as_borrowed())?;
    let t = request.import(Some(&LegacyStream), None)?;
    let (layout, ptr, _) = dlpack_image(&t, format)?;
    let planes = DeviceFrame::new(DeviceBuffer::new(
        ptr,
        layout.size(),
        device,
        CU_STREAM_LEGACY,
        Box::new(DlpackOwner(t)),
    ));
    Ok(AppFrame::device(layout, planes))
}

/// A CUDA image from a `__cuda_array_interface__` producer, without a copy.
fn cai_frame(
    image: &Bound<'_, PyAny>,
    cai: &Bound<'_, PyAny>,
    format: Option<&str>,
    policy: &DevicePolicy,
) -> PyResult<AppFrame> {
    // The interface does not say which GPU; the pointer's context does. Take the pipeline's.
    let want = policy.as_ref().map(|d| *d as i32).unwrap_or(0);
    let device = check_device(policy, want)?;
    let cai = Interface::read(cai, "__cuda_array_interface__")?;
    let layout = cai.image_layout(format)?;
    let planes = DeviceFrame::new(DeviceBuffer::new(
        cai.ptr as u64,
        layout.size(),
        device,
        cai.stream.unwrap_or(0),
        Box::new(ObjectOwner(image.clone().unbind())),
    ));
    Ok(AppFrame::device(layout, planes))
}

/// `boxes` as an N x 4 array of `x, y, w, h` (None: no boxes).
pub fn boxes_of(boxes: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<[f64; 4]>> {
    let Some(boxes) = boxes.filter(|b| !b.is_none()) else {
        return Ok(Vec::new());
    };
    let py = boxes.py();
    let np = py.import("numpy")?;
    let host = to_host(boxes)?;
    let arr = np.call_method1("asarray", (host, "float64")).map_err(|e| {
        PyTypeError::new_err(format!(
            "boxes must be an Nx4 array of x, y, w, h numbers ({})",
            e.value(py)
        ))
    })?;
    let arr = np.call_method1("ascontiguousarray", (arr,))?;
    let ai = Interface::read(&arr.getattr("__array_interface__")?, "boxes")?;
    let n = match ai.shape.as_slice() {
        [0] => 0,
        [n, 4] => *n,
        s => {
            return Err(PyValueError::new_err(format!(
                "boxes must be an Nx4 array of x, y, w, h, found shape {}",
                shape_text(s)
            )))
        }
    };
    // SAFETY: a C-contiguous float64 array of n x 4 values, held by `arr` while read.
    let values = unsafe { std::slice::from_raw_parts(ai.ptr as *const f64, n * 4) };
    Ok(values
        .chunks_exact(4)
        .map(|b| [b[0], b[1], b[2], b[3]])
        .collect())
}

/// `x` as something NumPy takes: detached from autograd (`.detach()`), and in host memory
/// (`.cpu()` for a torch CUDA tensor, `.get()` for a CuPy array).
pub fn to_host<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let mut x = x.clone();
    let on_device = match x.getattr("__dlpack_device__") {
        Ok(f) => f.call0()?.extract::<(u32, i32)>()?.0 != 1,
        Err(_) => x.hasattr("__cuda_array_interface__")?,
    };
    if x.hasattr("detach")? && x.hasattr("requires_grad")? {
        x = x.call_method0("detach")?;
    }
    if on_device {
        if x.hasattr("cpu")? {
            x = x.call_method0("cpu")?;
        } else if x.hasattr("get")? {
            x = x.call_method0("get")?;
        } else {
            return Err(PyTypeError::new_err(format!(
                "cannot bring a {} from the GPU to the host: give a NumPy array",
                type_name(&x)
            )));
        }
    }
    Ok(x)
}
