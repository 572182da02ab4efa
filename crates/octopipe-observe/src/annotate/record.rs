//! The renderer's rectangles recorded instead of drawn ([`RecordingCanvas`]): each clipped, its
//! colour already the frame's Y, U and V ([`YuvRect`], as [`FrameCanvas`](super::FrameCanvas)
//! fills it), in the renderer's order. The GStreamer overlay draws a frame in CUDA memory from
//! this list with a kernel (later rectangles over earlier ones), so the frame comes out
//! byte-identical to the same frame drawn in system memory.

use octopipe_core::frame::Colorimetry;

use super::canvas::Canvas;
use super::yuv::YuvRect;

/// A YUV frame's [`Canvas`] that records what the renderer fills: one [`YuvRect`] per
/// rectangle with something on the frame, in order.
#[derive(Debug, Clone)]
pub struct RecordingCanvas {
    size: (u32, u32),
    colorimetry: Colorimetry,
    rects: Vec<YuvRect>,
}

impl RecordingCanvas {
    /// An empty list for a frame of `width`x`height` whose colours are written in
    /// `colorimetry`.
    pub fn new(size: (u32, u32), colorimetry: Colorimetry) -> Self {
        RecordingCanvas {
            size,
            colorimetry,
            rects: Vec::new(),
        }
    }

    /// The rectangles filled so far, in order: a later one covers an earlier one where they
    /// overlap.
    pub fn rects(&self) -> &[YuvRect] {
        &self.rects
    }
}

