//! NVDEC zero copy: GStreamer's `nvcodec` decoders write into CUDA memory
//! (`video/x-raw(memory:CUDAMemory),format=NV12`) and the frame goes to the preprocess kernel as
//! it is, a [`DeviceFrame`] over the decoder's own buffer.
//!
//! ```text
//! media location=flight.mp4 decoder=nvdec ! boxes ... ! batch ! preprocess backend=cuda ! ...
//! uridecodebin (nvcodec decoders only) ! video/x-raw(memory:CUDAMemory),format=NV12 ! appsink
//! ```
//!
//! - **One CUDA context.** The decoder and octopipe share the device's primary context (the one
//!   cudarc's `CudaContext::new` retains and the CUDA backend uses): it is wrapped in a
//!   `GstCudaContext` and given to the pipeline, to each element that asks (`gst.cuda.context`
//!   need-context message, answered from the bus's sync handler) and to decodebin's context
//!   queries, so device pointers are valid in both without peer access.
//! - **No copy.** Each buffer is mapped with `GST_MAP_READ | GST_MAP_CUDA`
//!   (`gst_video_frame_map`): the plane pointers and pitches come from the mapped frame. The
//!   mapping holds a reference to the buffer; the frame's owner unmaps it when the frame
//!   releases its planes, which returns the buffer to the decoder's pool.
//! - **Ordering.** GStreamer 1.22's decoders copy the picture into the pool's buffer on a
//!   stream of their own and synchronize it before pushing: the frame's stream is 0 (complete).
//!   From 1.24 a CUDA memory carries its stream (`gst_cuda_memory_get_stream`), and the frame
//!   names it, so the kernel waits on it with an event; memory written on the NULL stream is
//!   synchronized (`gst_cuda_memory_sync`) and its stream is 0.
//!
//! `libgstcuda-1.0` has no Rust binding and no headers in Debian: it is opened at run time and the
//! few functions used are declared here, so builds and machines without it work (`decoder=nvdec`
//! then says why it cannot run).

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use cudarc::driver::CudaContext;
use gstreamer as gst;
use gstreamer::glib::translate::{from_glib_full, ToGlibPtr};
use gstreamer::prelude::*;
use gstreamer_video as gst_video;
use libloading::Library;

use crate::dylib::{optional, symbol};
use octopipe_core::frame::{DeviceBuffer, DeviceFrame, FrameLayout, PixelFormat};

/// The library's soname (GStreamer 1.22 and later).
const LIBRARY: &str = "libgstcuda-1.0.so.0";
/// The context type decoders ask for.
pub const CONTEXT_TYPE: &str = "gst.cuda.context";
/// The caps feature of CUDA device memory.
pub const CUDA_MEMORY: &str = "memory:CUDAMemory";
/// `GST_MAP_CUDA` (gstcudamemory.h): map to the device pointer, not a host copy.
const GST_MAP_CUDA: gst::ffi::GstMapFlags = gst::ffi::GST_MAP_FLAG_LAST << 1;
/// The GStreamer plugin that holds NVIDIA's decoders.
const PLUGIN: &str = "nvcodec";

/// Why NVDEC decoding into CUDA memory cannot run here (cloned: the library and the plugin are
/// tried once per process).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NvdecError {
    /// GStreamer does not start (its message).
    #[error("{0}")]
    Gst(String),
    /// `libgstcuda-1.0` does not load.
    #[error("{LIBRARY} cannot be loaded ({0}): install gstreamer1.0-plugins-bad")]
    Library(#[source] Arc<libloading::Error>),
    /// `libgstcuda-1.0` lacks a function octopipe calls.
    #[error("{LIBRARY} has no {name} ({source})")]
    Symbol {
        /// The function.
        name: &'static str,
        /// The loader's error.
        source: Arc<libloading::Error>,
    },
    /// No usable GPU.
    #[error(transparent)]
    NoGpu(#[from] octopipe_cuda::NoGpu),
    /// The `nvcodec` plugin registered no decoder.
    #[error(
        "GStreamer's {PLUGIN} plugin registered no decoder (gstreamer1.0-plugins-bad \
         registers nvh264dec etc. only where NVDEC works)"
    )]
    NoDecoder,
    /// The `nvcodec` plugin does not load.
    #[error("GStreamer's {PLUGIN} plugin cannot be loaded: {0}")]
    Plugin(#[source] gst::glib::BoolError),
    /// `libgstcuda-1.0` cannot load the CUDA driver library.
    #[error("{LIBRARY} cannot load the CUDA driver library")]
    Driver,
    /// The CUDA device does not start.
    #[error("CUDA device {device} cannot start: {source:?}")]
    Device {
        /// The device ordinal.
        device: usize,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
    /// GStreamer cannot wrap the device's context.
    #[error("GStreamer cannot wrap CUDA device {0}'s context")]
    Wrap(usize),
    /// GStreamer cannot make the context it hands decoders.
    #[error("GStreamer cannot make a CUDA GstContext")]
    Context,
}

impl octopipe_core::error::Kind for NvdecError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            NvdecError::Gst(_)
            | NvdecError::Library(_)
            | NvdecError::Symbol { .. }
            | NvdecError::NoDecoder
            | NvdecError::Plugin(_) => ErrorKind::Unavailable,
            NvdecError::NoGpu(_)
            | NvdecError::Driver
            | NvdecError::Device { .. }
            | NvdecError::Wrap(_)
            | NvdecError::Context => ErrorKind::Device,
        }
    }
}

