//! One object (a JSONL line, a message's item) made of a frame's box, with its frame's times.

use std::sync::Arc;

use serde::Serialize;

use crate::batch::CropBatch;
use octopipe_core::frame::{BoxOrigin, Classification};

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
    /// Where several classifiers classify the boxes one after the other: each one's answer by
    /// its name, in chain order (the first's is also `label`, `class_id`, `score` and `topk`).
    /// Empty (and not written) with one classifier.
    #[serde(skip_serializing_if = "Classifiers::is_empty")]
    pub classifiers: Classifiers,
    /// What `tilestats` measured of the box's pixels (mean, std, min, max, above, pixels, and the
    /// exact integer sums of the raw samples under `sums`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<octopipe_core::frame::TileStats>,
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
    pub fn in_frame(frame: &octopipe_core::frame::Frame) -> impl Iterator<Item = Object> + '_ {
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
        frame: &octopipe_core::frame::Frame,
        timestamp: &Arc<str>,
        index: u32,
        det: &octopipe_core::frame::Detection,
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
            classifiers: Classifiers(
                det.classifications
                    .iter()
                    .map(|n| {
                        (
                            n.classifier.clone(),
                            ClassifierAnswer::of(&n.classification),
                        )
                    })
                    .collect(),
            ),
            stats: det.stats,
            kept: det.stats.map(|s| s.kept),
        }
    }
}

/// One classifier's answer in an object's `classifiers`: its top-1 class and score, and the
/// further classes when top-k > 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ClassifierAnswer {
    /// The top-1 class name.
    pub label: Arc<str>,
    /// The top-1 class index.
    pub class_id: u32,
    /// The top-1 softmax score.
    pub score: f32,
    /// Further classes when top-k > 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topk: Vec<(Arc<str>, f32)>,
}

impl ClassifierAnswer {
    fn of(c: &Classification) -> Self {
        ClassifierAnswer {
            label: c.best.label.clone(),
            class_id: c.best.class_id,
            score: c.best.score,
            topk: c.topk.iter().map(|s| (s.label.clone(), s.score)).collect(),
        }
    }
}

/// Every classifier's answer by its name, in chain order: written as a JSON object whose keys
/// are the classifiers' names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Classifiers(pub Vec<(Arc<str>, ClassifierAnswer)>);

impl Classifiers {
    /// Whether no classifier's answer is here (one classifier, or none answered).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The answer of the classifier named `name`.
    pub fn get(&self, name: &str) -> Option<&ClassifierAnswer> {
        self.0.iter().find(|(n, _)| &**n == name).map(|(_, a)| a)
    }
}

impl Serialize for Classifiers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, answer) in &self.0 {
            map.serialize_entry(name.as_ref(), answer)?;
        }
        map.end()
    }
}

/// A frame's presentation time in ms, as objects and messages give it.
pub(super) fn pts_ms(frame: &octopipe_core::frame::Frame) -> Option<f64> {
    frame.pts.map(|p| p.as_secs_f64() * 1000.0)
}

/// A frame's wall-clock time ([`Frame::wall`](octopipe_core::frame::Frame::wall)) as objects and
/// messages give it: RFC 3339, UTC, milliseconds (`2026-11-27T16:02:11.042Z`).
pub fn timestamp(frame: &octopipe_core::frame::Frame) -> String {
    humantime::format_rfc3339_millis(frame.wall).to_string()
}
