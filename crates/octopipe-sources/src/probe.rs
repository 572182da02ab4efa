//! What GStreamer and the GPU decoders offer here: elements, NVDEC, nvJPEG, image files, live
//! fragments.

use octopipe_core::stage::source::SourceError;

use super::nvdec::NvdecError;
use super::nvjpeg::NvjpegError;
use super::{elements, images, launch, nvdec, nvjpeg};

/// Whether GStreamer has an element factory called `name` (GStreamer is initialised if needed;
/// false when it cannot be).
pub fn element_exists(name: &str) -> bool {
    elements::element_exists(name)
}

/// Names of every installed GStreamer element (empty when GStreamer cannot be initialised).
pub fn element_names() -> Vec<String> {
    elements::element_names()
}

/// Whether NVDEC decoding into CUDA memory (`decoder=nvdec`) can run here; otherwise why not
/// (no `libgstcuda-1.0`, no GPU, no NVDEC decoder registered by GStreamer's `nvcodec` plugin).
pub fn nvdec_available() -> Result<(), NvdecError> {
    nvdec::available()
}

/// Whether nvJPEG decoding into CUDA memory (`images decoder=nvjpeg`) can run on GPU `device`
/// here: `libnvjpeg` loads, the GPU exists and a decoder starts on it (the one every stream of
/// the process decoding there shares); otherwise why not. `Ok` says which backend decodes
/// (`hardware`: the GPU's JPEG engines; `gpu`: its cores).
pub fn nvjpeg_available(device: usize) -> Result<&'static str, NvjpegError> {
    nvjpeg::available(device).map(|d| d.backend())
}

/// Whether GStreamer's CUDA library (`libgstcuda-1.0`, opened at run time) loads with the
/// functions octopipe calls; otherwise why not.
pub fn gst_cuda_library() -> Result<(), NvdecError> {
    nvdec::library()
}

/// The files an `images location=` (a folder, a glob such as `dir/*.jpg`, or one image) plays,
/// in name order, as the source lists them when it opens (symlinks not resolved): for a check
/// of each file's real path.
pub fn image_files(location: &str) -> Result<Vec<std::path::PathBuf>, SourceError> {
    images::matching_files(location)
}

/// Whether a GStreamer launch fragment holds a live source (it is parsed, never started).
pub fn fragment_is_live(fragment: &str) -> bool {
    launch::fragment_is_live(fragment)
}
