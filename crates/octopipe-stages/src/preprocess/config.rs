//! The preprocess stage's settings ([`PreprocessConfig`]), made from its properties
//! ([`PreprocessProps`]), with their enums and defaults. The stage tells them to the stages around
//! it in the caps, keyed by this type (`caps.get::<PreprocessConfig>()`): the batch stage (the crop
//! size) and the models (which settle the size) read them; the sources read the request for
//! page-locked frames it tells beside them (`octopipe_core::stage::PageLocked`).

use octopipe_core::stage::{PropChoice, PropValue, Properties};
use octopipe_core::tensor::{DType, Layout};
use octopipe_cuda::StreamPriority;

/// Default output size (width, height).
pub const DEFAULT_SIZE: (u32, u32) = (64, 64);
/// Default scale applied to 0..255 values before mean/std.
pub const DEFAULT_SCALE: f32 = 1.0 / 255.0;

/// Channel order of the output tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
pub enum ChannelOrder {
    /// Red, green, blue.
    #[default]
    Rgb,
    /// Blue, green, red.
    Bgr,
}

/// How a crop is resampled to the output size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
pub enum Interpolation {
    /// OpenCV `INTER_LINEAR` (half-pixel centres, 2x2 taps, no antialiasing).
    #[default]
    Bilinear,
    /// OpenCV `INTER_AREA`: when the crop is downscaled on both axes, each output pixel is the
    /// area-weighted mean of the source pixels its footprint covers (antialiased); otherwise
    /// OpenCV's own fallback, a 2-tap linear filter with `INTER_AREA`'s tap positions.
    Area,
}

/// Which implementation runs the stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
pub enum BackendKind {
    /// CUDA when a GPU is present, else CPU.
    #[default]
    Auto,
    /// The multi-threaded CPU backend.
    Cpu,
    /// The CUDA backend.
    Cuda,
}

impl BackendKind {
    /// The value of a checked `backend` property (`auto`, `cpu`, `cuda`; auto when not given).
    pub fn from_prop(value: Option<&str>) -> Self {
        value.and_then(Self::parse_prop).unwrap_or_default()
    }
}

/// Settings of the preprocess stage.
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessConfig {
    /// Output (width, height); `None` takes it from the classifier's input shape.
    pub size: Option<(u32, u32)>,
    /// Per-channel mean, in the output channel order, after `scale`.
    pub mean: [f32; 3],
    /// Per-channel standard deviation, in the output channel order, after `scale`.
    pub std: [f32; 3],
    /// Factor from 0..255 values to the units of mean/std.
    pub scale: f32,
    /// Channel order.
    pub channels: ChannelOrder,
    /// Memory layout.
    pub layout: Layout,
    /// Backend.
    pub backend: BackendKind,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
    /// Resampling filter.
    pub interpolation: Interpolation,
    /// `Some(pad)`: letterbox. The crop keeps its aspect ratio: it is resized to the largest size
    /// that fits the output (the other side rounded to nearest, at least 1 pixel), centred (the
    /// spare columns or rows split with the odd one at the right / bottom), and the rest is filled
    /// with `pad` (on the 0..255 scale, normalized like the pixels). `None`: stretch to the output.
    pub letterbox: Option<f32>,
    /// Output element type.
    pub dtype: DType,
    /// Leave the tensor in device memory (`TensorData::Device`, CUDA backend only) instead of
    /// copying it to the host: for consumers that read device memory.
    pub device_output: bool,
    /// The CUDA device the CUDA backend runs on.
    pub device: usize,
    /// How the CUDA backend takes crop rectangles out of host frames.
    pub gather: Gather,
    /// The priority of the CUDA backend's streams (`gpu-priority`; the detector's tiles at
    /// `detect gpu-priority`).
    pub priority: StreamPriority,
}

/// How the CUDA backend takes each crop's rectangle out of a host frame (`gather`). With `auto`
/// or `device`, the pipeline's sources decode into page-locked pooled buffers, which the GPU
/// reads in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
pub enum Gather {
    /// The GPU pulls the rectangles when every frame of the batch is page-locked, else the host
    /// gathers them.
    #[default]
    Auto,
    /// The host copies the rectangles' rows into one staging buffer, uploaded with one copy.
    Host,
    /// The GPU pulls the rectangles (`cuda/gather.cu`); a frame that is not page-locked is an
    /// error naming it.
    Device,
}

impl PreprocessConfig {
    /// The device whose context allocates page-locked frames for this stage, when its frames
    /// should be page-locked: a CUDA (or auto) backend that may gather on the GPU.
    pub fn page_locked_frames(&self) -> Option<usize> {
        (self.backend != BackendKind::Cpu && self.gather != Gather::Host).then_some(self.device)
    }
}

impl Default for PreprocessConfig {
    /// Each property's declared default ([`PreprocessProps`]).
    fn default() -> Self {
        PreprocessConfig::from(PreprocessProps::default())
    }
}