type GBoolean = c_int;

/// The start of `GstCudaMemory` (gstcudamemory.h, public fields): the memory and the
/// `GstCudaContext` it was allocated in.
#[repr(C)]
struct CudaMemoryHead {
    mem: gst::ffi::GstMemory,
    context: *mut c_void,
}

/// The functions of `libgstcuda-1.0` octopipe calls.
struct Api {
    /// Keeps the symbols below valid.
    _library: Library,
    /// `gboolean gst_cuda_load_library (void)`: loads libcuda into libgstcuda.
    load_library: unsafe extern "C" fn() -> GBoolean,
    /// `GstCudaContext * gst_cuda_context_new_wrapped (CUcontext handler, CUdevice device)`.
    context_new_wrapped: unsafe extern "C" fn(*mut c_void, c_int) -> *mut gst::ffi::GstObject,
    /// `gpointer gst_cuda_context_get_handle (GstCudaContext * ctx)`: its `CUcontext`.
    context_get_handle: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    /// `GstContext * gst_context_new_cuda_context (GstCudaContext * cuda_ctx)`.
    context_new_cuda_context: unsafe extern "C" fn(*mut c_void) -> *mut gst::ffi::GstContext,
    /// `gboolean gst_is_cuda_memory (GstMemory * mem)`.
    is_cuda_memory: unsafe extern "C" fn(*mut gst::ffi::GstMemory) -> GBoolean,
    /// `void gst_cuda_memory_init_once (void)`: registers the CUDA allocator.
    memory_init_once: unsafe extern "C" fn(),
    /// Stream-ordered CUDA memory (GStreamer 1.24 and later); `None` on 1.22.
    streams: Option<Streams>,
}

/// `GstCudaStream * gst_cuda_memory_get_stream (GstCudaMemory *)`,
/// `CUstream gst_cuda_stream_get_handle (GstCudaStream *)`,
/// `void gst_cuda_memory_sync (GstCudaMemory *)`.
struct Streams {
    memory_get_stream: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    stream_get_handle: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    memory_sync: unsafe extern "C" fn(*mut c_void),
}

impl Api {
    fn load() -> Result<Api, NvdecError> {
        // SAFETY: libgstcuda's initialisers only register GTypes; GStreamer is initialised.
        let library =
            unsafe { Library::new(LIBRARY) }.map_err(|e| NvdecError::Library(Arc::new(e)))?;
        let missing = |name: &'static str, e: libloading::Error| NvdecError::Symbol {
            name,
            source: Arc::new(e),
        };
        // SAFETY (each `symbol`, `optional`): the declared types are those of the GStreamer 1.22
        // headers (gstcudaloader.h, gstcudacontext.h, gstcudamemory.h, gstcudastream.h); the
        // pointers are copied out and stay valid while `_library` is held.
        unsafe {
            let streams = match (
                optional(&library, "gst_cuda_memory_get_stream"),
                optional(&library, "gst_cuda_stream_get_handle"),
                optional(&library, "gst_cuda_memory_sync"),
            ) {
                (Some(memory_get_stream), Some(stream_get_handle), Some(memory_sync)) => {
                    Some(Streams {
                        memory_get_stream,
                        stream_get_handle,
                        memory_sync,
                    })
                }
                _ => None,
            };
            Ok(Api {
                load_library: symbol(&library, "gst_cuda_load_library", missing)?,
                context_new_wrapped: symbol(&library, "gst_cuda_context_new_wrapped", missing)?,
                context_get_handle: symbol(&library, "gst_cuda_context_get_handle", missing)?,
                context_new_cuda_context: symbol(
                    &library,
                    "gst_context_new_cuda_context",
                    missing,
                )?,
                is_cuda_memory: symbol(&library, "gst_is_cuda_memory", missing)?,
                memory_init_once: symbol(&library, "gst_cuda_memory_init_once", missing)?,
                streams,
                _library: library,
            })
        }
    }
}

