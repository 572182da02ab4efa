//! What the sinks that write files (`jsonl`, `tensors`, `tilesink`) share, written once: opening
//! their output (a new file or a folder with no earlier output, unless overwriting; see
//! [`output`](super::output)), passing every batch on after writing it, and at the end keeping
//! the output, or, when the run was cut short, removing what it left empty. Each sink is a
//! [`FileWriter`]: only what it writes of a batch.

use std::path::{Path, PathBuf};

use super::error::SinkError;
use super::lines::JsonLines;
use super::output::{fresh_folder, CutShort, Leftover};
use crate::batch::CropBatch;
use octopipe_core::error::Error;
use octopipe_core::stage::{OpenContext, Running, Stage};

/// What a file sink writes of each batch; [`FileSink`] opens, passes on and finishes.
pub trait FileWriter: Send + 'static {
    /// Write `batch`'s part of the output, whole: after a failure the output keeps only what
    /// was complete before it.
    fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError>;
}

/// A sink that writes files: its [`FileWriter`], and the outputs it made, removed when the run
/// is cut short (a stage failed, a stop was asked for, a stream failed) while they are empty.
pub struct FileSink<W> {
    writer: W,
    /// The outputs while the run has not finished: removed if left empty.
    leftover: Leftover,
    /// Set when the run is cut short.
    stopped: CutShort,
}

impl<W: FileWriter> FileSink<W> {
    /// `writer`, whose outputs `leftover` watches.
    pub(crate) fn writing(writer: W, leftover: Leftover) -> Self {
        FileSink {
            writer,
            leftover,
            stopped: CutShort::default(),
        }
    }

    /// The stage, told by `ctx` when the run is cut short (it then removes its outputs at the
    /// end if it wrote nothing into them).
    pub(crate) fn running(mut self, ctx: &OpenContext) -> Running {
        self.stopped = CutShort::of(ctx);
        Running::stage(Box::new(self))
    }

    /// Write `batch`.
    pub fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        self.writer.write(batch)
    }

    /// What writes the files.
    pub fn writer(&self) -> &W {
        &self.writer
    }
}

impl<W: FileWriter> Stage<CropBatch, CropBatch> for FileSink<W> {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.writer.write(&batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        if !self.stopped.get() {
            self.leftover.keep();
        }
        Ok(())
    }
}

/// Open a sink's JSON Lines output `path` (a new file; with `overwrite`, an existing one
/// emptied; `-` is stdout), watched while the run has not finished.
pub(crate) fn open_lines(path: &Path, overwrite: bool) -> Result<(JsonLines, Leftover), SinkError> {
    let lines = JsonLines::create(path, overwrite)?;
    let file = (path.as_os_str() != "-").then(|| path.to_path_buf());
    Ok((lines, Leftover::new(file.into_iter().collect(), None)))
}

/// Take the folder `dir` for a sink's files (created if missing; refused when it holds a file
/// that `ours` recognises, unless `overwrite`, which removes them) and create its
/// `index.jsonl`; the index, and the folder if made here, are watched while the run has not
/// finished.
pub(crate) fn open_folder(
    dir: &Path,
    ours: impl Fn(&str) -> bool,
    overwrite: bool,
) -> Result<(JsonLines, Leftover), SinkError> {
    let made = fresh_folder(dir, ours, overwrite)?;
    let index_path = dir.join("index.jsonl");
    let index = JsonLines::create(&index_path, overwrite)?;
    let folder: Option<PathBuf> = made.then(|| dir.to_path_buf());
    Ok((index, Leftover::new(vec![index_path], folder)))
}

/// What writing the file `path` came to: a failure removes the partial file and says so.
pub(crate) fn written_whole(path: &Path, written: std::io::Result<()>) -> Result<(), SinkError> {
    let Err(e) = written else { return Ok(()) };
    // No partial file is left behind.
    let _ = std::fs::remove_file(path);
    Err(SinkError::io(
        path.display().to_string(),
        format!("write failed: {e}; the file was removed"),
    )
    .caused_by(e))
}
