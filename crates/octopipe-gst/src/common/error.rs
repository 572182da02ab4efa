//! Why an element cannot start or process a frame ([`PluginError`]), and the GStreamer error a
//! user sees for it.

use octopipe_core::error::ErrorKind;

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
    /// A shared stage failed on frames it held: its own error, the same for every element whose
    /// frames it held (a model's failure stays a model error).
    #[error("{0}")]
    Shared(std::sync::Arc<octopipe_core::Error>),
    /// The shared stage's thread stopped before giving a frame back.
    #[error("the shared stage stopped")]
    SharedStopped,
    /// The shared stage's thread cannot start.
    #[error("shared={shared}: cannot start the stage's thread: {source}")]
    Thread {
        /// The shared instance's name.
        shared: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// The error a user sees for a stage's error of `kind`, saying `text`.
fn by_kind(kind: ErrorKind, text: &str) -> gstreamer::ErrorMessage {
    use gstreamer::{error_msg, CoreError, LibraryError, ResourceError};
    match kind {
        ErrorKind::Config => error_msg!(LibraryError::Settings, ("{text}")),
        ErrorKind::Input | ErrorKind::Model | ErrorKind::NotFound => {
            error_msg!(ResourceError::OpenRead, ("{text}"))
        }
        ErrorKind::Io | ErrorKind::Conflict => error_msg!(ResourceError::OpenWrite, ("{text}")),
        ErrorKind::Device | ErrorKind::Unavailable => error_msg!(LibraryError::Init, ("{text}")),
        _ => error_msg!(CoreError::Failed, ("{text}")),
    }
}

impl PluginError {
    /// The GStreamer error domain and code a user sees: a bad setting, a file that cannot be
    /// read or written, a stream that cannot be read, or a failure of the library.
    pub(crate) fn to_message(&self) -> gstreamer::ErrorMessage {
        use gstreamer::{error_msg, CoreError, LibraryError, StreamError};
        let text = self.to_string();
        match self {
            PluginError::Property(_) => error_msg!(LibraryError::Settings, ("{text}")),
            PluginError::Buffer(_) => error_msg!(StreamError::Format, ("{text}")),
            PluginError::Cuda(_) => error_msg!(LibraryError::Init, ("{text}")),
            PluginError::SharedStopped | PluginError::Thread { .. } => {
                error_msg!(CoreError::Failed, ("{text}"))
            }
            // A shared stage's error is the one the element's own stage would give.
            PluginError::Stage(e) => by_kind(e.kind(), &text),
            PluginError::Shared(e) => by_kind(e.kind(), &text),
        }
    }
}
