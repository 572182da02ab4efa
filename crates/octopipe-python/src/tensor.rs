//! A batch's tensor in Python: the preprocess stage's values, handed over without a copy
//! through DLPack (`__dlpack__` / `__dlpack_device__`, dlpark) and the array interfaces
//! (`__array_interface__` on the host, `__cuda_array_interface__` on a GPU). Writable.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyAttributeError, PyBufferError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use dlpark::allocation::dynamic;
use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
};
use dlpark::metadata::Dynamic;
use dlpark::python::{CudaStreamRequest, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use octopipe::tensor::{DType, Layout, TensorData};

/// The values, kept alive while Python (an array, a capsule, a torch tensor) refers to them.
struct Held {
    /// The tensor; its values are never read or written from Rust once held.
    tensor: octopipe::Tensor,
    /// Address of element 0 (host or device).
    ptr: u64,
    /// `Some(gpu)` for device memory.
    device: Option<usize>,
    /// The stream the values were written on (device memory).
    stream: u64,
    /// Streams consumers said they read on (`__dlpack__(stream=...)`): before the memory goes
    /// back to its producer's pool, the producer's stream waits for them.
    consumers: Mutex<Vec<u64>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(device) = self.device else { return };
        let consumers = self
            .consumers
            .get_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        for c in consumers {
            // The producer's next write to this memory (on its stream) waits for the reads
            // queued on the consumer's stream; no host wait.
            if octopipe_cuda::order_streams(device, self.stream, c).is_err() {
                // Then wait here: the memory must not be written while it is read.
                let _ = octopipe_cuda::sync_stream(device, c);
            }
        }
        // `tensor` drops now, giving device memory back to its pool.
    }
}

/// The preprocessed crops of a batch: `float32` (or `float16`) values, `[rows, 3, h, w]`
/// (`nchw`) or `[rows, h, w, 3]` (`nhwc`) when every crop has the same size, `[elements]` for a
/// ragged batch (`Batch.rows` says where each crop starts). In host memory (NumPy:
/// `numpy.asarray(t)`, `numpy.from_dlpack(t)`) or on a GPU (`torch.from_dlpack(t)`,
/// `cupy.asarray(t)`), as the preprocess stage left it; every view shares the memory, which
/// stays alive while any of them does. Writable.
#[pyclass(frozen, module = "octopipe")]
pub struct Tensor {
    held: Arc<Held>,
}

impl Tensor {
    /// Take `tensor` over.
    pub fn new(mut tensor: octopipe::Tensor) -> Self {
        let (ptr, device, stream) = match &mut tensor.data {
            TensorData::Host(h) => (h.bytes_mut().as_mut_ptr() as u64, None, 0),
            TensorData::Device(d) => (d.ptr(), Some(d.device()), d.stream()),
        };
        if tensor.shape.iter().product::<usize>() != tensor.len() {
            tensor.shape = vec![tensor.len()];
        }
        Tensor {
            held: Arc::new(Held {
                tensor,
                ptr,
                device,
                stream,
                consumers: Mutex::new(Vec::new()),
            }),
        }
    }

    fn t(&self) -> &octopipe::Tensor {
        &self.held.tensor
    }

    fn dl_device(&self) -> DLDevice {
        match self.held.device {
            Some(d) => DLDevice::cuda(d as i32),
            None => DLDevice::CPU,
        }
    }

