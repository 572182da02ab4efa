//! Where a frame's planes live: pooled host buffers (pageable, or page-locked so that a GPU
//! reads them in place), or CUDA device memory owned by its producer.

use std::fmt;
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaContext, DriverError, PinnedHostSlice};

use crate::alloc::{try_zeroed, AllocError};
use crate::buffer::{DeviceBuffer, Memory};

/// A free list of byte buffers; buffers taken from it come back when dropped.
///
/// A pool is pageable ([`BufferPool::new`]) or page-locked ([`BufferPool::page_locked`]): its
/// buffers then come from `cuMemHostAlloc` (portable and mapped: every GPU of the host reads
/// them over PCIe in place, so the CUDA preprocess backend pulls crop rectangles straight out of
/// the frames instead of gathering them on the host first). Page-locked memory is a scarce
/// resource of the host, which is why it is pooled: a source's buffers are allocated while the
/// pipeline fills and reused after.
#[derive(Clone, Default)]
pub struct BufferPool {
    free: Arc<Mutex<Vec<Bytes>>>,
    /// The context page-locked buffers are allocated in; `None` for a pageable pool.
    locked: Option<Arc<CudaContext>>,
}

impl BufferPool {
    /// An empty pageable pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty page-locked pool allocating through CUDA device `device`'s primary context (the
    /// buffers are portable: any GPU reads them). Errors, saying why, where there is no usable
    /// CUDA device.
    pub fn page_locked(device: usize) -> Result<Self, PageLockedError> {
        // SAFETY: only tries to dlopen libcuda by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(PageLockedError::NoDriver);
        }
        let ctx = CudaContext::new(device)
            .map_err(|source| PageLockedError::Context { device, source })?;
        Ok(BufferPool {
            free: Arc::default(),
            locked: Some(ctx),
        })
    }

    /// Whether this pool's buffers are page-locked.
    pub fn is_page_locked(&self) -> bool {
        self.locked.is_some()
    }

    /// A buffer of exactly `len` bytes (contents unspecified), reused from the pool when possible.
    /// A page-locked pool that cannot allocate (the host is out of page-locked memory) gives a
    /// pageable buffer instead, with one warning. Panics where the system refuses the memory:
    /// a size a stream's data decides is taken with [`BufferPool::try_take`].
    pub fn take(&self, len: usize) -> PooledBuf {
        self.try_take(len)
            .unwrap_or_else(|e| panic!("a frame buffer of {len} bytes: {e}"))
    }

    /// [`BufferPool::take`], its growth fallible: a buffer the system refuses (a frame too large
    /// for the memory the process may still take) is an [`AllocError`], the caller's stream's
    /// error, not an abort. A reused buffer large enough allocates nothing.
    pub fn try_take(&self, len: usize) -> Result<PooledBuf, AllocError> {
        let reused = self.free.lock().ok().and_then(|mut f| f.pop());
        let bytes = match (reused, &self.locked) {
            (Some(Bytes::Locked(mut l)), _) if l.mem.len() >= len => {
                l.len = len;
                Bytes::Locked(l)
            }
            (_, Some(ctx)) => match Locked::alloc(ctx, len) {
                Ok(l) => Bytes::Locked(l),
                Err(e) => {
                    static WARNED: std::sync::Once = std::sync::Once::new();
                    WARNED.call_once(|| {
                        tracing::warn!(
                            "page-locked frame buffer of {len} bytes not allocated ({e:?}): \
                             pageable frames from here on where it fails"
                        )
                    });
                    Bytes::Heap(try_zeroed(len)?)
                }
            },
            (Some(Bytes::Heap(mut data)), None) => {
                if len > data.capacity() {
                    // Growth: a fresh zeroed buffer rather than copying the old one over.
                    data = try_zeroed(len)?;
                }
                data.resize(len, 0);
                Bytes::Heap(data)
            }
            (_, None) => Bytes::Heap(try_zeroed(len)?),
        };
        Ok(PooledBuf {
            bytes,
            pool: Some(self.clone()),
        })
    }

    /// Buffers currently waiting for reuse.
    pub fn idle(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }
}

/// Why a page-locked [`BufferPool`] cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageLockedError {
    /// libcuda does not load.
    #[error("libcuda.so not found (no NVIDIA driver)")]
    NoDriver,
    /// The device's primary context cannot be had.
    #[error("cuda:{device}: {source:?}")]
    Context {
        /// The CUDA device ordinal.
        device: usize,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
}

/// A buffer's memory.
enum Bytes {
    Heap(Vec<u8>),
    Locked(Locked),
}

