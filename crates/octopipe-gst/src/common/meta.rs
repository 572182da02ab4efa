//! The metadata contract: one `GstVideoRegionOfInterestMeta` per object, its parameters in the
//! convention DL Streamer and others use (docs/gstreamer.md lists every field):
//!
//! - `detection`: `x_min`, `y_min`, `x_max`, `y_max` (doubles, the box as fractions of the frame),
//!   `confidence` (double: the box source's score), `label_id` (int: its class id, the VisDrone
//!   category for annotations), `label` (string: its class name); `annotation` (boolean, only
//!   when true: the class is an annotated category, not a detector's); `predicted` (boolean, only
//!   when true: the tracker's box on a frame the detector skipped);
//! - `object_id`: `id` (int), the track id (per stream);
//! - one structure per classifier, named after the element that classified (`octoclassify0`):
//!   `label` (string), `label_id` (int), `confidence` (double), `model_name` (string: the model
//!   file); `reused` and `non_finite` (booleans, only when true). Each classifier adds its own
//!   and keeps those before it; read back, the first is the object's main result, and with
//!   several each one's answer is kept by its structure's name.
//!
//! and one custom meta per frame, `OctopipeFrameMeta` (a structure: `frame`, the frame's number
//! in its stream as the first octopipe element numbered it by presentation time; `source`, its
//! name (the annotation file a DET replay matched); `predicted`, the detector skipped it;
//! `skipped`, the boxes the box stage skipped, by reason; `stream`, the first element's `stream`;
//! `detect-score`, the score threshold of the detector that found the boxes, which `octotrack`
//! follows; `arrival-ns` and `marks`, when it came to the first octopipe element and when each
//! was done with it, for the budget report), so the elements after the first agree on what the
//! frame is.
//!
//! The ROI's own rectangle is the integer box in frame pixels and its type the box's label
//! (`object` when it has none). Any ROI meta is read, whoever attached it: one without a
//! `detection` structure is a box of score 1 labelled by its ROI type.

use gstreamer as gst;
use gstreamer_video as gst_video;
use octopipe_core::frame::{
    source_uri, BoxOrigin, ClassScore, Classification, Detection, Frame, NamedClassification,
    SkipReason,
};

use super::report::{self, Marks};

/// The name of the box source's structure.
pub(crate) const DETECTION: &str = "detection";
/// The name of the track id's structure.
pub(crate) const OBJECT_ID: &str = "object_id";

/// The name of the per-frame custom meta.
pub(crate) const FRAME_META: &str = "OctopipeFrameMeta";

/// Register the per-frame custom meta (once, when the plugin loads).
pub(crate) fn register() {
    if !gst::meta::CustomMeta::is_registered(FRAME_META) {
        gst::meta::CustomMeta::register(FRAME_META, &[]);
    }
}

/// Take the frame's number, name and flags from the frame meta an element before put on the
/// buffer, if any, and the timing marks of the elements before (`None`: this is the first).
pub(crate) fn read_frame(buffer: &gst::BufferRef, frame: &mut Frame) -> Option<Marks> {
    let meta = gst::meta::CustomMeta::from_buffer(buffer, FRAME_META).ok()?;
    let s = meta.structure();
    if let Ok(seq) = s.get::<u64>("frame") {
        frame.seq = seq;
    }
    if let Ok(stream) = s.get::<u32>("stream") {
        frame.stream = stream;
    }
    if let Ok(source) = s.get::<&str>("source") {
        frame.source = source.into();
        frame.uri = source_uri(source).into();
    }
    frame.predicted = s.get::<bool>("predicted").unwrap_or(false);
    frame.skipped = skipped_of(s.get::<&str>("skipped").unwrap_or(""));
    let arrival = report::instant(s.get::<u64>("arrival-ns").ok()?);
    // The frame's wall-clock time is when the first element made it.
    frame.wall = octopipe_core::frame::wall_time(arrival);
    Some(Marks::parse(arrival, s.get::<&str>("marks").unwrap_or("")))
}

/// The score threshold of the detector before (`octodetect` writes it in the frame meta), which
/// a tracker after it follows unless its `high` is set, as `track` follows `detect`.
pub(crate) fn detect_score(buffer: &gst::BufferRef) -> Option<f32> {
    let meta = gst::meta::CustomMeta::from_buffer(buffer, FRAME_META).ok()?;
    meta.structure()
        .get::<f64>("detect-score")
        .ok()
        .map(|v| v as f32)
}

/// Put (or update) the frame meta of `frame` on the buffer, with the elements' timing `marks`
/// and, from a detector, its score threshold (`detect_score`).
pub(crate) fn write_frame(
    buffer: &mut gst::BufferRef,
    frame: &Frame,
    marks: &Marks,
    detect_score: Option<f32>,
) {
    let meta = match gst::meta::CustomMeta::from_buffer(buffer, FRAME_META).is_ok() {
        true => gst::meta::CustomMeta::from_mut_buffer(buffer, FRAME_META),
        false => gst::meta::CustomMeta::add(buffer, FRAME_META),
    };
    if let Ok(mut meta) = meta {
        let s = meta.mut_structure();
        s.set("frame", frame.seq);
        s.set("stream", frame.stream);
        if let Some(score) = detect_score {
            s.set("detect-score", f64::from(score));
        }
        s.set("source", frame.source.as_ref());
        s.set("predicted", frame.predicted);
        s.set("skipped", skipped_text(&frame.skipped));
        s.set("arrival-ns", report::ns(marks.arrival));
        s.set("marks", marks.text());
    }
}

