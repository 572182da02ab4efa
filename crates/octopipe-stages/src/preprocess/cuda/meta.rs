//! Host mirrors of the structs in octopipe-cuda's `common.cuh` that the preprocess kernels read
//! (packed into one byte buffer with `octopipe_cuda::push_aligned`, uploaded with one copy).

use cudarc::driver::DeviceRepr;

use crate::preprocess::{ChannelOrder, Layout, PreprocessConfig};
use octopipe_core::frame::{ChromaSite, Colorimetry, FrameLayout, PixelFormat};

/// Kernel input family: which sampler a kernel is specialised for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// Planar YUV 4:2:0.
    I420,
    /// Semi-planar YUV 4:2:0.
    Nv12,
    /// Packed RGB, BGR, RGBA or BGRA.
    Packed,
}

impl InputKind {
    /// The family of a pixel format.
    pub fn of(format: PixelFormat) -> Self {
        match format {
            PixelFormat::I420 => InputKind::I420,
            PixelFormat::Nv12 => InputKind::Nv12,
            _ => InputKind::Packed,
        }
    }
}

/// `FrameDesc` of `common.cuh`: one frame's planes inside the device frame arena.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameDesc {
    /// Absolute byte offset of each plane in the arena.
    pub plane: [u64; 3],
    /// Row stride of each plane.
    pub stride: [u32; 3],
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// 0 I420, 1 NV12, 2 packed.
    pub format: u32,
    /// Bytes per pixel (packed).
    pub bpp: u32,
    /// Byte index of R, G, B in a packed pixel.
    pub rgb: [u32; 3],
    /// Luma offset (YUV).
    pub y_off: f32,
    /// Row-major YUV to RGB matrix.
    pub m: [f32; 9],
    /// Horizontal chroma siting shift.
    pub x_shift: f32,
    /// 1: a YUV frame of JPEG colorimetry, converted with libjpeg-turbo's integer arithmetic
    /// (`preprocess::jpeg`) instead of `m`, `y_off` and `x_shift`.
    pub jpeg: u32,
}

impl FrameDesc {
    /// The descriptor of a frame whose buffer starts at arena byte `base` (an offset that may
    /// wrap around: the kernels add it to the arena's address modulo 2^64, which is how a frame
    /// outside the arena is reached).
    pub fn new(layout: &FrameLayout, colorimetry: &Colorimetry, base: u64) -> Self {
        let (y_off, m) = colorimetry.yuv_to_rgb();
        let format = match InputKind::of(layout.format) {
            InputKind::I420 => 0,
            InputKind::Nv12 => 1,
            InputKind::Packed => 2,
        };
        FrameDesc {
            plane: std::array::from_fn(|i| base.wrapping_add(layout.offsets[i] as u64)),
            stride: layout.strides.map(|s| s as u32),
            width: layout.width,
            height: layout.height,
            format,
            bpp: layout.format.packed_bytes() as u32,
            rgb: match layout.format {
                PixelFormat::Bgr | PixelFormat::Bgra => [2, 1, 0],
                // The grey value in every channel: the packed sampler reads byte 0 three times.
                PixelFormat::Gray8 => [0, 0, 0],
                _ => [0, 1, 2],
            },
            y_off,
            m: [
                m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2], m[2][0], m[2][1], m[2][2],
            ],
            x_shift: match colorimetry.chroma_site {
                ChromaSite::Center => 0.25,
                ChromaSite::Left => 0.0,
            },
            jpeg: (layout.format.is_yuv() && *colorimetry == Colorimetry::JPEG) as u32,
        }
    }
}

/// `Norm` of `common.cuh`: `out[k] = v[k] * a[k] + b[k]`, channel order and layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Norm {
    /// Scale per output channel.
    pub a: [f32; 3],
    /// Offset per output channel.
    pub b: [f32; 3],
    /// 1 when output channel 0 is blue.
    pub bgr: u32,
    /// 1 for NHWC, 0 for NCHW.
    pub nhwc: u32,
}

// SAFETY: plain `#[repr(C)]` data with the layout of the kernels' `Norm`, passed by value.
unsafe impl DeviceRepr for Norm {}

impl Norm {
    /// The normalization of a preprocess configuration.
    pub fn from_config(config: &PreprocessConfig) -> Self {
        let aff = config.affine();
        Norm {
            a: aff.map(|(a, _)| a),
            b: aff.map(|(_, b)| b),
            bgr: (config.channels == ChannelOrder::Bgr) as u32,
            nhwc: (config.layout == Layout::Nhwc) as u32,
        }
    }
}

/// `GatherRect` of `common.cuh`: one plane rectangle of a crop that `gather.cu`
/// pulls from page-locked host memory into the frame arena.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatherRect {
    /// Device address of the rectangle's first byte (a page-locked host address).
    pub src: u64,
    /// Arena byte the rectangle is packed to.
    pub dst: u64,
    /// Bytes between the starts of two source rows.
    pub src_stride: u32,
    /// Bytes per row.
    pub row_bytes: u32,
    /// Rows.
    pub rows: u32,
    /// Padding to 8 bytes.
    pub pad: u32,
}

// SAFETY: a `#[repr(C)]` struct of 4- and 8-byte fields with no implicit padding (its size is
// checked below), so its bytes can be packed as they are (`octopipe_cuda::push_aligned`).
unsafe impl octopipe_cuda::Pod for FrameDesc {}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::crops::{BlockMeta, CropMeta};

    #[test]
    fn frame_desc_matches_the_kernel_header() {
        assert_eq!(std::mem::size_of::<FrameDesc>(), 112);
        assert_eq!(std::mem::size_of::<Norm>(), 32);
        assert_eq!(std::mem::size_of::<CropMeta>(), 32);
        assert_eq!(std::mem::size_of::<BlockMeta>(), 12);
        assert_eq!(std::mem::size_of::<GatherRect>(), 32);
    }
}
