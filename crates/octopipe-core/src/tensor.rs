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

/// An element type whose host values are read through a typed view of [`HostData`]'s bytes.
///
/// Implemented for `f32` and `u16` (f16 bits) only: plain numbers, every bit pattern a value, no
/// larger alignment than the buffer's.
pub trait HostValue: Copy + Default + sealed::Sealed + 'static {
    /// The dtype whose values these are.
    const DTYPE: DType;
}

impl HostValue for f32 {
    const DTYPE: DType = DType::F32;
}

impl HostValue for u16 {
    const DTYPE: DType = DType::F16;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u16 {}
}

/// A tensor's values in host memory: one byte buffer (native byte order) and the [`DType`] it is
/// read as, through typed views ([`HostData::as_f32`], [`HostData::as_f16`], ...).
#[derive(Clone, Default)]
pub struct HostData {
    /// The bytes, held in 4-byte words so that a view of any dtype is aligned.
    words: Vec<u32>,
    /// Bytes in use (`len * dtype.size()`).
    bytes: usize,
    dtype: DType,
}

impl HostData {
    /// `len` zeros of `dtype`; an allocation the system refuses is an error, not an abort.
    pub fn try_zeroed(dtype: DType, len: usize) -> Result<Self, crate::alloc::AllocError> {
        let mut h = HostData::default();
        h.try_resize(dtype, len)?;
        Ok(h)
    }

    /// The values' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.bytes / self.dtype.size()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The bytes (native byte order).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `bytes` initialised bytes; u8 has no alignment.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.bytes) }
    }

    /// The bytes to write (a copy back from the device fills them).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.bytes) }
    }

    /// The values as `T`, if that is their dtype.
    pub fn view<T: HostValue>(&self) -> Option<&[T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        let len = self.bytes / std::mem::size_of::<T>();
        // SAFETY: the words are aligned for T (align 4 or less), hold `len` T's initialised
        // bytes, and every bit pattern is a T (`HostValue`).
        Some(unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<T>(), len) })
    }

    /// The values as `T` to change in place, if that is their dtype.
    pub fn view_mut<T: HostValue>(&mut self) -> Option<&mut [T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        let len = self.bytes / std::mem::size_of::<T>();
        // SAFETY: as in `view`, borrowed mutably through `self`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<T>(), len) })
    }

    /// The values, typed by their dtype.
    pub fn values(&self) -> HostView<'_> {
        match self.dtype {
            DType::F32 => HostView::F32(self.view().unwrap_or_default()),
            DType::F16 => HostView::F16(self.view().unwrap_or_default()),
        }
    }

    /// The f32 values, if that is their dtype.
    pub fn as_f32(&self) -> Option<&[f32]> {
        self.view()
    }

    /// The f16 values (IEEE half bits), if that is their dtype.
    pub fn as_f16(&self) -> Option<&[u16]> {
        self.view()
    }

    /// Make it `len` elements of `dtype`, reusing the buffer (contents unspecified where it
    /// held another dtype; new bytes zero). A growth the system refuses is an error.
    pub fn try_resize(&mut self, dtype: DType, len: usize) -> Result<(), crate::alloc::AllocError> {
        let bytes = len.saturating_mul(dtype.size());
        crate::alloc::try_resize(&mut self.words, bytes.div_ceil(4), 0)
            .map_err(|_| crate::alloc::AllocError::of::<u8>(bytes))?;
        self.dtype = dtype;
        self.bytes = bytes;
        Ok(())
    }

    /// [`HostData::try_resize`], a refused growth an abort as any `Vec`'s.
    pub fn resize(&mut self, dtype: DType, len: usize) {
        let bytes = len * dtype.size();
        self.words.resize(bytes.div_ceil(4), 0);
        self.dtype = dtype;
        self.bytes = bytes;
    }

    /// Empty it, keeping the buffer.
    pub fn clear(&mut self) {
        self.bytes = 0;
    }
}

/// Host values typed by their dtype ([`HostData::values`]).
#[derive(Debug, Clone, Copy)]
pub enum HostView<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// f16 values (IEEE half bits).
    F16(&'a [u16]),
}

impl fmt::Debug for HostData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostData({} {:?} elements)", self.len(), self.dtype)
    }
}

/// A tensor's values and where they are.
#[derive(Debug)]
pub enum TensorData {
    /// Values in host memory: bytes read as their dtype.
    Host(HostData),
    /// Values of the tensor's dtype on a CUDA device.
    Device(DeviceTensor),
}

impl Default for TensorData {
    fn default() -> Self {
        TensorData::Host(HostData::default())
    }
}

