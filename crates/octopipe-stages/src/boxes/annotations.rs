//! VisDrone annotation parsers (DET per image, MOT/VID per sequence).
//!
//! The readers take a file's bytes as they are: a UTF-8 byte-order mark at the start is dropped
//! (editors on Windows write one); any other byte that cannot be part of a number (an invisible
//! character, a byte that is not UTF-8) is named in the line's error with its value and column,
//! since printing the field would show nothing wrong.

use super::error::BoxesError;
use octopipe_core::files::FileError;

/// The UTF-8 encoding of U+FEFF, written by some editors at the start of a text file.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// One annotation line, before clipping.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct AnnotationRow {
    /// `[x, y, w, h]` as written (may lie partly outside the frame).
    pub bbox: [i64; 4],
    /// Score (0 marks an ignored region).
    pub score: f32,
    /// VisDrone category.
    pub category: u8,
    /// Track id (MOT only).
    pub track: Option<u32>,
}

/// One line of a file: its bytes (no line ending), its 1-based number, and where it is read from.
#[derive(Clone, Copy)]
struct Line<'a> {
    bytes: &'a [u8],
    number: usize,
    path: &'a str,
}

impl Line<'_> {
    fn error(&self, reason: String) -> BoxesError {
        FileError::parse(self.path, self.number, reason).into()
    }
}

/// The non-blank lines of `text` (a UTF-8 byte-order mark at the start dropped, `\n` or `\r\n`
/// endings), numbered from 1 as an editor numbers them.
fn lines<'a>(text: &'a [u8], path: &'a str) -> impl Iterator<Item = Line<'a>> + 'a {
    let text = text.strip_prefix(UTF8_BOM).unwrap_or(text);
    text.split(|b| *b == b'\n')
        .enumerate()
        .map(move |(i, bytes)| Line {
            bytes: bytes.strip_suffix(b"\r").unwrap_or(bytes),
            number: i + 1,
            path,
        })
        .filter(|l| !l.bytes.iter().all(u8::is_ascii_whitespace))
}

/// Whether a character shows nothing (or nothing distinct) when printed: controls, spaces other
/// than ASCII's, and format characters such as zero-width spaces and the byte-order mark.
fn invisible(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// The error for a field that is not an integer: the offending byte by value and column when it
/// is not plain visible ASCII (an invisible character or a byte that is not UTF-8), else the field
/// as written. `start` is the field's byte offset in the line.
fn not_an_integer(line: &Line, field: usize, start: usize, raw: &[u8], what: &str) -> BoxesError {
    let text = String::from_utf8_lossy(raw);
    let trimmed = text.trim();
    let plain = |b: &u8| b.is_ascii_graphic() || *b == b' ' || *b == b'\t';
    let Some(at) = raw.iter().position(|b| !plain(b)) else {
        let digits = trimmed.strip_prefix(['-', '+']).unwrap_or(trimmed);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return line.error(format!(
                "field {field} is '{trimmed}', out of range for a 64-bit integer ({what})"
            ));
        }
        return line.error(format!(
            "field {field} is '{trimmed}', expected an integer ({what})"
        ));
    };
    let column = start + at + 1;
    let character = match std::str::from_utf8(&raw[at..]) {
        Ok(rest) => rest.chars().next(),
        Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&raw[at..at + e.valid_up_to()])
            .ok()
            .and_then(|s| s.chars().next()),
        Err(_) => None,
    };
    let detail = match character {
        Some(c) if invisible(c) => format!("U+{:04X}, an invisible character", c as u32),
        Some(c) => format!("U+{:04X} '{c}'", c as u32),
        None => "not UTF-8 text".to_string(),
    };
    line.error(format!(
        "byte 0x{:02X} at column {column} is not part of a number (field {field}: {detail})",
        raw[at]
    ))
}

/// Split a line into its comma-separated integer fields (a trailing comma is allowed).
fn fields(line: &Line, want: usize, what: &str) -> Result<Vec<i64>, BoxesError> {
    let mut end = line.bytes.len();
    while end > 0 && line.bytes[end - 1] == b',' {
        end -= 1;
    }
    let body = &line.bytes[..end];
    let count = body.iter().filter(|b| **b == b',').count() + 1;
    if count < want {
        return Err(line.error(format!(
            "expected {want} comma-separated fields ({what}), found {count}"
        )));
    }
    let mut start = 0;
    body.split(|b| *b == b',')
        .enumerate()
        .map(|(i, raw)| {
            let at = start;
            start += raw.len() + 1;
            std::str::from_utf8(raw)
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| not_an_integer(line, i + 1, at, raw, what))
        })
        .collect()
}

fn row(v: &[i64], line: &Line, track: Option<u32>) -> Result<AnnotationRow, BoxesError> {
    let [x, y, w, h, score, category] = [v[0], v[1], v[2], v[3], v[4], v[5]];
    if w <= 0 || h <= 0 {
        return Err(line.error(format!(
            "box width and height must be positive, found {w}x{h}"
        )));
    }
    let category = u8::try_from(category)
        .ok()
        .filter(|c| *c <= 11)
        .ok_or_else(|| {
            line.error(format!(
                "object category {category} is not a VisDrone category (0..11)"
            ))
        })?;
    Ok(AnnotationRow {
        bbox: [x, y, w, h],
        score: score as f32,
        category,
        track,
    })
}

/// Parse a VisDrone DET file: `bbox_left,bbox_top,bbox_width,bbox_height,score,object_category,truncation,occlusion`
/// (truncation and occlusion optional). `text` is the file's text or its raw bytes (a UTF-8
/// byte-order mark at the start is dropped). Blank lines are skipped. `path` is used in errors;
/// the first malformed line is the error.
pub fn parse_det<T: AsRef<[u8]> + ?Sized>(
    text: &T,
    path: &str,
) -> Result<Vec<AnnotationRow>, BoxesError> {
    det_lines(text, path).collect()
}

