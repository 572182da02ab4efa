//! The `analytics` feature: one `GstAnalyticsRelationMeta` per buffer that says what the ROI
//! metas say, read back as another element would (the application's boxes through `octotrack`
//! and `octoclassify`; `octodetect`'s objects on the clip, with `octotrack`'s tracking entries
//! related to them), and GStreamer's own `objectdetectionoverlay` drawing `octodetect`'s objects
//! from it.
//!
//! They need GStreamer >= 1.24 (libgstanalytics-1.0, analyticsoverlay): `bash scripts/gst126.sh`
//! builds the plugin with the feature against Debian 13's GStreamer 1.26 and runs them there (CI
//! does). Built without the feature (GStreamer 1.22 here) the same tests are ignored with that
//! reason: listed, never counted as passed.

/// The feature's tests where it is not built: ignored with the reason.
#[cfg(not(feature = "analytics"))]
mod relation {
    /// One ignored test per name; run anyway (`--ignored`), it fails.
    macro_rules! needs_analytics {
        ($($name:ident),*) => {$(
            #[test]
            #[ignore = "needs the analytics feature against GStreamer >= 1.24: bash scripts/gst126.sh"]
            fn $name() {
                panic!("built without the analytics feature: bash scripts/gst126.sh runs it");
            }
        )*};
    }
    needs_analytics!(
        the_relation_meta_says_what_the_roi_metas_say,
        octotrack_relates_its_tracks_to_octodetects_objects_on_the_clip,
        objectdetectionoverlay_draws_octodetects_objects
    );
}

#[cfg(feature = "analytics")]
mod relation {
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use gstreamer as gst;
    use gstreamer::prelude::*;
    use gstreamer_analytics::prelude::*;
    use gstreamer_analytics::{
        AnalyticsClassificationMtd, AnalyticsODMtd, AnalyticsRelationMeta, AnalyticsTrackingMtd,
        RelTypes,
    };
    use gstreamer_video as gst_video;
    use gstreamer_video::prelude::*;

    use super::super::*;

    /// A box: x, y, width, height in frame pixels.
    type Rect = (i32, i32, i32, i32);

    /// One object as the relation meta or the ROI metas give it: its box, label, confidence,
    /// track id and classifiers' answers.
    #[derive(Debug, Clone, PartialEq)]
    struct Object {
        rect: Rect,
        label: String,
        confidence: f32,
        track: Option<u64>,
        classes: Vec<(String, f32)>,
    }

    /// What one buffer carried.
    struct Carried {
        pts: gst::ClockTime,
        /// How many relation metas.
        metas: usize,
        /// The objects of the ROI metas.
        rois: Vec<Object>,
        /// The objects of the relation meta, each with its track's first-seen time.
        relation: Vec<(Object, Option<gst::ClockTime>)>,
        /// How many tracking entries the relation meta holds, related to an object or not.
        tracking: usize,
    }

    impl Carried {
        fn of(buffer: &gst::BufferRef) -> Self {
            Carried {
                pts: buffer.pts().unwrap(),
                metas: buffer.iter_meta::<AnalyticsRelationMeta>().count(),
                rois: of_rois(buffer),
                relation: of_relation(buffer),
                tracking: buffer
                    .meta::<AnalyticsRelationMeta>()
                    .map_or(0, |m| m.iter::<AnalyticsTrackingMtd>().count()),
            }
        }
    }

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

    /// The objects of the buffer's relation meta: each object-detection entry with the tracking
    /// and classification entries it relates to.
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

    fn launch(text: &str) -> gst::Pipeline {
        gst::parse::launch(text)
            .unwrap()
            .downcast::<gst::Pipeline>()
            .unwrap()
    }

