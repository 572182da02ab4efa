//! The `jsonl` sink: one JSON line per object, written whole, into a file or stdout.

use std::path::PathBuf;

use crate::batch::CropBatch;
use crate::files::RunPath;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Properties, Role, Running, Stage, StageDecl,
};
use crate::Error;

use super::error::SinkError;
use super::lines::JsonLines;
use super::object::Object;
use super::output;

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

/// Runtime state of the JSONL sink.
pub(crate) struct JsonlSink {
    out: JsonLines,
    /// The file while the run has not finished: removed if left empty.
    leftover: output::Leftover,
    /// Set when the run is cut short (a stage failed, a stop was asked for).
    stopped: output::CutShort,
}

impl JsonlSink {
    /// Create the output: a new file, or an existing one emptied with `overwrite`.
    pub fn new(config: &JsonlConfig) -> Result<Self, SinkError> {
        let out = JsonLines::create(&config.location, config.overwrite)?;
        let file = (config.location.as_os_str() != "-").then(|| config.location.clone());
        Ok(JsonlSink {
            out,
            leftover: output::Leftover::new(file.into_iter().collect(), None),
            stopped: Default::default(),
        })
    }

    /// Tell the sink when the run is cut short: it then removes its file at the end if it
    /// wrote nothing into it.
    pub(crate) fn stopped_by(mut self, stopped: output::CutShort) -> Self {
        self.stopped = stopped;
        self
    }

    /// Write one line per crop of `batch`, whole: after a failed write the file ends with its
    /// last complete line.
    pub fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        for object in Object::all(batch) {
            self.out.push(&object)?;
        }
        self.out.commit()
    }
}

impl Stage<CropBatch, CropBatch> for JsonlSink {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.write(&batch)?;
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

impl Element for JsonlConfig {
    fn open(mut self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        self.overwrite |= ctx.overwrite;
        let sink = JsonlSink::new(&self)?.stopped_by(output::CutShort::of(ctx));
        Ok(Running::stage(Box::new(sink)))
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
