//! The errors of the observers that write files.

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
    /// A frame cannot be drawn on in place (its format, or planes too small for it).
    #[error("cannot draw on a {format} frame: {reason}")]
    Canvas {
        /// The frame's format.
        format: octopipe_core::frame::PixelFormat,
        /// Why.
        reason: String,
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
    pub(crate) fn mp4(what: &'static str) -> Self {
        ObserveError::Mp4 { what, source: None }
    }

    pub(crate) fn mp4_by(
        what: &'static str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ObserveError::Mp4 {
            what,
            source: Some(Box::new(e)),
        }
    }
}

impl octopipe_core::error::Kind for ObserveError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            ObserveError::Write { .. } | ObserveError::CreateDir { .. } | ObserveError::Draw(_) => {
                ErrorKind::Io
            }
            ObserveError::Gst(_) | ObserveError::MissingElement { .. } => ErrorKind::Unavailable,
            ObserveError::Canvas { .. } => ErrorKind::Input,
            ObserveError::Thread(_) | ObserveError::Panicked | ObserveError::Mp4 { .. } => {
                ErrorKind::Internal
            }
        }
    }
}
