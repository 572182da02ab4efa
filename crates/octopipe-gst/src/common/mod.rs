//! What every element shares: its properties from the stages' tables ([`props`]), the frame made
//! of a buffer ([`frame`]), the metadata contract ([`meta`]), the stages opened outside a
//! pipeline and driven one frame at a time ([`stages`]), and the BaseTransform every element is
//! ([`element`]: the [`Work`] an element does, and the `octo_element!` macro that makes the
//! GObject subclass around it), the stages several elements share ([`shared`]), and the
//! buffers an element keeps in flight in a shared stage ([`flight`]); with the `analytics`
//! feature, the objects as a `GstAnalyticsRelationMeta` too (`analytics`).

#[cfg(feature = "analytics")]
pub(crate) mod analytics;
pub(crate) mod cuda;
#[macro_use]
pub(crate) mod element;
pub(crate) mod flight;
pub(crate) mod frame;
pub(crate) mod meta;
pub(crate) mod props;
pub(crate) mod report;
pub(crate) mod shared;
pub(crate) mod stages;

use octopipe_core::error::ErrorKind;
use octopipe_core::frame::Frame;
use octopipe_core::stage::StageDecl;

pub(crate) use props::Values;

/// The name of the element message each element posts per frame: `frame` (its number),
/// `objects` (how many it carries on leaving), `process-ms` (the element's time on it).
pub(crate) const TIMING: &str = "octopipe-frame";

/// The `shared` property of the elements that can share their stage.
pub(crate) fn shared_param_spec() -> gstreamer::glib::ParamSpec {
    use gstreamer::prelude::*;
    gstreamer::glib::ParamSpecString::builder("shared")
        .blurb(
            "a name: the elements of this process naming the same one share one stage (one model \
             session, one collector batching the frames of all their branches); set them alike, \
             the first to start opens it (unset: the element's own)",
        )
        .mutable_ready()
        .build()
}

/// Why an element cannot start or process a frame. Each names what it is about (the property,
/// the file); the element posts it as an element error, which names the element.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// A property's value is refused by the stage's declaration (or a required one is unset).
    #[error("{0}")]
    Property(String),
    /// A stage failed to open or to process a frame (a model, an annotation file, an output).
    #[error("{0}")]
    Stage(#[from] octopipe_core::Error),
    /// The buffer cannot be read as a frame (its caps, its planes).
    #[error("{0}")]
    Buffer(String),
    /// Frames in CUDA memory cannot be read here (no `libgstcuda-1.0`, no GPU).
    #[error("{0}")]
    Cuda(String),
}

impl PluginError {
    /// The GStreamer error domain and code a user sees: a bad setting, a file that cannot be
    /// read or written, a stream that cannot be read, or a failure of the library.
    pub(crate) fn to_message(&self) -> gstreamer::ErrorMessage {
        use gstreamer::{error_msg, CoreError, LibraryError, ResourceError, StreamError};
        let text = self.to_string();
        match self {
            PluginError::Property(_) => error_msg!(LibraryError::Settings, ("{text}")),
            PluginError::Buffer(_) => error_msg!(StreamError::Format, ("{text}")),
            PluginError::Cuda(_) => error_msg!(LibraryError::Init, ("{text}")),
            PluginError::Stage(e) => match e.kind() {
                ErrorKind::Config => error_msg!(LibraryError::Settings, ("{text}")),
                ErrorKind::Input | ErrorKind::Model | ErrorKind::NotFound => {
                    error_msg!(ResourceError::OpenRead, ("{text}"))
                }
                ErrorKind::Io | ErrorKind::Conflict => {
                    error_msg!(ResourceError::OpenWrite, ("{text}"))
                }
                ErrorKind::Device | ErrorKind::Unavailable => {
                    error_msg!(LibraryError::Init, ("{text}"))
                }
                _ => error_msg!(CoreError::Failed, ("{text}")),
            },
        }
    }
}

/// What an element does to each frame, between `start` (READY to PAUSED: the stages open) and
/// `stop`: the element is a BaseTransform around it (`octo_element!`), in place, the video
/// untouched and the objects read from and written to the buffer's ROI metas.
pub(crate) trait Work: Sized + Send + 'static {
    /// The stages whose declared properties are the element's properties (in this order).
    const DECLS: &'static [&'static StageDecl];
    /// The element's long name, and what it does (gst-inspect-1.0).
    const LONG_NAME: &'static str;
    /// What it does, in one line.
    const DESCRIPTION: &'static str;
    /// Whether it reads the frame's pixels (then only the formats octopipe reads are accepted,
    /// in system memory, or NV12 in CUDA memory; else any raw video, in any memory).
    const PIXELS: bool;
    /// Whether the objects already on the buffer (any element's ROI metas) are its input (a
    /// box source starts from none and adds its own).
    const READS_OBJECTS: bool;
    /// Whether it writes the objects back (the JSONL writer only reads them).
    const WRITES_OBJECTS: bool;
    /// Whether it has the `shared` property: elements naming the same instance share one stage
    /// (one model session, one collector across their branches: [`shared`]).
    const SHAREABLE: bool = false;
    /// Whether it records the frames' timings and posts octopipe's budget report at end of
    /// stream ([`report`]: the element that writes the objects out).
    const REPORTS: bool = false;

    /// Open the stages with the properties set (`element` names the element, for messages), or
    /// join the instance named `shared` (opening it if it is the first).
    fn start(values: &Values, element: &str, shared: Option<&str>) -> Result<Self, PluginError>;

    /// Do the work on one frame.
    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError>;

    /// The shared stage the element hands its frames to, when it uses one: then it keeps
    /// several buffers in flight ([`flight`]) instead of processing each in turn.
    fn shared(&self) -> Option<&shared::Handle> {
        None
    }

    /// For a classifier: the name of its structure on each object and its model's name.
    fn classifier(&self) -> Option<(&str, &str)> {
        None
    }

    /// End of stream: push out what is held, close outputs.
    fn eos(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}