/// The preprocessed values of a batch's crops.
#[derive(Debug, Default)]
pub struct Tensor {
    /// The values.
    pub data: TensorData,
    /// Element type (the host data's own, or the device data's).
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
            TensorData::Host(h) => h.len(),
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
            TensorData::Host(_) => Memory::Host,
        }
    }

    /// The host values, if that is where they are.
    pub fn host(&self) -> Option<&HostData> {
        match &self.data {
            TensorData::Host(h) => Some(h),
            TensorData::Device(_) => None,
        }
    }

    /// The f32 host values, if that is what it holds.
    pub fn as_f32(&self) -> Option<&[f32]> {
        self.host()?.view()
    }

    /// The f32 host values to change in place, if that is what it holds.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            TensorData::Host(h) => h.view_mut(),
            TensorData::Device(_) => None,
        }
    }

    /// The f16 host values to change in place, if that is what it holds.
    pub fn as_f16_mut(&mut self) -> Option<&mut [u16]> {
        match &mut self.data {
            TensorData::Host(h) => h.view_mut(),
            TensorData::Device(_) => None,
        }
    }

    /// The f16 host values (IEEE half bits), if that is what it holds.
    pub fn as_f16(&self) -> Option<&[u16]> {
        self.host()?.view()
    }

    /// The device values, if that is where they are.
    pub fn device(&self) -> Option<&DeviceTensor> {
        match &self.data {
            TensorData::Device(d) => Some(d),
            TensorData::Host(_) => None,
        }
    }

    /// The host buffer, reused when it holds one (a device tensor is let go).
    fn host_buffer(&mut self) -> &mut HostData {
        if !matches!(self.data, TensorData::Host(_)) {
            self.data = TensorData::default();
        }
        let TensorData::Host(h) = &mut self.data else {
            unreachable!("just set to Host")
        };
        h
    }

    /// A host buffer of `len` elements of `dtype` to fill (reusing the one it holds; contents
    /// unspecified where it held another dtype), its growth fallible: an allocation the system
    /// refuses (a batch too large for the memory left) is an error of the caller's batch, not an
    /// abort.
    pub fn try_host(
        &mut self,
        dtype: DType,
        len: usize,
    ) -> Result<&mut HostData, crate::alloc::AllocError> {
        self.dtype = dtype;
        let h = self.host_buffer();
        h.try_resize(dtype, len)?;
        Ok(h)
    }

    /// [`Tensor::try_host`], a refused growth an abort.
    pub fn host_mut(&mut self, dtype: DType, len: usize) -> &mut HostData {
        self.dtype = dtype;
        let h = self.host_buffer();
        h.resize(dtype, len);
        h
    }

    /// A host f32 buffer of `len` elements to fill, as [`Tensor::host_mut`].
    pub fn host_f32(&mut self, len: usize) -> &mut [f32] {
        self.host_mut(DType::F32, len)
            .view_mut()
            .expect("just made f32")
    }

    /// A host f16 buffer of `len` elements to fill, as [`Tensor::host_mut`].
    pub fn host_f16(&mut self, len: usize) -> &mut [u16] {
        self.host_mut(DType::F16, len)
            .view_mut()
            .expect("just made f16")
    }

    /// [`Tensor::host_f32`], its growth fallible as [`Tensor::try_host`]'s.
    pub fn try_host_f32(&mut self, len: usize) -> Result<&mut [f32], crate::alloc::AllocError> {
        Ok(self
            .try_host(DType::F32, len)?
            .view_mut()
            .expect("just made f32"))
    }

    /// [`Tensor::host_f16`], its growth fallible as [`Tensor::try_host`]'s.
    pub fn try_host_f16(&mut self, len: usize) -> Result<&mut [u16], crate::alloc::AllocError> {
        Ok(self
            .try_host(DType::F16, len)?
            .view_mut()
            .expect("just made f16"))
    }

    /// Empty it, keeping a host buffer for reuse.
    pub fn clear(&mut self) {
        match &mut self.data {
            TensorData::Host(h) => h.clear(),
            TensorData::Device(_) => self.data = TensorData::default(),
        }
        self.shape.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_data_is_bytes_read_as_their_dtype() {
        let mut t = Tensor::default();
        t.host_f32(3).copy_from_slice(&[1.0, -2.0, 0.5]);
        assert_eq!(t.as_f32(), Some(&[1.0f32, -2.0, 0.5][..]));
        assert_eq!(t.as_f16(), None);
        let host = t.host().unwrap();
        assert_eq!(host.bytes().len(), 12);
        assert_eq!(&host.bytes()[4..8], &(-2.0f32).to_ne_bytes());
        // The same buffer, now three f16 values: six bytes, no f32 view.
        t.host_f16(3).copy_from_slice(&[0x3C00, 0xC000, 0x3800]);
        assert_eq!(t.dtype, DType::F16);
        assert_eq!(t.len(), 3);
        assert_eq!(t.as_f32(), None);
        assert_eq!(t.host().unwrap().bytes(), {
            let mut b = Vec::new();
            for v in [0x3C00u16, 0xC000, 0x3800] {
                b.extend(v.to_ne_bytes());
            }
            b
        });
        t.as_f16_mut().unwrap()[1] = 0;
        assert!(matches!(
            t.host().unwrap().values(),
            HostView::F16([0x3C00, 0, 0x3800])
        ));
        assert_eq!(t.as_f16(), Some(&[0x3C00u16, 0, 0x3800][..]));
        t.clear();
        assert!(t.is_empty());
        let z = HostData::try_zeroed(DType::F32, 5).unwrap();
        assert_eq!(z.as_f32(), Some(&[0.0f32; 5][..]));
    }
}
