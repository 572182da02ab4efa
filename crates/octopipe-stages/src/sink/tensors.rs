//! The `tensors` sink: every batch's preprocessed tensor as a `.npy` file, and an index of which
//! crop is which, for applications that run their own model on octopipe's tensors.
//!
//! ```text
//! ... ! preprocess size=224x224 ! tensors location=out/
//! ```
//!
//! `out/batch-000000.npy`, `out/batch-000001.npy`, ...: the tensor of each batch, `<f4` (or
//! `<f2` with `preprocess dtype=f16`), shaped `[n, 3, h, w]` / `[n, h, w, 3]` (or flat for a
//! ragged batch). `out/index.jsonl`: one line per crop, `{"file":"batch-000000.npy","index":0,
//! "offset":0,...}` followed by the object's fields (stream, frame, source, bbox, ...). A folder
//! that already holds such files is refused (with `overwrite=true` they are removed first); so is
//! a folder the run reads, or one holding an input of the run. A run that fails before writing
//! anything leaves no empty index (nor the folder, if it made it). When a write fails, a partial `.npy` file is removed
//! and the index ends with its last complete line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use serde::Serialize;

use super::error::SinkError;
use super::file::{open_folder, written_whole, FileSink, FileWriter};
use super::lines::JsonLines;
use super::object::Object;
use crate::batch::CropBatch;
use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::stage::{Element, OpenContext, Properties, Role, Running, StageDecl};
use octopipe_core::tensor::{HostView, TensorData};

/// Settings of the tensors sink, its properties declared once ([`TENSORS`]).
#[derive(Debug, Clone, PartialEq, Eq, Properties)]
pub struct TensorsConfig {
    /// output folder (created if missing; must not hold earlier output)
    #[prop(required)]
    pub location: PathBuf,
    /// Replace an earlier run's files in the folder (else the folder is refused).
    #[prop(spec = super::jsonl::OVERWRITE)]
    pub overwrite: bool,
}

/// `tensors location=DIR`.
pub const TENSORS: StageDecl = StageDecl {
    name: "tensors",
    role: Role::Sink,
    doc: "each batch's tensor as a .npy file plus index.jsonl (which crop is which)",
    props: TensorsConfig::PROPS,
    needs: &[Role::Boxes, Role::Batch, Role::Preprocess],
    provides: &[],
    make: |p| Ok(Box::new(TensorsConfig::from_props(p)?)),
};

impl Element for TensorsConfig {
    fn open(mut self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        self.overwrite |= ctx.overwrite;
        Ok(TensorsSink::new(&self)?.running(ctx))
    }
    fn outputs(&self) -> Vec<RunPath> {
        vec![RunPath::folder("tensors location", &self.location)]
    }
}

/// One line of `index.jsonl`.
#[derive(Serialize)]
struct IndexLine<'a> {
    file: &'a str,
    index: usize,
    offset: u32,
    #[serde(flatten)]
    object: Object,
}

/// The tensors sink: a [`FileSink`] writing [`TensorFiles`].
pub type TensorsSink = FileSink<TensorFiles>;

/// What the tensors sink writes: each batch's tensor as a `.npy` file, and its index lines.
pub struct TensorFiles {
    dir: PathBuf,
    index: JsonLines,
    batches: u64,
}

impl TensorsSink {
    /// Create the folder (or take one with no earlier output; with `overwrite`, the earlier
    /// output is removed) and the index.
    pub fn new(config: &TensorsConfig) -> Result<Self, SinkError> {
        let dir = config.location.clone();
        let ours = |n: &str| n == "index.jsonl" || (n.starts_with("batch-") && n.ends_with(".npy"));
        let (index, leftover) = open_folder(&dir, ours, config.overwrite)?;
        let files = TensorFiles {
            dir,
            index,
            batches: 0,
        };
        Ok(FileSink::writing(files, leftover))
    }
}

impl FileWriter for TensorFiles {
    /// Write `batch`'s tensor and its index lines.
    fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        if batch.crops.is_empty() {
            return Ok(());
        }
        let name = format!("batch-{:06}.npy", self.batches);
        let path = self.dir.join(&name);
        let err = |reason: String| SinkError::io(path.display().to_string(), reason);
        let t = &batch.tensor;
        // The values are written as they are read: no copy of the tensor (as large as the
        // batch) is allocated.
        let (descr, values) = match &t.data {
            TensorData::Host(h) => match h.values() {
                HostView::F32(v) => ("<f4", NpyData::F32(v)),
                HostView::F16(v) => ("<f2", NpyData::U16(v)),
            },
            TensorData::Device(_) => {
                return Err(err(
                    "the tensor is in device memory: the tensors sink writes host tensors".into(),
                ))
            }
        };
        written_whole(
            &path,
            File::create(&path).and_then(|f| write_npy(f, descr, &t.shape, values)),
        )?;
        for (i, object) in Object::all(batch).enumerate() {
            self.index.push(&IndexLine {
                file: &name,
                index: i,
                offset: batch.crops[i].out_offset,
                object,
            })?;
        }
        // On failure the index ends with its last complete line; every line it keeps names a
        // whole tensor file.
        self.index.commit()?;
        self.batches += 1;
        Ok(())
    }
}

/// Write a NumPy `.npy` (format 1.0) file of little-endian `descr` values with `shape` to `file`.
pub(super) fn write_npy(
    file: File,
    descr: &str,
    shape: &[usize],
    data: NpyData<'_>,
) -> std::io::Result<()> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut f = BufWriter::new(file);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    // Multi-byte values go out in little-endian chunks through one small buffer.
    const CHUNK: usize = 16 * 1024;
    let mut chunk = Vec::new();
    match data {
        NpyData::Bytes(b) => f.write_all(b)?,
        NpyData::F32(v) => {
            for part in v.chunks(CHUNK) {
                chunk.clear();
                chunk.extend(part.iter().flat_map(|x| x.to_le_bytes()));
                f.write_all(&chunk)?;
            }
        }
        NpyData::U16(v) => {
            for part in v.chunks(CHUNK) {
                chunk.clear();
                chunk.extend(part.iter().flat_map(|x| x.to_le_bytes()));
                f.write_all(&chunk)?;
            }
        }
    }
    f.flush()
}

/// The values of a `.npy` file, written little-endian by [`write_npy`].
pub(super) enum NpyData<'a> {
    /// Bytes as they are.
    Bytes(&'a [u8]),
    /// 32-bit floats.
    F32(&'a [f32]),
    /// 16-bit values (f16 bits, 16-bit grey samples).
    U16(&'a [u16]),
}
