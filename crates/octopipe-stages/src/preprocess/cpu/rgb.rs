//! A frame's pixels as packed 8-bit RGB, converted as the backend samples them: for observers.

use octopipe_core::frame::{Frame, PixelFormat};

use super::sampler::{ChromaRow, Sampler};

/// The whole frame as packed 8-bit RGB (`width * height * 3` bytes): [`rect_to_rgb`] of the
/// whole frame. For observers that draw on frames.
pub fn frame_to_rgb(frame: &Frame) -> Option<Vec<u8>> {
    rect_to_rgb(frame, [0, 0, frame.layout.width, frame.layout.height])
}

/// The pixels of `rect` (`[x, y, w, h]`, inside the frame) as packed 8-bit RGB (`w * h * 3`
/// bytes), converted exactly as the backend samples them (the frame's colorimetry, chroma
/// upsampled at its siting; a JPEG frame's bytes are libjpeg-turbo's, those `cv2.imread` gives);
/// a GRAY16 frame as grey from each sample's high byte. `None` when the frame's pixels were
/// released or the rectangle is not inside the frame.
pub fn rect_to_rgb(frame: &Frame, rect: [u32; 4]) -> Option<Vec<u8>> {
    let data = frame.data()?;
    let l = &frame.layout;
    let [x, y, w, h] = rect;
    if data.len() < l.size() || x.checked_add(w)? > l.width || y.checked_add(h)? > l.height {
        return None;
    }
    let mut out = Vec::with_capacity(w as usize * h as usize * 3);
    if w == 0 || h == 0 {
        return Some(out);
    }
    if l.format == PixelFormat::Gray16 {
        for row in y..y + h {
            let start = l.offsets[0] + row as usize * l.strides[0] + x as usize * 2;
            for px in data[start..start + w as usize * 2].chunks_exact(2) {
                out.extend_from_slice(&[px[1]; 3]);
            }
        }
        return Some(out);
    }
    let s = Sampler::new(frame);
    let (mut line, mut chroma) = (Vec::new(), ChromaRow::default());
    for row in y..y + h {
        s.row_rgb(x, row, w, &mut line, &mut chroma);
        out.extend(line.iter().map(|v| v.round() as u8));
    }
    Some(out)
}
