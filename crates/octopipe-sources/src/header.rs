//! The picture size an image file's header declares, read before the file is handed to a
//! decoder the way the decoder reads it: a size past what a frame may be is refused before the
//! decoder allocates it, and so is a file whose size cannot be read ([`declared_size`]).

/// The image formats whose declared size is read, by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageFormat {
    Jpeg,
    Png,
    Gif,
    Bmp,
    Webp,
}

impl ImageFormat {
    /// The format `bytes` start like (`None`: none of these).
    pub(crate) fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
        if bytes.starts_with(&[0xFF, 0xD8]) {
            Some(ImageFormat::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageFormat::Gif)
        } else if bytes.starts_with(b"BM") {
            Some(ImageFormat::Bmp)
        } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
            Some(ImageFormat::Webp)
        } else {
            None
        }
    }

    /// The format's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
            ImageFormat::Gif => "GIF",
            ImageFormat::Bmp => "BMP",
            ImageFormat::Webp => "WebP",
        }
    }
}

/// The (width, height) an image file declares, read as its decoder reads it; an error saying
/// why when the bytes are of none of the formats read here or declare no size before the
/// picture data: such a file is refused, never handed to a decoder that would find a size
/// this reader did not.
pub(crate) fn declared_size(bytes: &[u8]) -> Result<(u64, u64), String> {
    let format = ImageFormat::sniff(bytes)
        .ok_or("not a JPEG, PNG, GIF, BMP or WebP file (its size cannot be checked)")?;
    let size = match format {
        ImageFormat::Jpeg => jpeg_size(bytes),
        ImageFormat::Png => png_size(bytes),
        ImageFormat::Gif => gif_size(bytes),
        ImageFormat::Bmp => bmp_size(bytes),
        ImageFormat::Webp => webp_size(bytes),
    };
    size.ok_or_else(|| {
        format!(
            "no picture size could be read from its {} header before the picture data (a damaged file?)",
            format.name()
        )
    })
}

/// (width, height) of a PNG's IHDR chunk (`None` when the bytes hold none): libpng refuses a
/// file whose first chunk is not IHDR.
pub(crate) fn png_size(bytes: &[u8]) -> Option<(u64, u64)> {
    // Signature (8), IHDR length (4) and type (4), then width and height.
    (bytes.len() >= 24 && &bytes[12..16] == b"IHDR")
        .then(|| (be32(&bytes[16..20]), be32(&bytes[20..24])))
}

/// (width, height) of a GIF's logical screen: what gdk-pixbuf and libnsgif allocate (a frame
/// larger than the screen is clipped to it).
fn gif_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let b = bytes.get(6..10)?;
    Some((le16(&b[0..2]), le16(&b[2..4])))
}

/// (width, height) of a BMP's info header: the core header (12 bytes) has 16-bit sizes, the
/// later ones signed 32-bit (a negative height is a top-down picture).
fn bmp_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let header = le32(bytes.get(14..18)?);
    if header == 12 {
        let b = bytes.get(18..22)?;
        return Some((le16(&b[0..2]), le16(&b[2..4])));
    }
    let b = bytes.get(18..26)?;
    let w = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let h = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    Some((u64::from(w.unsigned_abs()), u64::from(h.unsigned_abs())))
}

