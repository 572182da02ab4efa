//! Where a detector looks: the tiles of a frame (sliced inference), and how a box found in a tile's
//! model input goes back to frame pixels.

use crate::preprocess::letterbox_rect;

/// A rectangle of frame pixels `[x, y, w, h]` a detector input is made from.
pub type Rect = [u32; 4];

/// The tiles of a `fw`x`fh` frame for tiles of `tw`x`th` with `overlap` (a fraction of the tile
/// size shared by neighbours), row by row, as SAHI places them: tiles step by
/// `size - floor(overlap * size)`, and a tile that would run past the right or bottom edge is moved
/// back to end at it (so every tile lies inside the frame and has the full size when the frame is
/// at least that large; a frame smaller than a tile gives one tile, the frame's own size, on that
/// axis).
pub fn place(fw: u32, fh: u32, tw: u32, th: u32, overlap: f64) -> Vec<Rect> {
    let xs = starts(fw, tw, overlap);
    let ys = starts(fh, th, overlap);
    let mut tiles = Vec::with_capacity(xs.len() * ys.len());
    for &(y, h) in &ys {
        for &(x, w) in &xs {
            tiles.push([x, y, w, h]);
        }
    }
    tiles
}

/// Tile starts and lengths along one axis of `len` pixels.
fn starts(len: u32, size: u32, overlap: f64) -> Vec<(u32, u32)> {
    if len <= size {
        return vec![(0, len)];
    }
    let shared = ((overlap * size as f64).floor() as u32).min(size - 1);
    let step = size - shared;
    let mut v = Vec::new();
    let mut start = 0;
    loop {
        if start + size >= len {
            v.push((len - size, size));
            break;
        }
        v.push((start, size));
        start += step;
    }
    v
}

/// How a tile is fitted to the model's input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fit {
    /// Resized to the input's size, aspect ratio not kept.
    Stretch,
    /// Resized keeping its aspect ratio, centred, the rest padded
    /// ([`crate::preprocess::letterbox_rect`]).
    Letterbox,
}

/// Map a box `[x1, y1, x2, y2]` in the model input's pixels (`input` = width, height) back to
/// frame pixels, for a model input made from `tile` with `fit`. Not clipped.
pub fn to_frame(b: [f32; 4], tile: Rect, input: (u32, u32), fit: Fit) -> [f32; 4] {
    let [tx, ty, tw, th] = tile;
    let (ox, oy, iw, ih) = match fit {
        Fit::Stretch => (0, 0, input.0, input.1),
        Fit::Letterbox => letterbox_rect(tw, th, input.0, input.1),
    };
    let sx = tw as f32 / iw as f32;
    let sy = th as f32 / ih as f32;
    [
        tx as f32 + (b[0] - ox as f32) * sx,
        ty as f32 + (b[1] - oy as f32) * sy,
        tx as f32 + (b[2] - ox as f32) * sx,
        ty as f32 + (b[3] - oy as f32) * sy,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_tiles_of_a_visdrone_frame_stay_inside_it() {
        let t = place(2000, 1500, 640, 640, 0.15);
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
        assert_eq!(place(1280, 640, 640, 640, 0.0).len(), 2);
        assert_eq!(place(1280, 640, 640, 640, 0.0)[1], [640, 0, 640, 640]);
        assert_eq!(place(300, 200, 640, 640, 0.2), vec![[0, 0, 300, 200]]);
        // An overlap of nearly the whole tile still advances.
        assert_eq!(place(10, 1, 4, 1, 0.99).len(), 7);
    }

    #[test]
    fn boxes_go_back_through_stretch_and_letterbox() {
        // A 1280x640 tile at (100, 50) stretched into 320x320: x scales by 4, y by 2.
        let b = to_frame(
            [10.0, 20.0, 30.0, 40.0],
            [100, 50, 1280, 640],
            (320, 320),
            Fit::Stretch,
        );
        assert_eq!(b, [140.0, 90.0, 220.0, 130.0]);
        // Letterboxed: the tile fills 320x160 at y offset 80, scale 4 on both axes.
        let b = to_frame(
            [10.0, 100.0, 30.0, 120.0],
            [0, 0, 1280, 640],
            (320, 320),
            Fit::Letterbox,
        );
        assert_eq!(b, [40.0, 80.0, 120.0, 160.0]);
    }
}
