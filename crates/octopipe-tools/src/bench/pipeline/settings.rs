//! The pipeline benchmark's fixed settings and the defaults of its command-line options.

/// Frame rate of the encoded video, and of `--live` playback.
pub const FPS: u32 = 30;
/// Default stream counts (`--streams`).
pub const DEFAULT_STREAMS: [usize; 5] = [1, 8, 16, 32, 64];
/// Default bound of the `--live` search (`--max-streams`).
pub const DEFAULT_MAX_STREAMS: usize = 96;
/// Default largest number of frames in one batch (`--batch-frames`): 16 frames of 28 boxes are
/// 448 crops, one inference call.
pub const DEFAULT_BATCH_FRAMES: usize = 16;
/// Crops a frame of annotated image streams is given room for in a batch (`max-crops`): the
/// clip's annotations have 59 boxes a frame on average.
pub const ANNOTATED_BOXES: u32 = 64;
/// Synthetic boxes per frame (the drone workload).
pub const DEFAULT_BOXES: u32 = 28;
/// The decoder choices of the `media` stage's `decoder` property.
pub const DECODERS: [&str; 3] = ["auto", "cpu", "nvdec"];
/// The decoder choices of the `images` stage's `decoder` property (`--images`).
pub const IMAGE_DECODERS: [&str; 3] = ["auto", "cpu", "nvjpeg"];
/// Default encoder bitrate (`--bitrate`), kbit/s: a drone downlink's order of magnitude at
/// 1080p30.
pub const BITRATE_KBPS: u32 = 8000;
/// The most classifier stages per chain (`--classifiers`).
pub const MAX_CLASSIFIERS: usize = 4;
/// A row at or above this share of its decode-only fps is said to be held by the decoder.
pub const DECODER_BOUND: f64 = 0.9;
/// Encoder key-frame interval, frames (3 s at 30 fps).
pub const KEY_INT: u32 = 90;
/// The shared classifier's classes.
pub const LABELS: &str = "person,two-wheeler,car,large-vehicle";
/// Where the objects go: written (the sink's real work) and thrown away.
pub const SINK: &str = "jsonl name=out location=/dev/null";
/// GPU sampling period of `nvidia-smi`, ms.
pub const GPU_SAMPLE_MS: u32 = 200;