/// Where the preprocess stage leaves its tensor (`memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
pub enum Memory {
    /// Host memory.
    Host,
    /// Device memory (the CUDA backend), for consumers that read it there.
    Device,
}

/// The `backend` and `threads` properties of the stages that run on the CPU or CUDA
/// (`preprocess`, `tilestats`), flattened into theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Properties)]
pub struct BackendProps {
    /// implementation (auto: CUDA when a GPU is present)
    #[prop(default = "auto")]
    pub backend: BackendKind,
    /// CPU worker threads (0: one per core)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_THREADS)]
    pub threads: usize,
}

/// The preprocess stage's properties, declared once (the stage's table, in `octopipe`'s
/// `preprocess` module); [`PreprocessConfig`] is made from them.
#[derive(Debug, Clone, PartialEq, Properties)]
pub struct PreprocessProps {
    /// output size (auto: the model's input size)
    #[prop(default = "auto", range = ..=octopipe_core::stage::limits::MAX_INPUT_SIDE)]
    pub size: Option<(u32, u32)>,
    /// per-channel mean, after scale
    #[prop(default = "0.485,0.456,0.406")]
    pub mean: [f32; 3],
    /// per-channel standard deviation, after scale
    #[prop(default = "0.229,0.224,0.225", positive)]
    pub std: [f32; 3],
    /// factor from 0..255 to the units of mean/std (auto: 1/255)
    #[prop(default = "auto", value = DEFAULT_SCALE, positive)]
    pub scale: f32,
    /// channel order of the tensor
    #[prop(default = "rgb")]
    pub channels: ChannelOrder,
    /// tensor layout
    #[prop(default = "nchw")]
    pub layout: Layout,
    /// tensor element type (the classify stage takes f32)
    #[prop(default = "f32")]
    pub dtype: DType,
    /// where the tensor is left: host memory, or (backend=cuda) device memory for consumers that
    /// read it there
    #[prop(default = "host")]
    pub memory: Memory,
    /// the GPU the CUDA backend runs on (its frames and tensor in that GPU's memory)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_DEVICE)]
    pub device: usize,
    /// CUDA backend: crop rectangles pulled by the GPU from page-locked frames (the sources then
    /// decode into page-locked buffers), or gathered on the host (auto: the GPU when the frames
    /// are page-locked)
    #[prop(default = "auto")]
    pub gather: Gather,
    /// `backend`, `threads`.
    #[prop(flatten)]
    pub compute: BackendProps,
    /// OpenCV INTER_LINEAR, or INTER_AREA (antialiased downscaling)
    #[prop(default = "bilinear")]
    pub interpolation: Interpolation,
    /// keep the aspect ratio and pad with this value (0..255 scale) instead of stretching
    #[prop(range = 0.0..=255.0)]
    pub letterbox: Option<f32>,
    /// CUDA backend: the priority of its GPU work (high, the default: its crops are cut ahead of
    /// the waiting work of normal streams, a detector's large calls)
    #[prop(default = "high")]
    pub gpu_priority: StreamPriority,
}

impl From<PreprocessProps> for PreprocessConfig {
    fn from(p: PreprocessProps) -> Self {
        PreprocessConfig {
            size: p.size,
            mean: p.mean,
            std: p.std,
            scale: p.scale,
            channels: p.channels,
            layout: p.layout,
            backend: p.compute.backend,
            threads: p.compute.threads,
            interpolation: p.interpolation,
            letterbox: p.letterbox,
            dtype: p.dtype,
            device_output: p.memory == Memory::Device,
            device: p.device,
            gather: p.gather,
            priority: p.gpu_priority,
        }
    }
}

impl PreprocessConfig {
    /// Per-channel `(a, b)` with `out = v * a + b` for a 0..255 value `v`, in output channel order.
    pub fn affine(&self) -> [(f32, f32); 3] {
        std::array::from_fn(|c| (self.scale / self.std[c], -self.mean[c] / self.std[c]))
    }

    /// Whether the plain stretch-bilinear path applies (no letterbox, bilinear): the original fast
    /// paths of both backends.
    pub fn is_plain_bilinear(&self) -> bool {
        self.interpolation == Interpolation::Bilinear && self.letterbox.is_none()
    }

    /// The output size, or the default when not set yet.
    pub fn out_size(&self) -> (u32, u32) {
        self.size.unwrap_or(DEFAULT_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_defaults_are_the_constants() {
        let d = PreprocessConfig::default();
        assert_eq!(
            (d.mean, d.std, d.scale),
            ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225], DEFAULT_SCALE)
        );
        assert_eq!(
            (d.size, d.layout, d.dtype),
            (None, Layout::Nchw, DType::F32)
        );
        assert_eq!(
            (d.backend, d.threads, d.device_output),
            (BackendKind::Auto, 0, false)
        );
    }
}
