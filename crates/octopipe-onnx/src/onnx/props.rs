//! The properties every stage that runs an ONNX model has (detect, classify), declared once:
//! the model, its class names, the execution provider, the GPU and ONNX Runtime's threads.

use std::path::{Path, PathBuf};

use super::session::Ep;
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{PropChoice, Properties, Props};

/// The `ep` property: which execution provider runs the model; with `device`, an [`Ep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
#[non_exhaustive]
pub enum EpKind {
    /// CUDA's when ONNX Runtime's build has it and a GPU is present, else the CPU's.
    Auto,
    /// The CPU's.
    Cpu,
    /// CUDA's; an error when it cannot be had.
    Cuda,
}

/// The model block of the stages that run an ONNX model, flattened into theirs
/// (`#[prop(flatten)] onnx: OnnxProps`).
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct OnnxProps {
    /// the .onnx model
    #[prop(required)]
    pub model: PathBuf,
    /// class names in class-index order, one per class of the model (detect: coco for COCO's 80)
    #[prop(default = "class0,...", value = Vec::new())]
    pub labels: Vec<String>,
    /// a file with one class name per line, one per class of the model
    pub labels_file: Option<PathBuf>,
    /// ONNX Runtime execution provider (auto: CUDA when its build has it and a GPU is present;
    /// with cuda, input already on the GPU, detect's tiles or a preprocess memory=device tensor,
    /// is read where it is)
    #[prop(default = "auto")]
    pub ep: EpKind,
    /// the GPU of the execution provider (and of detect's CUDA preprocessing)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_DEVICE)]
    pub device: usize,
    /// ONNX Runtime intra-op threads (0: its default)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_THREADS)]
    pub ort_threads: usize,
}

impl OnnxProps {
    /// The execution provider: `ep` on `device`.
    pub fn ep(&self) -> Ep {
        let device = i32::try_from(self.device).unwrap_or(i32::MAX);
        match self.ep {
            EpKind::Auto => Ep::Auto(device),
            EpKind::Cpu => Ep::Cpu,
            EpKind::Cuda => Ep::Cuda(device),
        }
    }

    /// Read `labels-file` (when given) into `labels`: an error of `stage` naming the file when
    /// it cannot be read or names no class.
    pub(crate) fn read_labels_file(&mut self, stage: &str, p: &Props) -> Result<(), DescribeError> {
        let Some(file) = &self.labels_file else {
            return Ok(());
        };
        let labels = read_labels(file).map_err(|e| e.to_string());
        self.labels = labels
            .and_then(|l| match l.is_empty() {
                true => Err("no class names in it".to_string()),
                false => Ok(l),
            })
            .map_err(|e| {
                p.error(
                    "labels-file",
                    format!("{stage}: labels-file '{}': {e}", file.display()),
                )
            })?;
        Ok(())
    }
}

/// A model's class names from a labels file: one per line, trimmed, blank lines skipped. The
/// file must be a regular file of at most [`MAX_LABELS_FILE`](octopipe_core::files::MAX_LABELS_FILE)
/// bytes of UTF-8.
pub(crate) fn read_labels(path: &Path) -> std::io::Result<Vec<String>> {
    let bytes = octopipe_core::files::read_bounded(path, octopipe_core::files::MAX_LABELS_FILE)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}
