//! The bounds every size, count and thread property and every decoded frame stays within, so
//! that a value from a description (one posted over HTTP included) can never ask for an
//! allocation or a thread count that ends the process: each property declares its range with
//! its type (`#[prop(range = ..=N)]`, shown by `octopipe inspect`, checked by the builder), and
//! these are the ranges that several properties share.

/// The longest side of a `WxH` property (a frame, a tile, a model input), unless the property
/// declares a smaller one.
pub const MAX_SIDE: u32 = 16384;

/// The longest side of a tensor a stage makes per crop or tile (`preprocess size`, `detect
/// size`): one such input of 4096x4096 is already 200 MB of f32.
pub const MAX_INPUT_SIDE: u32 = 4096;

/// The most pixels of one frame (a decoded picture, a test frame): 8192x8192, 67 megapixels
/// (96 MiB of I420, 192 MiB as RGBA).
pub const MAX_FRAME_PIXELS: u64 = 8192 * 8192;

/// The most threads a stage's `threads`, `ort-threads` or `workers` may ask for.
pub const MAX_THREADS: i64 = 256;

/// The most items a queue (`queue size=`) or a batch's count (`max-frames`, `max-batch`,
/// `max-crops`) may hold.
pub const MAX_QUEUE: i64 = 1024;

/// The most crops or tiles one batch or inference call may hold (`max-crops`, `max-batch`).
pub const MAX_BATCH: i64 = 4096;

/// The most boxes of one frame (`boxes count`, `detect max-detections`, top-k's).
pub const MAX_BOXES: i64 = 100_000;

/// The most tiles one frame may be cut into (`detect tiles`, `tiles size`): a grid finer than
/// this is refused when the frame comes, naming the property.
pub const MAX_TILES: u64 = 4096;

/// The longest interval, in frames of a stream, of a stage that acts once every N frames
/// (`detect interval`, `classify reinfer-interval`).
pub const MAX_INTERVAL: u64 = 1_000_000;

/// The largest GPU ordinal a `device` property takes.
pub const MAX_DEVICE: i64 = 255;

/// Whether a `width`x`height` frame is within [`MAX_FRAME_PIXELS`] and [`MAX_SIDE`].
pub fn frame_fits(width: u64, height: u64) -> bool {
    width <= u64::from(MAX_SIDE)
        && height <= u64::from(MAX_SIDE)
        && width.saturating_mul(height) <= MAX_FRAME_PIXELS
}

/// Why a `width`x`height` frame is refused (`None`: it fits), for messages: `30000x30000 is
/// 900000000 pixels; a frame may have at most 67108864 (8192x8192) and 16384 a side`.
pub fn frame_too_large(width: u64, height: u64) -> Option<String> {
    (!frame_fits(width, height)).then(|| {
        format!(
            "{width}x{height} is {} pixels; a frame may have at most {MAX_FRAME_PIXELS} (8192x8192) and {MAX_SIDE} a side",
            width.saturating_mul(height)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_fit_by_side_and_by_pixels() {
        assert!(frame_fits(8192, 8192));
        assert!(frame_fits(16384, 4096));
        assert!(!frame_fits(16385, 1));
        assert!(!frame_fits(8193, 8192));
        assert!(!frame_fits(u64::MAX, u64::MAX));
        let why = frame_too_large(30000, 30000).unwrap();
        assert!(why.contains("30000x30000 is 900000000 pixels"), "{why}");
        assert_eq!(frame_too_large(64, 64), None);
    }
}