/// (width, height) of a WebP: its VP8X canvas, else its one VP8 (lossy) or VP8L (lossless)
/// bitstream's frame size, as libwebp's `WebPGetInfo` reads them.
fn webp_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let chunk = bytes.get(12..16)?;
    let data = bytes.get(20..)?;
    match chunk {
        b"VP8X" => {
            let b = data.get(4..10)?;
            let w = u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16;
            let h = u64::from(b[3]) | u64::from(b[4]) << 8 | u64::from(b[5]) << 16;
            Some((w + 1, h + 1))
        }
        b"VP8 " => {
            // A 3-byte frame tag, the start code 9D 01 2A, then 14-bit sizes.
            let b = data.get(3..10)?;
            (b[..3] == [0x9D, 0x01, 0x2A])
                .then(|| (le16(&b[3..5]) & 0x3FFF, le16(&b[5..7]) & 0x3FFF))
        }
        b"VP8L" => {
            // The signature 0x2F, then 14 bits of width - 1 and 14 of height - 1.
            let b = data.get(..5)?;
            let bits = u64::from(le32(&b[1..5]));
            (b[0] == 0x2F).then(|| ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        _ => None,
    }
}

/// (width, height) of a JPEG's first start-of-frame marker (`None` when the scan data or the
/// end comes first).
pub(crate) fn jpeg_size(bytes: &[u8]) -> Option<(u64, u64)> {
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

/// The first start-of-frame segment of a JPEG file ([`jpeg_walk`]): `None` when scan data,
/// the end of the image, a second SOI or the end of the bytes comes first.
pub(crate) fn jpeg_frame(bytes: &[u8]) -> Option<JpegFrame<'_>> {
    match jpeg_walk(bytes) {
        Walk::Frame(f) => Some(f),
        Walk::NoFrame | Walk::Short => None,
    }
}

/// What walking a JPEG's markers found.
enum Walk<'a> {
    Frame(JpegFrame<'a>),
    /// Scan data, the end of the image or a second SOI before any frame header.
    NoFrame,
    /// The bytes end before a frame header.
    Short,
}

/// A JPEG's markers walked as libjpeg's marker reader reads them (`next_marker` in
/// jdmarker.c): after SOI, bytes other than 0xFF before a marker are skipped (libjpeg warns of
/// "extraneous bytes" and goes on), so are fill bytes (FF FF) and a stuffed FF 00; RSTn and TEM
/// markers have no length; every other segment is skipped by its length, up to the first
/// start-of-frame segment.
fn jpeg_walk(bytes: &[u8]) -> Walk<'_> {
    let at = |i: usize| bytes.get(i).copied();
    match bytes.get(..2) {
        None => return Walk::Short,
        Some(soi) if soi != [0xFF, 0xD8] => return Walk::NoFrame,
        Some(_) => {}
    }
    let mut i = 2;
    loop {
        let marker = loop {
            while at(i).is_some_and(|b| b != 0xFF) {
                i += 1;
            }
            while at(i) == Some(0xFF) {
                i += 1;
            }
            let Some(c) = at(i) else {
                return Walk::Short;
            };
            i += 1;
            if c != 0 {
                break c;
            }
        };
        match marker {
            0xD0..=0xD7 | 0x01 => continue,      // RSTn, TEM: no parameters
            0xD8..=0xDA => return Walk::NoFrame, // SOI again, EOI, SOS
            _ => {}
        }
        let Some(len) = bytes.get(i..i + 2).map(be16) else {
            return Walk::Short;
        };
        let len = len as usize;
        // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC).
        let sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            if bytes.len() < i + 7 {
                return Walk::Short;
            }
            let end = (i + len).min(bytes.len());
            return Walk::Frame(JpegFrame {
                marker,
                len,
                segment: bytes.get(i + 2..end).unwrap_or(&[]),
            });
        }
        if len < 2 {
            return Walk::NoFrame;
        }
        i += len;
    }
}

/// What the first bytes of an image stream say of its picture size.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SizeScan {
    /// (width, height) as declared.
    Size(u64, u64),
    /// No size can be read from these bytes, however many follow: why.
    Unreadable(String),
    /// The bytes end before the size: more are needed.
    NeedMore,
}

/// The picture size the first bytes of an image stream declare ([`declared_size`]), or that
/// more bytes are needed to read it (a decoder fed in chunks has not got its header either).
pub(crate) fn scan_size(bytes: &[u8]) -> SizeScan {
    // Every format's magic and size (save a JPEG's) lie in its first 30 bytes.
    const HEAD: usize = 32;
    let jpeg = ImageFormat::sniff(bytes) == Some(ImageFormat::Jpeg);
    if jpeg && matches!(jpeg_walk(bytes), Walk::Short) {
        return SizeScan::NeedMore;
    }
    match declared_size(bytes) {
        Ok((w, h)) => SizeScan::Size(w, h),
        Err(_) if !jpeg && bytes.len() < HEAD => SizeScan::NeedMore,
        Err(why) => SizeScan::Unreadable(why),
    }
}

