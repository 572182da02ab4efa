//! Sink stage: one JSON line per classified object.
//!
//! ```text
//! ... ! classify model=m.onnx ! jsonl location=objects.jsonl
//! ```
//!
//! Lines are written whole: a batch's lines are written together, and when a write fails
//! part-way (a full disk, a file-size limit) the file is cut back to its last complete line and
//! the run fails naming the file.
//!
//! Each line (schema version [`message::SCHEMA_VERSION`], docs/report.md lists every field):
//! `{"stream":0,"frame":12,"source":"file:///data/seq/0000001.jpg","pts_ms":400.0,
//! "timestamp":"2026-11-27T16:02:11.042Z","width":1920,"height":1080,"bbox":[x,y,w,h],
//! "label":"car","class_id":2,"score":0.97,"annotation":{"category_id":4,"category":"car"}}`
//! where `source` is the frame's source as a URI, `timestamp` its wall-clock time (RFC 3339, UTC,
//! milliseconds: a live source's capture time, otherwise when the frame was decoded), `width` and
//! `height` the frame's size, `bbox` the clipped integer box, `label`, `class_id` and `score` the
//! classifier's, and where the box's class came from in a field of its own: `detection`
//! (`{"class_id","label","score"}`, a detector's) or `annotation` (`{"category_id","category"}`,
//! an annotation's VisDrone category); `track` is the track id when there is one (the `track`
//! stage's, per stream, or the MOT annotation's). `location=-` writes to stdout.
//!
//! An object whose classifier output was not finite (with `classify non-finite=flag`) has
//! `"non_finite":true` and no label, class or score. With `classify reinfer-interval=N`, an
//! object whose label is its track's last one (no crop was made of it) has `"reused":true`; a
//! fresh label has no such field. There is a line for every box of every frame, in frame order,
//! reused ones included.
//!
//! The output may not resolve to one of the run's inputs (checked before anything opens).
//!
//! The same objects go to a broker with `mqtt` (`MQTT`, the `mqtt` feature) or to Zenoh peers
//! with `zenoh` (`ZENOH`, the `zenoh` feature; both on by default): one message per frame or per
//! object, in the versioned schema of docs/messages.md ([`message`]).

#[cfg(any(feature = "mqtt", feature = "zenoh"))]
mod backlog;
#[cfg(any(feature = "mqtt", feature = "zenoh"))]
mod broker;
mod lines;
pub mod message;
#[cfg(feature = "mqtt")]
mod mqtt;
#[cfg(feature = "mqtt")]
mod mqtt_pem;
pub mod output;
mod tensors;
mod tiles;
#[cfg(feature = "zenoh")]
mod zenoh;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::batch::CropBatch;
use crate::description::DescribeError;
use crate::error::ErrorKind;
use crate::files::RunPath;
use crate::frame::BoxOrigin;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Properties, Props, Role, Running, Stage, StageDecl,
};
use crate::Error;

#[cfg(any(feature = "mqtt", feature = "zenoh"))]
pub use broker::{Sending, MAX_MESSAGE};
use lines::JsonLines;
#[cfg(feature = "mqtt")]
pub use mqtt::{MqttConfig, MQTT};
pub use tensors::{TensorsConfig, TensorsSink, TENSORS};
pub use tiles::{TileFormat, TileSink, TileSinkConfig, TILESINK};
#[cfg(feature = "zenoh")]
pub use zenoh::{ZenohConfig, ZENOH};

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

/// Errors of the sink stages: an output file ([`ErrorKind::Io`]) or a broker
/// ([`ErrorKind::Network`]) that failed, with the typed cause (an `io::Error`, the broker
/// client's error) as `source()` where there is one.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
#[non_exhaustive]
pub struct SinkError {
    /// The output: a file, or a broker (`mqtt HOST:PORT`).
    pub path: String,
    /// What went wrong (with the cause's words).
    pub reason: String,
    kind: ErrorKind,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl SinkError {
    /// An output file (or folder, or stdout) that failed.
    pub fn io(path: impl Into<String>, reason: String) -> Self {
        SinkError {
            path: path.into(),
            reason,
            kind: ErrorKind::Io,
            source: None,
        }
    }

    /// A broker (or its connection, or its sending thread) that failed.
    pub fn network(path: impl Into<String>, reason: String) -> Self {
        SinkError {
            kind: ErrorKind::Network,
            ..Self::io(path, reason)
        }
    }

    /// The same error, with `cause` as its `source()` (its words are in the reason already).
    pub(crate) fn caused_by(
        mut self,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Box::new(cause));
        self
    }
}

impl crate::error::Kind for SinkError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

crate::error::stage_error!(SinkError);

/// What a detector said of a box (the `detection` field): its class, the class's name and the
/// box's score.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BoxInfo {
    /// The detector's class id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_id: Option<u32>,
    /// The detector's class name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Arc<str>>,
    /// Its score.
    pub score: f32,
}

/// What an annotation said of a box (the `annotation` field): its annotated category.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AnnotationInfo {
    /// The annotated category's id (a VisDrone category, 0 to 11).
    pub category_id: u32,
    /// Its name, when the category is a known one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Arc<str>>,
}