/// `libgstcuda-1.0`, opened once per process; the error says why it cannot be used.
fn api() -> Result<&'static Api, NvdecError> {
    static API: OnceLock<Result<Api, NvdecError>> = OnceLock::new();
    API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
}

/// Whether `libgstcuda-1.0` opens and has the functions octopipe needs; why not otherwise.
pub(crate) fn library() -> Result<(), NvdecError> {
    super::elements::init().map_err(|e| NvdecError::Gst(e.to_string()))?;
    api().map(|_| ())
}

/// Whether NVDEC decoding into CUDA memory can run here: `libgstcuda-1.0` loads, a GPU is
/// present, and the `nvcodec` plugin registered decoders (it registers none without a GPU
/// with NVDEC). The error says what is missing.
pub(crate) fn available() -> Result<(), NvdecError> {
    library()?;
    octopipe_cuda::available()?;
    if decoders().is_empty() {
        return Err(NvdecError::NoDecoder);
    }
    Ok(())
}

/// Names of the video and image decoders of the `nvcodec` plugin.
fn decoders() -> Vec<String> {
    gst::Registry::get()
        .features_by_plugin(PLUGIN)
        .into_iter()
        .filter_map(|f| f.downcast::<gst::ElementFactory>().ok())
        .filter(is_nv_decoder)
        .map(|f| f.name().to_string())
        .collect()
}

/// Whether `factory` is a video decoder (audio decoders are left to decodebin).
pub(super) fn is_video_decoder(factory: &gst::ElementFactory) -> bool {
    let klass = factory.klass();
    klass.contains("Decoder") && (klass.contains("Video") || klass.contains("Image"))
}

/// Whether `factory` is one of NVIDIA's decoders.
pub(super) fn is_nv_decoder(factory: &gst::ElementFactory) -> bool {
    is_video_decoder(factory) && factory.plugin_name().as_deref() == Some(PLUGIN)
}

/// Whether `factory` is one of NVIDIA's decoders on CUDA device `device`: `nvcodec` registers
/// each decoder once per GPU, the first GPU's as `nvh264dec`, GPU N's as `nvh264deviceNdec`.
pub(super) fn decodes_on(factory: &gst::ElementFactory, device: usize) -> bool {
    let name = factory.name();
    is_nv_decoder(factory)
        && match device {
            0 => !name.contains("device"),
            n => name.contains(&format!("device{n}")),
        }
}

/// Load the `nvcodec` plugin in full, once, before any pipeline makes a decoder. Its
/// initialisation registers the decoders first and the CUDA allocator last, a second later (it
/// probes every GPU's encoders in between): a decoder made by another pipeline meanwhile found
/// no allocator and failed ("Failed to configure the buffer pool", seen with two chains of
/// NVDEC streams in one process). Registering the allocator ourselves covers a plugin loaded
/// by someone else.
fn load_plugin(api: &Api) -> Result<(), NvdecError> {
    static LOADED: OnceLock<Result<(), NvdecError>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            gst::Plugin::load_by_name(PLUGIN)
                .map(|_| ())
                .map_err(NvdecError::Plugin)?;
            // SAFETY: takes no argument; registers the allocator once (idempotent).
            unsafe { (api.memory_init_once)() };
            Ok(())
        })
        .clone()
}

/// The device's primary CUDA context, wrapped for GStreamer: what decoders allocate in and what
/// octopipe's kernels read in.
pub struct SharedCuda {
    /// Retains the primary context while GStreamer uses it (and while frames use its memory:
    /// each frame's owner holds a clone).
    cuda: Arc<CudaContext>,
    /// The `GstContext` of type [`CONTEXT_TYPE`] holding the wrapped context.
    context: gst::Context,
    api: &'static Api,
}