    fn typestr(&self) -> &'static str {
        match self.t().dtype {
            DType::F32 => "<f4",
            DType::F16 => "<f2",
        }
    }

    /// The array interface dict (`version` 3) shared by both interfaces.
    fn interface<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", pyo3::types::PyTuple::new(py, &self.t().shape)?)?;
        d.set_item("typestr", self.typestr())?;
        d.set_item("data", (self.held.ptr, false))?;
        d.set_item("strides", py.None())?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// A fresh managed tensor over the values, owning a reference to them.
    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.t().shape.iter().map(|&d| d as i64).collect();
        let prepared = Dynamic::compact(shape)
            .prepare_as::<M>()
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        let mut init: dynamic::Initialized<M> = prepared.initialize(self.held.clone());
        init.set_data(self.held.ptr as *mut std::ffi::c_void)
            .set_device(self.dl_device())
            .set_dtype(DLDataType {
                code: DLDataTypeCode::FLOAT,
                bits: (self.t().dtype.size() * 8) as u8,
                lanes: 1,
            });
        // SAFETY: the data pointer covers the shape's elements (compact strides, set by the
        // metadata builder), owned by `held`, which the managed tensor keeps alive; the memory
        // is writable (no READ_ONLY flag).
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for Tensor {
    fn device(&self) -> DLDevice {
        self.dl_device()
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let Some(device) = self.held.device else {
            return Ok(());
        };
        // The consumer's stream: its reads are ordered after our writes, and the memory does
        // not go back to its pool before they are done.
        let consumer = match request.cuda_stream()? {
            CudaStreamRequest::NoSync => return Ok(()),
            CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => 1,
            CudaStreamRequest::PerThreadDefault => 2,
            CudaStreamRequest::Pointer(p) => p as u64,
        };
        octopipe_cuda::order_streams(device, consumer, self.held.stream)
            .map_err(|e| PyBufferError::new_err(format!("cuda:{device}: {e}")))?;
        if let Ok(mut c) = self.held.consumers.lock() {
            if !c.contains(&consumer) {
                c.push(consumer);
            }
        }
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

#[pymethods]
impl Tensor {
    /// The shape: `(rows, 3, h, w)`, `(rows, h, w, 3)`, or `(elements,)` for a ragged batch.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.t().shape.clone()
    }

    /// `'float32'` or `'float16'`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.t().dtype {
            DType::F32 => "float32",
            DType::F16 => "float16",
        }
    }

    /// `'nchw'` or `'nhwc'`: how each crop's values are laid out.
    #[getter]
    fn layout(&self) -> &'static str {
        match self.t().layout {
            Layout::Nchw => "nchw",
            Layout::Nhwc => "nhwc",
        }
    }

    /// `'cpu'` or `'cuda:N'`.
    #[getter]
    fn device(&self) -> String {
        match self.held.device {
            Some(d) => format!("cuda:{d}"),
            None => "cpu".into(),
        }
    }

    /// Address of element 0 (host or device): every zero-copy view has this data pointer.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.held.ptr
    }

    /// Size of the values in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.t().len() * self.t().dtype.size()
    }

    /// DLPack export (the Python array API): a capsule sharing the memory. `stream` is the
    /// consumer's CUDA stream, ordered after the preprocess stage's writes.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        dlpark::python::export_dlpack(self, py, request)
    }

    /// `(device type, device id)`: `(1, 0)` for host memory, `(2, N)` for CUDA GPU N.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = self.dl_device();
        (d.device_type.0, d.device_id)
    }

    /// NumPy's array interface (host memory only).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.held.device.is_some() {
            return Err(PyAttributeError::new_err(
                "the tensor is in GPU memory: use __cuda_array_interface__ or __dlpack__",
            ));
        }
        self.interface(py)
    }

    /// The CUDA array interface (version 3; GPU memory only), with the stream the values were
    /// written on.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.held.device.is_none() {
            return Err(PyAttributeError::new_err(
                "the tensor is in host memory: use __array_interface__ or __dlpack__",
            ));
        }
        let d = self.interface(py)?;
        let stream = self.held.stream;
        d.set_item("stream", if stream == 0 { None } else { Some(stream) })?;
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.t().shape.first().copied().unwrap_or(0)
    }

    pub(crate) fn __repr__(&self) -> String {
        format!(
            "Tensor(shape={:?}, dtype={}, layout={}, device={})",
            self.t().shape,
            self.dtype(),
            self.layout(),
            self.device()
        )
    }
}
