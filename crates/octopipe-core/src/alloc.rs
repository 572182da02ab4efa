//! Fallible allocations for the buffers whose sizes a stream's data decides (a frame's planes,
//! a batch's tensor, a model's padding rows, a decoded picture): a size that overflows or
//! memory the system refuses is an [`AllocError`], which the stage turns into its stream's
//! error, naming what it was allocating. An infallible allocation that fails aborts the whole
//! process, every stream with it.
//!
//! Only growth is fallible: a buffer reused at the same size or smaller allocates nothing.
//!
//! ```
//! use octopipe_core::alloc::{bytes, try_zeroed};
//! let n = bytes(&[640, 480, 3]).unwrap();
//! assert_eq!(try_zeroed(n).unwrap().len(), 921_600);
//! // A size past usize (or past what the process may take) is an error, not an abort.
//! assert!(bytes(&[usize::MAX, 2]).is_err());
//! ```

use std::alloc::Layout;

/// The system refused an allocation, or its size overflows: it needs
/// [`bytes`](AllocError::bytes) bytes. Its message reads after what was being allocated:
/// `frame 3 (8192x8192 I420) needs 100663296 bytes, more than the memory this process may
/// still take`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("needs {bytes} bytes, more than the memory this process may still take")]
pub struct AllocError {
    /// The bytes asked for (`u64::MAX` where the size overflows).
    pub bytes: u64,
}

impl AllocError {
    /// The error of an allocation of `len` elements of `T`.
    pub fn of<T>(len: usize) -> Self {
        AllocError {
            bytes: (len as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        }
    }
}

/// The product of `dims` (a buffer's element count or byte size), or an [`AllocError`] where
/// it overflows `usize`.
pub fn bytes(dims: &[usize]) -> Result<usize, AllocError> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or(AllocError { bytes: u64::MAX })
}

/// `len` copies of `value`, allocated fallibly.
pub fn try_vec<T: Clone>(len: usize, value: T) -> Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    try_resize(&mut v, len, value)?;
    Ok(v)
}

/// `len` zero bytes, allocated fallibly as zeroed memory (fresh pages of the system are not
/// written: as cheap as `vec![0; len]`).
pub fn try_zeroed(len: usize) -> Result<Vec<u8>, AllocError> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let layout = Layout::array::<u8>(len).map_err(|_| AllocError::of::<u8>(len))?;
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(AllocError::of::<u8>(len));
    }
    // SAFETY: `ptr` was allocated by the global allocator with `layout` (`len` bytes of `u8`'s
    // alignment), and its `len` bytes are initialised (zero).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// `v` resized to `len` (new elements `value`), its growth fallible: a `v` already holding the
/// capacity allocates nothing.
pub fn try_resize<T: Clone>(v: &mut Vec<T>, len: usize, value: T) -> Result<(), AllocError> {
    if len > v.len() {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| AllocError::of::<T>(len))?;
    }
    v.resize(len, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_the_address_space_are_errors_naming_their_bytes() {
        let e = try_zeroed(usize::MAX / 2).unwrap_err();
        assert_eq!(e.bytes, (usize::MAX / 2) as u64);
        assert_eq!(
            try_vec(usize::MAX / 8, 0f32).unwrap_err().bytes,
            (usize::MAX / 8) as u64 * 4
        );
        assert_eq!(bytes(&[usize::MAX, 2]).unwrap_err().bytes, u64::MAX);
        assert!(e
            .to_string()
            .ends_with("bytes, more than the memory this process may still take"));
        let mut v = try_vec(4, 1u16).unwrap();
        try_resize(&mut v, 2, 0).unwrap();
        assert_eq!(v, [1, 1]);
        assert_eq!(try_zeroed(3).unwrap(), [0, 0, 0]);
    }
}
