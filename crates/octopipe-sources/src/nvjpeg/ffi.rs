//! The nvJPEG functions octopipe calls, from `libnvjpeg` opened at run time (as cudarc opens the
//! CUDA libraries), so that builds and machines without it keep working.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, OnceLock};

use libloading::Library;

use super::error::NvjpegError;
use crate::dylib::symbol;

/// `nvjpegStatus_t`: 0 is success.
pub(super) type Status = c_int;
/// `nvjpegHandle_t`.
pub(super) type Handle = *mut c_void;
/// `nvjpegJpegState_t`.
pub(super) type State = *mut c_void;

/// `NVJPEG_BACKEND_GPU_HYBRID`: Huffman decoding on the CPU, the rest on the GPU's cores.
pub(super) const BACKEND_GPU_HYBRID: c_int = 2;
/// `NVJPEG_BACKEND_HARDWARE`: the GPU's JPEG engines (A100, H100, L4...).
pub(super) const BACKEND_HARDWARE: c_int = 3;
/// `NVJPEG_OUTPUT_YUV`: the decoded planes as they are, no colour conversion.
pub(super) const OUTPUT_YUV: c_int = 1;
/// `NVJPEG_MAX_COMPONENT`.
pub(super) const MAX_COMPONENT: usize = 4;

/// `nvjpegImage_t`: a destination's planes and their pitches.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Image {
    pub channel: [*mut u8; MAX_COMPONENT],
    pub pitch: [usize; MAX_COMPONENT],
}

/// The functions of `libnvjpeg` octopipe calls (nvjpeg.h, CUDA 12 and 13).
pub(super) struct Api {
    /// Keeps the symbols below valid.
    _library: Library,
    /// `nvjpegCreateEx(backend, dev_allocator, pinned_allocator, flags, *handle)`.
    pub create_ex:
        unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, c_uint, *mut Handle) -> Status,
    /// `nvjpegDestroy(handle)`.
    pub destroy: unsafe extern "C" fn(Handle) -> Status,
    /// `nvjpegJpegStateCreate(handle, *state)`.
    pub state_create: unsafe extern "C" fn(Handle, *mut State) -> Status,
    /// `nvjpegJpegStateDestroy(state)`.
    pub state_destroy: unsafe extern "C" fn(State) -> Status,
    /// `nvjpegDecodeBatchedInitialize(handle, state, batch_size, max_cpu_threads, format)`.
    pub batched_initialize: unsafe extern "C" fn(Handle, State, c_int, c_int, c_int) -> Status,
    /// `nvjpegDecodeBatched(handle, state, data[], lengths[], destinations[], stream)`.
    pub decode_batched: unsafe extern "C" fn(
        Handle,
        State,
        *const *const u8,
        *const usize,
        *mut Image,
        *mut c_void,
    ) -> Status,
}

// SAFETY: the API is a table of C function pointers and the library that keeps them valid;
// nvJPEG's functions may be called from any thread (each handle is used by one thread at a time:
// the decoder's own).
unsafe impl Send for Api {}
// SAFETY: as above; the table is never written after loading.
unsafe impl Sync for Api {}

/// Where `libnvjpeg` is looked for: the loader's path first (pip's `nvidia-nvjpeg-cu13`, a CUDA
/// toolkit on `LD_LIBRARY_PATH`), then the toolkit's usual folder.
const NAMES: &[&str] = &[
    "libnvjpeg.so.13",
    "libnvjpeg.so.12",
    "libnvjpeg.so",
    "/usr/local/cuda/lib64/libnvjpeg.so.13",
    "/usr/local/cuda/lib64/libnvjpeg.so.12",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvjpeg.so.13",
];

impl Api {
    fn load() -> Result<Api, NvjpegError> {
        let mut tried = Vec::new();
        // SAFETY: loading libnvjpeg runs its initialisers only (it starts no CUDA work).
        let library = NAMES
            .iter()
            .find_map(|name| match unsafe { Library::new(*name) } {
                Ok(l) => Some(l),
                Err(e) => {
                    tried.push(format!("{name}: {e}"));
                    None
                }
            })
            .ok_or_else(|| NvjpegError::Library(tried.join("; ")))?;
        let missing = |name: &'static str, e: libloading::Error| NvjpegError::Symbol {
            name,
            source: Arc::new(e),
        };
        // SAFETY (each `symbol`): the declared types are those of nvjpeg.h (CUDA 12 and 13); the
        // pointers are copied out and stay valid while `_library` is held.
        unsafe {
            Ok(Api {
                create_ex: symbol(&library, "nvjpegCreateEx", missing)?,
                destroy: symbol(&library, "nvjpegDestroy", missing)?,
                state_create: symbol(&library, "nvjpegJpegStateCreate", missing)?,
                state_destroy: symbol(&library, "nvjpegJpegStateDestroy", missing)?,
                batched_initialize: symbol(&library, "nvjpegDecodeBatchedInitialize", missing)?,
                decode_batched: symbol(&library, "nvjpegDecodeBatched", missing)?,
                _library: library,
            })
        }
    }
}

/// `libnvjpeg`, opened once per process; the error says why it cannot be used.
pub(super) fn api() -> Result<&'static Api, NvjpegError> {
    static API: OnceLock<Result<Api, NvjpegError>> = OnceLock::new();
    API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
}

/// nvJPEG's name for a status code, for messages.
pub(super) fn status_name(status: Status) -> &'static str {
    match status {
        0 => "success",
        1 => "NVJPEG_STATUS_NOT_INITIALIZED",
        2 => "NVJPEG_STATUS_INVALID_PARAMETER",
        3 => "NVJPEG_STATUS_BAD_JPEG",
        4 => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
        5 => "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        6 => "NVJPEG_STATUS_EXECUTION_FAILED",
        7 => "NVJPEG_STATUS_ARCH_MISMATCH",
        8 => "NVJPEG_STATUS_INTERNAL_ERROR",
        9 => "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
        10 => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
        _ => "an unknown nvJPEG status",
    }
}
