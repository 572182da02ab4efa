//! Where memory lives ([`Memory`]) and the one type for CUDA device memory someone else owns
//! ([`DeviceBuffer`]), which a frame's device planes ([`DeviceFrame`](crate::frame::DeviceFrame))
//! and a tensor's device values ([`DeviceTensor`](crate::tensor::DeviceTensor)) both hold.
//!
//! Host memory has its own types (a frame's [`PooledBuf`](crate::frame::PooledBuf), a tensor's
//! `Vec`); the enums that hold either ([`Planes`](crate::frame::Planes),
//! [`TensorData`](crate::tensor::TensorData)) say by their variant which it is.

use std::fmt;

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

/// Bytes in CUDA device memory, written on a stream, kept alive by an owner.
///
/// The memory belongs to whoever produced it (an application's own allocation, a decoder's pool,
/// the CUDA preprocess backend's output pool): `owner` keeps it alive while the buffer is held
/// and frees it, or gives it back to its pool, when the buffer is dropped. Drop a buffer only
/// once the work reading it is done.
pub struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    device: usize,
    stream: u64,
    /// Never read: dropping it releases the memory.
    _owner: Box<dyn Send + Sync>,
}

impl DeviceBuffer {
    /// `bytes` bytes at device address `ptr` (a `CUdeviceptr`) on CUDA device `device`, written
    /// on the `CUstream` `stream` (as an integer; 0: the writes are complete already, e.g. after
    /// a synchronizing copy), alive as long as `owner` is.
    pub fn new(
        ptr: u64,
        bytes: usize,
        device: usize,
        stream: u64,
        owner: Box<dyn Send + Sync>,
    ) -> Self {
        DeviceBuffer {
            ptr,
            bytes,
            device,
            stream,
            _owner: owner,
        }
    }

    /// Device address of byte 0 (a `CUdeviceptr`).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes that may be read from [`ptr`](Self::ptr).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// CUDA device ordinal the memory is on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The `CUstream` the producer wrote the memory on, as an integer (0: the writes are
    /// complete). Consumers order their reads after it.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// Where the memory is: [`Memory::Device`] of its ordinal.
    pub fn memory(&self) -> Memory {
        Memory::Device(self.device)
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes at 0x{:x} on cuda:{}, stream 0x{:x}",
            self.bytes, self.ptr, self.device, self.stream
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn accessors_and_owner_dropped_with_the_buffer() {
        let dropped = Arc::new(AtomicBool::new(false));
        let b = DeviceBuffer::new(0x1000, 64, 1, 7, Box::new(Flag(dropped.clone())));
        assert_eq!(
            (b.ptr(), b.bytes(), b.device(), b.stream()),
            (0x1000, 64, 1, 7)
        );
        assert_eq!(b.memory(), Memory::Device(1));
        assert_eq!(format!("{b:?}"), "64 bytes at 0x1000 on cuda:1, stream 0x7");
        assert!(!dropped.load(Ordering::SeqCst));
        drop(b);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