/// One object: a JSONL line, or an item of the runner's `Pipeline::results`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Object {
    /// Stream (branch) id.
    pub stream: u32,
    /// Frame number in its stream.
    pub frame: u64,
    /// The frame's source as a URI (`file:///...`, `rtsp://...` with credentials redacted,
    /// `octopipe:...` for the test source, launch heads and the application's frames).
    pub source: Arc<str>,
    /// Presentation time in ms.
    pub pts_ms: Option<f64>,
    /// The frame's wall-clock time, RFC 3339 in UTC with milliseconds: a live source's capture
    /// time, otherwise when the frame was decoded.
    pub timestamp: Arc<str>,
    /// The frame's width in pixels.
    pub width: u32,
    /// The frame's height in pixels.
    pub height: u32,
    /// The clipped integer box `[x, y, w, h]`.
    pub bbox: [u32; 4],
    /// The classifier's top-1 class name (when classified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Arc<str>>,
    /// The classifier's top-1 class index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_id: Option<u32>,
    /// The classifier's top-1 softmax score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The classifier's output for this crop was not finite (NaN or infinite logits, with
    /// `classify non-finite=flag`): no label, class or score is given.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub non_finite: bool,
    /// A detector's class and score, for a box a detector gave (the `detect` stage, an upstream
    /// GStreamer detector, the application) when it names a class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detection: Option<BoxInfo>,
    /// The annotated category, for a box from annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation: Option<AnnotationInfo>,
    /// Track id (from the `track` stage, MOT annotations or the application); ids are per
    /// stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<u32>,
    /// The label is the track's last one, reused (`classify reinfer-interval`): no crop was made
    /// of this box. `false` (and not written) for a fresh label. A reused object with no label
    /// is one whose track had none to give (see the report's `reused` count).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    /// The detector skipped the frame (`detect interval`): the box is the tracker's prediction.
    /// `false` (and not written) for a detected box.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub predicted: bool,
    /// Further classes when top-k > 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topk: Vec<(Arc<str>, f32)>,
    /// What `tilestats` measured of the box's pixels (mean, std, min, max, above, pixels, and the
    /// exact integer sums of the raw samples under `sums`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<crate::frame::TileStats>,
    /// Whether `tilestats` keeps the box (its rule and top-k).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<bool>,
}

impl Object {
    /// Every object of `batch`: each frame's boxes, in frame order, whether a crop was made of
    /// it or its label was reused.
    pub fn all(batch: &CropBatch) -> impl Iterator<Item = Object> + '_ {
        batch.frames.iter().flat_map(Object::in_frame)
    }

    /// Every object of `frame` (of the part of it that `frame` is), in box order.
    pub fn in_frame(frame: &crate::frame::Frame) -> impl Iterator<Item = Object> + '_ {
        let timestamp: Arc<str> = timestamp(frame).into();
        let boxes = frame.detections.iter().enumerate();
        boxes.map(move |(i, det)| Object::of(frame, &timestamp, i as u32, det))
    }

    /// The annotated category's id, for a box from annotations.
    pub fn category_id(&self) -> Option<u32> {
        self.annotation.as_ref().map(|a| a.category_id)
    }

    /// The object of `frame`'s box `det`, its `index`-th; `timestamp` is the frame's.
    pub(crate) fn of(
        frame: &crate::frame::Frame,
        timestamp: &Arc<str>,
        index: u32,
        det: &crate::frame::Detection,
    ) -> Object {
        let c = det.classification.as_ref();
        let annotated = det.origin == BoxOrigin::Annotation;
        let named = det.class_id.is_some() || det.label.is_some();
        Object {
            stream: frame.stream,
            frame: frame.seq,
            source: frame.uri.clone(),
            pts_ms: pts_ms(frame),
            timestamp: timestamp.clone(),
            width: frame.layout.width,
            height: frame.layout.height,
            bbox: det.bbox,
            label: c.map(|c| c.best.label.clone()),
            class_id: c.map(|c| c.best.class_id),
            score: c.map(|c| c.best.score),
            non_finite: frame.non_finite.contains(&index),
            detection: (!annotated && named).then(|| BoxInfo {
                class_id: det.class_id,
                label: det.label.clone(),
                score: det.score,
            }),
            annotation: annotated
                .then_some(det.class_id)
                .flatten()
                .map(|category_id| AnnotationInfo {
                    category_id,
                    category: det.label.clone(),
                }),
            track: det.track,
            reused: frame.reused.binary_search(&index).is_ok(),
            predicted: frame.predicted,
            topk: c
                .map(|c| c.topk.iter().map(|s| (s.label.clone(), s.score)).collect())
                .unwrap_or_default(),
            stats: det.stats,
            kept: det.stats.map(|s| s.kept),
        }
    }
}

/// A frame's presentation time in ms, as objects and messages give it.
fn pts_ms(frame: &crate::frame::Frame) -> Option<f64> {
    frame.pts.map(|p| p.as_secs_f64() * 1000.0)
}

/// A frame's wall-clock time ([`Frame::wall`](crate::frame::Frame::wall)) as objects and
/// messages give it: RFC 3339, UTC, milliseconds (`2026-11-27T16:02:11.042Z`).
pub fn timestamp(frame: &crate::frame::Frame) -> String {
    humantime::format_rfc3339_millis(frame.wall).to_string()
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
const OVERWRITE: PropSpec = PropSpec::new(
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

/// The `appsink` stage: writes nothing; the application reads the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AppSinkConfig;

/// Passes batches on untouched.
struct PassOn;

impl Stage<CropBatch, CropBatch> for PassOn {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.push(batch);
        Ok(())
    }
}

impl Element for AppSinkConfig {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(PassOn)))
    }
}

/// `appsink`: the application reads objects (`Pipeline::results`) or whole batches with their
/// tensors (`Pipeline::batches`); nothing is written.
pub const APPSINK: StageDecl = StageDecl {
    name: "appsink",
    role: Role::Sink,
    doc: "writes nothing: the application reads objects or batches (Pipeline::results, ::batches)",
    props: &[],
    needs: &[Role::Batch],
    provides: &[],
    make: |_: &Props| -> Result<Box<dyn Element>, DescribeError> { Ok(Box::new(AppSinkConfig)) },
};
