//! Preprocess stage: crop + resize + colour conversion + normalization, one pass per output pixel.
//!
//! ```text
//! ... ! batch ! preprocess size=64x64 mean=0.485,0.456,0.406 std=0.229,0.224,0.225 channels=rgb layout=nchw ! classify ...
//! ```
//!
//! Semantics (both backends): the crop is the detection's integer box; it is resized exactly as
//! OpenCV `cv2.resize(crop, size, interpolation=INTER_LINEAR)` does (half-pixel centres, sampling
//! clamped to the crop's own edge pixels); YUV frames are converted to RGB at each sampled pixel:
//! JPEG frames ([`Colorimetry::JPEG`](octopipe_core::frame::Colorimetry::JPEG)) with libjpeg-turbo's own
//! integer arithmetic (its "fancy" chroma upsampling and fixed-point YCbCr to RGB), so that they
//! equal `cv2.imread`'s RGB byte for byte; other colorimetries in floating point with the frame's
//! matrix and range, chroma upsampled bilinearly at its siting; then
//! `value = (v * scale - mean) / std` per channel, written NCHW or NHWC as f32.
//!
//! Options (both backends, bit-identical): `interpolation` ([`Interpolation::Area`]: OpenCV
//! `INTER_AREA`, antialiased downscaling), `letterbox` (aspect-preserving resize into the output,
//! centred, padded; [`letterbox_rect`]) and `dtype` ([`DType::F16`]: half output in
//! `CropBatch::tensor_f16`, for f16 consumers; the classifier needs f32).

mod backend;
mod choose;
mod config;
pub mod cpu;
pub mod cuda;
mod error;
mod half;
mod jpeg;
mod letterbox;
mod stage;
mod validate;

pub use octopipe_core::tensor::{DType, Layout};

pub use backend::Backend;
pub use choose::{create_backend, GpuWithFallback};
pub use config::{
    BackendKind, BackendProps, ChannelOrder, Gather, Interpolation, Memory, PreprocessConfig,
    PreprocessProps, DEFAULT_SCALE, DEFAULT_SIZE,
};
pub use error::PreprocessError;
pub use half::{f16_to_f32, f32_to_f16};
pub use letterbox::letterbox_rect;
pub use stage::PREPROCESS;
pub use validate::validate;
