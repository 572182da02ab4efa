//! Where the tiles of a frame lie: a regular grid (the detector's sliced inference, the `tiles`
//! stage's `size=WxH`) or a random variable grid (the `tiles` stage's `min=`, `max=`, `seed=`).

use octopipe_core::rng::Rng;

/// A rectangle of frame pixels `[x, y, w, h]`.
pub type Rect = [u32; 4];

/// What a regular grid does with a tile that would run past the frame's right or bottom edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Edge {
    /// Move it back to end at the edge, as SAHI places tiles: every tile has the full size when
    /// the frame is at least that large (the last row and column overlap their neighbours more).
    #[default]
    Shift,
    /// Clip it to the frame: the last row and column are narrower, and no pixel is in two tiles
    /// unless `overlap` puts it there.
    Clip,
}

/// The tiles of a `fw`x`fh` frame for tiles of `tw`x`th` with `overlap` (a fraction of the tile
/// size shared by neighbours), row by row: tiles step by `size - floor(overlap * size)` (at least
/// 1), and a tile that would run past the right or bottom edge is moved back or clipped as `edge`
/// says. A frame smaller than a tile gives one tile, the frame's own size, on that axis.
pub fn regular(fw: u32, fh: u32, tw: u32, th: u32, overlap: f64, edge: Edge) -> Vec<Rect> {
    let xs = starts(fw, tw, overlap, edge);
    let ys = starts(fh, th, overlap, edge);
    let mut tiles = Vec::with_capacity(xs.len() * ys.len());
    for &(y, h) in &ys {
        for &(x, w) in &xs {
            tiles.push([x, y, w, h]);
        }
    }
    tiles
}

/// How many tiles [`regular`] would give, counted without making them (a grid of tiny tiles
/// on a large frame would be millions): the count along each axis, multiplied.
pub fn regular_count(fw: u32, fh: u32, tw: u32, th: u32, overlap: f64) -> u64 {
    axis_count(fw, tw, overlap).saturating_mul(axis_count(fh, th, overlap))
}

/// How many starts [`starts`] gives along one axis (either edge gives as many).
fn axis_count(len: u32, size: u32, overlap: f64) -> u64 {
    if len <= size || size == 0 {
        return 1;
    }
    let shared = ((overlap * size as f64).floor() as u32).min(size - 1);
    let step = u64::from(size - shared);
    // Starts 0, step, ... while start + size < len, then the edge tile.
    (u64::from(len - size) - 1) / step + 2
}

/// Tile starts and lengths along one axis of `len` pixels.
fn starts(len: u32, size: u32, overlap: f64, edge: Edge) -> Vec<(u32, u32)> {
    if len <= size {
        return vec![(0, len)];
    }
    let shared = ((overlap * size as f64).floor() as u32).min(size - 1);
    let step = size - shared;
    let mut v = Vec::new();
    let mut start = 0;
    loop {
        if start + size >= len {
            v.push(match edge {
                Edge::Shift => (len - size, size),
                Edge::Clip => (start, len - start),
            });
            break;
        }
        v.push((start, size));
        start += step;
    }
    v
}

/// The random variable grid of a `fw`x`fh` frame: tiles of `min..=max` pixels a side, covering
/// the frame once (no gap, no overlap), the same for the same `seed` on every machine.
///
/// Rows top to bottom: each row's height is drawn uniformly from `min..=max`, then the row is cut
/// left to right into tiles whose widths are drawn uniformly from `min..=max`, each draw taking the
/// next number of a SplitMix64 generator seeded with `seed` (`min + n % (max - min + 1)`). A tile
/// or row that would run past the right or bottom edge is clipped to the frame, so the last
/// column of each row and the last row may be narrower than `min`. Every row has its own column
/// boundaries, so tiles of neighbouring rows do not line up (a brick wall of random bricks).
/// `min <= max`, both at least 1.
pub fn random(fw: u32, fh: u32, min: u32, max: u32, seed: u64) -> Vec<Rect> {
    let (min, max) = (min.max(1), max.max(min.max(1)));
    let mut rng = Rng::new(seed);
    let mut tiles = Vec::new();
    let mut y = 0;
    while y < fh {
        let h = rng.between(min, max).min(fh - y);
        let mut x = 0;
        while x < fw {
            let w = rng.between(min, max).min(fw - x);
            tiles.push([x, y, w, h]);
            x += w;
        }
        y += h;
    }
    tiles
}