/// Every non-blank line of a VisDrone DET file, parsed, or its error (`path:line: what is wrong`).
pub fn det_lines<'a, T: AsRef<[u8]> + ?Sized>(
    text: &'a T,
    path: &'a str,
) -> impl Iterator<Item = Result<AnnotationRow, BoxesError>> + 'a {
    const WHAT: &str = "x,y,w,h,score,category,truncation,occlusion";
    lines(text.as_ref(), path).map(|line| {
        let v = fields(&line, 6, WHAT)?;
        row(&v, &line, None)
    })
}

/// Parse a VisDrone MOT/VID file:
/// `frame_index,target_id,bbox_left,bbox_top,bbox_width,bbox_height,score,object_category,truncation,occlusion`.
/// `text` is the file's text or its raw bytes (a UTF-8 byte-order mark at the start is dropped).
/// Returns `(frame_index, row)` pairs, `frame_index` as written (1-based). The first malformed
/// line is the error.
pub fn parse_mot<T: AsRef<[u8]> + ?Sized>(
    text: &T,
    path: &str,
) -> Result<Vec<(u64, AnnotationRow)>, BoxesError> {
    mot_lines(text, path).map(|(_, line)| line).collect()
}

/// Every non-blank line of a VisDrone MOT/VID file: its frame index when that much can be read
/// (an integer >= 1 in the first field), and the parsed `(frame_index, row)` or the line's error.
pub fn mot_lines<'a, T: AsRef<[u8]> + ?Sized>(
    text: &'a T,
    path: &'a str,
) -> impl Iterator<Item = (Option<u64>, Result<(u64, AnnotationRow), BoxesError>)> + 'a {
    const WHAT: &str = "frame,target,x,y,w,h,score,category,truncation,occlusion";
    lines(text.as_ref(), path).map(|line| {
        let frame = line
            .bytes
            .split(|b| *b == b',')
            .next()
            .and_then(|f| std::str::from_utf8(f).ok())
            .and_then(|f| f.trim().parse::<u64>().ok())
            .filter(|f| *f >= 1);
        let parsed = (|| {
            let v = fields(&line, 8, WHAT)?;
            if v[0] < 1 {
                return Err(line.error(format!("frame index {} must be >= 1", v[0])));
            }
            let track = u32::try_from(v[1]).ok();
            Ok((v[0] as u64, row(&v[2..], &line, track)?))
        })();
        (frame, parsed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn det_lines_parse_with_and_without_trailing_fields() {
        let rows = parse_det(
            "684,8,273,116,0,0,0,0\n406,119,265,70,1,4,0,1,\n\n1,2,3,4,1,1\n",
            "a.txt",
        )
        .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].bbox, [406, 119, 265, 70]);
        assert_eq!(rows[1].category, 4);
        assert_eq!(rows[0].score, 0.0);
        assert_eq!(rows[2].category, 1);
    }

    #[test]
    fn det_errors_name_file_and_line() {
        let e = parse_det("1,2,3,4,1,4,0,0\n1,2,x,4,1,4,0,0\n", "ann/f.txt")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "ann/f.txt:2: field 3 is 'x', expected an integer (x,y,w,h,score,category,truncation,occlusion)");
        let e = parse_det("1,2,3\n", "f.txt").unwrap_err().to_string();
        assert!(
            e.starts_with("f.txt:1: expected 6 comma-separated fields"),
            "{e}"
        );
        let e = parse_det("1,2,0,4,1,4\n", "f.txt").unwrap_err().to_string();
        assert!(
            e.contains("f.txt:1: box width and height must be positive, found 0x4"),
            "{e}"
        );
        let e = parse_det("1,2,3,4,1,12\n", "f.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("category 12"), "{e}");
    }

    #[test]
    fn a_byte_order_mark_is_dropped_and_other_odd_bytes_are_named() {
        let rows = parse_det(b"\xEF\xBB\xBF1,2,3,4,1,4\r\n5,6,7,8,1,4\r\n", "a.txt").unwrap();
        assert_eq!(rows.len(), 2);
        let e = parse_det(b"1,2,3,4,1,4\n\xEF\xBB\xBF5,6,7,8,1,4\n", "a.txt")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a.txt:2: byte 0xEF at column 1 is not part of a number (field 1: U+FEFF, an invisible character)"
        );
        let e = parse_det(b"1,2,3\xFF,4,1,4\n", "a.txt")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a.txt:1: byte 0xFF at column 6 is not part of a number (field 3: not UTF-8 text)"
        );
        let e = parse_det("1,2,3,4\u{200B},1,4\n", "a.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.txt:1: byte 0xE2 at column 8 "), "{e}");
        let e = parse_det("1,2,99999999999999999999,4,1,4\n", "a.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn mot_lines_keep_frame_and_track() {
        let rows = parse_mot(
            "98,0,808,1,47,22,1,4,0,0\n99,3,808,55,46,21,1,4,0,0\n",
            "m.txt",
        )
        .unwrap();
        assert_eq!(rows[0].0, 98);
        assert_eq!(rows[1].1.track, Some(3));
        assert_eq!(rows[1].1.bbox, [808, 55, 46, 21]);
        let e = parse_mot("0,1,1,1,5,5,1,4,0,0\n", "m.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.txt:1: frame index 0"), "{e}");
        let rows = parse_mot(b"\xEF\xBB\xBF7,0,1,1,5,5,1,4,0,0\n", "m.txt").unwrap();
        assert_eq!(rows[0].0, 7);
    }
}
