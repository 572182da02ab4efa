//! The motion model: a constant-velocity Kalman filter on a box's centre and size
//! (`cx, cy, w, h` and their velocities), as SORT and ByteTrack use.
//!
//! The transition only couples each quantity with its own velocity, and the noises are
//! diagonal, so the 8-state filter is exactly four independent 2-state filters (value,
//! velocity); that is how it is computed. Noises scale with the box (ByteTrack's weights: 1/20
//! of the size for positions, 1/160 for velocities), so a large box may move more pixels per
//! frame than a small one.

/// Standard deviation of position noise, as a share of the box's size.
const STD_POSITION: f64 = 1.0 / 20.0;
/// Standard deviation of velocity noise, as a share of the box's size.
const STD_VELOCITY: f64 = 1.0 / 160.0;

/// One quantity and its velocity, with their covariance.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    x: f64,
    v: f64,
    /// Covariance: var(x), cov(x, v), var(v).
    pxx: f64,
    pxv: f64,
    pvv: f64,
}

impl Axis {
    fn new(x: f64, scale: f64) -> Self {
        Axis {
            x,
            v: 0.0,
            pxx: (2.0 * STD_POSITION * scale).powi(2),
            pxv: 0.0,
            pvv: (10.0 * STD_VELOCITY * scale).powi(2),
        }
    }

    /// One frame on: x += v, with process noise for a box of size `scale`.
    fn predict(&mut self, scale: f64) {
        self.x += self.v;
        self.pxx += 2.0 * self.pxv + self.pvv + (STD_POSITION * scale).powi(2);
        self.pxv += self.pvv;
        self.pvv += (STD_VELOCITY * scale).powi(2);
    }

    /// Fold in a measurement `z` of x, with measurement noise for a box of size `scale`.
    fn update(&mut self, z: f64, scale: f64) {
        let s = self.pxx + (STD_POSITION * scale).powi(2);
        let (kx, kv) = (self.pxx / s, self.pxv / s);
        let y = z - self.x;
        self.x += kx * y;
        self.v += kv * y;
        let (pxx, pxv) = (self.pxx, self.pxv);
        self.pxx = (1.0 - kx) * pxx;
        self.pxv = (1.0 - kx) * pxv;
        self.pvv -= kv * pxv;
    }
}

/// A box's motion state: centre and size, each with its velocity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxFilter {
    axes: [Axis; 4],
}

impl BoxFilter {
    /// A filter starting at `bbox` (`[x, y, w, h]`), at rest.
    pub fn new(bbox: [f64; 4]) -> Self {
        let [cx, cy, w, h] = centre(bbox);
        BoxFilter {
            axes: [
                Axis::new(cx, w),
                Axis::new(cy, h),
                Axis::new(w, w),
                Axis::new(h, h),
            ],
        }
    }

    /// The noise scale of each axis: x and w scale with the width, y and h with the height.
    fn scales(&self) -> [f64; 4] {
        let (w, h) = (self.axes[2].x.max(1.0), self.axes[3].x.max(1.0));
        [w, h, w, h]
    }

    /// Move one frame on.
    pub fn predict(&mut self) {
        let scales = self.scales();
        for (a, s) in self.axes.iter_mut().zip(scales) {
            a.predict(s);
        }
    }

    /// Move the box by `[dx, dy]` pixels (the camera moved: the scene shifts on the image).
    pub fn shift(&mut self, d: [f64; 2]) {
        self.axes[0].x += d[0];
        self.axes[1].x += d[1];
    }

    /// Stop the size from changing (a track that lost its box keeps its size while it coasts).
    pub(crate) fn freeze_size(&mut self) {
        self.axes[2].v = 0.0;
        self.axes[3].v = 0.0;
    }

    /// Correct with a measured box `[x, y, w, h]`.
    pub fn update(&mut self, bbox: [f64; 4]) {
        let z = centre(bbox);
        let scales = [bbox[2], bbox[3], bbox[2], bbox[3]].map(|s| s.max(1.0));
        for ((a, z), s) in self.axes.iter_mut().zip(z).zip(scales) {
            a.update(z, s);
        }
    }

    /// The box now, `[x, y, w, h]` (size at least 1 pixel).
    pub fn bbox(&self) -> [f64; 4] {
        let [cx, cy, w, h] = self.axes.map(|a| a.x);
        let (w, h) = (w.max(1.0), h.max(1.0));
        [cx - w / 2.0, cy - h / 2.0, w, h]
    }

    /// The velocity of the centre, pixels per frame.
    pub fn velocity(&self) -> [f64; 2] {
        [self.axes[0].v, self.axes[1].v]
    }
}

/// `[x, y, w, h]` -> `[cx, cy, w, h]`.
fn centre(b: [f64; 4]) -> [f64; 4] {
    [b[0] + b[2] / 2.0, b[1] + b[3] / 2.0, b[2], b[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_moving_steadily_is_predicted_where_it_goes() {
        let mut f = BoxFilter::new([100.0, 50.0, 40.0, 20.0]);
        // 3 px/frame right, 1 px/frame down, for 20 frames.
        for t in 1..=20 {
            f.predict();
            f.update([100.0 + 3.0 * t as f64, 50.0 + t as f64, 40.0, 20.0]);
        }
        let [vx, vy] = f.velocity();
        assert!(
            (vx - 3.0).abs() < 0.1 && (vy - 1.0).abs() < 0.1,
            "{vx} {vy}"
        );
        // Five frames lost: the prediction keeps moving.
        for _ in 0..5 {
            f.predict();
        }
        let b = f.bbox();
        assert!((b[0] - 175.0).abs() < 1.0, "{b:?}");
        assert!((b[1] - 75.0).abs() < 1.0, "{b:?}");
        assert!(
            (b[2] - 40.0).abs() < 0.5 && (b[3] - 20.0).abs() < 0.5,
            "{b:?}"
        );
    }

    #[test]
    fn a_box_at_rest_stays_and_the_size_never_goes_below_one_pixel() {
        let mut f = BoxFilter::new([10.0, 10.0, 2.0, 2.0]);
        for _ in 0..10 {
            f.predict();
            f.update([10.0, 10.0, 2.0, 2.0]);
        }
        let b = f.bbox();
        assert!(b
            .iter()
            .zip([10.0, 10.0, 2.0, 2.0])
            .all(|(a, e)| (a - e).abs() < 1e-6));
        // A box shrinking 2 px a frame, then coasting: its predicted size stops at 1 pixel.
        let mut g = BoxFilter::new([0.0, 0.0, 40.0, 40.0]);
        for t in 1..=15 {
            let s = 40.0 - 2.0 * t as f64;
            g.predict();
            g.update([0.0, 0.0, s, s]);
        }
        for _ in 0..100 {
            g.predict();
        }
        assert_eq!([g.bbox()[2], g.bbox()[3]], [1.0, 1.0]);
    }
}
