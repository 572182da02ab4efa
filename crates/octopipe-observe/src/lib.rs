//! Observers: what a user sees of a run besides the JSONL output.
//!
//! ```text
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=objects.jsonl \
//!     --progress --plot latency.svg --annotate frames/ --mosaic crops.png \
//!     --metrics-addr 127.0.0.1:9184 --energy --report json
//! ```
//!
//! Each observer implements [`Observer`](octopipe_core::Observer): the runner calls
//! [`batch`](octopipe_core::Observer::batch) on its collector thread for every finished batch and
//! [`finish`](octopipe_core::Observer::finish) once with the report. An observer must be quick (a
//! slow one delays the sink, and so every frame after it); those that encode images do it on their
//! own thread.
//!
//! | observer | what it gives |
//! | --- | --- |
//! | [`Progress`] | a live line (indicatif on a terminal, plain lines otherwise): fps, frames (of the total, with the share done, when the sources know their length), objects, p99 against the budget, drops |
//! | `MetricsServer` | a Prometheus endpoint: per-stage latency histograms, frames, drops, budget misses, fps (the control plane's, crates/octopipe-control; `octopipe::observe::MetricsServer`) |
//! | [`LatencyPlot`] | an SVG or PNG plot: end-to-end latency per frame with the budget line, and the per-stage breakdown |
//! | [`Annotator`] | the frames with boxes, labels and scores drawn: PNG files or an MP4 (x264) |
//! | [`Mosaic`] | the tensors fed to the classifier, de-normalized back to pixels, in a labelled grid |
//! | [`Energy`] | GPU energy per frame from NVML's total-energy counter (or why it is not available) |

mod annotate;
mod energy;
mod errors;
mod plot;
mod progress;
mod units;

pub use annotate::Mp4Encoder;
pub use annotate::{
    draw_box, draw_objects, draw_text, text_width, yuv_of, AnnotateTarget, Annotator, Canvas,
    FrameCanvas, Mosaic, RecordingCanvas, Style, YuvRect, GLYPH,
};
pub use energy::Energy;
pub use errors::ObserveError;
pub use octopipe_core::budget::GapCounter;
pub use plot::LatencyPlot;
pub use progress::{Progress, ProgressStyle};
