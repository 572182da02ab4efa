//! A deterministic box generator following the real VisDrone box-size distribution.
//!
//! Box sizes are log-normal, fitted to the 40,169 boxes of VisDrone2019-DET-val at 1920x1080:
//! median about 39x56 px, 95th percentile about 162x151 px, width and height correlated. Sizes
//! scale with the frame width; categories follow VisDrone's rough mix. The same
//! `(seed, stream, frame)` always gives the same boxes.

use super::annotations::AnnotationRow;
use octopipe_core::rng::Rng;

/// Median box width and height at 1920 px frame width.
const MEDIAN: (f64, f64) = (39.0, 56.0);
/// Log-normal sigma of width and height (from the 95th percentile: ln(p95 / median) / 1.645).
const SIGMA: (f64, f64) = (0.866, 0.603);
/// Correlation of log width and log height.
const RHO: f64 = 0.6;
/// VisDrone categories 1..=10 with rough frequencies (percent).
const CATEGORY_WEIGHTS: [(u8, u32); 10] = [
    (1, 20),
    (2, 8),
    (3, 3),
    (4, 40),
    (5, 7),
    (6, 3),
    (7, 2),
    (8, 1),
    (9, 1),
    (10, 15),
];

/// The generator.
#[derive(Debug, Clone, Copy)]
pub struct Synthetic {
    seed: u64,
}

impl Synthetic {
    /// A generator with `seed`.
    pub fn new(seed: u64) -> Self {
        Synthetic { seed }
    }

    /// `count` boxes for frame `seq` of `stream` on a `width`x`height` frame, all inside it: at
    /// least 2x2 px where the frame is that large, else as wide or tall as the frame (a 1-px-wide
    /// frame gets 1-px-wide boxes, which the boxes stage then skips as too small). A frame of
    /// width or height 0 gets no boxes.
    pub fn frame_boxes(
        &self,
        stream: u32,
        seq: u64,
        count: u32,
        width: u32,
        height: u32,
    ) -> Vec<AnnotationRow> {
        let mut rng =
            Rng::new(self.seed ^ ((stream as u64) << 48) ^ seq.wrapping_mul(0x2545_F491_4F6C_DD1D));
        if width == 0 || height == 0 {
            return Vec::new();
        }
        let scale = width as f64 / 1920.0;
        // Each side is at least 2 px, or the whole side of a frame smaller than that.
        let side = |median: f64, sigma: f64, z: f64, limit: u32| {
            let limit = limit as f64;
            (median * (sigma * z).exp() * scale)
                .round()
                .clamp(limit.min(2.0), limit) as i64
        };
        let total: u32 = CATEGORY_WEIGHTS.iter().map(|(_, w)| w).sum();
        (0..count)
            .map(|_| {
                let (z1, z2) = (rng.normal(), rng.normal());
                let zw = z1;
                let zh = RHO * z1 + (1.0 - RHO * RHO).sqrt() * z2;
                let w = side(MEDIAN.0, SIGMA.0, zw, width);
                let h = side(MEDIAN.1, SIGMA.1, zh, height);
                let x = (rng.unit() * (width as i64 - w + 1) as f64) as i64;
                let y = (rng.unit() * (height as i64 - h + 1) as f64) as i64;
                let mut pick = (rng.unit() * total as f64) as u32;
                let category = CATEGORY_WEIGHTS
                    .iter()
                    .find(|(_, wt)| {
                        let hit = pick < *wt;
                        pick = pick.saturating_sub(*wt);
                        hit
                    })
                    .map_or(4, |(c, _)| *c);
                AnnotationRow {
                    bbox: [x, y, w, h],
                    score: 1.0,
                    category,
                    track: None,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_inside_and_visdrone_sized() {
        let g = Synthetic::new(7);
        let a = g.frame_boxes(0, 3, 2000, 1920, 1080);
        assert_eq!(a, g.frame_boxes(0, 3, 2000, 1920, 1080));
        assert_ne!(a, g.frame_boxes(0, 4, 2000, 1920, 1080));
        for r in &a {
            let [x, y, w, h] = r.bbox;
            assert!(
                x >= 0 && y >= 0 && x + w <= 1920 && y + h <= 1080 && w >= 2 && h >= 2,
                "{r:?}"
            );
            assert!((1..=10).contains(&r.category));
        }
        let mut ws: Vec<i64> = a.iter().map(|r| r.bbox[2]).collect();
        let mut hs: Vec<i64> = a.iter().map(|r| r.bbox[3]).collect();
        ws.sort();
        hs.sort();
        let (mw, mh) = (ws[ws.len() / 2], hs[hs.len() / 2]);
        assert!((33..=45).contains(&mw), "median width {mw}");
        assert!((49..=63).contains(&mh), "median height {mh}");
        let p95 = ws[ws.len() * 95 / 100];
        assert!((130..=200).contains(&p95), "p95 width {p95}");
    }
}
