//! Drawing on an RGB image: text in the built-in 8x8 font, box outlines, and saving it as PNG.

use std::path::Path;

use image::{Rgb, RgbImage};

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
pub fn draw_text(
    img: &mut RgbImage,
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
        fill_rect(img, x, y, w, GLYPH as i64 * scale, bg);
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
                    fill_rect(
                        img,
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

/// Fill the rectangle at (`x`, `y`) of `w`x`h`, clipped to the image.
fn fill_rect(img: &mut RgbImage, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
    let (iw, ih) = (img.width() as i64, img.height() as i64);
    for py in y.max(0)..(y + h).min(ih) {
        for px in x.max(0)..(x + w).min(iw) {
            img.put_pixel(px as u32, py as u32, Rgb(color));
        }
    }
}

/// Draw the outline of box `[x, y, w, h]`, `thickness` pixels wide, inside the box.
pub fn draw_box(img: &mut RgbImage, bbox: [u32; 4], color: [u8; 3], thickness: u32) {
    let [x, y, w, h] = bbox.map(i64::from);
    let t = (thickness as i64).min(w / 2).min(h / 2).max(1);
    fill_rect(img, x, y, w, t, color);
    fill_rect(img, x, y + h - t, w, t, color);
    fill_rect(img, x, y, t, h, color);
    fill_rect(img, x + w - t, y, t, h, color);
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
