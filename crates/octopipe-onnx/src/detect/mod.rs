//! Detect stage: an ONNX object detector finds the boxes, on the whole frame or on overlapping
//! tiles of it (sliced inference).
//!
//! ```text
//! images location=${root}/images ! detect model=coco-centernet-512.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 ! track ! classify ... ! jsonl ...
//! media location=flight.mp4 ! detect model=yolov8n.onnx labels-file=coco.names fit=letterbox ! jsonl ...
//! ```
//!
//! **Input.** The tiles of a frame (and/or the whole frame) are the crops of one ragged batch,
//! made by the same preprocess backends as the classifier's crops (CPU, or one CUDA kernel launch
//! for all of a frame's tiles): each is resized to the model's input size (`fit=stretch`, or
//! `letterbox` with `pad`), in the model's layout (NCHW or NHWC, read from the model's input),
//! channel order (`channels`), `value = (v * scale - mean) / std`, and the model's element type
//! (f32 or f16, read from the model). A model with a fixed batch of 1 runs tile by tile; a model
//! with a dynamic batch gets up to `max-batch` tiles per run.
//!
//! **Many frames, many streams, one call.** Branches may join one detect stage the way they join
//! a batch stage (`media location=a.mp4 ! det.  media location=b.mp4 ! det.  detect name=det ...
//! ! track ! ...`). The stage collects frames (of every stream it serves) until their tiles would
//! pass `max-batch` or the first frame's wait ends (`max-wait-ms`, by default half of what its
//! budget leaves, the rule of the batch stage), preprocesses all their tiles as one ragged batch
//! and runs the model on them together; boxes go back to their frames and each stream's frames
//! leave in their order. On CUDA the model runs at a few fixed batch sizes (`batch-sizes`), each
//! with input and output buffers of its own, planned, warmed and (with `cuda-graph`) captured
//! as a CUDA graph when the stage opens, on a thread of the model's own that runs every call
//! after (replays); a call is padded to the next size. With `overlap-calls` (by default on CUDA)
//! the model runs on a thread of its own: while a call runs there, the stage collects and
//! preprocesses the next call's frames and places the boxes of the call before (at most two calls
//! out at once).
//! `interval=N` detects every Nth frame of each stream; a `track` stage after it gives the frames
//! between the boxes of its tracks, predicted (`"predicted": true` in the output).
//!
//! **The runtime.** `engine=ort` (the default) runs the model on ONNX Runtime; `engine=octopipe`
//! on octopipe's own CUDA engine (`octopipe-engine`, docs/engine.md) for a CenterNet of its op set
//! with an f16 NHWC input and f16 heads (the shared CenterNet's six-class heads model): one engine
//! per batch size, each a CUDA graph captured when the stage opens, the tiles copied into its
//! input on the GPU, the heads read there by the peak kernel. A model it cannot run is refused
//! when the stage opens, naming why (the input's type or layout, an op and its node, no GPU).
//!
//! **Output.** `decoder` reads the output ([`Decoder`]; `auto` picks it from the output's shape):
//! `end2end` rows `x1, y1, x2, y2, score, class`, `yolov8` `[B, 4 + classes, anchors]`, `yolov5`
//! `[B, anchors, 5 + classes]`, `centernet` two heads (scores `[B, classes, h, w]`, distances
//! `[B, 4, h, w]`: [`centernet`]), whose peaks are found on the GPU where the model runs there. Boxes under `score` are left out; the rest go back to frame
//! pixels (undoing the letterbox or stretch and the tile's offset), are merged across tiles and
//! suppressed within a tile by one per-class NMS (a box is dropped when a better one of its class
//! overlaps it by more than `iou`, or, with `ios` below 1, covers more than `ios` of the smaller
//! of the two: a box that a tile border cut short lies inside the whole object's box),
//! at most `max-detections` per frame, rounded to whole pixels and clipped to the frame (boxes
//! under 2 px are counted as skipped, as annotation boxes are).
//!
//! **Classes.** Names come from `labels` (`coco` is COCO's 80) or `labels-file`; `classes` keeps
//! only the named classes (names or indices); `map=from:to,...` renames classes for the stages
//! after (the classifier's crops, the JSONL `detection.label`), and a box's `class_id` is its
//! output label's: the lowest class index the map gives that label (`map=car:vehicle,
//! bus:vehicle,truck:vehicle`: every vehicle is class 2), so one label never has several ids.
//!
//! The report gets the stage's row like any stage, and a line with the detector's own split per
//! frame (preprocessing, inference, decoding and merging) and its box counts.

mod blind;
pub mod centernet;
mod coco;
mod config;
mod decode;
mod detector;
mod engine;
mod error;
mod gpu;
mod io;
mod model;
mod place;
mod raw;
mod section;
mod stage;
#[cfg(test)]
mod tests;
pub mod tiles;

pub use blind::BLIND_FRAMES;
pub use coco::COCO_LABELS;
pub use config::{DetectConfig, DetectProps, DEFAULT_BATCH_SIZES, DETECT};
pub use decode::{nms, Decoder, Output, ShapeError, Suppress};
pub use detector::{region_batch, regions_batch, Call, Detector};
pub use engine::DetectEngine;
pub use error::{DetectError, IoError, RunError, Unfit};
pub use gpu::CENTERNET_KERNELS;
pub use raw::RawBox;
pub use section::DetectSection;
pub use tiles::{Fit, Rect};
