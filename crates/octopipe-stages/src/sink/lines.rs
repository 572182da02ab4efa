//! JSON Lines that never end in a partial line: a batch's lines are serialized whole into memory,
//! then written; when a write fails part-way (a full disk, a file-size limit), the file is cut
//! back to its last complete line and the error says so.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::error::SinkError;

/// A JSON Lines writer that only ever leaves complete lines behind.
pub(crate) struct JsonLines {
    /// How errors name the output.
    name: String,
    out: Box<dyn Write + Send>,
    /// The output as a regular file, to cut back after a failed write (`None` for stdout,
    /// `/dev/full`, a FIFO: nothing to cut).
    cut: Option<File>,
    /// Lines (and their bytes) known to be complete in the output.
    lines: u64,
    committed: u64,
    /// Serialized lines not written yet, and where each ends in `pending`.
    pending: Vec<u8>,
    ends: Vec<usize>,
}

impl JsonLines {
    /// Create `path` (a new file; with `overwrite`, an existing one is emptied); `-` is
    /// stdout.
    pub(crate) fn create(path: &Path, overwrite: bool) -> Result<Self, SinkError> {
        let name = path.display().to_string();
        if name == "-" {
            return Ok(JsonLines::new(name, Box::new(std::io::stdout()), None));
        }
        let file = super::output::create_file(path, overwrite)?;
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        let cut = regular.then(|| file.try_clone().ok()).flatten();
        Ok(JsonLines::new(name, Box::new(file), cut))
    }

    fn new(name: String, out: Box<dyn Write + Send>, cut: Option<File>) -> Self {
        JsonLines {
            name,
            out,
            cut,
            lines: 0,
            committed: 0,
            pending: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// Complete lines written so far.
    #[cfg(test)]
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// Serialize `value` as one line, held until [`JsonLines::commit`].
    pub(crate) fn push<T: Serialize>(&mut self, value: &T) -> Result<(), SinkError> {
        let start = self.pending.len();
        if let Err(e) = serde_json::to_writer(&mut self.pending, value) {
            self.pending.truncate(start);
            return Err(self
                .error(format!("cannot serialize a line: {e}"))
                .caused_by(e));
        }
        self.pending.push(b'\n');
        self.ends.push(self.pending.len());
        Ok(())
    }

    /// Write the held lines. On failure the output keeps only complete lines (a regular file is
    /// cut back to the end of the last line written whole) and the error says how many.
    pub(crate) fn commit(&mut self) -> Result<(), SinkError> {
        let (written, result) = self.write_pending();
        let whole = self.ends.iter().take_while(|&&end| end <= written).count();
        let kept = if whole == 0 { 0 } else { self.ends[whole - 1] };
        self.lines += whole as u64;
        self.committed += kept as u64;
        self.pending.clear();
        self.ends.clear();
        let Err(e) = result else { return Ok(()) };
        let mut reason = format!("write failed: {e}");
        if let Some(file) = &self.cut {
            let lines = self.lines;
            match file.set_len(self.committed) {
                Ok(()) if written > kept => {
                    reason += &format!("; the file was cut back to its last complete line ({lines} lines)")
                }
                Ok(()) => reason += &format!("; the file holds {lines} complete lines"),
                Err(cut) => reason += &format!(
                    "; cutting the file back to its last complete line ({lines} lines) failed too: {cut}"
                ),
            }
        }
        Err(self.error(reason).caused_by(e))
    }

    /// Write `pending`, returning how many of its bytes the output took, and the error that
    /// stopped it if any.
    fn write_pending(&mut self) -> (usize, std::io::Result<()>) {
        let mut written = 0;
        while written < self.pending.len() {
            match self.out.write(&self.pending[written..]) {
                Ok(0) => return (written, Err(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return (written, Err(e)),
            }
        }
        (written, self.out.flush())
    }

    fn error(&self, reason: String) -> SinkError {
        SinkError::io(self.name.clone(), reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that takes `left` more bytes, then fails as a file-size limit does.
    struct Limited {
        file: File,
        left: usize,
    }

    impl Write for Limited {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_short_write_is_cut_back_to_the_last_complete_line() {
        let dir = std::env::temp_dir().join(format!("octopipe-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("o.jsonl");
        let file = File::create(&path).unwrap();
        let cut = file.try_clone().ok();
        // Two whole lines of 8 bytes fit, then 5 bytes of the third.
        let out = Limited { file, left: 21 };
        let mut lines = JsonLines::new(path.display().to_string(), Box::new(out), cut);
        for i in 0..2 {
            lines.push(&serde_json::json!({ "a": i })).unwrap();
        }
        lines.commit().unwrap();
        for i in 2..4 {
            lines.push(&serde_json::json!({ "a": i })).unwrap();
        }
        let e = lines.commit().unwrap_err().to_string();
        assert!(e.contains("write failed: File too large"), "{e}");
        assert!(
            e.ends_with("cut back to its last complete line (2 lines)"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":0}\n{\"a\":1}\n"
        );
        assert_eq!(lines.lines(), 2);
    }
}
