//! One rule for every file a run writes (the sinks' files and folders, and what the command
//! line writes: `--plot`, `--annotate`, `--mosaic`, `--report-file`, `octopipe scene`,
//! `octopipe pan`): an existing file is refused, and so is a folder holding an earlier run's
//! output, unless overwriting is asked for (`overwrite=true` on a sink, `--force` on the
//! command line); and a run that fails leaves no empty file or folder of its own behind.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::error::SinkError;
use octopipe_core::files::RunPath;

/// Why a PNG could not be written ([`write_png`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PngError {
    /// The encoder failed (or a write it made did).
    #[error(transparent)]
    Encode(#[from] image::ImageError),
    /// The encoded bytes still buffered could not be written out (a full disk, a file-size
    /// limit).
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Write `pixels` (`w`x`h` of `color`; 16-bit samples in native byte order) into `file` as a PNG
/// with `compression` and `filter`. The write buffer is flushed here, so an error writing its
/// last bytes is returned rather than lost as it drops.
pub fn write_png(
    file: File,
    pixels: &[u8],
    (w, h): (u32, u32),
    color: image::ExtendedColorType,
    compression: image::codecs::png::CompressionType,
    filter: image::codecs::png::FilterType,
) -> Result<(), PngError> {
    use image::ImageEncoder;
    let mut out = std::io::BufWriter::new(file);
    image::codecs::png::PngEncoder::new_with_quality(&mut out, compression, filter)
        .write_image(pixels, w, h, color)?;
    out.flush()?;
    Ok(())
}

/// What to say when an output exists and overwriting was not asked for.
pub(crate) const REPLACE_HINT: &str =
    "overwrite=true on the sink (octopipe run --force) replaces it";

/// Create the file `path` for writing: a new file, or with `overwrite` an existing one emptied.
/// An existing file without `overwrite` is an error naming it. What is not a regular file
/// (`/dev/null`, a FIFO, a terminal) holds no earlier output: it is opened as it is.
///
/// A regular file is taken with an advisory lock (`flock`, exclusive) held as long as the file
/// returned is open: a file another process holds (a running station's output) is refused,
/// `overwrite` or not, before anything of it is emptied.
pub fn create_file(path: &Path, overwrite: bool) -> Result<File, SinkError> {
    let err = |reason: String| SinkError::io(path.display().to_string(), reason);
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    match (special, overwrite) {
        (true, _) => &mut open,
        // Emptied once locked, not at the open.
        (false, true) => open.create(true).truncate(false),
        (false, false) => open.create_new(true),
    };
    let file = open.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => err(format!(
            "exists already: give a new name, or {REPLACE_HINT} (nothing was written)"
        )),
        _ => err(format!("cannot create: {e}")).caused_by(e),
    })?;
    if special {
        return Ok(file);
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(err(
                "is being written by another running process (it holds the file's lock): \
                 give another name, or stop that process first (nothing was written)"
                    .into(),
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(err(format!("cannot lock: {e}")).caused_by(e))
        }
    }
    if overwrite {
        file.set_len(0)
            .map_err(|e| err(format!("cannot empty it to overwrite it: {e}")).caused_by(e))?;
    }
    Ok(file)
}

/// Refuse, before a run, outputs of the command line (`--plot`, `--mosaic`, `--report-file`,
/// `--annotate`) that would replace earlier output: a file that exists, or a folder that holds
/// anything, unless `overwrite` (`--force`).
pub fn check_new(outputs: &[RunPath], overwrite: bool) -> Result<(), SinkError> {
    if overwrite {
        return Ok(());
    }
    for out in outputs {
        let taken = match out.folder {
            false => std::fs::metadata(&out.path).is_ok_and(|m| m.is_file() || m.is_dir()),
            true => std::fs::read_dir(&out.path).is_ok_and(|mut d| d.next().is_some()),
        };
        if taken {
            let what = match out.folder {
                false => "exists already: give a new name",
                true => "is a folder that holds files already: give a new or empty one",
            };
            return Err(SinkError::io(
                out.to_string(),
                format!("{what}, or --force to replace it (nothing was written)"),
            ));
        }
    }
    Ok(())
}

/// Take `dir` for a sink that writes files into it: created (with its parents) if missing;
/// refused when it holds a file that `ours` recognises as an earlier run's output, unless
/// `overwrite`, which removes those files first. Returns whether the folder was made here.
pub(crate) fn fresh_folder(
    dir: &Path,
    ours: impl Fn(&str) -> bool,
    overwrite: bool,
) -> Result<bool, SinkError> {
    let err = |reason: String| SinkError::io(dir.display().to_string(), reason);
    let made = !dir.exists();
    std::fs::create_dir_all(dir)
        .map_err(|e| err(format!("cannot create the folder: {e}")).caused_by(e))?;
    let earlier: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| err(format!("cannot read the folder: {e}")).caused_by(e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| ours(n))
        .collect();
    let Some(first) = earlier.first() else {
        return Ok(made);
    };
    if !overwrite {
        return Err(err(format!(
            "already holds {first} from an earlier run: give an empty or new folder, or overwrite=true on the sink (octopipe run --force) to replace what it holds (nothing was written)"
        )));
    }
    for name in &earlier {
        let path = dir.join(name);
        std::fs::remove_file(&path)
            .map_err(|e| err(format!("cannot remove {name} to overwrite it: {e}")).caused_by(e))?;
    }
    Ok(made)
}

