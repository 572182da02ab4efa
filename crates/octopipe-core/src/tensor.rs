//! Tensors: what the preprocess stage makes of a batch's crops, in host or device memory.
//!
//! One [`Tensor`] per batch holds every crop's values packed without padding (crop `i` from
//! `CropMeta::out_offset` on), as f32 or f16, NCHW or NHWC per crop, in host memory or on a CUDA
//! device. Consumers ask where it lives ([`Tensor::memory`]) and take it there; nothing copies
//! it between host and device behind their back.

use std::fmt;

use crate::buffer::{DeviceBuffer, Memory};

/// Memory layout of each crop's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Channel planes: `[n, c, h, w]`.
    #[default]
    Nchw,
    /// Interleaved: `[n, h, w, c]`.
    Nhwc,
}

/// Element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DType {
    /// 32-bit float (what the classify stage takes).
    #[default]
    F32,
    /// IEEE half, stored as its bits (`u16`), rounded to nearest even from the f32 value.
    F16,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
        }
    }
}

/// A tensor's values in CUDA device memory: a [`DeviceBuffer`] (pointer, device, stream, the
/// owner that keeps the memory alive and returns it to its pool when dropped) read as `len`
/// elements of the tensor's dtype. The pointer, device and stream are the buffer's
/// (`d.ptr()`, `d.device()`, `d.stream()` through `Deref`).
///
/// Dropping it may hand the memory to its producer's next write: drop a tensor only once the
/// work reading it is done (the CUDA backend's outputs go back to its engine).
pub struct DeviceTensor {
    buffer: DeviceBuffer,
    len: usize,
    capacity: usize,
}

impl DeviceTensor {
    /// `len` elements at the start of `buffer`, of which `capacity` (at least `len`) may be read.
    pub fn new(buffer: DeviceBuffer, len: usize, capacity: usize) -> Self {
        debug_assert!(capacity >= len, "capacity {capacity} < len {len}");
        DeviceTensor {
            buffer,
            len,
            capacity,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements that may be read from the pointer (at least [`len`](Self::len)): room a
    /// consumer may use, e.g. to run a model on a batch padded to a fixed size. What lies past
    /// `len` is unspecified.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The memory.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

impl std::ops::Deref for DeviceTensor {
    type Target = DeviceBuffer;
    fn deref(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

impl fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceTensor({} elements in {:?})",
            self.len, self.buffer
        )
    }
}

/// A tensor's values and where they are.
#[derive(Debug)]
pub enum TensorData {
    /// f32 values in host memory.
    F32(Vec<f32>),
    /// f16 values (IEEE half bits) in host memory.
    F16(Vec<u16>),
    /// Values of the tensor's dtype on a CUDA device.
    Device(DeviceTensor),
}

impl Default for TensorData {
    fn default() -> Self {
        TensorData::F32(Vec::new())
    }
}

/// The preprocessed values of a batch's crops.
#[derive(Debug, Default)]
pub struct Tensor {
    /// The values.
    pub data: TensorData,
    /// Element type (for device data; host data says it by its variant).
    pub dtype: DType,
    /// Layout of each crop's values.
    pub layout: Layout,
    /// Shape: `[n, c, h, w]` (or `[n, h, w, c]`) when every crop has the same output size,
    /// `[elements]` otherwise (a ragged batch).
    pub shape: Vec<usize>,
}

impl Tensor {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::Device(d) => d.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the values are.
    pub fn memory(&self) -> Memory {
        match &self.data {
            TensorData::Device(d) => d.memory(),
            _ => Memory::Host,
        }
    }

    /// The f32 host values, if that is what it holds.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The f32 host values to change in place, if that is what it holds.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The f16 host values to change in place, if that is what it holds.
    pub fn as_f16_mut(&mut self) -> Option<&mut [u16]> {
        match &mut self.data {
            TensorData::F16(v) => Some(v),
            _ => None,
        }
    }

    /// The f16 host values (IEEE half bits), if that is what it holds.
    pub fn as_f16(&self) -> Option<&[u16]> {
        match &self.data {
            TensorData::F16(v) => Some(v),
            _ => None,
        }
    }

    /// The device values, if that is where they are.
    pub fn device(&self) -> Option<&DeviceTensor> {
        match &self.data {
            TensorData::Device(d) => Some(d),
            _ => None,
        }
    }

    /// A host f32 buffer of `len` elements to fill (reusing the one it holds; contents
    /// unspecified where it grew from another type).
    pub fn host_f32(&mut self, len: usize) -> &mut Vec<f32> {
        self.dtype = DType::F32;
        if !matches!(self.data, TensorData::F32(_)) {
            self.data = TensorData::F32(Vec::new());
        }
        let TensorData::F32(v) = &mut self.data else {
            unreachable!("just set to F32")
        };
        v.resize(len, 0.0);
        v
    }

    /// [`Tensor::host_f32`], its growth fallible: an allocation the system refuses (a batch
    /// too large for the memory left) is an error of the caller's batch, not an abort.
    pub fn try_host_f32(&mut self, len: usize) -> Result<&mut Vec<f32>, crate::alloc::AllocError> {
        self.dtype = DType::F32;
        if !matches!(self.data, TensorData::F32(_)) {
            self.data = TensorData::F32(Vec::new());
        }
        let TensorData::F32(v) = &mut self.data else {
            unreachable!("just set to F32")
        };
        crate::alloc::try_resize(v, len, 0.0)?;
        Ok(v)
    }

    /// [`Tensor::host_f16`], its growth fallible as [`Tensor::try_host_f32`]'s.
    pub fn try_host_f16(&mut self, len: usize) -> Result<&mut Vec<u16>, crate::alloc::AllocError> {
        self.dtype = DType::F16;
        if !matches!(self.data, TensorData::F16(_)) {
            self.data = TensorData::F16(Vec::new());
        }
        let TensorData::F16(v) = &mut self.data else {
            unreachable!("just set to F16")
        };
        crate::alloc::try_resize(v, len, 0)?;
        Ok(v)
    }

    /// A host f16 buffer of `len` elements to fill, as [`Tensor::host_f32`].
    pub fn host_f16(&mut self, len: usize) -> &mut Vec<u16> {
        self.dtype = DType::F16;
        if !matches!(self.data, TensorData::F16(_)) {
            self.data = TensorData::F16(Vec::new());
        }
        let TensorData::F16(v) = &mut self.data else {
            unreachable!("just set to F16")
        };
        v.resize(len, 0);
        v
    }

    /// Empty it, keeping a host buffer for reuse.
    pub fn clear(&mut self) {
        match &mut self.data {
            TensorData::F32(v) => v.clear(),
            TensorData::F16(v) => v.clear(),
            TensorData::Device(_) => self.data = TensorData::default(),
        }
        self.shape.clear();
    }
}
