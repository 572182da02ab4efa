//! The renderer: each object's box in its class's colour and its caption (`#track label
//! score`), drawn on any [`Canvas`] ([`draw_objects`]), as `octopipe run --annotate` and the
//! GStreamer overlay draw them ([`Style`]: what is drawn, and how thick).

use octopipe_core::frame::Detection;

use super::canvas::Canvas;
use super::draw::{draw_box, draw_text, GLYPH};

/// Box colours by class id (cycled), chosen to stand out from aerial footage.
const PALETTE: [[u8; 3]; 6] = [
    [255, 0, 255],
    [0, 255, 255],
    [0, 255, 0],
    [255, 140, 0],
    [255, 255, 0],
    [160, 110, 255],
];

/// What is drawn of each object, and how thick: `octopipe run --annotate` draws everything at
/// the frame's own scale ([`Style::default`]); the GStreamer overlay sets each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// The class name in the caption.
    pub labels: bool,
    /// The score in the caption.
    pub scores: bool,
    /// The track id (`#id`) in the caption.
    pub tracks: bool,
    /// The box's line width in pixels (0: by the frame's width, 2 under 1600 pixels, else 3).
    pub line_width: u32,
    /// The caption's font scale, 8 pixels a glyph at 1 (0: by the frame's width, 1 under 1600
    /// pixels, else 2).
    pub font_scale: u32,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            labels: true,
            scores: true,
            tracks: true,
            line_width: 0,
            font_scale: 0,
        }
    }
}

impl Style {
    /// The font scale and line width on a frame `width` pixels wide.
    pub(super) fn scales(&self, width: u32) -> (u32, u32) {
        let scale = if width >= 1600 { 2 } else { 1 };
        let font = match self.font_scale {
            0 => scale,
            s => s,
        };
        let line = match self.line_width {
            0 => scale + 1,
            w => w,
        };
        (font, line)
    }
}

/// One object to draw: box, colour and its caption.
pub(super) struct Mark {
    bbox: [u32; 4],
    color: [u8; 3],
    caption: String,
}

impl Mark {
    /// How a box is drawn: coloured by its class, captioned `label score`: the classifier's,
    /// else the box source's (a detector's class and score, an annotation's category), `?`
    /// when neither names it; and `#id` first when it has a track. `style` leaves parts out.
    pub(super) fn of(d: &Detection, style: &Style) -> Mark {
        let (class, label, score) = match (&d.classification, &d.label) {
            (Some(c), _) => (c.best.class_id, Some(&*c.best.label), Some(c.best.score)),
            (None, Some(label)) => (
                d.class_id.unwrap_or(u32::MAX),
                Some(&**label),
                Some(d.score),
            ),
            (None, None) => (u32::MAX, None, None),
        };
        let mut parts = Vec::new();
        if let (Some(id), true) = (d.track, style.tracks) {
            parts.push(format!("#{id}"));
        }
        if style.labels {
            parts.push(label.unwrap_or("?").to_string());
        }
        if let (Some(score), true) = (score, style.scores) {
            parts.push(format!("{score:.2}"));
        }
        Mark {
            bbox: d.bbox,
            color: PALETTE[class as usize % PALETTE.len()],
            caption: parts.join(" "),
        }
    }
}

/// Draw `marks` on `canvas`: every box, then every caption (over the boxes), above its box or,
/// at the top of the picture, below it.
pub(super) fn draw_marks<C: Canvas + ?Sized>(canvas: &mut C, marks: &[Mark], style: &Style) {
    let (font, line) = style.scales(canvas.size().0);
    for m in marks {
        draw_box(canvas, m.bbox, m.color, line);
    }
    for m in marks.iter().filter(|m| !m.caption.is_empty()) {
        let th = (GLYPH * font) as i64;
        let above = m.bbox[1] as i64 - th;
        let y = if above >= 0 {
            above
        } else {
            (m.bbox[1] + m.bbox[3]) as i64
        };
        draw_text(
            canvas,
            m.bbox[0] as i64,
            y,
            &m.caption,
            [0, 0, 0],
            font,
            Some(m.color),
        );
    }
}

/// Draw `detections` on `canvas` as `octopipe run --annotate` draws them (box colours by class,
/// captions `#track label score`), what `style` asks: an RGB image, or a frame in place in its
/// own format ([`FrameCanvas`](super::FrameCanvas)).
pub fn draw_objects<C: Canvas + ?Sized>(canvas: &mut C, detections: &[Detection], style: &Style) {
    let marks: Vec<Mark> = detections.iter().map(|d| Mark::of(d, style)).collect();
    draw_marks(canvas, &marks, style);
}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::frame::{ClassScore, Classification};

    #[test]
    fn a_tracked_box_is_captioned_with_its_id() {
        let car = Classification {
            best: ClassScore {
                class_id: 2,
                label: "car".into(),
                score: 0.9,
            },
            topk: Vec::new(),
        };
        let tracked = Detection {
            track: Some(12),
            classification: Some(car.clone()),
            ..Detection::new([1, 2, 30, 20])
        };
        let all = Style::default();
        let m = Mark::of(&tracked, &all);
        assert_eq!(
            (m.caption.as_str(), m.color, m.bbox),
            ("#12 car 0.90", PALETTE[2], [1, 2, 30, 20])
        );
        let untracked = Detection {
            track: None,
            ..tracked.clone()
        };
        assert_eq!(Mark::of(&untracked, &all).caption, "car 0.90");
        // Not classified: the box source's class and score (a detector's, an annotation's).
        let detected = Detection {
            classification: None,
            label: Some("vehicle".into()),
            class_id: Some(4),
            score: 0.42,
            ..tracked.clone()
        };
        let m = Mark::of(&detected, &all);
        assert_eq!(
            (m.caption.as_str(), m.color),
            ("#12 vehicle 0.42", PALETTE[4])
        );
        let unlabelled = Detection {
            classification: None,
            label: None,
            ..tracked
        };
        assert_eq!(Mark::of(&unlabelled, &all).caption, "#12 ?");
        // The overlay's choices leave parts out.
        let ids_only = Style {
            labels: false,
            scores: false,
            ..all
        };
        assert_eq!(Mark::of(&detected, &ids_only).caption, "#12");
        let no_ids = Style {
            tracks: false,
            ..all
        };
        assert_eq!(Mark::of(&detected, &no_ids).caption, "vehicle 0.42");
    }
}