/// Whether the run was cut short: stopped (a stage failed, or a stop was asked for) or a
/// stream failed alone. A sink's [`Leftover`] is then not kept (empty outputs go).
#[derive(Debug, Clone, Default)]
pub(crate) struct CutShort {
    stopped: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

impl CutShort {
    /// The run's flags, as the stage opening gets them.
    pub fn of(ctx: &octopipe_core::stage::OpenContext) -> Self {
        CutShort {
            stopped: ctx.stopped_early.clone(),
            failed: ctx.stream_failed.clone(),
        }
    }

    /// Whether the run was cut short so far.
    pub fn get(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || self.failed.load(Ordering::SeqCst)
    }
}

/// What a sink made when it opened, removed when it is dropped before [`Leftover::keep`] if it
/// holds nothing: the files while empty, then the folder it made while empty. A run that fails
/// (or never starts) so leaves no empty output to trip the next run.
#[derive(Debug, Default)]
pub struct Leftover {
    files: Vec<PathBuf>,
    folder: Option<PathBuf>,
    kept: bool,
}

impl Leftover {
    /// Watch `files`, and `folder` when this run made it.
    pub fn new(files: Vec<PathBuf>, folder: Option<PathBuf>) -> Self {
        Leftover {
            files,
            folder,
            kept: false,
        }
    }

    /// The run finished: keep everything, empty or not.
    pub fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for Leftover {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        for file in &self.files {
            if std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.len() == 0) {
                let _ = std::fs::remove_file(file);
            }
        }
        if let Some(dir) = &self.folder {
            // Only an empty folder is removed.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_cannot_be_created_is_an_io_error_with_its_cause() {
        use std::error::Error as _;
        let path = Path::new("/nonexistent/octopipe/out.jsonl");
        let e = octopipe_core::error::Error::from(create_file(path, false).unwrap_err());
        assert_eq!(e.kind(), octopipe_core::error::ErrorKind::Io);
        assert_eq!(
            e.to_string(),
            "/nonexistent/octopipe/out.jsonl: cannot create: No such file or directory (os error 2)"
        );
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
        assert!(e.downcast_ref::<SinkError>().is_some());
    }

    #[test]
    fn a_file_held_by_a_writer_is_refused_even_when_overwriting() {
        let dir = std::env::temp_dir().join(format!("octopipe-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("held.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut held = create_file(&path, false).unwrap();
        held.write_all(b"{}\n").unwrap();
        let e = create_file(&path, true).unwrap_err().to_string();
        assert!(
            e.contains("held.jsonl: is being written by another running process"),
            "{e}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n", "nothing emptied");
        drop(held);
        create_file(&path, true).expect("free once its writer closed it");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "emptied to overwrite"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn outputs_are_new_unless_overwriting_and_empty_leftovers_go() {
        let dir = std::env::temp_dir().join(format!("octopipe-output-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let made = fresh_folder(&dir.join("out"), |n| n == "index.jsonl", false).unwrap();
        assert!(made);
        let index = dir.join("out/index.jsonl");
        create_file(&index, false).unwrap();
        let e = create_file(&index, false).unwrap_err().to_string();
        assert!(e.ends_with("index.jsonl: exists already: give a new name, or overwrite=true on the sink (octopipe run --force) replaces it (nothing was written)"), "{e}");
        std::fs::write(&index, "{}\n").unwrap();
        let e = fresh_folder(&dir.join("out"), |n| n == "index.jsonl", false).unwrap_err();
        assert!(
            e.to_string()
                .contains("already holds index.jsonl from an earlier run"),
            "{e}"
        );
        assert!(!fresh_folder(&dir.join("out"), |n| n == "index.jsonl", true).unwrap());
        assert!(!index.exists(), "overwriting removes the earlier output");
        // Made, left empty, dropped unkept: gone, folder and all.
        create_file(&index, false).unwrap();
        drop(Leftover::new(vec![index.clone()], Some(dir.join("out"))));
        assert!(!dir.join("out").exists());
        // Kept, or not empty: stays.
        std::fs::write(dir.join("a.jsonl"), "{}\n").unwrap();
        drop(Leftover::new(vec![dir.join("a.jsonl")], None));
        assert!(dir.join("a.jsonl").exists());
        create_file(&dir.join("b.jsonl"), false).unwrap();
        // Not a regular file: no earlier output to keep.
        create_file(Path::new("/dev/null"), false).unwrap();
        let mut kept = Leftover::new(vec![dir.join("b.jsonl")], None);
        kept.keep();
        drop(kept);
        assert!(dir.join("b.jsonl").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
