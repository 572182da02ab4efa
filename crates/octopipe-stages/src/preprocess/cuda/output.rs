//! The engine's device output (f32 or f16 bits, grown and reused) and its copies back to the host:
//! waited for into any slice, or queued into pinned buffers.

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};
use octopipe_cuda::grow;

use super::CudaError;
use super::Engine;
use octopipe_core::frame::DeviceBuffer;
use octopipe_core::tensor::DeviceTensor;

/// Output element type of the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutType {
    /// 32-bit float.
    #[default]
    F32,
    /// IEEE half, round to nearest even.
    F16,
}

/// Device outputs that went out as tensors and came back: the next launches write into them, so
/// a pipeline allocates no device memory per batch (and the stream-ordered allocator never
/// returns memory to the driver only to map it again).
pub(crate) type OutputPool<T> = Arc<Mutex<Vec<CudaSlice<T>>>>;

/// A [`DeviceTensor`]'s owner: gives the buffer back to its engine's pool when the tensor is
/// dropped (by then its readers are done: see [`DeviceTensor`]).
struct Pooled<T> {
    buf: Option<CudaSlice<T>>,
    pool: OutputPool<T>,
}

impl<T> Drop for Pooled<T> {
    fn drop(&mut self) {
        if let (Some(buf), Ok(mut free)) = (self.buf.take(), self.pool.lock()) {
            free.push(buf);
        }
    }
}

/// Take a buffer of at least `len` elements from `pool` into an empty `slot` (the smallest that
/// fits; none: the slot stays empty and is allocated).
fn refill<T>(slot: &mut Option<CudaSlice<T>>, pool: &OutputPool<T>, len: usize) {
    if slot.is_some() {
        return;
    }
    let Ok(mut free) = pool.lock() else { return };
    let best = (0..free.len())
        .filter(|&i| free[i].len() >= len)
        .min_by_key(|&i| free[i].len());
    *slot = best.map(|i| free.swap_remove(i));
}

impl Engine {
    /// Make the output buffer hold at least `len` elements of `ty` (done by [`Self::launch`] too;
    /// call it ahead to keep allocation out of timed regions). A buffer back from a dropped
    /// tensor is used when one is large enough.
    pub fn reserve_output(&mut self, ty: OutType, len: usize) -> Result<(), CudaError> {
        match ty {
            OutType::F32 => {
                refill(&mut self.out32, &self.free32, len);
                grow(self.gpu.stream(), &mut self.out32, len)?
            }
            OutType::F16 => {
                refill(&mut self.out16, &self.free16, len);
                grow(self.gpu.stream(), &mut self.out16, len)?
            }
        }
        Ok(())
    }

    /// Fill the output buffer with `value` (f32 bit pattern, or the f16 bits for [`OutType::F16`]):
    /// used by tests to prove every element gets written.
    pub fn poison_output(&mut self, ty: OutType, len: usize, bits: u32) -> Result<(), CudaError> {
        self.reserve_output(ty, len)?;
        match ty {
            OutType::F32 => {
                let v = vec![f32::from_bits(bits); len];
                let out = self.out32.as_mut().expect("reserved");
                self.gpu
                    .stream()
                    .memcpy_htod(&v, &mut out.slice_mut(..len))?;
            }
            OutType::F16 => {
                let v = vec![bits as u16; len];
                let out = self.out16.as_mut().expect("reserved");
                self.gpu
                    .stream()
                    .memcpy_htod(&v, &mut out.slice_mut(..len))?;
            }
        }
        Ok(())
    }

    /// Hand the last launch's output over as a [`DeviceTensor`] of `len` elements: the tensor owns
    /// the buffer until it is dropped (then it returns to this engine for a later launch; the
    /// next launch takes another), and says which stream wrote it so that readers order their
    /// work after it.
    pub fn take_output(&mut self, ty: OutType, len: usize) -> Result<DeviceTensor, CudaError> {
        let stream = self.gpu.stream().clone();
        let (ptr, capacity, owner): (u64, usize, Box<dyn Send + Sync>) = match ty {
            OutType::F32 => {
                let out = self.out32.take();
                let buf = launched(&out)?;
                let (ptr, capacity) = (buf.device_ptr(&stream).0, buf.len());
                let pool = self.free32.clone();
                (ptr, capacity, Box::new(Pooled { buf: out, pool }))
            }
            OutType::F16 => {
                let out = self.out16.take();
                let buf = launched(&out)?;
                let (ptr, capacity) = (buf.device_ptr(&stream).0, buf.len());
                let pool = self.free16.clone();
                (ptr, capacity, Box::new(Pooled { buf: out, pool }))
            }
        };
        let bytes = capacity
            * match ty {
                OutType::F32 => 4,
                OutType::F16 => 2,
            };
        let buffer = DeviceBuffer::new(
            ptr,
            bytes,
            self.gpu.context().ordinal(),
            stream.cu_stream() as u64,
            owner,
        );
        Ok(DeviceTensor::new(buffer, len, capacity))
    }

    /// The device output of the last f32 launch (for a device-side consumer).
    pub fn output_f32(&self) -> Option<&CudaSlice<f32>> {
        self.out32.as_ref()
    }

