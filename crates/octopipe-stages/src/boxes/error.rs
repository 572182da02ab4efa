//! The boxes stage's errors.

use octopipe_core::files::FileError;

/// Errors of the boxes stage; each names the file (and line) it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BoxesError {
    /// A file that cannot be read, or a malformed annotation line.
    #[error(transparent)]
    File(#[from] FileError),
    /// A frame has no annotation file.
    #[error("{path}: no annotation file for frame '{frame}'")]
    MissingAnnotations {
        /// The expected file.
        path: String,
        /// The frame's source name.
        frame: String,
    },
    /// An image's file name cannot say which MOT frame index it is: the sequence's names end
    /// with numbers inconsistently.
    #[error(
        "{image}: {reason}: boxes format=mot location={mot} takes an image's frame index from the \
         number its name ends with; name every image of the sequence by its 1-based frame index \
         (as VisDrone's 0000001.jpg), or none (then images are numbered by position)"
    )]
    ImageNumber {
        /// The image's file name.
        image: String,
        /// The MOT file.
        mot: String,
        /// What is inconsistent.
        reason: String,
    },
}

impl octopipe_core::error::Kind for BoxesError {
    /// Every boxes error is about its annotation files.
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        octopipe_core::error::ErrorKind::Input
    }
}

octopipe_core::error::stage_error!(BoxesError);
