//! The picture size an image file's header declares, read before the file is handed to a
//! decoder: a size past what a frame may be is refused before the decoder allocates it.

/// (width, height) of a PNG's IHDR chunk (`None` when the bytes hold none).
pub(super) fn png_size(bytes: &[u8]) -> Option<(u64, u64)> {
    // Signature (8), IHDR length (4) and type (4), then width and height.
    (bytes.len() >= 24 && &bytes[12..16] == b"IHDR")
        .then(|| (be32(&bytes[16..20]), be32(&bytes[20..24])))
}

/// (width, height) of a JPEG's first start-of-frame marker (`None` when the scan data or the
/// end comes first).
pub(super) fn jpeg_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let f = jpeg_frame(bytes)?.segment.get(..5)?;
    Some((be16(&f[3..5]), be16(&f[1..3])))
}

/// A JPEG's first frame header (start-of-frame segment), as [`jpeg_frame`] finds it.
pub(crate) struct JpegFrame<'a> {
    /// The SOFn marker's second byte (0xC0 baseline, 0xC2 progressive, ...).
    pub(crate) marker: u8,
    /// The segment's length as declared (its two length bytes included).
    pub(crate) len: usize,
    /// The segment after its length bytes (precision, height, width, components...), cut
    /// where the data ends.
    pub(crate) segment: &'a [u8],
}

/// The first start-of-frame segment of a JPEG file, found by walking its segments from after
/// SOI by their lengths (`None` when the scan data or the end comes first).
pub(crate) fn jpeg_frame(bytes: &[u8]) -> Option<JpegFrame<'_>> {
    let mut i = 2;
    while i + 4 <= bytes.len() {
        if bytes[i] != 0xFF {
            return None;
        }
        let marker = bytes[i + 1];
        if marker == 0xFF {
            i += 1; // fill byte
            continue;
        }
        let len = be16(&bytes[i + 2..]) as usize;
        // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC).
        let sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            let end = (i + 2 + len).min(bytes.len());
            return Some(JpegFrame {
                marker,
                len,
                segment: bytes.get(i + 4..end).unwrap_or(&[]),
            });
        }
        if marker == 0xDA || len < 2 {
            return None; // scan data: no frame header before it
        }
        i += 2 + len;
    }
    None
}

fn be32(b: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be16(b: &[u8]) -> u64 {
    u64::from(u16::from_be_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_declare_the_picture_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(30000u32.to_be_bytes());
        png.extend(20000u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((30000, 20000)));
        assert_eq!(png_size(b"\x89PNG"), None);
        // SOI, an APP0 of 4 bytes, then SOF0: precision, height 600, width 800.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8, 0x02, 0x58, 0x03, 0x20,
        ];
        assert_eq!(jpeg_size(&jpeg), Some((800, 600)));
        assert_eq!(jpeg_size(&jpeg[..10]), None);
        // Scan data before any frame header: the decoder decides.
        assert_eq!(jpeg_size(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]), None);
    }
}
