//! The `analytics` feature (GStreamer >= 1.24): one `GstAnalyticsRelationMeta` per buffer that
//! says what the ROI metas say, read back as another element would.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_analytics::prelude::*;
use gstreamer_analytics::{
    AnalyticsClassificationMtd, AnalyticsODMtd, AnalyticsRelationMeta, AnalyticsTrackingMtd,
    RelTypes,
};
use gstreamer_video as gst_video;

use super::*;

/// One object as the relation meta or the ROI metas give it: its box, label, confidence, track
/// id (with the track's first-seen time, from the relation meta) and classifiers' answers.
#[derive(Debug, Clone, PartialEq)]
struct Object {
    rect: (i32, i32, i32, i32),
    label: String,
    confidence: f32,
    track: Option<u64>,
    classes: Vec<(String, f32)>,
}

/// What one buffer carried: its pts, how many relation metas, the objects of the ROI metas and
/// those of the relation meta with each track's first-seen time.
type Carried = (
    gst::ClockTime,
    usize,
    Vec<Object>,
    Vec<(Object, Option<gst::ClockTime>)>,
);

/// The objects of the buffer's ROI metas, as the relation meta should give them.
fn of_rois(buffer: &gst::BufferRef) -> Vec<Object> {
    buffer
        .iter_meta::<gst_video::VideoRegionOfInterestMeta>()
        .map(|roi| {
            let det = roi.param("detection").unwrap();
            let (x, y, w, h) = roi.rect();
            Object {
                rect: (x as i32, y as i32, w as i32, h as i32),
                label: det
                    .get::<String>("label")
                    .unwrap_or_else(|_| roi.roi_type().to_string()),
                confidence: det.get::<f64>("confidence").unwrap() as f32,
                track: roi
                    .param("object_id")
                    .map(|s| s.get::<i32>("id").unwrap() as u64),
                classes: roi
                    .param("cls")
                    .map(|s| {
                        vec![(
                            s.get::<String>("label").unwrap(),
                            s.get::<f64>("confidence").unwrap() as f32,
                        )]
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The objects of the buffer's relation meta: each object-detection entry with the tracking and
/// classification entries it relates to.
fn of_relation(buffer: &gst::BufferRef) -> Vec<(Object, Option<gst::ClockTime>)> {
    let Some(meta) = buffer.meta::<AnalyticsRelationMeta>() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for od in meta.iter::<AnalyticsODMtd>() {
        let loc = od.location().unwrap();
        let tracks: Vec<_> = meta
            .iter_direct_related::<AnalyticsTrackingMtd>(od.id(), RelTypes::RELATE_TO)
            .map(|t| t.info())
            .collect();
        assert!(tracks.len() <= 1, "one tracking entry per object");
        let classes = meta
            .iter_direct_related::<AnalyticsClassificationMtd>(od.id(), RelTypes::RELATE_TO)
            .map(|c| {
                assert_eq!(c.len(), 1, "one class per classification entry");
                (c.quark(0).as_str().to_string(), c.level(0))
            })
            .collect();
        out.push((
            Object {
                rect: (loc.x, loc.y, loc.w, loc.h),
                label: od.obj_type().unwrap().as_str().to_string(),
                confidence: loc.loc_conf_lvl,
                track: tracks.first().map(|t| t.0),
                classes,
            },
            tracks.first().map(|t| t.1),
        ));
    }
    out
}

#[test]
fn the_relation_meta_says_what_the_roi_metas_say() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    let launch = format!(
        "videotestsrc num-buffers=6 ! video/x-raw,format=I420,width=640,height=480,framerate=30/1 \
         ! octotrack name=track ! octoclassify name=cls model={model} labels={LABELS} threads=1 \
         ! fakesink name=sink",
        model = data.join("models/visdrone-crops-64.onnx").display(),
    );
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    // The application's boxes: six on every frame, a seventh from the third frame on (its track
    // is first seen later).
    pipeline
        .by_name("track")
        .unwrap()
        .static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &mut info.data {
                let buffer = buffer.make_mut();
                for i in 0..6 {
                    let rect = (20 + 100 * i, 50 + 60 * i, 40, 30);
                    gst_video::VideoRegionOfInterestMeta::add(buffer, "car", rect);
                }
                if buffer.pts().unwrap() >= gst::ClockTime::from_mseconds(60) {
                    gst_video::VideoRegionOfInterestMeta::add(buffer, "van", (300, 40, 50, 40));
                }
            }
            gst::PadProbeReturn::Ok
        });
    let carried: Arc<Mutex<Vec<Carried>>> = Arc::default();
    let into = carried.clone();
    pipeline
        .by_name("sink")
        .unwrap()
        .static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                into.lock().unwrap().push((
                    buffer.pts().unwrap(),
                    buffer.iter_meta::<AnalyticsRelationMeta>().count(),
                    of_rois(buffer),
                    of_relation(buffer),
                ));
            }
            gst::PadProbeReturn::Ok
        });
    run(&pipeline).unwrap();
    let carried = carried.lock().unwrap();
    assert_eq!(carried.len(), 6, "six frames");
    // Each track's first frame, as the ROI metas show it.
    let mut first_met = std::collections::HashMap::new();
    for (pts, metas, rois, relation) in carried.iter() {
        assert_eq!(
            *metas, 1,
            "one relation meta per buffer (each element replaces it)"
        );
        assert!(rois.len() >= 6, "the application's boxes: {}", rois.len());
        for o in rois {
            assert_eq!(o.classes.len(), 1, "octoclassify labelled it: {o:?}");
            if let Some(track) = o.track {
                first_met.entry(track).or_insert(*pts);
            }
        }
        let objects: Vec<Object> = relation.iter().map(|(o, _)| o.clone()).collect();
        assert_eq!(
            &objects, rois,
            "the relation meta's objects are the ROI metas'"
        );
        for (o, first_seen) in relation {
            let expected = o.track.map(|t| first_met[&t]);
            assert_eq!(
                *first_seen, expected,
                "first seen on its first frame: {o:?}"
            );
        }
    }
    assert_eq!(first_met.len(), 7, "seven tracks: {first_met:?}");
    assert!(
        first_met.values().any(|t| *t > gst::ClockTime::ZERO),
        "the seventh box's track starts later: {first_met:?}"
    );
}
