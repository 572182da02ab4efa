//! CenterNet heads to boxes: a score map per class and a map of distances to the box's edges,
//! read as the CenterNet family's own decode reads them.
//!
//! A cell `(x, y)` of class `c` is a peak when its score is the largest of its 3x3 neighbourhood
//! in that class (the 3x3 max-pool test); the `TOP_K` best peaks per image at or over the score
//! threshold become boxes `[sx*x - l, sy*y - t, sx*x + r, sy*y + b]`, where `(l, t, r, b)` are the
//! distances at that cell in input pixels and `(sx, sy)` the stride of the maps over the input.
//! Ties are broken as the model's own top-k over the NHWC-flattened scores breaks them (lower
//! flat index first). The peaks are found on the host here, or by `centernet.cu` on the
//! GPU where the model runs there; both hand their peaks to [`select`].

use super::raw::RawBox;

/// Peaks kept per image, best first (the shared CenterNet's own top-k).
pub const TOP_K: usize = 100;

/// One peak: its score, cell (`index` = `(c * h + y) * w + x`) and the distances there.
/// `#[repr(C)]`: the layout `centernet.cu` writes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Peak {
    /// The class score.
    pub score: f32,
    /// `(class * h + y) * w + x`.
    pub index: u32,
    /// Distances to the left, top, right and bottom edge, in input pixels.
    pub d: [f32; 4],
}

/// What a score map holds: class probabilities (after the sigmoid), or their logits (a model
/// that leaves the sigmoid to octopipe, which then takes it of the peaks alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Scores {
    /// Probabilities, 0..1.
    #[default]
    Probabilities,
    /// Logits: the probability is their sigmoid.
    Logits,
}

impl Scores {
    /// The score in the maps' own units at which a probability reaches `min_score` (the sigmoid
    /// is monotonic: a peak of the logits is a peak of the probabilities).
    pub fn threshold(self, min_score: f32) -> f32 {
        match self {
            Scores::Probabilities => min_score,
            Scores::Logits if min_score <= 0.0 => f32::NEG_INFINITY,
            Scores::Logits if min_score >= 1.0 => f32::INFINITY,
            Scores::Logits => (min_score / (1.0 - min_score)).ln(),
        }
    }

    /// The peaks' scores as probabilities.
    pub(crate) fn to_probabilities(self, peaks: &mut [Peak]) {
        if self == Scores::Logits {
            for p in peaks {
                p.score = 1.0 / (1.0 + (-p.score).exp());
            }
        }
    }
}

/// The maps' geometry: classes, height and width, and the stride over the model input.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Maps {
    /// Classes (score maps).
    pub classes: usize,
    /// Map height.
    pub h: usize,
    /// Map width.
    pub w: usize,
    /// Input pixels per map cell, horizontally and vertically.
    pub stride: (f32, f32),
}

impl Maps {
    /// Elements of one image's score maps.
    pub(crate) fn per_image(&self) -> usize {
        self.classes * self.h * self.w
    }

    /// The flat index of `index` in the NHWC order the model's own top-k sorts ties by.
    fn nhwc(&self, index: u32) -> usize {
        let i = index as usize;
        let plane = self.h * self.w;
        let (c, p) = (i / plane, i % plane);
        p * self.classes + c
    }
}

/// Append to `out` the peaks of image `image` of `heat` (`[N, classes, h, w]`) at or over
/// `min_score`, with their distances from `wh` (`[N, 4, h, w]`).
pub fn peaks(
    heat: &[f32],
    wh: &[f32],
    maps: &Maps,
    image: usize,
    min_score: f32,
    out: &mut Vec<Peak>,
) {
    let (h, w) = (maps.h, maps.w);
    let plane = h * w;
    let scores = &heat[image * maps.per_image()..(image + 1) * maps.per_image()];
    let dist = &wh[image * 4 * plane..(image + 1) * 4 * plane];
    for c in 0..maps.classes {
        let map = &scores[c * plane..(c + 1) * plane];
        for y in 0..h {
            for x in 0..w {
                let s = map[y * w + x];
                if s.is_nan() || s < min_score {
                    continue;
                }
                let peak = (y.saturating_sub(1)..(y + 2).min(h)).all(|yy| {
                    (x.saturating_sub(1)..(x + 2).min(w)).all(|xx| map[yy * w + xx] <= s)
                });
                if peak {
                    let p = y * w + x;
                    out.push(Peak {
                        score: s,
                        index: (c * plane + p) as u32,
                        d: [
                            dist[p],
                            dist[plane + p],
                            dist[2 * plane + p],
                            dist[3 * plane + p],
                        ],
                    });
                }
            }
        }
    }
}

/// The boxes of image `image` of `heat` and `wh` (as [`peaks`] reads them; the maps holding
/// `scores`) at or over the probability `min_score`, as [`select`] makes them.
pub fn boxes(
    heat: &[f32],
    wh: &[f32],
    maps: &Maps,
    scores: Scores,
    image: usize,
    min_score: f32,
    out: &mut Vec<RawBox>,
) -> usize {
    let mut found = Vec::new();
    peaks(
        heat,
        wh,
        maps,
        image,
        scores.threshold(min_score),
        &mut found,
    );
    scores.to_probabilities(&mut found);
    select(&mut found, maps, out)
}

