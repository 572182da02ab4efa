//! VisDrone annotation parsers (DET per image, MOT/VID per sequence).

use super::DetectError;

/// One annotation line, before clipping.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// Split a line into its comma-separated integer fields (a trailing comma is allowed).
fn fields(
    line: &str,
    path: &str,
    lineno: usize,
    want: usize,
    what: &str,
) -> Result<Vec<i64>, DetectError> {
    let parts: Vec<&str> = line
        .trim_end_matches(',')
        .split(',')
        .map(str::trim)
        .collect();
    if parts.len() < want {
        return Err(DetectError::Parse {
            path: path.into(),
            line: lineno,
            reason: format!(
                "expected {want} comma-separated fields ({what}), found {}",
                parts.len()
            ),
        });
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.parse::<i64>().map_err(|_| DetectError::Parse {
                path: path.into(),
                line: lineno,
                reason: format!("field {} is '{p}', expected an integer ({what})", i + 1),
            })
        })
        .collect()
}

fn row(
    v: &[i64],
    path: &str,
    lineno: usize,
    track: Option<u32>,
) -> Result<AnnotationRow, DetectError> {
    let bad = |reason: String| DetectError::Parse {
        path: path.into(),
        line: lineno,
        reason,
    };
    let [x, y, w, h, score, category] = [v[0], v[1], v[2], v[3], v[4], v[5]];
    if w <= 0 || h <= 0 {
        return Err(bad(format!(
            "box width and height must be positive, found {w}x{h}"
        )));
    }
    let category = u8::try_from(category)
        .ok()
        .filter(|c| *c <= 11)
        .ok_or_else(|| {
            bad(format!(
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
/// (truncation and occlusion optional). Blank lines are skipped. `path` is used in errors; the first
/// malformed line is the error.
pub fn parse_det(text: &str, path: &str) -> Result<Vec<AnnotationRow>, DetectError> {
    det_lines(text, path).collect()
}

/// Every non-blank line of a VisDrone DET file, parsed, or its error (`path:line: what is wrong`).
pub fn det_lines<'a>(
    text: &'a str,
    path: &'a str,
) -> impl Iterator<Item = Result<AnnotationRow, DetectError>> + 'a {
    const WHAT: &str = "x,y,w,h,score,category,truncation,occlusion";
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(move |(i, line)| {
            let v = fields(line, path, i + 1, 6, WHAT)?;
            row(&v, path, i + 1, None)
        })
}

/// Parse a VisDrone MOT/VID file:
/// `frame_index,target_id,bbox_left,bbox_top,bbox_width,bbox_height,score,object_category,truncation,occlusion`.
/// Returns `(frame_index, row)` pairs, `frame_index` as written (1-based). The first malformed line
/// is the error.
pub fn parse_mot(text: &str, path: &str) -> Result<Vec<(u64, AnnotationRow)>, DetectError> {
    mot_lines(text, path).map(|(_, line)| line).collect()
}

/// Every non-blank line of a VisDrone MOT/VID file: its frame index when that much can be read
/// (an integer >= 1 in the first field), and the parsed `(frame_index, row)` or the line's error.
pub fn mot_lines<'a>(
    text: &'a str,
    path: &'a str,
) -> impl Iterator<Item = (Option<u64>, Result<(u64, AnnotationRow), DetectError>)> + 'a {
    const WHAT: &str = "frame,target,x,y,w,h,score,category,truncation,occlusion";
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(move |(i, line)| {
            let frame = line
                .split(',')
                .next()
                .and_then(|f| f.trim().parse::<u64>().ok())
                .filter(|f| *f >= 1);
            let parsed = (|| {
                let v = fields(line, path, i + 1, 8, WHAT)?;
                if v[0] < 1 {
                    return Err(DetectError::Parse {
                        path: path.into(),
                        line: i + 1,
                        reason: format!("frame index {} must be >= 1", v[0]),
                    });
                }
                let track = u32::try_from(v[1]).ok();
                Ok((v[0] as u64, row(&v[2..], path, i + 1, track)?))
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
    }
}
