//! Reading a whole file whose size octopipe does not control (a labels file, an annotation
//! file): only regular files, and at most a stated size, so `/dev/zero` or a FIFO given as
//! `labels-file` is an error at once instead of a read that never ends. And [`RunPath`]: a file or
//! folder a stage reads or writes, which the runner checks before anything opens.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest labels file read (one class name per line).
pub const MAX_LABELS_FILE: u64 = 1 << 20;

/// The largest annotation file read (VisDrone DET or MOT text).
pub const MAX_ANNOTATION_FILE: u64 = 1 << 30;

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