impl SharedCuda {
    /// Wrap the primary context of CUDA device `device`.
    pub fn new(device: usize) -> Result<Arc<SharedCuda>, NvdecError> {
        let api = api()?;
        // SAFETY: takes no argument; loads libcuda's entry points into libgstcuda (idempotent).
        if unsafe { (api.load_library)() } == 0 {
            return Err(NvdecError::Driver);
        }
        load_plugin(api)?;
        let cuda =
            CudaContext::new(device).map_err(|source| NvdecError::Device { device, source })?;
        // SAFETY: a live context and its device; `cuda` keeps the context retained for as long
        // as the wrapper and any memory allocated in it live (this struct and every frame's
        // owner hold it), as gst_cuda_context_new_wrapped requires. The result is a full
        // (sunk) reference or NULL.
        let wrapped =
            unsafe { (api.context_new_wrapped)(cuda.cu_ctx() as *mut c_void, cuda.cu_device()) };
        if wrapped.is_null() {
            return Err(NvdecError::Wrap(device));
        }
        // SAFETY: `wrapped` is a non-NULL full reference to a GstObject (a GstCudaContext).
        let wrapped: gst::Object = unsafe { from_glib_full(wrapped) };
        // SAFETY: `wrapped` is a live GstCudaContext; the new GstContext takes its own reference
        // and is returned as a full reference (or NULL).
        let context = unsafe { (api.context_new_cuda_context)(wrapped.as_ptr() as *mut c_void) };
        if context.is_null() {
            return Err(NvdecError::Context);
        }
        // SAFETY: a non-NULL full reference to a GstContext.
        let context: gst::Context = unsafe { from_glib_full(context) };
        Ok(Arc::new(SharedCuda { cuda, context, api }))
    }

    /// The `gst.cuda.context` context to give elements.
    pub fn context(&self) -> &gst::Context {
        &self.context
    }

    /// The CUDA device ordinal.
    pub fn device(&self) -> usize {
        self.cuda.ordinal()
    }

    /// The decoded NV12 `buffer` (described by `info`, in CUDA memory of this context) as device
    /// planes with their layout, without a copy: the planes stay mapped, and the buffer out of
    /// its pool, until the returned frame's owner is dropped. The error is a message for
    /// [`SourceError::Stream`](super::SourceError::Stream).
    pub fn device_frame(
        &self,
        buffer: &gst::BufferRef,
        info: &gst_video::VideoInfo,
    ) -> Result<(DeviceFrame, FrameLayout), String> {
        let memory = self.cuda_memory(buffer, info)?;
        // SAFETY: `info` and `buffer` are live; the frame holds its own reference to the buffer
        // and the mapping until `gst_video_frame_unmap` (in `Mapped::drop`). A CUDA map gives
        // device pointers, which are never dereferenced on the host.
        let frame = unsafe { map_frame(buffer, info, gst::ffi::GST_MAP_READ | GST_MAP_CUDA) }
            .ok_or("cannot map the decoded frame's CUDA memory")?;
        let mapped = Mapped {
            frame,
            _cuda: self.cuda.clone(),
        };
        let stream = self.stream_of(memory);
        let layout = mapped.layout()?;
        let ptr = mapped.frame.data[0] as u64;
        let frame = DeviceFrame::new(DeviceBuffer::new(
            ptr,
            layout.size(),
            self.cuda.ordinal(),
            stream,
            Box::new(mapped),
        ));
        Ok((frame, layout))
    }