/// Every reason a box stage skips a box, by the word the frame meta holds.
const SKIP_REASONS: [(&str, SkipReason); 6] = [
    ("ignored-region", SkipReason::IgnoredRegion),
    ("under-2px", SkipReason::TooSmall),
    ("outside-frame", SkipReason::OutsideFrame),
    ("no-class", SkipReason::NoClass),
    ("bad-line", SkipReason::BadLine),
    ("capped", SkipReason::Capped),
];

/// The boxes skipped on a frame, as the frame meta holds them: `reason=n;reason=n`.
fn skipped_text(skipped: &[(SkipReason, u32)]) -> String {
    let words: Vec<String> = skipped
        .iter()
        .filter_map(|(r, n)| {
            let (word, _) = SKIP_REASONS.iter().find(|(_, reason)| reason == r)?;
            Some(format!("{word}={n}"))
        })
        .collect();
    words.join(";")
}

/// The skipped boxes read back from [`skipped_text`].
fn skipped_of(text: &str) -> Vec<(SkipReason, u32)> {
    text.split(';')
        .filter_map(|w| w.split_once('='))
        .filter_map(|(word, n)| {
            let (_, reason) = SKIP_REASONS.iter().find(|(w, _)| *w == word)?;
            Some((*reason, n.parse().ok()?))
        })
        .collect()
}

/// What was read of one ROI meta that became a detection: its parameters and identity, carried
/// over when the object is written back.
#[derive(Debug, Clone)]
pub(crate) struct Original {
    roi_type: String,
    id: i32,
    parent_id: i32,
    params: Vec<gst::Structure>,
}

/// The objects on a buffer: the detections made of its ROI metas, what each meta was, and for
/// each ROI meta on the buffer in order whether it became a detection.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) originals: Vec<Original>,
    read: Vec<bool>,
}

/// Read every ROI meta of `buffer` into `frame.detections` (appended, clipped to the frame; a
/// box with nothing left inside the frame is left out and its meta untouched), with the track
/// id, the box source's class and score, and the classifiers' answers: the first structure's is
/// the main result (and its `reused` and `non_finite` flags the object's); with several, each
/// one's by its structure's name too.
pub(crate) fn read(buffer: &gst::BufferRef, frame: &mut Frame) -> Read {
    let (fw, fh) = (frame.layout.width, frame.layout.height);
    let mut out = Read::default();
    for meta in buffer.iter_meta::<gst_video::VideoRegionOfInterestMeta>() {
        let (x, y, w, h) = meta.rect();
        let (x1, y1) = (x.saturating_add(w).min(fw), y.saturating_add(h).min(fh));
        if x >= fw || y >= fh || x1 <= x || y1 <= y {
            out.read.push(false);
            continue;
        }
        let mut det = Detection::new([x, y, x1 - x, y1 - y]);
        match meta.param(DETECTION) {
            Some(s) => {
                det.label = s.get::<&str>("label").ok().map(Into::into);
                det.class_id = int(s, "label_id").and_then(|v| u32::try_from(v).ok());
                det.score = s.get::<f64>("confidence").map_or(1.0, |v| v as f32);
                if s.get::<bool>("annotation").unwrap_or(false) {
                    det.origin = BoxOrigin::Annotation;
                }
            }
            None => det.label = Some(meta.roi_type().into()),
        }
        det.track = meta
            .param(OBJECT_ID)
            .and_then(|s| int(s, "id"))
            .and_then(|v| u32::try_from(v).ok());
        let index = frame.detections.len() as u32;
        let mut classifiers = meta.params().filter(|s| is_classification(s));
        if let Some(s) = classifiers.next() {
            det.classification = classification(s);
            if classifiers.next().is_some() {
                det.classifications = meta
                    .params()
                    .filter(|s| is_classification(s))
                    .filter_map(|s| {
                        Some(NamedClassification {
                            classifier: s.name().as_str().into(),
                            classification: classification(s)?,
                        })
                    })
                    .collect();
            }
            if s.get::<bool>("reused").unwrap_or(false) {
                frame.reused.push(index);
            }
            if s.get::<bool>("non_finite").unwrap_or(false) {
                frame.non_finite.push(index);
            }
        }
        frame.detections.push(det);
        out.read.push(true);
        out.originals.push(Original {
            roi_type: meta.roi_type().to_string(),
            id: meta.id(),
            parent_id: meta.parent_id(),
            params: meta.params().map(|s| s.to_owned()).collect(),
        });
    }
    out
}

