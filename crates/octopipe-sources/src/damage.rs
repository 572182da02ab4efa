//! Damaged input: what a source does with a frame whose data is damaged (`on-damaged=keep|skip|
//! fail`), and how an image file's damage is found before it is decoded.
//!
//! ```text
//! images location=clip/images on-damaged=skip ! ...     (the default for images)
//! media location=flight.mp4 on-damaged=keep ! ...       (the default for video)
//! ```
//!
//! GStreamer 1.22's `jpegdec` decodes a JPEG cut short or with corrupt entropy data without a
//! word (it adds the missing end marker and fills the rest grey, and drops libjpeg's
//! corrupt-data warnings), so the image source walks each file's markers itself
//! ([`image_damage`]): a file with no end-of-image marker, a marker where entropy-coded data or
//! a restart marker was due, a baseline scan whose Huffman codes do not decode to exactly the
//! blocks of its frame (what libjpeg warns of: data overwritten inside the file, e.g. 64 KiB of
//! zeros; `entropy`), or a file that is not of the sequence's kind at all, is damaged. Video decoders mark the frames they concealed errors in (libav's corrupt flag:
//! `GST_BUFFER_FLAG_CORRUPTED`, e.g. the frames after a lost keyframe) and may warn on the bus;
//! either makes the frame damaged. Each damaged frame is counted in the report (`damaged input`)
//! and named in one log line.

use octopipe_core::stage::PropChoice;

mod entropy;

/// What a source does with a damaged frame (`on-damaged=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum OnDamaged {
    /// Pass it on as decoded (a cut JPEG's missing part is flat grey), counted and logged.
    #[default]
    Keep,
    /// Leave it out, counted and logged: it is not among the frames in, and its place in the
    /// stream is a gap that is not counted as lost.
    Skip,
    /// End the run with an error naming the file (and the frame's time, for video).
    Fail,
}

impl OnDamaged {
    /// What was done, for the log line: `kept (on-damaged=keep)`.
    pub(crate) fn done(self) -> String {
        let what = match self {
            OnDamaged::Keep => "kept",
            OnDamaged::Skip => "skipped",
            OnDamaged::Fail => "failed",
        };
        format!("{what} (on-damaged={})", self.as_str())
    }
}

/// What is wrong with an image file's `bytes` of `kind` (`"JPEG"`, `"PNG"`); `None` when the file
/// is whole as far as its structure shows.
pub(crate) fn image_damage(kind: &str, bytes: &[u8]) -> Option<String> {
    match kind {
        "JPEG" => jpeg_damage(bytes),
        "PNG" => png_damage(bytes),
        _ => None,
    }
}

/// A JPEG's markers walked from SOI to EOI: segments by their lengths, entropy-coded data byte
/// by byte (an `FF` there is stuffed `FF 00`, a restart marker `RST0..7` in turn, or the next
/// marker).
fn jpeg_damage(bytes: &[u8]) -> Option<String> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Some("not a JPEG file".into());
    }
    let len = bytes.len();
    let premature = |at: usize| {
        Some(format!(
            "premature end of the JPEG data: no end-of-image marker in its {len} bytes (stops in a segment at byte {at}; a cut or partly written file?)"
        ))
    };
    let mut pos = 2;
    let mut tables = entropy::Tables::default();
    loop {
        if pos >= len {
            return premature(pos);
        }
        if bytes[pos] != 0xFF {
            return Some(format!(
                "corrupt JPEG data: byte {pos} is 0x{:02x} where a marker was due",
                bytes[pos]
            ));
        }
        // Fill bytes (FF FF ...) before a marker.
        while pos < len && bytes[pos] == 0xFF {
            pos += 1;
        }
        let Some(&marker) = bytes.get(pos) else {
            return premature(pos);
        };
        pos += 1;
        match marker {
            0xD9 => return None,
            0x01 | 0xD0..=0xD7 => continue,
            0x00 | 0x02..=0xBF | 0xD8 => {
                return Some(format!(
                    "corrupt JPEG data: unexpected marker 0x{marker:02x} at byte {}",
                    pos - 2
                ))
            }
            _ => {}
        }
        let Some(seg) = bytes.get(pos..pos + 2) else {
            return premature(pos);
        };
        let seg_len = usize::from(u16::from_be_bytes([seg[0], seg[1]]));
        if seg_len < 2 {
            return Some(format!(
                "corrupt JPEG data: marker 0x{marker:02x} at byte {} has a length of {seg_len}",
                pos - 2
            ));
        }
        if pos + seg_len > len {
            return premature(pos);
        }
        let payload = &bytes[pos + 2..pos + seg_len];
        match marker {
            0xC4 => tables.define_huffman(payload),
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                tables.start_frame(marker, payload)
            }
            0xDD => tables.restart_interval(payload),
            _ => {}
        }
        let at = pos - 2;
        pos += seg_len;
        if marker == 0xDA {
            match entropy_end(bytes, pos) {
                Ok(next) => {
                    // The scan's codes decoded as libjpeg does: data overwritten inside keeps
                    // every marker in place, but not the number of blocks it decodes to.
                    if let Some(why) = tables.scan(payload, &bytes[pos..next], at) {
                        return Some(why);
                    }
                    pos = next;
                }
                Err(why) => return Some(why),
            }
        }
    }
}