impl Canvas for RecordingCanvas {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
        if let Some(rect) = YuvRect::clipped(x, y, w, h, self.size, self.colorimetry, color) {
            self.rects.push(rect);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotate::{draw_objects, FrameCanvas, Style};
    use octopipe_core::frame::{ClassScore, Classification, Detection, PixelFormat};

    /// `rects` applied to NV12 planes (`y` rows `ys` bytes apart, `uv` rows `uvs` apart) as the
    /// overlay kernel (octopipe-gst `octooverlay/overlay.cu`) applies them: each rectangle's
    /// pixels and chroma samples are claimed by the greatest index covering them (a first pass),
    /// then written by that rectangle only (a second), so the rectangles need no order among
    /// themselves and the last one drawn wins.
    fn apply_nv12(
        rects: &[YuvRect],
        (w, h): (usize, usize),
        y: &mut [u8],
        ys: usize,
        uv: &mut [u8],
        uvs: usize,
    ) {
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        let mut owner_y = vec![0u32; w * h];
        let mut owner_uv = vec![0u32; cw * ch];
        for paint in [false, true] {
            for (i, r) in rects.iter().enumerate() {
                let me = i as u32 + 1;
                for row in r.y0 as usize..r.y1 as usize {
                    for col in r.x0 as usize..r.x1 as usize {
                        let o = &mut owner_y[row * w + col];
                        match paint {
                            false => *o = (*o).max(me),
                            true if *o == me => y[row * ys + col] = r.yuv[0],
                            true => {}
                        }
                    }
                }
                let [cx0, cy0, cx1, cy1] = r.chroma().map(|v| v as usize);
                for row in cy0..cy1 {
                    for col in cx0..cx1 {
                        let o = &mut owner_uv[row * cw + col];
                        match paint {
                            false => *o = (*o).max(me),
                            true if *o == me => {
                                uv[row * uvs + 2 * col] = r.yuv[1];
                                uv[row * uvs + 2 * col + 1] = r.yuv[2];
                            }
                            true => {}
                        }
                    }
                }
            }
        }
    }

    /// Objects on a frame of `w`x`h`: overlapping boxes, boxes past the right and bottom edges,
    /// one at the top (its caption below it), tracked and classified ones.
    fn objects(w: u32, h: u32) -> Vec<Detection> {
        let car = Classification {
            best: ClassScore {
                class_id: 2,
                label: "car".into(),
                score: 0.87,
            },
            topk: Vec::new(),
        };
        let boxes = [
            [5, 20, 40, 30],
            [30, 35, 50, 25],
            [w - 20, 40, 60, 30],
            [17, h - 12, 33, 40],
            [61, 0, 21, 9],
            [1, 1, 3, 3],
            [w - 33, h - 21, 33, 21],
        ];
        boxes
            .iter()
            .enumerate()
            .map(|(i, &b)| Detection {
                track: (i % 2 == 0).then_some(i as u32 * 7),
                classification: (i % 3 == 0).then(|| car.clone()),
                label: Some(format!("obj{i}").into()),
                class_id: Some(i as u32),
                score: 0.5 + i as f32 / 20.0,
                ..Detection::new(b)
            })
            .collect()
    }

    /// The recorded rectangles, applied to an NV12 frame as the kernel applies them, give the
    /// bytes FrameCanvas draws on the same frame: boxes, clipped ones and captions, in every
    /// colorimetry, with padded rows, at odd line widths and font scales.
    #[test]
    fn recorded_rectangles_applied_to_nv12_equal_the_frame_canvas_byte_for_byte() {
        let (w, h) = (131u32, 97u32);
        let (ys, uvs) = (144usize, 160usize);
        let ch = h.div_ceil(2) as usize;
        let pattern = |n: usize, k: usize| -> Vec<u8> {
            (0..n).map(|i| ((i * 7 + k * 13) % 251) as u8).collect()
        };
        let detections = objects(w, h);
        let styles = [
            Style::default(),
            Style {
                line_width: 1,
                font_scale: 2,
                ..Style::default()
            },
            Style {
                labels: false,
                line_width: 5,
                ..Style::default()
            },
        ];
        for colorimetry in [Colorimetry::BT601, Colorimetry::JPEG, Colorimetry::BT709] {
            for style in &styles {
                let (mut y, mut uv) = (pattern(ys * h as usize, 1), pattern(uvs * ch, 2));
                let (before_y, before_uv) = (y.clone(), uv.clone());
                let mut canvas = FrameCanvas::new(
                    PixelFormat::Nv12,
                    (w, h),
                    colorimetry,
                    [&mut y, &mut uv, &mut []],
                    [ys, uvs, 0],
                )
                .unwrap();
                draw_objects(&mut canvas, &detections, style);

                let mut recorder = RecordingCanvas::new((w, h), colorimetry);
                draw_objects(&mut recorder, &detections, style);
                let rects = recorder.rects();
                let (mut ry, mut ruv) = (before_y.clone(), before_uv.clone());
                apply_nv12(rects, (w as usize, h as usize), &mut ry, ys, &mut ruv, uvs);

                // Something was drawn, clipped to the frame, captions included (more rectangles
                // than the boxes' four sides).
                assert!(rects.len() > 4 * detections.len(), "{}", rects.len());
                assert!(rects.iter().all(|r| r.x0 < r.x1 && r.x1 <= w && r.y1 <= h));
                assert!(rects.iter().any(|r| r.x1 == w) && rects.iter().any(|r| r.y1 == h));
                assert_ne!(y, before_y);
                assert_ne!(uv, before_uv);
                let first = |a: &[u8], b: &[u8]| a.iter().zip(b).position(|(a, b)| a != b);
                assert_eq!(first(&ry, &y), None, "{colorimetry:?} {style:?}: luma");
                assert_eq!(first(&ruv, &uv), None, "{colorimetry:?} {style:?}: chroma");
            }
        }
    }

    #[test]
    fn a_rectangle_off_the_frame_is_not_recorded() {
        let mut recorder = RecordingCanvas::new((64, 48), Colorimetry::BT709);
        recorder.fill_rect(-10, 5, 10, 4, [255, 0, 0]);
        recorder.fill_rect(64, 5, 10, 4, [255, 0, 0]);
        recorder.fill_rect(60, -2, 10, 4, [255, 255, 255]);
        assert_eq!(
            recorder.rects(),
            &[YuvRect {
                x0: 60,
                y0: 0,
                x1: 64,
                y1: 2,
                yuv: [235, 128, 128],
            }]
        );
    }
}
