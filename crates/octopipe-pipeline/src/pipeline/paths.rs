//! The files a run reads and writes, and the check that no output lands on an input.
//!
//! Every stage lists the paths it reads ([`Element::inputs`](octopipe_core::stage::Element::inputs):
//! the model, a labels file, the images, the annotations) and writes
//! ([`Element::outputs`](octopipe_core::stage::Element::outputs): the JSONL, the tensors folder); the
//! command line adds its own outputs (the plot, the annotated frames, the mosaic, the report
//! file). [`check`] refuses, before anything opens, an output that resolves to an input (a
//! symlink, a hard link, `./x` for `x`), lies inside a folder the run reads, or is a folder the
//! run writes files into that holds an input; and two outputs that resolve to the same file.

use std::path::{Component, Path, PathBuf};

use super::PipelineError;
use crate::describe::Graph;
use octopipe_core::files::RunPath;

/// Symbolic links followed at most, as the kernel does (ELOOP beyond).
const MAX_LINKS: u32 = 40;

/// How an output meets an input (or another output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clash {
    /// Both resolve to the same file or folder.
    Same,
    /// The output lies inside a folder the run reads.
    Inside,
    /// The output is a folder the run writes files into, and an input lies directly in it.
    Holds,
}

/// A path resolved to what the system would open: absolute, symlinks followed (also for a path
/// that does not exist yet: its nearest existing ancestor is resolved), and the file's identity
/// (device, inode) when it exists, which also catches hard links.
#[derive(Debug, Clone)]
struct Resolved {
    real: PathBuf,
    inode: Option<(u64, u64)>,
}

impl Resolved {
    fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let real = resolve(path, 0);
        let inode = std::fs::metadata(&real).ok().map(|m| (m.dev(), m.ino()));
        Resolved { real, inode }
    }

    fn same(&self, other: &Resolved) -> bool {
        self.real == other.real || (self.inode.is_some() && self.inode == other.inode)
    }
}

/// `path` absolute with every symlink followed, as far as it exists; the rest appended.
fn resolve(path: &Path, links: u32) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    // A dangling symlink: a write creates its target.
    if links < MAX_LINKS {
        if let Ok(target) = std::fs::read_link(path) {
            let base = path.parent().unwrap_or(Path::new("."));
            return resolve(&base.join(target), links + 1);
        }
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            resolve(parent, links).join(name)
        }
        _ => lexical(path),
    }
}

