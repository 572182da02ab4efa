//! The `jsonl` sink: one JSON line per object, written whole, into a file or stdout.

use std::path::PathBuf;

use crate::batch::CropBatch;
use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::stage::{
    Element, OpenContext, PropSpec, PropType, Properties, Role, Running, StageDecl,
};

use super::error::SinkError;
use super::file::{open_lines, FileSink, FileWriter};
use super::lines::JsonLines;
use super::object::Object;

/// Settings of the JSONL sink, its properties declared once ([`JSONL`]).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct JsonlConfig {
    /// output file, or - for stdout
    #[prop(required)]
    pub location: PathBuf,
    /// Replace an existing file (else it is refused).
    #[prop(spec = OVERWRITE)]
    pub overwrite: bool,
}

/// What the JSONL sink writes: one line per crop of each batch, the batch's lines whole (after
/// a failed write the file ends with its last complete line).
pub(crate) struct ObjectLines(JsonLines);

impl FileWriter for ObjectLines {
    fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        for object in Object::all(batch) {
            self.0.push(&object)?;
        }
        self.0.commit()
    }
}

impl Element for JsonlConfig {
    fn open(mut self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        self.overwrite |= ctx.overwrite;
        let (lines, leftover) = open_lines(&self.location, self.overwrite)?;
        Ok(FileSink::writing(ObjectLines(lines), leftover).running(ctx))
    }
    fn outputs(&self) -> Vec<RunPath> {
        if self.writes_stdout() {
            return Vec::new();
        }
        vec![RunPath::file("jsonl location", &self.location)]
    }
    fn writes_stdout(&self) -> bool {
        self.location.as_os_str() == "-"
    }
}

/// The `overwrite` property of the sinks that write files (`#[prop(spec = OVERWRITE)]`).
pub(super) const OVERWRITE: PropSpec = PropSpec::new(
    "overwrite",
    PropType::Bool,
    "false",
    "replace earlier output at location (else it is refused; octopipe run --force sets it on every sink)",
);

/// `jsonl location=FILE|- overwrite=false`: one JSON line per object.
pub const JSONL: StageDecl = StageDecl {
    name: "jsonl",
    role: Role::Sink,
    doc: "one JSON line per object (box, and the classifier's label when classified)",
    props: JsonlConfig::PROPS,
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: |p| Ok(Box::new(JsonlConfig::from_props(p)?)),
};
