//! The CPU's decode of a JPEG file that nvJPEG's batched decoder does not take (progressive,
//! grey, CMYK, other chroma sampling, a damaged file), held as I420 of JPEG colorimetry like
//! nvJPEG's frames, so that both kinds go into one batch of the crop kernel.

use crate::SourceError;
use octopipe_core::frame::{FrameLayout, PixelFormat, PooledBuf};

/// Decode `bytes` (the JPEG file `input` names) into I420 planes (libjpeg's forward YCbCr
/// transform of the decoded RGB, chroma the mean of each 2x2 block); the decoder's words when
/// it cannot, and planes the system refuses are the stream's error, not an abort.
pub(crate) fn decode_on_cpu(
    bytes: &[u8],
    input: &str,
) -> Result<(PooledBuf, FrameLayout), SourceError> {
    let rgb = image::load_from_memory_with_format(bytes, image::ImageFormat::Jpeg)
        .map_err(|e| SourceError::Stream {
            source_name: input.to_string(),
            message: format!("not a JPEG that decodes: {e}"),
            debug: None,
        })?
        .to_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    let layout = FrameLayout::packed(PixelFormat::I420, w as u32, h as u32);
    let mut planes = octopipe_core::alloc::try_zeroed(layout.size()).map_err(|error| {
        SourceError::OutOfMemory {
            source_name: input.to_string(),
            what: format!("the {w}x{h} I420 planes of its picture decoded on the CPU"),
            error,
        }
    })?;
    let px = |x: usize, y: usize| {
        let p = rgb.get_pixel(x.min(w - 1) as u32, y.min(h - 1) as u32).0;
        [p[0] as f32, p[1] as f32, p[2] as f32]
    };
    for y in 0..h {
        for x in 0..w {
            let [r, g, b] = px(x, y);
            planes[y * layout.strides[0] + x] = byte(0.299 * r + 0.587 * g + 0.114 * b);
        }
    }
    for cy in 0..h.div_ceil(2) {
        for cx in 0..w.div_ceil(2) {
            let (mut cb, mut cr) = (0f32, 0f32);
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let [r, g, b] = px(2 * cx + dx, 2 * cy + dy);
                cb += -0.168_736 * r - 0.331_264 * g + 0.5 * b;
                cr += 0.5 * r - 0.418_688 * g - 0.081_312 * b;
            }
            let at = cy * layout.strides[1] + cx;
            planes[layout.offsets[1] + at] = byte(cb / 4.0 + 128.0);
            planes[layout.offsets[2] + at] = byte(cr / 4.0 + 128.0);
        }
    }
    Ok((PooledBuf::unpooled(planes), layout))
}

fn byte(v: f32) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

#[test]
fn decodes_a_jpeg_into_i420_and_names_what_is_not_one() {
    let mut bytes = Vec::new();
    let pixels = image::RgbImage::from_pixel(16, 8, image::Rgb([200, 40, 10]));
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 95)
        .encode_image(&pixels)
        .unwrap();
    let (planes, layout) = decode_on_cpu(&bytes, "t.jpg").unwrap();
    assert_eq!(
        (layout.width, layout.height, layout.format),
        (16, 8, PixelFormat::I420)
    );
    assert_eq!(planes.len(), 16 * 8 + 2 * 8 * 4);
    // Y, Cb, Cr of (200, 40, 10): 84.4, 86.0, 210.4 (within the codec's loss).
    let (y, cb, cr) = (planes[0], planes[128], planes[160]);
    assert!(
        y.abs_diff(84) <= 3 && cb.abs_diff(86) <= 3 && cr.abs_diff(210) <= 3,
        "{y} {cb} {cr}"
    );
    assert!(decode_on_cpu(b"not a jpeg", "t.jpg").is_err());
}