/// The end of the entropy-coded data that starts at `start`: the position of the marker after
/// it. Restart markers must come in turn (`RST0`, `RST1`, ... `RST7`, `RST0`).
fn entropy_end(bytes: &[u8], start: usize) -> Result<usize, String> {
    let len = bytes.len();
    let mut next_rst = 0u8;
    let mut i = start;
    loop {
        let Some(ff) = bytes[i..].iter().position(|&b| b == 0xFF) else {
            return Err(format!(
                "premature end of the JPEG data: no end-of-image marker in its {len} bytes (the image data stops at byte {len}; a cut or partly written file?)"
            ));
        };
        i += ff;
        let Some(&after) = bytes.get(i + 1) else {
            return Err(format!(
                "premature end of the JPEG data: no end-of-image marker in its {len} bytes (the image data stops at byte {len}; a cut or partly written file?)"
            ));
        };
        match after {
            0x00 | 0xFF => i += 1,
            0xD0..=0xD7 => {
                let n = after - 0xD0;
                if n != next_rst {
                    return Err(format!(
                        "corrupt JPEG data: restart marker RST{n} at byte {i} where RST{next_rst} was due"
                    ));
                }
                next_rst = (next_rst + 1) % 8;
                i += 2;
            }
            _ => return Ok(i),
        }
    }
}

/// A PNG is whole when it ends with its IEND chunk (`IEND` and its CRC, `AE 42 60 82`).
fn png_damage(bytes: &[u8]) -> Option<String> {
    const IEND: &[u8] = b"IEND\xAE\x42\x60\x82";
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some("not a PNG file".into());
    }
    let trimmed = bytes.len() - bytes.iter().rev().take_while(|&&b| b == 0).count();
    (!bytes[..trimmed].ends_with(IEND)).then(|| {
        format!(
            "premature end of the PNG data: no IEND chunk at the end of its {} bytes (a cut or partly written file?)",
            bytes.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal baseline JPEG's structure: SOI, one segment, SOS with entropy data, EOI.
    fn jpeg(entropy: &[u8]) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x04, 1, 2];
        v.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x03, 0]);
        v.extend_from_slice(entropy);
        v.extend_from_slice(&[0xFF, 0xD9]);
        v
    }

    #[test]
    fn a_whole_jpeg_is_not_damaged() {
        assert_eq!(jpeg_damage(&jpeg(&[1, 2, 0xFF, 0x00, 3])), None);
        let rst = [1, 0xFF, 0xD0, 2, 0xFF, 0xD1, 3];
        assert_eq!(jpeg_damage(&jpeg(&rst)), None);
        let mut trailing = jpeg(&[1]);
        trailing.extend_from_slice(&[0, 0, 0]);
        assert_eq!(jpeg_damage(&trailing), None, "bytes after EOI are ignored");
    }

    #[test]
    fn cut_and_corrupt_jpegs_say_what_is_wrong() {
        let whole = jpeg(&[1, 2, 3, 4, 5, 6]);
        for cut in [3, 7, 11, whole.len() - 2, whole.len() - 1] {
            let why = jpeg_damage(&whole[..cut]).unwrap();
            assert!(
                why.starts_with("premature end of the JPEG data"),
                "{cut}: {why}"
            );
        }
        let why = jpeg_damage(&jpeg(&[1, 0xFF, 0xD0, 2, 0xFF, 0xD3, 3])).unwrap();
        assert!(
            why.contains("RST3 at byte") && why.contains("where RST1 was due"),
            "{why}"
        );
        let why = jpeg_damage(&jpeg(&[1, 0xFF, 0x05, 2])).unwrap();
        assert!(why.contains("unexpected marker 0x05"), "{why}");
        assert_eq!(jpeg_damage(b"not a jpeg").unwrap(), "not a JPEG file");
    }

    #[test]
    fn a_png_without_its_end_is_damaged() {
        let mut png = b"\x89PNG\r\n\x1a\n....IHDR".to_vec();
        png.extend_from_slice(b"\0\0\0\0IEND\xAE\x42\x60\x82");
        assert_eq!(png_damage(&png), None);
        let why = png_damage(&png[..png.len() - 3]).unwrap();
        assert!(why.starts_with("premature end of the PNG data"), "{why}");
    }

    /// A real baseline JPEG (4:2:0 from the `image` crate's encoder) of a gradient with detail.
    fn real_jpeg(w: u32, h: u32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..w * h)
            .flat_map(|i| {
                let (x, y) = (i % w, i / w);
                [(x * 7 + y) as u8, (x ^ y) as u8, (x * y / 13) as u8]
            })
            .collect();
        let mut out = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
            .encode(&pixels, w, h, image::ExtendedColorType::Rgb8)
            .unwrap();
        out
    }

    #[test]
    fn a_whole_jpeg_decodes_to_its_blocks() {
        for (w, h) in [(640, 480), (97, 61), (8, 8)] {
            let jpeg = real_jpeg(w, h);
            assert_eq!(image_damage("JPEG", &jpeg), None, "{w}x{h}");
        }
    }

    #[test]
    fn zeros_or_noise_inside_the_data_are_damage() {
        let whole = real_jpeg(640, 480);
        let (a, b) = (whole.len() / 3, whole.len() / 3 + whole.len() / 4);
        let mut zeros = whole.clone();
        zeros[a..b].fill(0);
        let why = image_damage("JPEG", &zeros).expect("zeros inside are damage");
        assert!(why.starts_with("corrupt JPEG data: "), "{why}");
        // Bytes that keep the markers valid (no 0xFF), but not the codes.
        let mut noise = whole.clone();
        let mut x = 0x9E37_79B9u32;
        for byte in &mut noise[a..b] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *byte = (x >> 24) as u8 & 0xFE;
        }
        let why = image_damage("JPEG", &noise).expect("noise inside is damage");
        assert!(why.starts_with("corrupt JPEG data: "), "{why}");
    }
}