/// The boxes of one image's `peaks` (in any order): the [`TOP_K`] best, in descending score,
/// each `[x1, y1, x2, y2]` in input pixels with its class. Boxes of no area or with a non-finite
/// value are left out; returns how many were non-finite.
pub fn select(peaks: &mut [Peak], maps: &Maps, out: &mut Vec<RawBox>) -> usize {
    let order = |a: &Peak, b: &Peak| {
        b.score
            .total_cmp(&a.score)
            .then(maps.nhwc(a.index).cmp(&maps.nhwc(b.index)))
    };
    let k = TOP_K.min(peaks.len());
    if peaks.len() > k {
        peaks.select_nth_unstable_by(k, order);
    }
    let best = &mut peaks[..k];
    best.sort_unstable_by(order);
    let plane = maps.h * maps.w;
    let mut non_finite = 0;
    for p in best.iter() {
        let i = p.index as usize;
        let (class, cell) = (i / plane, i % plane);
        let (x, y) = ((cell % maps.w) as f32, (cell / maps.w) as f32);
        let (cx, cy) = (x * maps.stride.0, y * maps.stride.1);
        let b = [cx - p.d[0], cy - p.d[1], cx + p.d[2], cy + p.d[3]];
        if !b.iter().all(|v| v.is_finite()) {
            non_finite += 1;
            continue;
        }
        if b[2] > b[0] && b[3] > b[1] {
            out.push(RawBox {
                b,
                score: p.score,
                class: class as u32,
            });
        }
    }
    non_finite
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: Maps = Maps {
        classes: 2,
        h: 4,
        w: 5,
        stride: (4.0, 4.0),
    };

    #[test]
    fn peaks_are_the_3x3_maxima_over_the_score() {
        let plane = 20;
        let mut heat = vec![0.0f32; 2 * plane];
        let mut wh = vec![0.0f32; 4 * plane];
        // Class 0: a peak at (1, 1) with a weaker neighbour at (2, 1); a lone weak peak at (4, 3).
        heat[5 + 1] = 0.9;
        heat[5 + 2] = 0.6;
        heat[15 + 4] = 0.2;
        // Class 1: a plateau of two equal cells (both peaks, as the max-pool test gives).
        heat[plane + 10] = 0.5;
        heat[plane + 11] = 0.5;
        for (k, v) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
            wh[k * plane + 6] = v;
        }
        let mut found = Vec::new();
        peaks(&heat, &wh, &MAPS, 0, 0.3, &mut found);
        let at: Vec<(u32, f32)> = found.iter().map(|p| (p.index, p.score)).collect();
        assert_eq!(at, [(6, 0.9), (30, 0.5), (31, 0.5)]);
        assert_eq!(found[0].d, [1.0, 2.0, 3.0, 4.0]);

        let mut boxes = Vec::new();
        assert_eq!(select(&mut found, &MAPS, &mut boxes), 0);
        // (1, 1) at stride 4 is (4, 4): left 1, top 2, right 3, bottom 4.
        assert_eq!(boxes[0].b, [3.0, 2.0, 7.0, 8.0]);
        assert_eq!(boxes[0].class, 0);
        // The plateau's cells have no distances: boxes of no area are left out.
        assert_eq!(boxes.len(), 1);
    }

    #[test]
    fn select_keeps_the_top_k_and_breaks_ties_in_nhwc_order() {
        let maps = Maps {
            classes: 3,
            h: 50,
            w: 50,
            stride: (1.0, 1.0),
        };
        let mut peaks: Vec<Peak> = (0..300u32)
            .map(|i| Peak {
                score: if i % 2 == 0 { 0.5 } else { 0.9 },
                index: i,
                d: [1.0; 4],
            })
            .collect();
        let mut out = Vec::new();
        select(&mut peaks, &maps, &mut out);
        assert_eq!(out.len(), TOP_K);
        assert!(out.iter().all(|b| b.score == 0.9), "the 150 best first");
        // Indices 1, 3, 5 ... are class 0 cells 1, 3, 5 ...: NHWC order is cell order.
        let cells: Vec<f32> = out.iter().take(3).map(|b| b.b[0] + 1.0).collect();
        assert_eq!(cells, [1.0, 3.0, 5.0]);
    }

    #[test]
    fn logits_give_the_boxes_of_their_probabilities() {
        let plane = 20;
        let mut heat = vec![0.0f32; 2 * plane];
        let mut wh = vec![1.5f32; 4 * plane];
        for (i, v) in heat.iter_mut().enumerate() {
            *v = ((i * 7919) % 97) as f32 / 97.0;
        }
        wh[3] = 2.5;
        let logits: Vec<f32> = heat.iter().map(|p| (p / (1.0 - p)).ln()).collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let n = boxes(&heat, &wh, &MAPS, Scores::Probabilities, 0, 0.6, &mut a);
        let m = boxes(&logits, &wh, &MAPS, Scores::Logits, 0, 0.6, &mut b);
        assert_eq!((n, m), (0, 0));
        assert!(a.len() >= 3, "{a:?}");
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.b, x.class), (y.b, y.class));
            assert!((x.score - y.score).abs() < 1e-6, "{x:?} {y:?}");
            assert!(y.score >= 0.6);
        }
        assert_eq!(Scores::Logits.threshold(0.5), 0.0);
        assert_eq!(Scores::Logits.threshold(0.0), f32::NEG_INFINITY);
        assert_eq!(Scores::Logits.threshold(1.0), f32::INFINITY);
        assert_eq!(Scores::Probabilities.threshold(0.3), 0.3);
    }
}
