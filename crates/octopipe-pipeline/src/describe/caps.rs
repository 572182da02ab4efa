//! Caps written in a GStreamer head (`... ! video/x-raw,width=640 ! ...`): their field names are
//! checked against what GStreamer's own media types have, so a misspelt field (`widht=640`),
//! which GStreamer would take as a field of its own and then ignore, is an error naming it.

use super::{closest, DescribeError, Description, Span, StageDesc};

/// Fields of the media types whose fields are a closed set.
const RAW_VIDEO: &[&str] = &[
    "format",
    "width",
    "height",
    "framerate",
    "max-framerate",
    "pixel-aspect-ratio",
    "interlace-mode",
    "field-order",
    "colorimetry",
    "chroma-site",
    "multiview-mode",
    "multiview-flags",
    "views",
    "texture-target",
    "drm-format",
];
const JPEG: &[&str] = &[
    "width",
    "height",
    "framerate",
    "pixel-aspect-ratio",
    "interlace-mode",
    "sof-marker",
    "colorspace",
    "sampling",
    "parsed",
];
const CODED_VIDEO: &[&str] = &[
    "stream-format",
    "alignment",
    "profile",
    "level",
    "tier",
    "width",
    "height",
    "framerate",
    "pixel-aspect-ratio",
    "interlace-mode",
    "parsed",
    "codec_data",
    "chroma-format",
    "bit-depth-luma",
    "bit-depth-chroma",
    "colorimetry",
    "chroma-site",
    "multiview-mode",
    "multiview-flags",
];
/// RTP caps also carry the stream's SDP attributes, any name: only a near miss of one of
/// these is refused.
const RTP: &[&str] = &[
    "media",
    "payload",
    "clock-rate",
    "encoding-name",
    "encoding-params",
    "ssrc",
    "clock-base",
    "seqnum-base",
    "npt-start",
    "npt-stop",
    "play-speed",
    "play-scale",
    "packetization-mode",
    "profile-level-id",
    "sprop-parameter-sets",
    "a-framerate",
];

/// The fields `media` may have and whether that list is closed; `None` for a media type not
/// checked.
fn fields_of(media: &str) -> Option<(&'static [&'static str], bool)> {
    Some(match media {
        "video/x-raw" => (RAW_VIDEO, true),
        "image/jpeg" => (JPEG, true),
        "video/x-h264" | "video/x-h265" => (CODED_VIDEO, true),
        "application/x-rtp" => (RTP, false),
        _ => return None,
    })
}

/// The top-level pieces of caps text split at commas (not inside quotes, braces, brackets or
/// parentheses), each with its byte offset.
fn pieces(text: &str) -> Vec<(usize, &str)> {
    let (mut out, mut depth, mut quote, mut start) = (Vec::new(), 0i32, None, 0);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{' | '[' | '(' | '<') => depth += 1,
            (None, '}' | ']' | ')' | '>') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push((start, &text[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push((start, &text[start..]));
    out
}

/// Check the field names of caps element `st` (its kind is the caps text).
pub(super) fn check(desc: &Description, st: &StageDesc) -> Result<(), DescribeError> {
    let parts = pieces(&st.kind);
    let media = parts[0].1.split('(').next().unwrap_or("").trim();
    let Some((known, closed)) = fields_of(media) else {
        return Ok(());
    };
    for &(offset, piece) in &parts[1..] {
        let name = piece.split('=').next().unwrap_or("").trim();
        if name.is_empty() || known.contains(&name) {
            continue;
        }
        let near = closest(name, known.iter().copied());
        if !closed && near.is_none() {
            continue;
        }
        let lead = piece.len() - piece.trim_start().len();
        let span = Span {
            start: st.span.start + offset + lead,
            len: name.len(),
        };
        let hint = match near {
            Some(c) => format!(" (did you mean '{c}'?)"),
            None => format!(" (its fields: {})", known.join(", ")),
        };
        return Err(desc.error(
            span,
            format!("caps {media} have no field '{name}'{hint}: GStreamer would ignore it"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_are_split_at_top_level_commas() {
        let p = pieces("video/x-raw,format={ I420, NV12 },width=(int)640");
        let names: Vec<&str> = p.iter().map(|(_, s)| *s).collect();
        assert_eq!(
            names,
            ["video/x-raw", "format={ I420, NV12 }", "width=(int)640"]
        );
        assert_eq!(p[2].0, 34);
    }

    fn checked(text: &str) -> Result<(), DescribeError> {
        let d = super::super::parse("p", text, &std::collections::HashMap::new()).unwrap();
        check(&d, &d.stages[1])
    }

    #[test]
    fn a_misspelt_field_is_an_error_naming_it_and_the_near_name() {
        let e = checked(
            "videotestsrc ! video/x-raw,widht=640,height=480 ! boxes format=synthetic ! jsonl location=o",
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "caps video/x-raw have no field 'widht' (did you mean 'width'?): GStreamer would ignore it"
        );
        assert_eq!((e.line, e.column), (1, 28));
        assert!(
            e.excerpt.ends_with(&format!("{}^^^^^", " ".repeat(29))),
            "{e}"
        );
        // Known fields, typed values, lists and no fields at all pass.
        checked("videotestsrc ! video/x-raw,format={I420,NV12},width=(int)640 ! jsonl location=o")
            .unwrap();
        checked("videotestsrc ! video/x-raw ! jsonl location=o").unwrap();
        // RTP caps carry any SDP attribute; only a near miss of a known one is refused.
        checked("udpsrc ! application/x-rtp,x-dimensions=640 ! jsonl location=o").unwrap();
        let e =
            checked("udpsrc ! application/x-rtp,clock-rat=90000 ! jsonl location=o").unwrap_err();
        assert!(e.message.contains("did you mean 'clock-rate'?"), "{e}");
    }
}
