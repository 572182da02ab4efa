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

// The layers below, under the names the modules here use (`crate::frame`, `crate::batch`).
use octopipe_core::{budget, error, frame};
use octopipe_stages::{batch, preprocess};

mod annotate;
mod energy;
mod plot;
mod progress;

pub use crate::budget::GapCounter;
pub use annotate::Mp4Encoder;
pub use annotate::{draw_box, draw_text, text_width, AnnotateTarget, Annotator, Mosaic, GLYPH};
pub use energy::Energy;
pub use plot::LatencyPlot;
pub use progress::{Progress, ProgressStyle};

use std::time::Duration;

/// Errors of the observers that write files (annotated frames, the MP4 encoder, the mosaic, the
/// latency plot).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// A file cannot be written (the system's or the PNG encoder's error).
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A folder cannot be made.
    #[error("cannot create {path}: {source}")]
    CreateDir {
        /// The folder.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A plot cannot be drawn (plotters' error: its backend's, or a bad layout).
    #[error("{0}")]
    Draw(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The writer's thread cannot start.
    #[error("cannot start the annotate thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The writer's thread panicked (a bug: please report it).
    #[error("annotate thread panicked")]
    Panicked,
    /// GStreamer cannot be initialised.
    #[error("GStreamer: {0}")]
    Gst(#[source] gstreamer::glib::Error),
    /// A GStreamer element the MP4 encoder needs is not installed.
    #[error("GStreamer element '{element}' is missing (apt-get install {package})")]
    MissingElement {
        /// The element.
        element: &'static str,
        /// The Debian package that has it.
        package: &'static str,
    },
    /// The MP4 pipeline cannot be built or started, or failed.
    #[error("{what}{}", source.as_ref().map(|s| format!(": {s}")).unwrap_or_default())]
    Mp4 {
        /// What failed (`cannot build the MP4 pipeline`, `MP4 encoding failed`, ...).
        what: &'static str,
        /// GStreamer's error, where it gave one.
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl ObserveError {
    fn mp4(what: &'static str) -> Self {
        ObserveError::Mp4 { what, source: None }
    }

    fn mp4_by(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ObserveError::Mp4 {
            what,
            source: Some(Box::new(e)),
        }
    }
}

impl crate::error::Kind for ObserveError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ObserveError::Write { .. } | ObserveError::CreateDir { .. } | ObserveError::Draw(_) => {
                ErrorKind::Io
            }
            ObserveError::Gst(_) | ObserveError::MissingElement { .. } => ErrorKind::Unavailable,
            ObserveError::Thread(_) | ObserveError::Panicked | ObserveError::Mp4 { .. } => {
                ErrorKind::Internal
            }
        }
    }
}

/// Milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
