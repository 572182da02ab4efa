//! Detector outputs to boxes: the output formats of common ONNX exports, and per-class
//! non-maximum suppression.

use super::centernet::Scores;
use super::raw::RawBox;

/// One output of a run, in host memory: its shape (first dimension the batch) and values.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Output<'a> {
    /// The shape.
    pub shape: &'a [usize],
    /// The values, row-major.
    pub data: &'a [f32],
}

/// How a detector's output is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, octopipe_core::stage::PropChoice)]
#[non_exhaustive]
pub enum Decoder {
    /// `[1, N, 6]` or `[N, 6]` (`[B, N, 6]` for a batch): rows `x1, y1, x2, y2, score, class`,
    /// suppression done inside the model (CenterNet, RT-DETR-style and YOLO end-to-end exports).
    /// Rows of score 0 are padding.
    #[choice(name = "end2end")]
    End2End,
    /// `[B, 4 + classes, anchors]`: `cx, cy, w, h` then one score per class (YOLOv8, YOLO11).
    Yolov8,
    /// `[B, anchors, 5 + classes]`: `cx, cy, w, h, objectness` then one score per class (YOLOv5);
    /// a box's score is objectness times its best class score.
    Yolov5,
    /// Two outputs, CenterNet's heads: scores `[B, classes, H, W]` (after the sigmoid) and
    /// distances to the box's left, top, right and bottom edge `[B, 4, H, W]` in input pixels;
    /// the peaks of the scores make the boxes ([`super::centernet`]).
    #[choice(name = "centernet")]
    CenterNet,
}

/// Largest row count an end-to-end output has: YOLOv5 models with one class also end in 6
/// columns, but have thousands of anchors.
const END2END_MAX_ROWS: i64 = 1000;

/// An output shape a decoder cannot read ([`Decoder::check`]): says what it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.reads())]
#[non_exhaustive]
pub struct ShapeError {
    /// The decoder.
    pub decoder: Decoder,
}

impl ShapeError {
    /// The shapes the decoder reads.
    fn reads(&self) -> &'static str {
        match self.decoder {
            Decoder::End2End => "end2end reads [1, N, 6] or [N, 6] (x1, y1, x2, y2, score, class)",
            Decoder::Yolov8 => {
                "yolov8 reads [batch, 4 + classes, anchors] (more anchors than classes)"
            }
            Decoder::Yolov5 => {
                "yolov5 reads [batch, anchors, 5 + classes] (more anchors than classes)"
            }
            Decoder::CenterNet => {
                "centernet reads scores [batch, classes, h, w] and distances [batch, 4, h, w]"
            }
        }
    }
}

