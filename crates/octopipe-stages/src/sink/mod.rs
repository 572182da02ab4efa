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

mod appsink;
#[cfg(any(feature = "mqtt", feature = "zenoh"))]
mod backlog;
#[cfg(any(feature = "mqtt", feature = "zenoh"))]
mod broker;
mod error;
mod file;
mod jsonl;
mod lines;
pub mod message;
#[cfg(feature = "mqtt")]
mod mqtt;
#[cfg(feature = "mqtt")]
mod mqtt_pem;
mod object;
pub mod output;
mod tensors;
mod tiles;
#[cfg(feature = "zenoh")]
mod zenoh;

pub use appsink::APPSINK;
#[cfg(any(feature = "mqtt", feature = "zenoh"))]
pub use broker::{Sending, MAX_MESSAGE};
pub use error::SinkError;
pub use file::{FileSink, FileWriter};
pub use jsonl::JSONL;
#[cfg(feature = "mqtt")]
pub use mqtt::{MqttConfig, MQTT};
pub use object::{timestamp, AnnotationInfo, BoxInfo, ClassifierAnswer, Classifiers, Object};
pub use tensors::{TensorFiles, TensorsConfig, TensorsSink, TENSORS};
pub use tiles::{TileFiles, TileFormat, TileSink, TileSinkConfig, TILESINK};
#[cfg(feature = "zenoh")]
pub use zenoh::{ZenohConfig, ZENOH};