/// Page-locked bytes: the first `len` of `mem`, at `ptr`.
struct Locked {
    mem: PinnedHostSlice<u8>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `ptr` points into `mem` (which is `Send + Sync`) and is only dereferenced through
// `&self` / `&mut self` of the owning `PooledBuf`.
unsafe impl Send for Locked {}
// SAFETY: as above.
unsafe impl Sync for Locked {}

impl Locked {
    /// `len` zeroed page-locked bytes, portable (pinned for every context) and mapped (readable
    /// by the GPUs in place); never write-combined, since the CPU reads frames too.
    fn alloc(ctx: &Arc<CudaContext>, len: usize) -> Result<Locked, DriverError> {
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: the memory is zeroed below before anything reads it.
        let mut mem = unsafe { ctx.alloc_pinned_with_flags::<u8>(len.max(1), flags) }?;
        let ptr = mem.as_mut_ptr()?;
        // SAFETY: `ptr` is the start of `mem`'s `mem.len()` bytes, owned here.
        unsafe { std::ptr::write_bytes(ptr, 0, mem.len()) };
        Ok(Locked { mem, ptr, len })
    }
}

/// Bytes owned by a frame; returned to their [`BufferPool`] on drop.
pub struct PooledBuf {
    bytes: Bytes,
    pool: Option<BufferPool>,
}

impl PooledBuf {
    /// A pageable buffer that belongs to no pool.
    pub fn unpooled(data: Vec<u8>) -> Self {
        PooledBuf {
            bytes: Bytes::Heap(data),
            pool: None,
        }
    }

    /// Whether the bytes are page-locked host memory (from a [`BufferPool::page_locked`] pool).
    pub fn is_page_locked(&self) -> bool {
        matches!(self.bytes, Bytes::Locked(_))
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Heap(v) => v,
            // SAFETY: `ptr` starts `len` initialized bytes of `mem`, alive as long as `self`.
            Bytes::Locked(l) => unsafe { std::slice::from_raw_parts(l.ptr, l.len) },
        }
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.bytes {
            Bytes::Heap(v) => v,
            // SAFETY: as in `deref`, borrowed mutably through `self`.
            Bytes::Locked(l) => unsafe { std::slice::from_raw_parts_mut(l.ptr, l.len) },
        }
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if let Ok(mut free) = pool.free.lock() {
                free.push(std::mem::replace(&mut self.bytes, Bytes::Heap(Vec::new())));
            }
        }
    }
}

impl fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_page_locked() {
            ", page-locked"
        } else {
            ""
        };
        write!(f, "PooledBuf({} bytes{kind})", self.len())
    }
}

/// A frame's planes in CUDA device memory, laid out as the frame's [`FrameLayout`](super::FrameLayout)
/// says (byte offsets and row pitches from [`DeviceBuffer::ptr`]). The memory belongs to whoever
/// produced it (an application's own allocation, a decoder's pool): the buffer's owner keeps it
/// alive while the frame holds it and returns it when the frame releases its planes.
///
/// Its pointer, device and stream are the buffer's (`planes.ptr()`, `planes.device()`,
/// `planes.stream()` through `Deref`).
pub struct DeviceFrame {
    buffer: DeviceBuffer,
}

impl DeviceFrame {
    /// Planes in `buffer` (which holds at least the layout's [`size`](super::FrameLayout::size)).
    pub fn new(buffer: DeviceBuffer) -> Self {
        DeviceFrame { buffer }
    }

    /// The memory.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

impl std::ops::Deref for DeviceFrame {
    type Target = DeviceBuffer;
    fn deref(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

impl fmt::Debug for DeviceFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceFrame({:?})", self.buffer)
    }
}

/// Where a frame's planes live.
#[derive(Debug)]
pub enum Planes {
    /// Host memory, in a pooled buffer.
    Host(PooledBuf),
    /// CUDA device memory.
    Device(DeviceFrame),
}

impl Planes {
    /// The host bytes, if the planes are in host memory.
    pub fn host(&self) -> Option<&[u8]> {
        match self {
            Planes::Host(b) => Some(b),
            Planes::Device(_) => None,
        }
    }

    /// The device planes, if the planes are in device memory.
    pub fn device(&self) -> Option<&DeviceFrame> {
        match self {
            Planes::Host(_) => None,
            Planes::Device(d) => Some(d),
        }
    }

    /// Where the planes are.
    pub fn memory(&self) -> Memory {
        match self {
            Planes::Host(_) => Memory::Host,
            Planes::Device(d) => d.memory(),
        }
    }
}