/// The answer a classifier's structure holds, when it has a label.
fn classification(s: &gst::StructureRef) -> Option<Classification> {
    let label = s.get::<&str>("label").ok()?;
    Some(Classification {
        best: ClassScore {
            class_id: int(s, "label_id").map_or(0, |v| v.max(0) as u32),
            label: label.into(),
            score: s.get::<f64>("confidence").map_or(0.0, |v| v as f32),
        },
        topk: Vec::new(),
    })
}

/// Whether `s` is a classifier's structure: any with a `label` but the box source's and the
/// track id's.
pub(crate) fn is_classification(s: &gst::StructureRef) -> bool {
    s.name().as_str() != DETECTION
        && s.name().as_str() != OBJECT_ID
        && (s.has_field("label") || s.has_field("non_finite"))
}

/// An integer field, whatever integer type it was written with.
pub(crate) fn int(s: &gst::StructureRef, field: &str) -> Option<i64> {
    s.get::<i32>(field)
        .map(i64::from)
        .or_else(|_| s.get::<u32>(field).map(i64::from))
        .or_else(|_| s.get::<i64>(field))
        .or_else(|_| s.get::<u64>(field).map(|v| v as i64))
        .ok()
}

/// Write `frame`'s objects on `buffer`: the ROI metas `read` took are removed, and one ROI meta
/// per detection added. When the detections are still those read (the same number: a tracker,
/// a classifier), each keeps its meta's type, ids and other parameters; the `detection` and
/// `object_id` structures are written afresh, and, when `classifier` names the element that
/// classified, its structure (with `model`'s name) too.
pub(crate) fn write(
    buffer: &mut gst::BufferRef,
    frame: &Frame,
    read: &Read,
    classifier: Option<(&str, &str)>,
) {
    if read.read.iter().any(|r| *r) {
        let mut k = 0;
        buffer.foreach_meta_mut(|mut meta| {
            use gst::buffer::BufferMetaForeachAction::{Keep, Remove};
            use std::ops::ControlFlow::Continue;
            if meta
                .downcast_ref::<gst_video::VideoRegionOfInterestMeta>()
                .is_none()
            {
                return Continue(Keep);
            }
            k += 1;
            Continue(if read.read.get(k - 1).copied().unwrap_or(false) {
                Remove
            } else {
                Keep
            })
        });
    }
    let same = read.originals.len() == frame.detections.len();
    // New objects take the ids after those on the buffer: ids stay unique on it, counting from
    // 0 where octopipe's elements put every object.
    let next = buffer
        .iter_meta::<gst_video::VideoRegionOfInterestMeta>()
        .map(|m| m.id().saturating_add(1))
        .max()
        .unwrap_or(0);
    let (fw, fh) = (
        frame.layout.width.max(1) as f64,
        frame.layout.height.max(1) as f64,
    );
    for (i, det) in frame.detections.iter().enumerate() {
        let original = same.then(|| &read.originals[i]);
        let label = det.label.as_deref().unwrap_or("object");
        let roi_type = original.map_or(label, |o| o.roi_type.as_str());
        let [x, y, w, h] = det.bbox;
        let mut meta = gst_video::VideoRegionOfInterestMeta::add(buffer, roi_type, (x, y, w, h));
        meta.set_id(original.map_or(next.saturating_add(i as i32), |o| o.id));
        meta.set_parent_id(original.map_or(-1, |o| o.parent_id));
        let mut s = gst::Structure::builder(DETECTION)
            .field("x_min", x as f64 / fw)
            .field("y_min", y as f64 / fh)
            .field("x_max", (x + w) as f64 / fw)
            .field("y_max", (y + h) as f64 / fh)
            .field("confidence", det.score as f64);
        if let Some(id) = det.class_id {
            s = s.field("label_id", id as i32);
        }
        if let Some(label) = &det.label {
            s = s.field("label", label.as_ref());
        }
        if det.origin == BoxOrigin::Annotation {
            s = s.field("annotation", true);
        }
        if frame.predicted {
            s = s.field("predicted", true);
        }
        meta.add_param(s.build());
        if let Some(track) = det.track {
            meta.add_param(
                gst::Structure::builder(OBJECT_ID)
                    .field("id", track as i32)
                    .build(),
            );
        }
        let ours = classifier.map(|(name, _)| name);
        for p in original.iter().flat_map(|o| &o.params) {
            let name = p.name().as_str();
            if name != DETECTION && name != OBJECT_ID && Some(name) != ours {
                meta.add_param(p.clone());
            }
        }
        if let (Some((name, model)), Some(c)) = (classifier, &det.classification) {
            let index = i as u32;
            let mut s = gst::Structure::builder(name)
                .field("label", c.best.label.as_ref())
                .field("label_id", c.best.class_id as i32)
                .field("confidence", c.best.score as f64)
                .field("model_name", model);
            if frame.reused.binary_search(&index).is_ok() {
                s = s.field("reused", true);
            }
            meta.add_param(s.build());
        } else if let Some((name, model)) = classifier {
            if frame.non_finite.contains(&(i as u32)) {
                meta.add_param(
                    gst::Structure::builder(name)
                        .field("model_name", model)
                        .field("non_finite", true)
                        .build(),
                );
            }
        }
    }
}
