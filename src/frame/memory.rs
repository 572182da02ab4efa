//! Where a frame's planes live: pooled host buffers, or CUDA device memory owned by its producer.

use std::fmt;
use std::sync::{Arc, Mutex};

/// A free list of byte buffers; buffers taken from it come back when dropped.
#[derive(Clone, Default)]
pub struct BufferPool {
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl BufferPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer of exactly `len` bytes (contents unspecified), reused from the pool when possible.
    pub fn take(&self, len: usize) -> PooledBuf {
        let mut data = self
            .free
            .lock()
            .map(|mut f| f.pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        data.resize(len, 0);
        PooledBuf {
            data,
            pool: Some(self.clone()),
        }
    }

    /// Buffers currently waiting for reuse.
    pub fn idle(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }
}

/// Bytes owned by a frame; returned to their [`BufferPool`] on drop.
pub struct PooledBuf {
    data: Vec<u8>,
    pool: Option<BufferPool>,
}

impl PooledBuf {
    /// A buffer that belongs to no pool.
    pub fn unpooled(data: Vec<u8>) -> Self {
        PooledBuf { data, pool: None }
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if let Ok(mut free) = pool.free.lock() {
                free.push(std::mem::take(&mut self.data));
            }
        }
    }
}

impl fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PooledBuf({} bytes)", self.data.len())
    }
}

/// A frame's planes in CUDA device memory, laid out as the frame's [`FrameLayout`](super::FrameLayout)
/// says (byte offsets and row pitches from `ptr`). The memory belongs to whoever produced it (an
/// application's own allocation, a decoder's pool): `owner` keeps it alive while the frame holds it
/// and returns it when the frame releases its planes.
pub struct DeviceFrame {
    /// Device address of byte 0 of the layout (a `CUdeviceptr`).
    pub ptr: u64,
    /// CUDA device ordinal the memory is on.
    pub device: usize,
    /// The `CUstream` the producer wrote the planes on, as an integer (0: the writes are complete
    /// already, e.g. after a synchronizing copy). Consumers order their reads after it.
    pub stream: u64,
    /// Dropped when the frame releases its planes: frees the memory or gives it back to its pool.
    pub owner: Box<dyn Send + Sync>,
}

impl fmt::Debug for DeviceFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceFrame(0x{:x} on cuda:{}, stream 0x{:x})",
            self.ptr, self.device, self.stream
        )
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
            Planes::Device(d) => Memory::Device(d.device),
        }
    }
}

/// Host memory, or the memory of one CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Host (CPU) memory.
    Host,
    /// Memory of the CUDA device with this ordinal.
    Device(usize),
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Memory::Host => f.write_str("host"),
            Memory::Device(d) => write!(f, "cuda:{d}"),
        }
    }
}
