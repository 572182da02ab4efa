//! Caps, formats and colorimetry shared by every kind of input, and the copy of a decoded frame's
//! planes into octopipe's packed layout.

use gstreamer as gst;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use crate::SourceError;
use octopipe_core::frame::{
    BufferPool, ChromaSite, Colorimetry, FrameLayout, Matrix, PixelFormat, PooledBuf, Range,
};

/// Ask `appsink` for I420 or NV12: decoders output YUV natively, and colour conversion is the
/// preprocess stage's job, so the decoder never converts to RGB.
pub(super) fn ask_for_yuv(appsink: &gst_app::AppSink) {
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format_list([gst_video::VideoFormat::I420, gst_video::VideoFormat::Nv12])
            .build(),
    ));
}

/// The GStreamer format of an octopipe format.
pub(super) fn gst_format(format: PixelFormat) -> gst_video::VideoFormat {
    use gst_video::VideoFormat as F;
    match format {
        PixelFormat::I420 => F::I420,
        PixelFormat::Nv12 => F::Nv12,
        PixelFormat::Rgb => F::Rgb,
        PixelFormat::Bgr => F::Bgr,
        PixelFormat::Rgba => F::Rgba,
        PixelFormat::Bgra => F::Bgra,
        PixelFormat::Gray16 => F::Gray16Le,
        PixelFormat::Gray8 => F::Gray8,
    }
}

/// The octopipe format of a decoded GStreamer format; RGBx/BGRx read as RGBA/BGRA (alpha ignored).
pub fn pixel_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    use gst_video::VideoFormat as F;
    Some(match format {
        F::I420 => PixelFormat::I420,
        F::Nv12 => PixelFormat::Nv12,
        F::Rgb => PixelFormat::Rgb,
        F::Bgr => PixelFormat::Bgr,
        F::Rgba | F::Rgbx => PixelFormat::Rgba,
        F::Bgra | F::Bgrx => PixelFormat::Bgra,
        F::Gray16Le => PixelFormat::Gray16,
        F::Gray8 => PixelFormat::Gray8,
        _ => return None,
    })
}

/// GStreamer's own default for video whose caps say nothing: BT.709 from 720 lines up, else BT.601.
pub fn video_default(height: u32) -> Colorimetry {
    if height >= 720 {
        Colorimetry::BT709
    } else {
        Colorimetry::BT601
    }
}

/// The colorimetry of `caps` (parsed into `info`), with what they leave unknown taken from `fallback`.
///
/// Matrices octopipe has no coefficients for map to the closest one: FCC to BT.601 (nearly the
/// same), SMPTE 240M and BT.2020 to BT.709 (240M is within 0.2% of it; BT.2020 content is HD
/// material whose nearest supported matrix is 709). Chroma co-sited horizontally (`mpeg2`, `dv`,
/// `cosited`) is `Left`; chroma centred (`jpeg`) is `Center`.
///
/// The `chroma-site` field is read from the caps themselves: GStreamer 1.22's `VideoInfo` overwrites
/// it with its default (centred below 720 lines, co-sited above) whenever the caps carry no
/// `colorimetry`, and leaves it unknown when they carry a colorimetry but no chroma site (H.264 from
/// `avdec_h264`); then `fallback` decides.
pub fn colorimetry(
    info: &gst_video::VideoInfo,
    caps: &gst::CapsRef,
    fallback: Colorimetry,
) -> Colorimetry {
    use gst_video::{VideoChromaSite as Site, VideoColorMatrix as M, VideoColorRange as R};
    let c = info.colorimetry();
    let matrix = match c.matrix() {
        M::Bt601 | M::Fcc => Matrix::Bt601,
        M::Bt709 | M::Smpte240m | M::Bt2020 => Matrix::Bt709,
        _ => fallback.matrix,
    };
    let range = match c.range() {
        R::Range0_255 => Range::Full,
        R::Range16_235 => Range::Limited,
        _ => fallback.range,
    };
    let site = caps
        .structure(0)
        .and_then(|s| s.get::<&str>("chroma-site").ok())
        .map(Site::from_string)
        .unwrap_or_else(|| info.chroma_site());
    let chroma_site = if site.contains(Site::H_COSITED) {
        ChromaSite::Left
    } else if site.is_empty() {
        fallback.chroma_site
    } else {
        ChromaSite::Center
    };
    Colorimetry {
        matrix,
        range,
        chroma_site,
    }
}

/// Map `buffer` (described by `info`) and copy its planes into `dst`, laid out as `layout`; the
/// error is a message for [`SourceError::Stream`](super::SourceError::Stream).
pub fn copy_frame(
    buffer: &gst::BufferRef,
    info: &gst_video::VideoInfo,
    layout: &FrameLayout,
    dst: &mut [u8],
) -> Result<(), String> {
    let video = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, info)
        .map_err(|e| format!("cannot map the decoded frame: {e}"))?;
    copy_planes(&video, layout, dst)
}

/// A pooled copy of `buffer`'s frame (frame `seq` of the input `source`), laid out as
/// `layout`: memory the system refuses for it is the stream's error, not an abort.
pub(crate) fn copy_out(
    pool: &BufferPool,
    buffer: &gst::BufferRef,
    info: &gst_video::VideoInfo,
    layout: &FrameLayout,
    source: &str,
    seq: u64,
) -> Result<PooledBuf, SourceError> {
    let (w, h, format) = (layout.width, layout.height, layout.format);
    let mut pixels = pool
        .try_take(layout.size())
        .map_err(|error| SourceError::OutOfMemory {
            source_name: source.to_string(),
            what: format!("frame {seq} ({w}x{h} {format})"),
            error,
        })?;
    copy_frame(buffer, info, layout, &mut pixels).map_err(|message| SourceError::Stream {
        source_name: source.to_string(),
        message,
        debug: None,
    })?;
    Ok(pixels)
}

/// Copy each plane's visible rows from the mapped frame into `dst`, laid out as `layout`.
fn copy_planes(
    frame: &gst_video::VideoFrameRef<&gst::BufferRef>,
    layout: &FrameLayout,
    dst: &mut [u8],
) -> Result<(), String> {
    let height = layout.height as usize;
    for plane in 0..layout.format.planes() {
        let rows = if plane == 0 {
            height
        } else {
            height.div_ceil(2)
        };
        let row = layout.strides[plane];
        let src = frame
            .plane_data(plane as u32)
            .map_err(|e| format!("plane {plane}: {e}"))?;
        let stride = usize::try_from(frame.plane_stride()[plane]).unwrap_or(0);
        let dst = &mut dst[layout.offsets[plane]..layout.offsets[plane] + row * rows];
        if rows == 0 || row == 0 {
            continue;
        }
        if stride < row || src.len() < stride * (rows - 1) + row {
            return Err(format!(
                "plane {plane} is {} bytes with stride {stride}, too small for {rows} rows of {row} bytes",
                src.len()
            ));
        }
        if stride == row {
            dst.copy_from_slice(&src[..row * rows]);
        } else {
            for (d, s) in dst.chunks_exact_mut(row).zip(src.chunks(stride)) {
                d.copy_from_slice(&s[..row]);
            }
        }
    }
    Ok(())
}