    /// The NV12 `buffer` (described by `info`, in CUDA memory of this context) mapped for
    /// reading and writing on the device, in place, while the returned frame lives (it borrows
    /// the buffer): to draw on a frame before it goes on. The error is a message for the element.
    pub fn device_frame_mut<'a>(
        &self,
        buffer: &'a mut gst::BufferRef,
        info: &gst_video::VideoInfo,
    ) -> Result<DeviceFrameMut<'a>, String> {
        self.cuda_memory(buffer, info)?;
        let flags = gst_video::ffi::GST_VIDEO_FRAME_MAP_FLAG_NO_REF
            | gst::ffi::GST_MAP_READ
            | gst::ffi::GST_MAP_WRITE
            | GST_MAP_CUDA;
        // SAFETY: `info` and `buffer` are live and `buffer` is writable (borrowed mutably); with
        // NO_REF the frame takes no reference of its own (as gstreamer-rs maps a writable frame),
        // so it must not outlive the borrow: `DeviceFrameMut` holds it and unmaps on drop. A CUDA
        // map gives device pointers, which are never dereferenced on the host.
        let frame = unsafe { map_frame(buffer, info, flags) }
            .ok_or("cannot map the frame's CUDA memory for writing")?;
        // The memory as mapped (a write map may have replaced a shared memory by a copy).
        let stream = self.stream_of(buffer.peek_memory(0).as_mut_ptr());
        Ok(DeviceFrameMut {
            frame,
            stream,
            _buffer: std::marker::PhantomData,
        })
    }

    /// The first memory of the NV12 `buffer` (of `info`), checked to be CUDA memory of this
    /// context.
    fn cuda_memory(
        &self,
        buffer: &gst::BufferRef,
        info: &gst_video::VideoInfo,
    ) -> Result<*mut gst::ffi::GstMemory, String> {
        if info.format() != gst_video::VideoFormat::Nv12 {
            return Err(format!(
                "NVDEC gave {} frames in CUDA memory: only NV12 is read there",
                info.format().to_str()
            ));
        }
        if buffer.n_memory() == 0 {
            return Err("the decoded buffer holds no memory".into());
        }
        let memory = buffer.peek_memory(0).as_mut_ptr();
        // SAFETY: `memory` is a live GstMemory of `buffer`.
        if unsafe { (self.api.is_cuda_memory)(memory) } == 0 {
            return Err("the decoded buffer is not in CUDA memory".into());
        }
        // SAFETY: a CUDA memory starts with the public `GstCudaMemory` fields; its context is
        // a live GstCudaContext (the memory holds a reference).
        let owner_ctx = unsafe {
            let head = memory as *const CudaMemoryHead;
            (self.api.context_get_handle)((*head).context)
        };
        if owner_ctx != self.cuda.cu_ctx() as *mut c_void {
            return Err(format!(
                "the decoder allocated its frames in a CUDA context other than device {}'s primary \
                 context, which octopipe reads in (was another context given to the pipeline?)",
                self.cuda.ordinal()
            ));
        }
        Ok(memory)
    }

    /// The `CUstream` the decoder wrote `memory` on, 0 when its writes are complete.
    fn stream_of(&self, memory: *mut gst::ffi::GstMemory) -> u64 {
        let Some(streams) = &self.api.streams else {
            // 1.22: the decoder synchronized its stream before pushing the buffer.
            return 0;
        };
        // SAFETY: `memory` is a live GstCudaMemory (checked by the caller, mapped and held by
        // its frame); the stream it returns is owned by the memory, which outlives the frame's
        // use of the handle.
        unsafe {
            let stream = (streams.memory_get_stream)(memory as *mut c_void);
            if stream.is_null() {
                (streams.memory_sync)(memory as *mut c_void);
                0
            } else {
                (streams.stream_get_handle)(stream) as u64
            }
        }
    }
}

/// A decoded frame mapped in CUDA memory: holds the buffer (out of its pool) until dropped.
struct Mapped {
    frame: gst_video::ffi::GstVideoFrame,
    /// The primary context the memory lives in stays retained while the frame is held.
    _cuda: Arc<CudaContext>,
}

// SAFETY: the mapped frame is read only when it is made (its pointers and pitches) and unmapped
// once, on drop; GstBuffer references and unmapping a CUDA mapping are thread-safe (no CUDA call
// and no host access to the planes).
unsafe impl Send for Mapped {}
// SAFETY: as above; a shared `&Mapped` gives no access to anything.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// The NV12 layout of the mapped planes: offsets from plane 0's pointer and the pitches.
    fn layout(&self) -> Result<FrameLayout, String> {
        let f = &self.frame;
        let (y, uv) = (f.data[0] as usize, f.data[1] as usize);
        if y == 0 || uv <= y {
            return Err(format!(
                "the mapped NV12 planes are not in one allocation, luma then chroma (0x{y:x}, 0x{uv:x})"
            ));
        }
        let pitch = |p: usize| usize::try_from(f.info.stride[p]).unwrap_or(0);
        let layout = FrameLayout {
            format: PixelFormat::Nv12,
            width: u32::try_from(f.info.width).unwrap_or(0),
            height: u32::try_from(f.info.height).unwrap_or(0),
            offsets: [0, uv - y, 0],
            strides: [pitch(0), pitch(1), 0],
        };
        layout.check(None).map_err(|e| e.to_string())?;
        Ok(layout)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the frame was mapped by gst_video_frame_map and is unmapped exactly once; this
        // drops the frame's buffer reference, returning the buffer to the decoder's pool.
        unsafe { gst_video::ffi::gst_video_frame_unmap(&mut self.frame) };
    }
}