impl Decoder {
    /// The property value naming this decoder.
    pub fn name(self) -> &'static str {
        octopipe_core::stage::PropChoice::as_str(&self)
    }

    /// How many outputs it reads.
    pub fn outputs(self) -> usize {
        match self {
            Decoder::CenterNet => 2,
            _ => 1,
        }
    }

    /// The CenterNet heads among `outputs` (name, shape as declared): two rank-4 outputs of the
    /// same map size, one with 4 channels (the distances) and one with more (the scores), as
    /// `(scores, distances)` indices.
    pub(crate) fn centernet_pair(shapes: &[&[i64]]) -> Option<(usize, usize)> {
        let maps: Vec<(usize, &[i64])> = shapes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.len() == 4)
            .map(|(i, s)| (i, *s))
            .collect();
        let wh = maps.iter().find(|(_, s)| s[1] == 4)?;
        let heat = maps
            .iter()
            .find(|(i, s)| *i != wh.0 && s[1] != 4 && s[2] == wh.1[2] && s[3] == wh.1[3])?;
        Some((heat.0, wh.0))
    }

    /// The decoder an output of `shape` (as the model declares it: -1 for a dynamic axis) is
    /// meant for, if one fits: 6 columns and at most 1000 rows is end-to-end; otherwise rank 3
    /// with more columns than rows is YOLOv8's `[B, 4 + classes, anchors]`, and more rows than
    /// columns YOLOv5's `[B, anchors, 5 + classes]`.
    pub fn detect(shape: &[i64]) -> Option<Decoder> {
        match shape {
            [n, 6] | [_, n, 6] if (1..=END2END_MAX_ROWS).contains(n) => Some(Decoder::End2End),
            [_, c, a] if *c > 4 && *a > *c => Some(Decoder::Yolov8),
            [_, a, c] if *c > 5 && *a > *c => Some(Decoder::Yolov5),
            _ => None,
        }
    }

    /// How many classes an output of `shape` (the scores, for CenterNet) scores, where its shape
    /// says: `None` for end-to-end rows (a class column) and dynamic axes.
    pub fn classes(self, shape: &[i64]) -> Option<usize> {
        let n = match (self, shape) {
            (Decoder::CenterNet, [_, c, _, _]) => *c,
            (Decoder::Yolov8, [_, c, _]) => *c - 4,
            (Decoder::Yolov5, [_, _, c]) => *c - 5,
            _ => return None,
        };
        usize::try_from(n).ok().filter(|&n| n > 0)
    }

    /// Why an output of `shape` cannot be read by this decoder (dynamic axes, -1, pass): YOLO
    /// outputs have more anchors than values per anchor.
    pub fn check(self, shape: &[i64]) -> Result<(), ShapeError> {
        let more = |a: i64, c: i64| a < 0 || c < 0 || a > c;
        let ok = match (self, shape) {
            (Decoder::CenterNet, [_, _, _, _]) => true,
            (Decoder::End2End, [_, c] | [_, _, c]) => *c == 6 || *c < 0,
            (Decoder::Yolov8, [_, c, a]) => (*c > 4 || *c < 0) && more(*a, *c),
            (Decoder::Yolov5, [_, a, c]) => (*c > 5 || *c < 0) && more(*a, *c),
            _ => false,
        };
        if ok {
            return Ok(());
        }
        Err(ShapeError { decoder: self })
    }

    /// Append the boxes of image `image` of a batch's outputs (as many as
    /// [`Decoder::outputs`]; `input` the model input's width and height) whose score is at least
    /// `min_score` (CenterNet score maps holding `scores`). Rows with a non-finite value, a box
    /// of no area or a class that is not a whole number in range are left out. Returns how many
    /// rows were left out for non-finite values.
    pub fn decode(
        self,
        outputs: &[Output<'_>],
        input: (u32, u32),
        scores: Scores,
        image: usize,
        min_score: f32,
        out: &mut Vec<RawBox>,
    ) -> usize {
        let Output { shape, data } = outputs[0];
        if self == Decoder::CenterNet {
            let maps = centernet_maps(shape, input);
            let wh = outputs[1].data;
            return super::centernet::boxes(data, wh, &maps, scores, image, min_score, out);
        }
        let mut non_finite = 0;
        let mut push = |b: [f32; 4], score: f32, class: f32| {
            if !(b.iter().all(|v| v.is_finite()) && score.is_finite() && class.is_finite()) {
                non_finite += 1;
                return;
            }
            let whole = class >= 0.0 && class.fract() == 0.0 && class < u32::MAX as f32;
            if score >= min_score && whole && b[2] > b[0] && b[3] > b[1] {
                out.push(RawBox {
                    b,
                    score,
                    class: class as u32,
                });
            }
        };
        match self {
            Decoder::End2End => {
                let rows = shape[shape.len() - 2];
                let base = image * rows * 6;
                for r in data[base..base + rows * 6].chunks_exact(6) {
                    push([r[0], r[1], r[2], r[3]], r[4], r[5]);
                }
            }
            Decoder::Yolov8 => {
                let (c, a) = (shape[1], shape[2]);
                let img = &data[image * c * a..(image + 1) * c * a];
                let at = |row: usize, anchor: usize| img[row * a + anchor];
                for i in 0..a {
                    let (best, score) = best_class((4..c).map(|k| at(k, i)));
                    push(cxcywh(at(0, i), at(1, i), at(2, i), at(3, i)), score, best);
                }
            }
            Decoder::CenterNet => unreachable!("decoded above"),
            Decoder::Yolov5 => {
                let (a, c) = (shape[1], shape[2]);
                let img = &data[image * a * c..(image + 1) * a * c];
                for r in img.chunks_exact(c) {
                    let (best, score) = best_class(r[5..].iter().copied());
                    push(cxcywh(r[0], r[1], r[2], r[3]), r[4] * score, best);
                }
            }
        }
        non_finite
    }
}

/// The geometry of CenterNet score maps of `shape` (`[B, classes, h, w]`) over an `input`
/// (width, height).
pub(crate) fn centernet_maps(shape: &[usize], input: (u32, u32)) -> super::centernet::Maps {
    let (classes, h, w) = (shape[1], shape[2].max(1), shape[3].max(1));
    super::centernet::Maps {
        classes,
        h,
        w,
        stride: (input.0 as f32 / w as f32, input.1 as f32 / h as f32),
    }
}

/// The best class and its score (a NaN score makes the score NaN, so the row is left out).
fn best_class(scores: impl Iterator<Item = f32>) -> (f32, f32) {
    let mut best = (0.0, f32::NEG_INFINITY);
    for (k, s) in scores.enumerate() {
        if s.is_nan() {
            return (k as f32, f32::NAN);
        }
        if s > best.1 {
            best = (k as f32, s);
        }
    }
    best
}

fn cxcywh(cx: f32, cy: f32, w: f32, h: f32) -> [f32; 4] {
    [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0]
}

