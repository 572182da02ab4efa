//! The CPU's decode of a JPEG file that nvJPEG's batched decoder does not take (progressive,
//! grey, CMYK, other chroma sampling, a damaged file): packed RGB in host memory.

use crate::frame::{FrameLayout, PixelFormat, PooledBuf};

/// Decode `bytes` (a JPEG file) into packed RGB; the decoder's words when it cannot.
pub(crate) fn decode_on_cpu(bytes: &[u8]) -> Result<(PooledBuf, FrameLayout), String> {
    let image = image::load_from_memory_with_format(bytes, image::ImageFormat::Jpeg)
        .map_err(|e| e.to_string())?
        .to_rgb8();
    let layout = FrameLayout::packed(PixelFormat::Rgb, image.width(), image.height());
    Ok((PooledBuf::unpooled(image.into_raw()), layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_jpeg_into_packed_rgb_and_names_what_is_not_one() {
        let mut bytes = Vec::new();
        let pixels = image::RgbImage::from_pixel(16, 8, image::Rgb([200, 40, 10]));
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 95)
            .encode_image(&pixels)
            .unwrap();
        let (planes, layout) = decode_on_cpu(&bytes).unwrap();
        assert_eq!((layout.width, layout.height, layout.format), (16, 8, PixelFormat::Rgb));
        assert_eq!(planes.len(), 16 * 8 * 3);
        let px = &planes[..3];
        assert!(px[0].abs_diff(200) <= 4 && px[1].abs_diff(40) <= 4 && px[2].abs_diff(10) <= 4);
        assert!(decode_on_cpu(b"not a jpeg").is_err());
    }
}