fn be32(b: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be16(b: &[u8]) -> u64 {
    u64::from(u16::from_be_bytes([b[0], b[1]]))
}

fn le16(b: &[u8]) -> u64 {
    u64::from(u16::from_le_bytes([b[0], b[1]]))
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
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
        // Scan data before any frame header: no size, the file is refused.
        assert_eq!(jpeg_size(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]), None);
        assert!(declared_size(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2])
            .unwrap_err()
            .contains("no picture size could be read from its JPEG header"));
        assert!(declared_size(b"hello")
            .unwrap_err()
            .contains("not a JPEG, PNG"));
    }

    #[test]
    fn jpeg_markers_are_found_past_what_libjpeg_skips() {
        // SOF2 of 30000x30000 after an APP0, with garbage where libjpeg skips it: a stray
        // byte, a stuffed FF 00, fill bytes, an RST marker.
        let sof = [0xFF, 0xC2, 0, 11, 8, 0x75, 0x30, 0x75, 0x30, 1, 1, 0x11, 0];
        for junk in [
            &[0x00][..],
            &[0x12, 0x34, 0x56],
            &[0xFF, 0x00],
            &[0xFF, 0xFF],
            &[0xFF, 0xD3],
        ] {
            let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0];
            b.extend(junk);
            b.extend(sof);
            assert_eq!(jpeg_size(&b), Some((30000, 30000)), "{junk:02x?}");
            assert_eq!(declared_size(&b), Ok((30000, 30000)));
        }
    }

    #[test]
    fn gif_bmp_and_webp_sizes() {
        let mut gif = b"GIF89a".to_vec();
        gif.extend([0x30, 0x75, 0x20, 0x4E]);
        assert_eq!(declared_size(&gif), Ok((30000, 20000)));
        let mut bmp = b"BM".to_vec();
        bmp.extend([0; 12]);
        bmp.extend(40u32.to_le_bytes());
        bmp.extend(30000i32.to_le_bytes());
        bmp.extend((-20000i32).to_le_bytes());
        assert_eq!(declared_size(&bmp), Ok((30000, 20000)));
        let webp = |chunk: &[u8], data: &[u8]| {
            let mut b = b"RIFF\0\0\0\0WEBP".to_vec();
            b.extend(chunk);
            b.extend([0; 4]);
            b.extend(data);
            b
        };
        let vp8x = webp(b"VP8X", &[0, 0, 0, 0, 0x2F, 0x75, 0, 0x1F, 0x4E, 0]);
        assert_eq!(declared_size(&vp8x), Ok((30000, 20000)));
        let vp8 = webp(
            b"VP8 ",
            &[0, 0, 0, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01],
        );
        assert_eq!(declared_size(&vp8), Ok((640, 480)));
        // 14 bits of 639 then 14 of 479.
        let bits: u32 = 639 | 479 << 14;
        let mut l = vec![0x2F];
        l.extend(bits.to_le_bytes());
        assert_eq!(declared_size(&webp(b"VP8L", &l)), Ok((640, 480)));
        assert!(declared_size(&webp(b"ALPH", &[0; 10])).is_err());
    }

    #[test]
    fn a_stream_in_chunks_needs_its_header_whole() {
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE1, 0x10, 0x00];
        b.extend([0u8; 0x1000 - 2]);
        b.extend([0xFF, 0xC0, 0, 11, 8, 0x02, 0x58, 0x03, 0x20, 1, 1, 0x11, 0]);
        for cut in [0, 1, 2, 5, 100, 0x1000, b.len() - 7] {
            assert_eq!(scan_size(&b[..cut]), SizeScan::NeedMore, "cut at {cut}");
        }
        assert_eq!(scan_size(&b), SizeScan::Size(800, 600));
        assert!(matches!(
            scan_size(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 2]),
            SizeScan::Unreadable(_)
        ));
        assert!(matches!(scan_size(&[b'x'; 40]), SizeScan::Unreadable(_)));
    }
}