    /// What each buffer carries as it leaves `element` (its src pad).
    fn carried_from(pipeline: &gst::Pipeline, element: &str) -> Arc<Mutex<Vec<Carried>>> {
        let carried: Arc<Mutex<Vec<Carried>>> = Arc::default();
        let into = carried.clone();
        pipeline
            .by_name(element)
            .unwrap()
            .static_pad("src")
            .unwrap()
            .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
                if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                    into.lock().unwrap().push(Carried::of(buffer));
                }
                gst::PadProbeReturn::Ok
            });
        carried
    }

    /// Checks each buffer's one relation meta against its ROI metas (the same objects in the
    /// same order; every tracking entry related to its object; a track first seen on the frame
    /// it was first met). Gives each track's first frame.
    fn check_relation(carried: &[Carried]) -> HashMap<u64, gst::ClockTime> {
        let mut first_met = HashMap::new();
        for c in carried {
            assert_eq!(
                c.metas, 1,
                "one relation meta per buffer (each element replaces it)"
            );
            for o in &c.rois {
                if let Some(track) = o.track {
                    first_met.entry(track).or_insert(c.pts);
                }
            }
            let objects: Vec<Object> = c.relation.iter().map(|(o, _)| o.clone()).collect();
            assert_eq!(
                objects, c.rois,
                "the relation meta's objects are the ROI metas'"
            );
            let tracked = c.rois.iter().filter(|o| o.track.is_some()).count();
            assert_eq!(
                c.tracking, tracked,
                "a tracking entry for each tracked object, related to it"
            );
            for (o, first_seen) in &c.relation {
                let expected = o.track.map(|t| first_met[&t]);
                assert_eq!(
                    *first_seen, expected,
                    "first seen on its first frame: {o:?}"
                );
            }
        }
        first_met
    }

    #[test]
    fn the_relation_meta_says_what_the_roi_metas_say() {
        let _serial = serial();
        let Some(data) = data_and_ort() else { return };
        init();
        let pipeline = launch(&format!(
            "videotestsrc num-buffers=6 ! video/x-raw,format=I420,width=640,height=480,framerate=30/1 \
             ! octotrack name=track ! octoclassify name=cls model={model} labels={LABELS} threads=1 \
             ! fakesink",
            model = data.join("models/visdrone-crops-64.onnx").display(),
        ));
        // The application's boxes: six on every frame, a seventh from the third frame on (its
        // track is first seen later).
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
        let carried = carried_from(&pipeline, "cls");
        run(&pipeline).unwrap();
        let carried = carried.lock().unwrap();
        assert_eq!(carried.len(), 6, "six frames");
        for c in carried.iter() {
            assert!(
                c.rois.len() >= 6,
                "the application's boxes: {}",
                c.rois.len()
            );
            for o in &c.rois {
                assert_eq!(o.classes.len(), 1, "octoclassify labelled it: {o:?}");
            }
        }
        let first_met = check_relation(&carried);
        assert_eq!(first_met.len(), 7, "seven tracks: {first_met:?}");
        assert!(
            first_met.values().any(|t| *t > gst::ClockTime::ZERO),
            "the seventh box's track starts later: {first_met:?}"
        );
    }

    /// The clip's first `n` frames (`frames/%05d.jpg`, [`numbered_clip`]) as RGB through
    /// `octodetect` (as the clip tests run it) and then `after`.
    fn detected(data: &Path, frames: &Path, n: usize, after: &str) -> String {
        format!(
            "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
             ! jpegdec idct-method=islow ! videoconvert ! video/x-raw,format=RGB \
             ! octodetect model={} labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 \
             ! {after}",
            frames.display(),
            n - 1,
            data.join("models/coco-centernet-512.onnx").display(),
        )
    }

    #[test]
    fn octotrack_relates_its_tracks_to_octodetects_objects_on_the_clip() {
        let _serial = serial();
        let Some(data) = data_and_ort() else { return };
        init();
        let frames = tmp("analytics-track");
        numbered_clip(&data, &frames);
        let n = 6;
        let pipeline = launch(&detected(
            &data,
            &frames,
            n,
            "octotrack name=track ! fakesink",
        ));
        let carried = carried_from(&pipeline, "track");
        run(&pipeline).unwrap();
        let carried = carried.lock().unwrap();
        assert_eq!(carried.len(), n, "frames");
        for c in carried.iter() {
            assert!(
                c.rois.len() >= 10,
                "octodetect's objects on the clip: {}",
                c.rois.len()
            );
            assert!(
                c.rois
                    .iter()
                    .all(|o| !o.label.is_empty() && o.confidence >= 0.3 && o.classes.is_empty()),
                "labelled detections above score=0.3, no classes: {:?}",
                c.rois
            );
        }
        let first_met = check_relation(&carried);
        let tracked: usize = carried.iter().map(|c| c.tracking).sum();
        eprintln!(
            "objects {:?}, tracking entries {tracked}, tracks {}",
            carried.iter().map(|c| c.rois.len()).collect::<Vec<_>>(),
            first_met.len()
        );
        // The clip's frames are far apart (few tracks go on), yet some do: their entries carry
        // an earlier frame's time as first seen.
        let going_on = carried
            .iter()
            .flat_map(|c| c.relation.iter().map(move |(_, first)| (c.pts, *first)))
            .filter(|(pts, first)| first.is_some_and(|f| f < *pts))
            .count();
        assert!(
            tracked >= 20 && going_on >= 3,
            "tracking entries: {tracked}, {going_on} of tracks first seen on an earlier frame"
        );
        let _ = std::fs::remove_dir_all(&frames);
    }

    /// One RGB frame, rows without padding.
    struct Rgb {
        width: usize,
        height: usize,
        pixels: Vec<u8>,
    }

    impl Rgb {
        fn of(pad: &gst::Pad, buffer: &gst::BufferRef) -> Self {
            let info = gst_video::VideoInfo::from_caps(&pad.current_caps().unwrap()).unwrap();
            assert_eq!(info.format(), gst_video::VideoFormat::Rgb);
            let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info).unwrap();
            let (width, height) = (info.width() as usize, info.height() as usize);
            let stride = frame.plane_stride()[0] as usize;
            let data = frame.plane_data(0).unwrap();
            let pixels = (0..height)
                .flat_map(|y| &data[y * stride..y * stride + 3 * width])
                .copied()
                .collect();
            Rgb {
                width,
                height,
                pixels,
            }
        }

        fn at(&self, x: usize, y: usize) -> &[u8] {
            let i = 3 * (y * self.width + x);
            &self.pixels[i..i + 3]
        }
    }

    /// How far from a box's outline a pixel the overlay changed may lie (its line, antialiased).
    const NEAR: usize = 4;

    /// The frames entering and leaving `objectdetectionoverlay` checked against the boxes it
    /// read from the relation meta: each box's outline changed (nearly every point along its
    /// four edges has a changed pixel within two pixels across), and every changed pixel within
    /// [`NEAR`] of some box's outline. Gives (edge points drawn, of, changed pixels).
    fn check_outlines(before: &Rgb, after: &Rgb, boxes: &[Rect]) -> [usize; 3] {
        assert_eq!((before.width, before.height), (after.width, after.height));
        let (w, h) = (after.width, after.height);
        let changed = |x: usize, y: usize| {
            before
                .at(x, y)
                .iter()
                .zip(after.at(x, y))
                .any(|(a, b)| a.abs_diff(*b) > 8)
        };
        // Where the boxes' outlines, widened by NEAR, lie.
        let mut near = vec![false; w * h];
        let clamp = |v: i64, max: usize| v.clamp(0, max as i64 - 1) as usize;
        let mut band = |x0: i64, y0: i64, x1: i64, y1: i64| {
            let n = NEAR as i64;
            for y in clamp(y0 - n, h)..=clamp(y1 + n, h) {
                for x in clamp(x0 - n, w)..=clamp(x1 + n, w) {
                    near[y * w + x] = true;
                }
            }
        };
        for &(x, y, bw, bh) in boxes {
            let (x0, y0, x1, y1) = (
                i64::from(x),
                i64::from(y),
                i64::from(x + bw),
                i64::from(y + bh),
            );
            band(x0, y0, x1, y0);
            band(x0, y1, x1, y1);
            band(x0, y0, x0, y1);
            band(x1, y0, x1, y1);
        }
        let (mut points, mut drawn) = (0, 0);
        for &(x, y, bw, bh) in boxes.iter().filter(|b| b.2 >= 16 && b.3 >= 16) {
            let (x, y, bw, bh) = (x as usize, y as usize, bw as usize, bh as usize);
            // Points along each edge, clear of the corners, with a changed pixel close across it.
            for t in 1..4 {
                let (ex, ey) = ((x + t * bw / 4).min(w - 1), (y + t * bh / 4).min(h - 1));
                let across_y = |yy: usize| yy.saturating_sub(2)..=(yy + 2).min(h - 1);
                let across_x = |xx: usize| xx.saturating_sub(2)..=(xx + 2).min(w - 1);
                let edges = [
                    across_y(y).any(|yy| changed(ex, yy)),
                    across_y((y + bh).min(h - 1)).any(|yy| changed(ex, yy)),
                    across_x(x).any(|xx| changed(xx, ey)),
                    across_x((x + bw).min(w - 1)).any(|xx| changed(xx, ey)),
                ];
                points += edges.len();
                drawn += edges.iter().filter(|d| **d).count();
            }
        }
        let (mut changed_all, mut far) = (0, 0);
        for y in 0..h {
            for x in 0..w {
                if changed(x, y) {
                    changed_all += 1;
                    far += usize::from(!near[y * w + x]);
                }
            }
        }
        eprintln!(
            "edge points drawn: {drawn} of {points}; changed pixels: {changed_all}, {far} of them \
             farther than {NEAR} px from every outline"
        );
        assert!(points >= 40, "enough boxes to check: {points} edge points");
        assert!(
            drawn * 100 >= points * 95,
            "{drawn} of {points} edge points drawn"
        );
        assert_eq!(far, 0, "changed pixels away from every box's outline");
        [drawn, points, changed_all]
    }

    #[test]
    fn objectdetectionoverlay_draws_octodetects_objects() {
        let _serial = serial();
        let Some(data) = data_and_ort() else { return };
        init();
        if lacks_element(
            "objectdetectionoverlay",
            "GStreamer >= 1.24, gstreamer1.0-plugins-bad",
        ) {
            return;
        }
        let frames = tmp("analytics-overlay");
        numbered_clip(&data, &frames);
        let n = 2;
        // Outlines only (no captions, which lie off the boxes), in opaque magenta (ARGB).
        let pipeline = launch(&detected(
            &data,
            &frames,
            n,
            "objectdetectionoverlay name=overlay draw-labels=false \
             object-detection-outline-color=0xffff00ff ! video/x-raw,format=RGB ! fakesink",
        ));
        let overlay = pipeline.by_name("overlay").unwrap();
        type Seen = Arc<Mutex<Vec<Rgb>>>;
        let (before, after): (Seen, Seen) = Default::default();
        let boxes: Arc<Mutex<Vec<Vec<Rect>>>> = Arc::default();
        let into = before.clone();
        overlay.static_pad("sink").unwrap().add_probe(
            gst::PadProbeType::BUFFER,
            move |pad, info| {
                if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                    into.lock().unwrap().push(Rgb::of(pad, buffer));
                }
                gst::PadProbeReturn::Ok
            },
        );
        let (into, boxes_into) = (after.clone(), boxes.clone());
        overlay.static_pad("src").unwrap().add_probe(
            gst::PadProbeType::BUFFER,
            move |pad, info| {
                if let Some(gst::PadProbeData::Buffer(buffer)) = &info.data {
                    into.lock().unwrap().push(Rgb::of(pad, buffer));
                    let rois = of_rois(buffer);
                    let relation: Vec<Object> =
                        of_relation(buffer).into_iter().map(|(o, _)| o).collect();
                    assert_eq!(relation, rois, "the relation meta the overlay read");
                    boxes_into
                        .lock()
                        .unwrap()
                        .push(rois.iter().map(|o| o.rect).collect());
                }
                gst::PadProbeReturn::Ok
            },
        );
        run(&pipeline).unwrap();
        let (before, after, boxes) = (
            before.lock().unwrap(),
            after.lock().unwrap(),
            boxes.lock().unwrap(),
        );
        assert_eq!((before.len(), after.len()), (n, n), "frames");
        for k in 0..n {
            assert!(boxes[k].len() >= 10, "objects: {}", boxes[k].len());
            let [drawn, _, changed] = check_outlines(&before[k], &after[k], &boxes[k]);
            assert!(
                changed > drawn,
                "lines, not points: {changed} pixels changed"
            );
        }
        let _ = std::fs::remove_dir_all(&frames);
    }
}