/// `path` made absolute and cleaned of `.` and `..` without asking the file system (for paths
/// whose every part is missing).
fn lexical(path: &Path) -> PathBuf {
    let mut out = std::env::current_dir().unwrap_or_default();
    for c in path.components() {
        match c {
            Component::RootDir => out = PathBuf::from("/"),
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// How `output` meets `input`, if it does.
fn clash(output: (&RunPath, &Resolved), input: (&RunPath, &Resolved)) -> Option<Clash> {
    let ((o, or), (i, ir)) = (output, input);
    if or.same(ir) {
        return Some(Clash::Same);
    }
    if i.folder && or.real.starts_with(&ir.real) {
        return Some(Clash::Inside);
    }
    let parent = ir.real.parent();
    if o.folder && parent.is_some_and(|p| Resolved::of(p).same(or)) {
        return Some(Clash::Holds);
    }
    None
}

/// Refuse outputs that would overwrite, or write into, what the run reads, outputs that
/// collide with each other, and outputs whose folder does not exist (for a folder output, the
/// folder it is made in: the writer makes the output folder itself, never its parents). `-`
/// (stdout) is not a path and is never refused.
pub fn check(inputs: &[RunPath], outputs: &[RunPath]) -> Result<(), PipelineError> {
    let keep = |p: &&RunPath| p.path.as_os_str() != "-" && !p.path.as_os_str().is_empty();
    let inputs: Vec<_> = inputs
        .iter()
        .filter(keep)
        .map(|p| (p, Resolved::of(&p.path)))
        .collect();
    let outputs: Vec<_> = outputs
        .iter()
        .filter(keep)
        .map(|p| (p, Resolved::of(&p.path)))
        .collect();
    for (k, (o, or)) in outputs.iter().enumerate() {
        for (i, ir) in &inputs {
            if let Some(how) = clash((o, or), (i, ir)) {
                return Err(refusal(o, i, how, &ir.real, true));
            }
        }
        for (other, otr) in &outputs[..k] {
            if or.same(otr) {
                return Err(refusal(o, other, Clash::Same, &otr.real, false));
            }
        }
    }
    for (o, _) in &outputs {
        let folder = match o.path.parent() {
            Some(p) if p.as_os_str().is_empty() => Path::new("."),
            Some(p) => p,
            None => continue,
        };
        if !folder.is_dir() {
            return Err(PipelineError::OutputFolderMissing {
                output: o.to_string(),
                folder: folder.display().to_string(),
            });
        }
    }
    Ok(())
}

/// The error for `output` meeting `other` (an input, or another output).
fn refusal(
    output: &RunPath,
    other: &RunPath,
    how: Clash,
    real: &Path,
    input: bool,
) -> PipelineError {
    // Say where both lead when they are written differently (a link, `./x` for `x`).
    let resolved = if how == Clash::Same && output.path != other.path {
        format!(" (both are {})", real.display())
    } else {
        String::new()
    };
    let what = match (how, input, other.folder) {
        (Clash::Same, false, _) => {
            format!("would overwrite {other}{resolved}, another output of this run")
        }
        (Clash::Same, true, false) => {
            format!("would overwrite {other}{resolved}, an input of this run")
        }
        (Clash::Same, true, true) => {
            format!("would write into {other}{resolved}, a folder this run reads")
        }
        (Clash::Inside, ..) => format!("is inside {other}, a folder this run reads"),
        (Clash::Holds, ..) => {
            format!("would write its files into the folder of {other}, an input of this run")
        }
    };
    PipelineError::OutputOnInput {
        output: output.to_string(),
        what,
    }
}

impl Graph {
    /// Refuse, before anything opens, an output of the stages or one of `extra` (what the
    /// application writes besides: a plot, a report file) that resolves to an input of the run,
    /// lies in a folder the run reads, or collides with another output. [`Pipeline::build`]
    /// checks the stages' own; call this first with the application's.
    ///
    /// [`Pipeline::build`]: super::Pipeline::build
    pub fn check_paths(&self, extra: &[RunPath]) -> Result<(), PipelineError> {
        let mut outputs = self.writes();
        outputs.extend_from_slice(extra);
        check(&self.reads(), &outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("octopipe-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn links_dots_and_missing_parts_resolve_to_the_same_file() {
        let dir = temp("resolve");
        let model = dir.join("m.onnx");
        std::fs::write(&model, b"x").unwrap();
        std::os::unix::fs::symlink(&model, dir.join("link")).unwrap();
        std::fs::hard_link(&model, dir.join("hard")).unwrap();
        let input = [RunPath::file("classify model", &model)];
        for out in ["link", "hard", "./m.onnx", "sub/../m.onnx"] {
            let o = RunPath::file("jsonl location", dir.join(out));
            let e = check(&input, &[o]).expect_err(out).to_string();
            assert!(e.contains("would overwrite classify model="), "{e}");
        }
        // A dangling symlink's target is where a write goes.
        std::os::unix::fs::symlink(dir.join("new.jsonl"), dir.join("dangling")).unwrap();
        let a = RunPath::file("jsonl location", dir.join("dangling"));
        let b = RunPath::file("--plot", dir.join("new.jsonl"));
        let e = check(&[], &[a, b]).unwrap_err().to_string();
        assert!(e.contains("another output of this run"), "{e}");
        // Beside the model is fine; in a folder that does not exist, refused (one rule for
        // every output, issue 39); stdout is no path.
        let ok = RunPath::file("jsonl location", dir.join("o.jsonl"));
        check(&input, &[ok, RunPath::file("jsonl location", "-")]).unwrap();
        let missing = RunPath::file("--plot", dir.join("no/such/p.svg"));
        let e = check(&input, &[missing]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--plot {0}/no/such/p.svg: its folder {0}/no/such does not exist: create it, or choose another path (nothing was written)",
                dir.display()
            )
        );
        let folder = RunPath::folder("--annotate", dir.join("no/frames"));
        let e = check(&input, &[folder]).unwrap_err().to_string();
        assert!(e.contains("its folder"), "{e}");
        check(&input, &[RunPath::folder("--annotate", dir.join("frames"))]).unwrap();
    }

    #[test]
    fn folders_read_and_folders_written() {
        let dir = temp("folders");
        std::fs::create_dir_all(dir.join("images")).unwrap();
        std::fs::write(dir.join("images/a.jpg"), b"x").unwrap();
        let images = [RunPath::folder("images location", dir.join("images"))];
        let inside = RunPath::file("--plot", dir.join("images/latency.png"));
        let e = check(&images, &[inside]).unwrap_err().to_string();
        assert!(e.contains("is inside images location="), "{e}");
        let same = RunPath::folder("tensors location", dir.join("images/."));
        let e = check(&images, &[same]).unwrap_err().to_string();
        assert!(e.contains("would write into images location="), "{e}");
        let file = [RunPath::file("images location", dir.join("images/a.jpg"))];
        let holds = RunPath::folder("--annotate", dir.join("images"));
        let e = check(&file, &[holds]).unwrap_err().to_string();
        assert!(e.contains("into the folder of images location="), "{e}");
        check(&images, &[RunPath::folder("--annotate", dir.join("out"))]).unwrap();
    }
}
