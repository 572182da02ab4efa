//! `octooverlay` draws each object where the ROI metas (and so the JSON lines) say: the box's
//! edges in its class's colour, the inside untouched; in every system-memory format, and
//! through an H.264 recording decoded back.

use gstreamer as gst;
use gstreamer::prelude::*;

use super::clip::first_images;
use super::*;

/// `octopipe run --annotate`'s box colours by class id (octopipe-observe's palette).
const PALETTE: [[u8; 3]; 6] = [
    [255, 0, 255],
    [0, 255, 255],
    [0, 255, 0],
    [255, 140, 0],
    [255, 255, 0],
    [160, 110, 255],
];

/// The line width the tests draw with.
const LINE: u32 = 4;

/// The RGB frames `launch` (ending in `appsink name=sink`, RGB caps) gives, with their width.
fn rgb_frames(launch: &str) -> Vec<(u32, Vec<u8>)> {
    let pipeline = gst::parse::launch(launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    sink_samples(&pipeline, launch, |sample| {
        let caps = sample.caps().unwrap();
        let width = caps.structure(0).unwrap().get::<i32>("width").unwrap() as u32;
        let map = sample.buffer().unwrap().map_readable().unwrap();
        (width, map.to_vec())
    })
}

/// The colour `octooverlay` draws `o` in: its class's (the classifier's, else the box
/// source's).
fn colour(o: &serde_json::Value) -> [u8; 3] {
    let class = o["class_id"]
        .as_u64()
        .or(o["detection"]["class_id"].as_u64())
        .or(o["annotation"]["category_id"].as_u64())
        .unwrap_or(u64::from(u32::MAX));
    PALETTE[(class % PALETTE.len() as u64) as usize]
}

/// `o`'s box.
fn bbox(o: &serde_json::Value) -> [u32; 4] {
    let b: Vec<u32> = o["bbox"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    [b[0], b[1], b[2], b[3]]
}

/// Where drawing `o` may touch: its box with the line around it, and its caption above it (at
/// most 200 pixels wide and 24 high here).
fn drawn_area(o: &serde_json::Value) -> [i64; 4] {
    let [x, y, w, h] = bbox(o).map(i64::from);
    [x - 8, y - 24, x + w.max(200) + 8, y + h + 8]
}

/// The objects no other object of their frame is drawn over (crowded frames have boxes and
/// captions over one another).
fn isolated(objects: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    let overlaps =
        |a: [i64; 4], b: [i64; 4]| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    objects
        .iter()
        .enumerate()
        .filter(|(i, o)| {
            !objects.iter().enumerate().any(|(k, other)| {
                k != *i
                    && other["frame"] == o["frame"]
                    && overlaps(drawn_area(o), drawn_area(other))
            })
        })
        .map(|(_, o)| o)
        .collect()
}

/// Checks the drawn frames against the plain ones where the objects of the JSON lines are
/// (those no other object is drawn over): points along each box's left and bottom edges have
/// its colour, and its centre the plain frame's pixel. Gives the edge points checked.
fn check_drawn(
    drawn: &[(u32, Vec<u8>)],
    plain: &[(u32, Vec<u8>)],
    objects: &[serde_json::Value],
    tolerance: u8,
) -> usize {
    assert_eq!(drawn.len(), plain.len(), "frames");
    let (mut edges, mut edges_ok, mut inside, mut inside_ok) = (0, 0, 0, 0);
    let near = |a: &[u8], b: &[u8]| a.iter().zip(b).all(|(a, b)| a.abs_diff(*b) <= tolerance);
    for o in isolated(objects) {
        let k = o["frame"].as_u64().unwrap() as usize;
        let ((width, d), (_, p)) = (&drawn[k], &plain[k]);
        let px = |img: &Vec<u8>, x: u32, y: u32| {
            let i = 3 * (y * width + x) as usize;
            img[i..i + 3].to_vec()
        };
        let [x, y, w, h] = bbox(o);
        if w < 4 * LINE || h < 4 * LINE {
            continue;
        }
        let c = colour(o);
        // Inside the line, clear of its ends (corners meet other lines and chroma blocks).
        for t in 1..4 {
            for (ex, ey) in [(x + 1, y + t * h / 4), (x + t * w / 4, y + h - 2)] {
                edges += 1;
                edges_ok += usize::from(near(&px(d, ex, ey), &c));
            }
        }
        inside += 1;
        let (cx, cy) = (x + w / 2, y + h / 2);
        inside_ok += usize::from(near(&px(d, cx, cy), &px(p, cx, cy)));
    }
    eprintln!(
        "edges in their colour: {edges_ok} of {edges}; centres untouched: {inside_ok} of {inside}"
    );
    assert!(edges >= 36, "enough boxes to check: {edges} points");
    assert!(
        edges_ok * 100 >= edges * 98,
        "{edges_ok} of {edges} edge points in their colour"
    );
    assert!(
        inside_ok * 100 >= inside * 95,
        "{inside_ok} of {inside} centres untouched"
    );
    edges
}

/// The clip's first `n` frames as RGB, decoded as the tests' pipelines decode them.
fn plain_frames(dir: &Path, n: usize) -> Vec<(u32, Vec<u8>)> {
    rgb_frames(&format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
         ! jpegdec idct-method=islow ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false",
        dir.join("frames").display(),
        n - 1
    ))
}

#[test]
fn octooverlay_draws_the_boxes_where_the_jsonl_says_in_the_recorded_mp4() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    init();
    if lacks_element("x264enc", "apt-get install gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = tmp("overlay-mp4");
    let n = 3;
    first_images(&data, &dir, n);
    let (jsonl, mp4) = (dir.join("objects.jsonl"), dir.join("drawn.mp4"));
    // Detected, tracked, drawn on jpegdec's I420 in place, recorded nearly losslessly.
    run(&gst::parse::launch(&format!(
        "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
         ! jpegdec idct-method=islow \
         ! octodetect model={} labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 \
         ! octotrack ! octooverlay line-width={LINE} ! octojsonl location={} \
         ! x264enc tune=zerolatency pass=quant quantizer=8 ! mp4mux ! filesink location={}",
        dir.join("frames").display(),
        n - 1,
        data.join("models/coco-centernet-512.onnx").display(),
        jsonl.display(),
        mp4.display()
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap())
    .unwrap();
    let objects = objects(&jsonl);
    assert!(
        objects.iter().any(|o| o["track"].is_u64()),
        "tracked objects"
    );
    let drawn = rgb_frames(&format!(
        "filesrc location={} ! qtdemux ! h264parse ! avdec_h264 ! videoconvert \
         ! video/x-raw,format=RGB ! appsink name=sink sync=false",
        mp4.display()
    ));
    check_drawn(&drawn, &plain_frames(&dir, n), &objects, 48);
}

#[test]
fn octooverlay_draws_in_place_in_every_system_memory_format() {
    let _serial = serial();
    let Some(data) = data() else { return };
    init();
    let dir = tmp("overlay-formats");
    let n = 4;
    first_images(&data, &dir, n);
    let plain = plain_frames(&dir, n);
    for format in ["I420", "NV12", "RGB", "BGR", "RGBA", "BGRA", "RGBx", "BGRx"] {
        let jsonl = dir.join(format!("{format}.jsonl"));
        let drawn = rgb_frames(&format!(
            "multifilesrc location={}/%05d.jpg index=0 stop-index={} caps=image/jpeg,framerate=30/1 \
             ! jpegdec idct-method=islow ! videoconvert ! video/x-raw,format={format} \
             ! octoboxes format=det location={} ! octooverlay line-width={LINE} \
             ! octojsonl location={} ! videoconvert ! video/x-raw,format=RGB \
             ! appsink name=sink sync=false",
            dir.join("frames").display(),
            n - 1,
            data.join("visdrone/clip-9999999/annotations").display(),
            jsonl.display()
        ));
        eprintln!("{format}:");
        // The RGB formats exactly; YUV through subsampled chroma and two conversions.
        let tolerance = if format.starts_with(['I', 'N']) {
            48
        } else {
            8
        };
        check_drawn(&drawn, &plain, &objects(&jsonl), tolerance);
    }
}