/// How many tiles [`random`] would give, counted without making them, up to `stop`: past it,
/// `stop + 1` (the count of a grid of tiny tiles on a large frame is not worth finishing).
pub fn random_count(fw: u32, fh: u32, min: u32, max: u32, seed: u64, stop: u64) -> u64 {
    let (min, max) = (min.max(1), max.max(min.max(1)));
    let mut rng = Rng::new(seed);
    let mut count = 0;
    let mut y = 0;
    while y < fh {
        let h = rng.between(min, max).min(fh - y);
        let mut x = 0;
        while x < fw {
            let w = rng.between(min, max).min(fw - x);
            count += 1;
            if count > stop {
                return count;
            }
            x += w;
        }
        y += h;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_tiles_of_a_visdrone_frame_stay_inside_it() {
        let t = regular(2000, 1500, 640, 640, 0.15, Edge::Shift);
        assert_eq!(t.len(), 12);
        let xs: Vec<u32> = t[..4].iter().map(|r| r[0]).collect();
        assert_eq!(xs, [0, 544, 1088, 1360]);
        let ys: Vec<u32> = t.iter().step_by(4).map(|r| r[1]).collect();
        assert_eq!(ys, [0, 544, 860]);
        assert!(t
            .iter()
            .all(|r| r[2] == 640 && r[3] == 640 && r[0] + 640 <= 2000 && r[1] + 640 <= 1500));
    }

    #[test]
    fn exact_fits_small_frames_and_no_overlap() {
        let place = |fw, fh, tw, th, o| regular(fw, fh, tw, th, o, Edge::Shift);
        assert_eq!(place(1280, 640, 640, 640, 0.0).len(), 2);
        assert_eq!(place(1280, 640, 640, 640, 0.0)[1], [640, 0, 640, 640]);
        assert_eq!(place(300, 200, 640, 640, 0.2), vec![[0, 0, 300, 200]]);
        // An overlap of nearly the whole tile still advances.
        assert_eq!(place(10, 1, 4, 1, 0.99).len(), 7);
    }

    #[test]
    fn clipped_edge_tiles_end_at_the_frame_and_cover_it_once() {
        let t = regular(1000, 700, 512, 512, 0.0, Edge::Clip);
        assert_eq!(
            t,
            [
                [0, 0, 512, 512],
                [512, 0, 488, 512],
                [0, 512, 512, 188],
                [512, 512, 488, 188]
            ]
        );
        // With overlap the step is 512 - floor(0.15 * 512) = 436; the last tile starts where the
        // step puts it.
        let t = regular(1000, 10, 512, 10, 0.15, Edge::Clip);
        assert_eq!(t, [[0, 0, 512, 10], [436, 0, 512, 10], [872, 0, 128, 10]]);
        // 1-pixel tiles: one per pixel.
        assert_eq!(regular(3, 2, 1, 1, 0.0, Edge::Clip).len(), 6);
        for (fw, fh, tw, th, o) in [
            (3, 2, 1, 1, 0.0),
            (2000, 1500, 640, 640, 0.15),
            (1000, 700, 512, 512, 0.0),
            (1000, 10, 512, 10, 0.15),
            (641, 640, 640, 640, 0.5),
            (100, 100, 7, 3, 0.9),
            (10, 10, 20, 20, 0.2),
        ] {
            let n = regular(fw, fh, tw, th, o, Edge::Clip).len() as u64;
            assert_eq!(
                regular_count(fw, fh, tw, th, o),
                n,
                "{fw}x{fh} by {tw}x{th} at {o}"
            );
        }
        for (fw, fh, min, max, seed) in [(2000, 1500, 128, 512, 1), (300, 200, 1, 9, 7)] {
            let n = random(fw, fh, min, max, seed).len() as u64;
            assert_eq!(random_count(fw, fh, min, max, seed, u64::MAX), n);
            assert_eq!(random_count(fw, fh, min, max, seed, 3), 4);
        }
    }

    /// Every pixel of the frame in exactly one tile.
    fn covers_once(tiles: &[Rect], fw: u32, fh: u32) -> bool {
        let mut hits = vec![0u8; (fw * fh) as usize];
        for &[x, y, w, h] in tiles {
            if x + w > fw || y + h > fh || w == 0 || h == 0 {
                return false;
            }
            for yy in y..y + h {
                for xx in x..x + w {
                    hits[(yy * fw + xx) as usize] += 1;
                }
            }
        }
        hits.iter().all(|&n| n == 1)
    }

    #[test]
    fn the_random_grid_covers_the_frame_once_with_tiles_of_its_sizes() {
        for (fw, fh, seed) in [
            (2000, 1500, 1),
            (1000, 1000, 2),
            (700, 129, 3),
            (100, 90, 4),
        ] {
            let t = random(fw, fh, 128, 512, seed);
            assert!(covers_once(&t, fw, fh), "{fw}x{fh} seed {seed}");
            for &[x, y, w, h] in &t {
                // Inside the frame's interior a tile has its drawn size; at an edge it is clipped.
                assert!(w <= 512 && h <= 512);
                assert!(w >= 128 || x + w == fw, "{:?}", [x, y, w, h]);
                assert!(h >= 128 || y + h == fh, "{:?}", [x, y, w, h]);
            }
        }
        assert_eq!(
            random(2000, 1500, 128, 512, 7),
            random(2000, 1500, 128, 512, 7)
        );
        assert_ne!(
            random(2000, 1500, 128, 512, 7),
            random(2000, 1500, 128, 512, 8)
        );
        // 1-pixel tiles.
        assert_eq!(random(5, 4, 1, 1, 0).len(), 20);
    }
}
