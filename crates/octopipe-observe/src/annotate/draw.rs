//! Drawing on a [`Canvas`] (an RGB image, or a frame in place): text in the built-in 8x8 font,
//! box outlines; and saving an RGB image as PNG.

use std::path::Path;

use image::RgbImage;

use super::canvas::Canvas;
use crate::errors::ObserveError;

/// Glyph cell of the built-in font, in pixels at scale 1.
pub const GLYPH: u32 = 8;

/// Width in pixels of `text` at `scale`.
pub fn text_width(text: &str, scale: u32) -> u32 {
    text.chars().count() as u32 * GLYPH * scale
}

/// Draw `text` with its top-left corner at (`x`, `y`) in `color`, each font pixel `scale` pixels
/// wide, over a `background` rectangle when given. Non-ASCII characters draw as `?`; whatever
/// falls outside the image is clipped.
pub fn draw_text<C: Canvas + ?Sized>(
    img: &mut C,
    x: i64,
    y: i64,
    text: &str,
    color: [u8; 3],
    scale: u32,
    background: Option<[u8; 3]>,
) {
    let scale = scale.max(1) as i64;
    if let Some(bg) = background {
        let w = text_width(text, scale as u32) as i64;
        img.fill_rect(x, y, w, GLYPH as i64 * scale, bg);
    }
    for (i, c) in text.chars().enumerate() {
        let glyph = font8x8::legacy::BASIC_LEGACY[if c.is_ascii() {
            c as usize
        } else {
            b'?' as usize
        }];
        let gx = x + i as i64 * GLYPH as i64 * scale;
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                if bits & (1 << col) != 0 {
                    img.fill_rect(
                        gx + col * scale,
                        y + row as i64 * scale,
                        scale,
                        scale,
                        color,
                    );
                }
            }
        }
    }
}

/// Draw the outline of box `[x, y, w, h]`, `thickness` pixels wide, inside the box.
pub fn draw_box<C: Canvas + ?Sized>(img: &mut C, bbox: [u32; 4], color: [u8; 3], thickness: u32) {
    let [x, y, w, h] = bbox.map(i64::from);
    let t = (thickness as i64).min(w / 2).min(h / 2).max(1);
    img.fill_rect(x, y, w, t, color);
    img.fill_rect(x, y + h - t, w, t, color);
    img.fill_rect(x, y, t, h, color);
    img.fill_rect(x + w - t, y, t, h, color);
}

/// Write `img` as a PNG: fast compression for frame after frame, or the smallest file.
pub(crate) fn save_png(img: &RgbImage, path: &Path, small: bool) -> Result<(), ObserveError> {
    use image::codecs::png::{CompressionType, FilterType};
    let fail = |e: Box<dyn std::error::Error + Send + Sync>| ObserveError::Write {
        path: path.display().to_string(),
        source: e,
    };
    let file = std::fs::File::create(path).map_err(|e| fail(e.into()))?;
    let (level, filter) = if small {
        (CompressionType::Best, FilterType::Adaptive)
    } else {
        (CompressionType::Fast, FilterType::Sub)
    };
    octopipe_stages::sink::output::write_png(
        file,
        img.as_raw(),
        img.dimensions(),
        image::ExtendedColorType::Rgb8,
        level,
        filter,
    )
    .map_err(|e| fail(e.into()))
}