    /// Copy the first `dst.len()` bytes of the device output of the last `ty` launch to `dst`
    /// (pinned or pageable) and wait for them: how a host tensor of either dtype comes back.
    pub fn download(&mut self, ty: OutType, dst: &mut [u8]) -> Result<(), CudaError> {
        if dst.is_empty() {
            return Ok(());
        }
        let stream = self.gpu.stream();
        self.gpu.context().bind_to_thread()?;
        // SAFETY: the stream is synchronized right after, while `dst` is borrowed here.
        unsafe {
            match ty {
                OutType::F32 => queue_bytes(stream, launched(&self.out32)?, dst),
                OutType::F16 => queue_bytes(stream, launched(&self.out16)?, dst),
            }
        }?;
        stream.synchronize()?;
        Ok(())
    }

    /// Queue the copy of the first `bytes` bytes of the device output of the last `ty` launch
    /// into pinned `dst` without waiting (the pinned form of [`Self::download`]).
    ///
    /// # Safety
    /// The copy is not tracked by `dst`'s event: `dst` must not be read, written or dropped until
    /// this engine's stream has been synchronized.
    pub unsafe fn download_pinned(
        &mut self,
        ty: OutType,
        dst: &mut PinnedHostSlice<u8>,
        bytes: usize,
    ) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        if bytes > dst.len() {
            return Err(CudaError::Invalid(format!(
                "{bytes} output bytes do not fit {} pinned bytes",
                dst.len()
            )));
        }
        self.gpu.context().bind_to_thread()?;
        let stream = self.gpu.stream();
        let host = &mut dst.as_mut_slice()?[..bytes];
        // SAFETY: forwarded to the caller.
        unsafe {
            match ty {
                OutType::F32 => queue_bytes(stream, launched(&self.out32)?, host),
                OutType::F16 => queue_bytes(stream, launched(&self.out16)?, host),
            }
        }
    }

    /// Copy the first `dst.len()` f32 outputs to `dst` (pinned or pageable) and wait for them
    /// ([`Self::download`] into f32 values).
    pub fn download_f32(&mut self, dst: &mut [f32]) -> Result<(), CudaError> {
        let len = std::mem::size_of_val(dst);
        // SAFETY: the f32s' memory read as bytes, borrowed for this call.
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), len) };
        self.download(OutType::F32, bytes)
    }

    /// Queue the copy of the first `len` f32 outputs into the first `len` elements of pinned
    /// `dst` without waiting (for the benchmarks' typed pinned buffers; the stage's host tensors
    /// of either dtype come back through [`Self::download_pinned`]). Exactly `len` elements move
    /// (cudarc's own `memcpy_dtoh` copies the whole host slice, which reads past the device
    /// output once `dst` has headroom).
    ///
    /// # Safety
    /// The copy is not tracked by `dst`'s event: `dst` must not be read, written or dropped until
    /// this engine's stream has been synchronized.
    pub unsafe fn download_f32_pinned(
        &mut self,
        dst: &mut PinnedHostSlice<f32>,
        len: usize,
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller.
        unsafe {
            download_exact(
                self.gpu.context(),
                self.gpu.stream(),
                launched(&self.out32)?,
                dst,
                len,
            )
        }
    }

    /// The device output of the last f16 launch (IEEE half bits, for a device-side consumer).
    pub fn output_f16(&self) -> Option<&CudaSlice<u16>> {
        self.out16.as_ref()
    }

    /// Copy the first `dst.len()` f16 outputs (as bits) to `dst` and wait for them
    /// ([`Self::download`] into f16 bits).
    pub fn download_f16(&mut self, dst: &mut [u16]) -> Result<(), CudaError> {
        let len = std::mem::size_of_val(dst);
        // SAFETY: the u16s' memory read as bytes, borrowed for this call.
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), len) };
        self.download(OutType::F16, bytes)
    }
}

/// The device output of the last launch of its type.
fn launched<T>(out: &Option<CudaSlice<T>>) -> Result<&CudaSlice<T>, CudaError> {
    out.as_ref()
        .ok_or_else(|| CudaError::Invalid("nothing launched".into()))
}

/// Queue the copy of the first `dst.len()` bytes of `src` into `dst` on `stream` (its context
/// bound to the thread).
///
/// # Safety
/// `dst` must not be read, written or dropped until `stream` has been synchronized.
unsafe fn queue_bytes<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    dst: &mut [u8],
) -> Result<(), CudaError> {
    let have = src.len() * std::mem::size_of::<T>();
    if dst.len() > have {
        return Err(CudaError::Invalid(format!(
            "{} bytes asked of a device output of {have}",
            dst.len()
        )));
    }
    let (ptr, _record) = DevicePtr::device_ptr(src, stream);
    // SAFETY: the device output holds at least `dst.len()` bytes; the caller keeps `dst` alive
    // and untouched until the stream is synchronized.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, ptr, stream.cu_stream()) }?;
    Ok(())
}

/// Queue the copy of `src[..len]` into `dst[..len]` on `stream`.
///
/// # Safety
/// `dst` must not be read, written or dropped until `stream` has been synchronized.
unsafe fn download_exact<T: DeviceRepr + ValidAsZeroBits>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    dst: &mut PinnedHostSlice<T>,
    len: usize,
) -> Result<(), CudaError> {
    if len == 0 {
        return Ok(());
    }
    if len > dst.len() || len > src.len() {
        return Err(CudaError::Invalid(format!(
            "{len} outputs do not fit {} pinned / {} device elements",
            dst.len(),
            src.len()
        )));
    }
    ctx.bind_to_thread()?;
    let view = src.slice(..len);
    let host = &mut dst.as_mut_slice()?[..len];
    let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&view, stream);
    // SAFETY: `host` and the device view both hold `len` elements; the caller keeps `host` alive
    // and untouched until the stream is synchronized.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(host, ptr, stream.cu_stream()) }?;
    Ok(())
}
