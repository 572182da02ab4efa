//! The objects as a `GstAnalyticsRelationMeta` too (the `analytics` feature, GStreamer >= 1.24),
//! beside the ROI metas, which stay the contract ([`super::meta`]).
//!
//! One relation meta per buffer mirrors every ROI meta on it, in their order: per ROI an
//! object-detection entry (its ROI rectangle in frame pixels, the `detection` structure's
//! `confidence` (1 without one) and its `label`, or the ROI type, as the class quark); a
//! tracking entry where it has an `object_id` (the track id, first seen at the presentation time
//! the element first met the track); one classification entry per classifier structure (its
//! `confidence` and `label`). The tracking and classification entries are related to their
//! object-detection entry with `RELATE_TO` (od -> entry), as GStreamer's and DL Streamer's
//! elements do. Each element that writes the ROI metas replaces the buffer's relation meta.

use std::collections::HashMap;

use gstreamer as gst;
use gstreamer::glib;
use gstreamer_analytics::prelude::*;
use gstreamer_analytics::{AnalyticsRelationMeta, RelTypes};
use gstreamer_video as gst_video;

use super::meta::{int, is_classification, DETECTION, OBJECT_ID};

/// How many tracks [`FirstSeen`] keeps before it forgets those gone a while.
const KEEP: usize = 4096;
/// How long (in presentation time) a track may be gone before [`FirstSeen`] may forget it.
const GONE: gst::ClockTime = gst::ClockTime::from_seconds(60);

/// When an element first and last met each track (presentation times): the tracking entries'
/// first-seen time.
#[derive(Debug, Default)]
pub(crate) struct FirstSeen {
    tracks: HashMap<u32, (gst::ClockTime, gst::ClockTime)>,
}

impl FirstSeen {
    /// The first-seen time of `track`, met now at `pts`.
    fn of(&mut self, track: u32, pts: gst::ClockTime) -> gst::ClockTime {
        let (first, last) = self.tracks.entry(track).or_insert((pts, pts));
        // A seek back may show a track earlier than first met.
        *first = (*first).min(pts);
        *last = pts;
        *first
    }

    /// Forget the tracks gone a while, once there are many.
    fn forget_gone(&mut self, pts: gst::ClockTime) {
        if self.tracks.len() > KEEP {
            self.tracks
                .retain(|_, (_, last)| pts.saturating_sub(*last) < GONE);
        }
    }
}

/// One ROI meta, as its relation-meta entries give it.
struct Object {
    label: glib::Quark,
    rect: (i32, i32, i32, i32),
    confidence: f32,
    track: Option<u32>,
    /// Each classifier's answer: its confidence and label.
    classes: Vec<(f32, glib::Quark)>,
}

impl Object {
    fn of(meta: &gst_video::VideoRegionOfInterestMeta) -> Self {
        let det = meta.param(DETECTION);
        let label = det
            .and_then(|s| s.get::<&str>("label").ok())
            .unwrap_or_else(|| meta.roi_type());
        let (x, y, w, h) = meta.rect();
        let px = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        Object {
            label: glib::Quark::from_str(label),
            rect: (px(x), px(y), px(w), px(h)),
            confidence: det
                .and_then(|s| s.get::<f64>("confidence").ok())
                .map_or(1.0, |v| v as f32),
            track: meta
                .param(OBJECT_ID)
                .and_then(|s| int(s, "id"))
                .and_then(|v| u32::try_from(v).ok()),
            classes: meta
                .params()
                .filter(|s| is_classification(s))
                .filter_map(|s| {
                    let label = s.get::<&str>("label").ok()?;
                    let confidence = s.get::<f64>("confidence").map_or(0.0, |v| v as f32);
                    Some((confidence, glib::Quark::from_str(label)))
                })
                .collect(),
        }
    }
}

/// Replace the buffer's relation meta with one mirroring its ROI metas (the module's contract);
/// `first_seen` is the element's record of its tracks.
pub(crate) fn write(
    buffer: &mut gst::BufferRef,
    first_seen: &mut FirstSeen,
) -> Result<(), glib::BoolError> {
    let pts = buffer.pts().unwrap_or(gst::ClockTime::ZERO);
    let objects: Vec<Object> = buffer
        .iter_meta::<gst_video::VideoRegionOfInterestMeta>()
        .map(|m| Object::of(&m))
        .collect();
    buffer.foreach_meta_mut(|mut meta| {
        use gst::buffer::BufferMetaForeachAction::{Keep, Remove};
        std::ops::ControlFlow::Continue(
            match meta.downcast_ref::<AnalyticsRelationMeta>().is_some() {
                true => Remove,
                false => Keep,
            },
        )
    });
    let mut relation = AnalyticsRelationMeta::add(buffer);
    for o in &objects {
        let (x, y, w, h) = o.rect;
        let od = relation.add_od_mtd(o.label, x, y, w, h, o.confidence)?.id();
        if let Some(track) = o.track {
            let first = first_seen.of(track, pts);
            let tracking = relation.add_tracking_mtd(u64::from(track), first)?.id();
            relation.set_relation(RelTypes::RELATE_TO, od, tracking)?;
        }
        for &(confidence, label) in &o.classes {
            let cls = relation.add_one_cls_mtd(confidence, label)?.id();
            relation.set_relation(RelTypes::RELATE_TO, od, cls)?;
        }
    }
    first_seen.forget_gone(pts);
    Ok(())
}