/// When a box is suppressed by a better one of its class.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Suppress {
    /// Intersection over union above this: a duplicate of the better box.
    pub iou: f32,
    /// Or intersection over the smaller box's area above this: one box lies inside the other, as
    /// a box that a tile border cut short lies inside the whole object's box from the next tile
    /// (SAHI merges slices by this measure); the better box then grows to cover both. 1 or more:
    /// never.
    pub ios: f32,
}

/// What a better box does to a box of its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Keep,
    /// Dropped as a duplicate.
    Duplicate,
    /// Dropped into the better box, which grows to cover it.
    Merge,
}

impl Suppress {
    fn verdict(&self, a: &[f32; 4], b: &[f32; 4]) -> Verdict {
        let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
        let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
        let inter = iw * ih;
        if inter <= 0.0 {
            return Verdict::Keep;
        }
        let area = |r: &[f32; 4]| (r[2] - r[0]) * (r[3] - r[1]);
        let (aa, ab) = (area(a), area(b));
        if inter / (aa + ab - inter) > self.iou {
            Verdict::Duplicate
        } else if inter / aa.min(ab) > self.ios {
            Verdict::Merge
        } else {
            Verdict::Keep
        }
    }
}

/// Per-class greedy non-maximum suppression: boxes by descending score (ties keep their order),
/// each kept unless a kept box of its class suppresses it (`rule`: as a duplicate, or merged into
/// it, the kept box growing to the union of both); at most `max` kept. Classes with the same `group` are one class here (classes a map renames alike). The
/// result is in descending score order.
pub fn nms(boxes: &mut Vec<RawBox>, rule: Suppress, max: usize, group: impl Fn(u32) -> u32) {
    boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<RawBox> = Vec::with_capacity(boxes.len().min(max));
    for b in boxes.drain(..) {
        if kept.len() >= max {
            break;
        }
        let mut verdict = Verdict::Keep;
        for k in kept.iter_mut().filter(|k| group(k.class) == group(b.class)) {
            verdict = rule.verdict(&k.b, &b.b);
            if verdict == Verdict::Merge {
                k.b = [
                    k.b[0].min(b.b[0]),
                    k.b[1].min(b.b[1]),
                    k.b[2].max(b.b[2]),
                    k.b[3].max(b.b[3]),
                ];
            }
            if verdict != Verdict::Keep {
                break;
            }
        }
        if verdict == Verdict::Keep {
            kept.push(b);
        }
    }
    *boxes = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out_of<'a>(data: &'a [f32], shape: &'a [usize]) -> Output<'a> {
        Output { shape, data }
    }

    #[test]
    fn shapes_pick_their_decoder() {
        assert_eq!(Decoder::detect(&[1, 100, 6]), Some(Decoder::End2End));
        assert_eq!(Decoder::detect(&[300, 6]), Some(Decoder::End2End));
        assert_eq!(Decoder::detect(&[-1, 84, 8400]), Some(Decoder::Yolov8));
        assert_eq!(Decoder::detect(&[1, 25200, 85]), Some(Decoder::Yolov5));
        // One-class YOLOv5: 6 columns, but thousands of anchors.
        assert_eq!(Decoder::detect(&[1, 25200, 6]), Some(Decoder::Yolov5));
        assert_eq!(Decoder::detect(&[1, 128, 128, 80]), None);
        assert_eq!(Decoder::detect(&[1, 1000]), None);
        assert!(Decoder::Yolov5.check(&[1, 84, 8400]).is_err());
        assert!(Decoder::Yolov5.check(&[1, 8400, 84]).is_ok());
        assert!(Decoder::Yolov8.check(&[-1, 84, -1]).is_ok());
        assert!(Decoder::End2End.check(&[1, 84, 8400]).is_err());
        let heat: &[i64] = &[-1, 80, 128, 128];
        let wh: &[i64] = &[-1, 4, 128, 128];
        assert_eq!(Decoder::centernet_pair(&[wh, heat]), Some((1, 0)));
        assert_eq!(Decoder::centernet_pair(&[heat, &[-1, 4, 64, 64]]), None);
        // The classes each shape scores, where it says.
        assert_eq!(Decoder::CenterNet.classes(heat), Some(80));
        assert_eq!(Decoder::Yolov8.classes(&[-1, 84, 8400]), Some(80));
        assert_eq!(Decoder::Yolov5.classes(&[1, 25200, 6]), Some(1));
        assert_eq!(Decoder::Yolov8.classes(&[-1, -1, -1]), None);
        assert_eq!(Decoder::End2End.classes(&[1, 100, 6]), None);
    }

    #[test]
    fn each_format_decodes_to_corner_boxes() {
        let mut out = Vec::new();
        // Two images of two rows each; image 1 has one real row and one padding row.
        let e2e = [
            0., 0., 1., 1., 0.9, 0., 0., 0., 1., 1., 0.9, 0., //
            10., 20., 30., 60., 0.8, 3., 0., 0., 0., 0., 0., 0.,
        ];
        Decoder::End2End.decode(
            &[out_of(&e2e, &[2, 2, 6])],
            (1, 1),
            Scores::default(),
            1,
            0.3,
            &mut out,
        );
        assert_eq!(
            out,
            [RawBox {
                b: [10., 20., 30., 60.],
                score: 0.8,
                class: 3
            }]
        );
        // YOLOv8: 2 classes, 3 anchors, column-major by anchor.
        let v8 = [
            50., 10., 0., // cx
            50., 10., 0., // cy
            20., 4., 0., // w
            10., 4., 0., // h
            0.1, 0.7, 0.0, // class 0
            0.6, 0.2, 0.0, // class 1
        ];
        out.clear();
        Decoder::Yolov8.decode(
            &[out_of(&v8, &[1, 6, 3])],
            (1, 1),
            Scores::default(),
            0,
            0.5,
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].b, out[0].class, out[0].score),
            ([40., 45., 60., 55.], 1, 0.6)
        );
        assert_eq!(
            (out[1].b, out[1].class, out[1].score),
            ([8., 8., 12., 12.], 0, 0.7)
        );
        // YOLOv5: objectness times the best class score.
        let v5 = [
            50., 50., 20., 10., 0.5, 0.2, 0.9, 10., 10., 4., 4., 0.2, 1.0, 0.0,
        ];
        out.clear();
        Decoder::Yolov5.decode(
            &[out_of(&v5, &[1, 2, 7])],
            (1, 1),
            Scores::default(),
            0,
            0.4,
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].b, out[0].class), ([40., 45., 60., 55.], 1));
        assert!((out[0].score - 0.45).abs() < 1e-6);
    }

    #[test]
    fn non_finite_and_bad_rows_are_left_out() {
        let rows = [
            f32::NAN,
            0.,
            1.,
            1.,
            0.9,
            0., // NaN coordinate
            0.,
            0.,
            1.,
            1.,
            0.9,
            1.5, // class not whole
            5.,
            5.,
            5.,
            9.,
            0.9,
            0., // no width
            0.,
            0.,
            1.,
            1.,
            f32::INFINITY,
            0., // infinite score
        ];
        let mut out = Vec::new();
        let non_finite = Decoder::End2End.decode(
            &[out_of(&rows, &[4, 6])],
            (1, 1),
            Scores::default(),
            0,
            0.3,
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(non_finite, 2);
    }

    const IOU: Suppress = Suppress { iou: 0.5, ios: 1.0 };
    const IOS: Suppress = Suppress {
        iou: 0.5,
        ios: 0.85,
    };

    fn rb(b: [f32; 4], score: f32, class: u32) -> RawBox {
        RawBox { b, score, class }
    }

    #[test]
    fn nms_is_per_class_and_keeps_the_best() {
        let mut v = vec![
            rb([0., 0., 10., 10.], 0.5, 0),
            rb([1., 0., 11., 10.], 0.9, 0), // IoU 9/11 with the first: suppresses it
            rb([1., 0., 11., 10.], 0.4, 1), // another class: kept
            rb([20., 20., 30., 30.], 0.3, 0),
        ];
        nms(&mut v, IOU, 100, |c| c);
        let scores: Vec<f32> = v.iter().map(|b| b.score).collect();
        assert_eq!(scores, [0.9, 0.4, 0.3]);
        let mut capped = v.clone();
        nms(&mut capped, IOU, 2, |c| c);
        // Classes 0 and 1 grouped: the class-1 box overlaps the best class-0 box.
        let mut grouped = v.clone();
        nms(&mut grouped, IOU, 100, |_| 0);
        assert_eq!(grouped.len(), 2);
        assert_eq!(capped.len(), 2);
    }

    #[test]
    fn a_box_cut_by_a_tile_border_merges_by_ios_not_iou() {
        // The whole object from one tile, and its left third from the tile beside it.
        let whole = rb([100., 0., 160., 30.], 0.8, 2);
        let cut = rb([100., 0., 120., 30.], 0.6, 2);
        // IoU 1/3, IOS 1.
        assert_eq!(IOU.verdict(&whole.b, &cut.b), Verdict::Keep);
        assert_eq!(IOS.verdict(&whole.b, &cut.b), Verdict::Merge);
        let mut v = vec![whole, cut];
        nms(&mut v, IOU, 10, |c| c);
        assert_eq!(v.len(), 2);
        nms(&mut v, IOS, 10, |c| c);
        assert_eq!(v, [whole]);
    }
}
