//! `octopipe bench pipeline`: the whole pipeline, decode to classifier, on N streams of 1080p
//! H.264 or H.265 made from the real VisDrone clip at run time, or (`--images DIR`) on N image
//! streams of a folder of JPEG files.
//!
//! ```text
//! octopipe bench pipeline --streams 1,8,16 --decoder cpu,nvdec --ep cpu,cuda
//! octopipe bench pipeline --live --max-streams 96
//! octopipe bench pipeline --images $OCTOPIPE_DATA/visdrone/clip-9999999 --decoders cpu,nvjpeg --ep cuda
//! octopipe bench pipeline --codec h265 --bitrate 4000 --detector centernet.onnx --tiles 1920x1080 --classifiers 2
//! ```
//!
//! The clip's JPEG frames are scaled to the video size (1920x1080 by default), looped to
//! `--seconds` of video at 30 fps and encoded by `x264enc` (High profile, 4:2:0: NVDEC refuses
//! High 4:4:4) or `x265enc` (`--codec h265`, Main) at `--bitrate` into an mp4 in a folder of its
//! own under the system's temporary folder, removed at the end (`video.rs`). Each combination of
//! streams, decoder and execution provider is then one description ([`description`], `run.rs`),
//! built and run in this process through [`Pipeline`](octopipe_pipeline::pipeline::Pipeline):
//!
//! ```text
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28 ! mux.   (N-1 times)
//! media location=${video} decoder=cpu|nvdec ! boxes format=synthetic count=28
//!   ! batch name=mux max-frames=F max-crops=28F [devices=0,1]
//!   ! preprocess backend=cpu|cuda [memory=device]
//!   ! classify model=${model} ep=cpu|cuda max-batch=28F labels=person,two-wheeler,car,large-vehicle
//!   [! classify model=${model} ... labels=c2:person,...]                     (--classifiers 2)
//!   ! jsonl name=out location=/dev/null
//! ```
//!
//! (with `--devices 0,1`, the batch stage's `devices=0,1` makes one such chain per GPU, meeting
//! in the one sink; with `--detector`, a shared `detect` and `track` give the boxes,
//! `detector.rs`; with `--images`, each stream is `images location=${images} loop=L
//! decoder=cpu|nvjpeg|auto ! boxes format=det location=${annotations}`, `images.rs`, and an
//! nvJPEG that cannot run here is its row's reason).
//!
//! File mode (the default) reads the files as fast as the pipeline takes them, so nothing is
//! dropped and every frame is counted; `--live` plays each file at its 30 fps (`media
//! live=true`: frame edges hold one frame and drop the oldest) and searches the most streams held
//! with a p99 end-to-end latency under one frame interval and nothing dropped. Every run's
//! row has the process's CPU time over the wall time (cores busy) and, when `nvidia-smi` is
//! there, the GPUs' mean utilization and peak memory sampled every 200 ms while it ran
//! (`usage.rs`); with the video, the decode-only ceiling of its streams and decoder (GStreamer
//! alone, `decode_only.rs`) and the row's fps as a share of it. The table and the driver are in
//! `table.rs`. A run that fails (an execution provider the ONNX Runtime build lacks, no GPU, no
//! nvJPEG) has its error in its row; the others go on.

mod compute;
mod decode_only;
mod decoders;
mod detector;
mod images;
mod lateness;
mod options;
mod run;
mod search;
mod settings;
mod spec;
mod table;
mod usage;
mod video;

pub use compute::{default_backend, Compute};
pub use decode_only::{decode_only, DecodeOnly, DecodeStart};
pub use decoders::{decode_bench, DecodeBenchOptions};
pub use detector::{parse_line, DetectStats};
pub use images::ImageStreams;
pub use lateness::{Lateness, StageLateness};
pub use options::PipelineBenchOptions;
pub use run::{description, run_one, RunResult};
pub use search::search_streams;
pub use settings::{
    ANNOTATED_BOXES, BITRATE_KBPS, DECODERS, DECODER_BOUND, DEFAULT_BATCH_FRAMES, DEFAULT_BOXES,
    DEFAULT_MAX_STREAMS, DEFAULT_STREAMS, FPS, GPU_SAMPLE_MS, IMAGE_DECODERS, KEY_INT, LABELS,
    MAX_CLASSIFIERS, SINK,
};
pub use spec::{DetectBench, RunSpec};
pub use table::pipeline;
pub use usage::GpuStats;
pub use video::{encode_clip, Codec, Motion, PAN_STEP};

#[cfg(test)]
mod tests;
