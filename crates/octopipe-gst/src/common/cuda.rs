//! Frames in CUDA memory (`video/x-raw(memory:CUDAMemory),format=NV12`, what `nvh264dec` and
//! `nvh265dec` give), read where the decoder wrote them, as `media decoder=nvdec` reads them.
//!
//! - **One CUDA context.** The elements that read pixels answer the decoder's `gst.cuda.context`
//!   query with the primary context of their GPU (`device=`), wrapped for GStreamer, so the
//!   decoder allocates its frames where octopipe's kernels read them. One wrapper per GPU serves
//!   every element of the process.
//! - **No copy.** A buffer is mapped with `GST_MAP_READ | GST_MAP_CUDA` into a device frame that
//!   holds the mapping (and the buffer) until the element has processed it; the detector cuts
//!   its tiles and the preprocess stage its crops on the GPU from it.
//! - **Refused on the CPU.** A stage configured to read system memory (`backend=cpu`) refuses
//!   CUDA caps at negotiation with an element error saying what to set.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use gstreamer as gst;
use octopipe_sources::plugin::{answer_context_query, SharedCuda, CONTEXT_TYPE};

use super::error::PluginError;
use super::props::Values;

/// The wrapped primary context of each GPU, while some element holds it.
static SHARED: LazyLock<Mutex<HashMap<usize, Weak<SharedCuda>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The GPU an element's stages run on: its `device` property (0 when unset).
pub(crate) fn device(values: &Values) -> Result<usize, PluginError> {
    match values.text("device") {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| {
            PluginError::Property(format!("device={text}: not a GPU ordinal (0, 1, ...)"))
        }),
    }
}

/// The primary context of GPU `device`, wrapped for GStreamer (made once while held); the error
/// says why frames in CUDA memory cannot be read here (no `libgstcuda-1.0`, no GPU).
pub(crate) fn shared(device: usize) -> Result<Arc<SharedCuda>, PluginError> {
    let mut held = SHARED.lock().unwrap();
    if let Some(shared) = held.get(&device).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let shared = SharedCuda::new(device).map_err(|e| {
        PluginError::Cuda(format!(
            "frames in CUDA memory (video/x-raw(memory:CUDAMemory)) cannot be read on GPU \
             {device}: {e}"
        ))
    })?;
    held.insert(device, Arc::downgrade(&shared));
    Ok(shared)
}

/// Whether `query` asks for the CUDA context (the decoder upstream looking for the one to
/// allocate its frames in).
pub(crate) fn is_context_query(query: &gst::QueryRef) -> bool {
    matches!(query.view(), gst::QueryView::Context(q) if q.context_type() == CONTEXT_TYPE)
}

/// Answer a `gst.cuda.context` query with `shared`'s context.
pub(crate) fn answer(query: &mut gst::QueryRef, shared: &SharedCuda) -> bool {
    answer_context_query(query, shared)
}

/// Whether `context` is a CUDA context (what a decoder or an application hands the pipeline).
pub(crate) fn is_cuda_context(context: &gst::Context) -> bool {
    context.context_type() == CONTEXT_TYPE
}

/// Why a stage configured with `values` cannot read frames in CUDA memory, if it cannot: its
/// `backend` reads system memory.
pub(crate) fn refuses(values: &Values, element: &str) -> Option<PluginError> {
    (values.text("backend") == Some("cpu")).then(|| {
        PluginError::Property(format!(
            "frames in CUDA memory (video/x-raw(memory:CUDAMemory)) are read on the GPU, and \
             backend=cpu reads system memory: set backend=cuda (or auto), or put cudadownload \
             before {element} to copy the frames to the host"
        ))
    })
}
