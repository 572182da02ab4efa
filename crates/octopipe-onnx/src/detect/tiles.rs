//! How a box found in a tile's model input goes back to frame pixels (the tiles themselves:
//! [`octopipe_stages::tiles::regular`]).

use octopipe_stages::preprocess::letterbox_rect;

pub use octopipe_stages::tiles::Rect;

/// How a tile is fitted to the model's input.
#[derive(Debug, Clone, Copy, PartialEq, octopipe_core::stage::PropChoice)]
#[non_exhaustive]
pub enum Fit {
    /// Resized to the input's size, aspect ratio not kept.
    Stretch,
    /// Resized keeping its aspect ratio, centred, the rest padded
    /// ([`octopipe_stages::preprocess::letterbox_rect`]).
    Letterbox,
}

/// Map a box `[x1, y1, x2, y2]` in the model input's pixels (`input` = width, height) back to
/// frame pixels, for a model input made from `tile` with `fit`. Not clipped.
pub(crate) fn to_frame(b: [f32; 4], tile: Rect, input: (u32, u32), fit: Fit) -> [f32; 4] {
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
