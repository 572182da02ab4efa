//! What every launcher shares: the launch configuration, one part of a packed metadata buffer as
//! a kernel argument, packing host structs into that buffer ([`push_aligned`]), and device and
//! pinned buffers that grow and are reused ([`grow`], [`grow_pinned`]).

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, DeviceRepr, DriverError, LaunchConfig,
    PinnedHostSlice, ValidAsZeroBits,
};
use octopipe_core::crops::{BlockMeta, CropMeta};

use crate::CudaError;

/// Launch configuration of every kernel: `grid` blocks of `threads` threads, no dynamic shared memory.
pub fn launch_config(grid: (u32, u32), threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.0.max(1), grid.1.max(1), 1),
        block_dim: (threads.clamp(32, 1024), 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One part (byte range) of the packed metadata as a kernel argument; an empty part gives one
/// byte, since a device view may not be empty (the kernels do not read it then).
pub fn part(meta: &CudaSlice<u8>, (a, b): (usize, usize)) -> CudaView<'_, u8> {
    meta.slice(a..b.max(a + 1))
}

/// Grow a device buffer to at least `len` elements (25% headroom); no-op when large enough.
#[track_caller]
pub fn grow<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &mut Option<CudaSlice<T>>,
    len: usize,
) -> Result<(), DriverError> {
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        let t = std::time::Instant::now();
        *slot = None;
        *slot = Some(stream.alloc_zeros::<T>((len + len / 4).max(256))?);
        grew("device", std::panic::Location::caller(), len, t);
    }
    Ok(())
}

/// Grow a pinned host buffer to at least `len` elements (25% headroom); no-op when large enough.
#[track_caller]
pub fn grow_pinned<T: DeviceRepr + Default>(
    ctx: &Arc<CudaContext>,
    slot: &mut Option<PinnedHostSlice<T>>,
    len: usize,
) -> Result<(), CudaError> {
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        let t = std::time::Instant::now();
        *slot = None;
        // SAFETY: the buffer is only read after a device copy into it has completed.
        *slot = Some(unsafe { ctx.alloc_pinned::<T>((len + len / 4).max(1024)) }?);
        grew("pinned", std::panic::Location::caller(), len, t);
    }
    Ok(())
}

/// A buffer grew (`RUST_LOG=octopipe::alloc=debug`): where, to how much, and what it took.
fn grew(kind: &str, at: &std::panic::Location<'_>, len: usize, since: std::time::Instant) {
    tracing::debug!(
        target: "octopipe::alloc",
        "{kind} buffer of {}:{} grew to {len} elements in {:.2} ms",
        at.file(),
        at.line(),
        since.elapsed().as_secs_f64() * 1e3
    );
}

/// Types whose bytes can be copied as they are (no padding, no pointers).
///
/// # Safety
/// Implementors must be `#[repr(C)]` with no padding bytes.
pub unsafe trait Pod: Copy {}
// SAFETY: the crop and block metadata are `#[repr(C)]` structs of `u32` fields only, so with no
// padding; a `u32` has none. (The preprocess backend's `FrameDesc` is made `Pod` where it is
// defined.)
unsafe impl Pod for CropMeta {}
unsafe impl Pod for BlockMeta {}
unsafe impl Pod for u32 {}

/// Append `items` to `buf` at a 16-byte aligned offset; returns that offset.
pub fn push_aligned<T: Pod>(buf: &mut Vec<u8>, items: &[T]) -> usize {
    let start = buf.len().next_multiple_of(16);
    buf.resize(start, 0);
    // SAFETY: `T: Pod` has no padding, so its bytes are initialized; the slice covers exactly `items`.
    let bytes = unsafe {
        std::slice::from_raw_parts(items.as_ptr() as *const u8, std::mem::size_of_val(items))
    };
    buf.extend_from_slice(bytes);
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_aligned_aligns() {
        let mut b = vec![1u8; 3];
        assert_eq!(push_aligned(&mut b, &[7u32, 8]), 16);
        assert_eq!(b.len(), 24);
        assert_eq!(&b[16..20], &7u32.to_ne_bytes());
    }
}