/// An NV12 frame in CUDA memory mapped for writing in place ([`SharedCuda::device_frame_mut`]):
/// its planes' device pointers and pitches, and the stream its last writer used.
pub struct DeviceFrameMut<'a> {
    frame: gst_video::ffi::GstVideoFrame,
    stream: u64,
    /// The buffer stays borrowed while mapped (the mapping holds no reference of its own).
    _buffer: std::marker::PhantomData<&'a mut gst::BufferRef>,
}

impl DeviceFrameMut<'_> {
    /// The luma and the interleaved chroma plane: each its device address and pitch (bytes
    /// between rows), as the buffer's video meta gives them.
    pub fn planes(&self) -> [(u64, usize); 2] {
        let f = &self.frame;
        let pitch = |p: usize| usize::try_from(f.info.stride[p]).unwrap_or(0);
        [(f.data[0] as u64, pitch(0)), (f.data[1] as u64, pitch(1))]
    }

    /// The `CUstream` the frame's last writer used (0 when its writes are complete): work on
    /// the frame waits for it.
    pub fn stream(&self) -> u64 {
        self.stream
    }
}

impl Drop for DeviceFrameMut<'_> {
    fn drop(&mut self) {
        // SAFETY: mapped by gst_video_frame_map and unmapped exactly once, while the buffer is
        // still borrowed.
        unsafe { gst_video::ffi::gst_video_frame_unmap(&mut self.frame) };
    }
}

/// Whether `caps` describe CUDA memory.
pub fn is_cuda_caps(caps: &gst::CapsRef) -> bool {
    caps.features(0).is_some_and(|f| f.contains(CUDA_MEMORY))
}

/// The caps an NVDEC appsink asks for: NV12 in CUDA memory.
pub(super) fn cuda_nv12_caps() -> gst::Caps {
    gst_video::VideoCapsBuilder::new()
        .features([CUDA_MEMORY])
        .format(gst_video::VideoFormat::Nv12)
        .build()
}

/// Answer a `gst.cuda.context` need-context message with `shared`'s context; `true` when the
/// message was one.
pub(super) fn answer_need_context(msg: &gst::MessageRef, shared: &SharedCuda) -> bool {
    let gst::MessageView::NeedContext(need) = msg.view() else {
        return false;
    };
    if need.context_type() != CONTEXT_TYPE {
        return false;
    }
    if let Some(element) = msg.src().and_then(|s| s.downcast_ref::<gst::Element>()) {
        element.set_context(shared.context());
    }
    true
}

/// Answer a `gst.cuda.context` context query with `shared`'s context; `true` when answered.
pub fn answer_context_query(query: &mut gst::QueryRef, shared: &SharedCuda) -> bool {
    match query.view_mut() {
        gst::QueryViewMut::Context(q) if q.context_type() == CONTEXT_TYPE => {
            q.set_context(shared.context());
            true
        }
        _ => false,
    }
}

/// `GstAutoplugSelectResult` value `value` (0 try, 2 skip) for decodebin's `autoplug-select`.
pub(super) fn autoplug_select_result(value: i32) -> Option<gst::glib::Value> {
    let ty = gst::glib::Type::from_name("GstAutoplugSelectResult")?;
    gst::glib::EnumClass::with_type(ty)?.to_value(value)
}

/// `buffer` (described by `info`) mapped as a video frame with `flags`; `None` when GStreamer
/// refuses the map.
///
/// # Safety
/// `buffer` and `info` must be live, `buffer` writable where `flags` ask to write; the frame
/// returned must be unmapped (`gst_video_frame_unmap`) while they are.
unsafe fn map_frame(
    buffer: &gst::BufferRef,
    info: &gst_video::VideoInfo,
    flags: gst::ffi::GstMapFlags,
) -> Option<gst_video::ffi::GstVideoFrame> {
    let mut mapped = MaybeUninit::<gst_video::ffi::GstVideoFrame>::zeroed();
    // SAFETY: as the caller guarantees; on success the frame is initialised.
    unsafe {
        let ok = gst_video::ffi::gst_video_frame_map(
            mapped.as_mut_ptr(),
            info.to_glib_none().0,
            buffer.as_mut_ptr(),
            flags,
        );
        (ok != 0).then(|| mapped.assume_init())
    }
}
