//! Reading a whole file whose size octopipe does not control (a labels file, an annotation
//! file): only regular files, and at most a stated size, so `/dev/zero` or a FIFO given as
//! `labels-file` is an error at once instead of a read that never ends. [`FileError`]: a file
//! that cannot be read, or a malformed line of it, named with its path (and line). And
//! [`RunPath`]: a file or folder a stage reads or writes, which the runner checks before
//! anything opens.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest labels file read (one class name per line).
pub const MAX_LABELS_FILE: u64 = 1 << 20;

/// The largest annotation file read (VisDrone DET or MOT text).
pub const MAX_ANNOTATION_FILE: u64 = 1 << 30;

/// A file (or folder) that cannot be read, or a malformed line of one; the message names the
/// file (`path: reason`) and the line (`path:line: reason`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A file or folder cannot be read, or is not what it must be.
    #[error("{path}: {reason}")]
    Io {
        /// The file or folder.
        path: String,
        /// What went wrong.
        reason: String,
        /// The system's error, where reading failed.
        #[source]
        source: Option<std::io::Error>,
    },
    /// A malformed line.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

impl FileError {
    /// Reading `path` failed with `e` (its message the reason, `e` the source).
    pub fn io(path: impl Into<String>, e: std::io::Error) -> Self {
        FileError::Io {
            path: path.into(),
            reason: e.to_string(),
            source: Some(e),
        }
    }

    /// `path` was read but cannot be used: `reason` says why.
    pub fn refused(path: impl Into<String>, reason: impl Into<String>) -> Self {
        FileError::Io {
            path: path.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// Line `line` (1-based) of `path` is malformed: `reason` says how.
    pub fn parse(path: impl Into<String>, line: usize, reason: impl Into<String>) -> Self {
        FileError::Parse {
            path: path.into(),
            line,
            reason: reason.into(),
        }
    }
}

/// The bytes of `path`, a regular file of at most `max` bytes; otherwise an error saying which
/// (`not a regular file`, `larger than N bytes`).
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        )
    };
    if meta.len() > max {
        return Err(too_large());
    }
    // The file may grow while it is read: the cap holds for what is read, too.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_large_files_are_refused() {
        let e = read_bounded(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let dir = std::env::temp_dir().join(format!("octopipe-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, "0123456789a").unwrap();
        assert_eq!(
            read_bounded(&file, 10).unwrap_err().to_string(),
            "larger than 10 bytes"
        );
        assert_eq!(read_bounded(&file, 11).unwrap(), b"0123456789a");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_error_names_the_file_and_line() {
        use std::error::Error as _;
        let e = FileError::io(
            "gt.txt",
            read_bounded(Path::new("/dev/zero"), 1).unwrap_err(),
        );
        assert_eq!(e.to_string(), "gt.txt: not a regular file");
        assert!(e.source().is_some());
        let e = FileError::refused("clip/images", "no .jpg, .jpeg or .png files");
        assert_eq!(e.to_string(), "clip/images: no .jpg, .jpeg or .png files");
        assert!(e.source().is_none());
        let e = FileError::parse("a.txt", 3, "expected 8 fields");
        assert_eq!(e.to_string(), "a.txt:3: expected 8 fields");
    }
}

/// A file or folder a stage reads or writes, with what names it (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPath {
    /// What names it: a stage and property (`classify model`) or a command-line option
    /// (`--plot`).
    pub what: String,
    /// The path as given.
    pub path: PathBuf,
    /// A folder (read as a whole, or written into file by file) rather than one file.
    pub folder: bool,
}

impl RunPath {
    /// The file `path`, named by `what`.
    pub fn file(what: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        RunPath {
            what: what.into(),
            path: path.into(),
            folder: false,
        }
    }

    /// The folder `path`, named by `what`.
    pub fn folder(what: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        RunPath {
            folder: true,
            ..RunPath::file(what, path)
        }
    }
}

impl fmt::Display for RunPath {
    /// `classify model=m.onnx`, or `--plot latency.svg` for an option.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.what.starts_with("--") {
            ' '
        } else {
            '='
        };
        write!(f, "{}{sep}{}", self.what, self.path.display())
    }
}
