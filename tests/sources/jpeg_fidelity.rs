//! JPEG frames against libjpeg-turbo's own decoding (what OpenCV's `imread` gives), on the shared
//! VisDrone clip and val-frames: the RGB octopipe samples from GStreamer's I420 at golden points,
//! the resized crops, and the classifier's labels against the reference preprocessing.
//!
//! The golden values are committed (`tests/data/golden/jpeg_rgb.json`, `jpeg_reference.json`) and
//! made by `scripts/make_jpeg_golden.py` with OpenCV and ONNX Runtime; the images stay in the
//! shared data folder (`$OCTOPIPE_DATA`).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use octopipe::batch::CropBatch;
use octopipe::describe;
use octopipe::frame::{BufferPool, Colorimetry, Detection, Frame, PixelFormat};
use octopipe::pipeline::Pipeline;
use octopipe::preprocess::cpu::{frame_to_rgb, CpuBackend};
use octopipe::preprocess::{Backend, ChannelOrder, Layout, PreprocessConfig};
use octopipe::source::{self, SourceConfig, SourceKind};

const FOLDERS: [&str; 2] = ["clip-9999999", "val-frames"];

#[derive(serde::Deserialize)]
struct RgbGolden {
    images: BTreeMap<String, RgbImage>,
}

#[derive(serde::Deserialize)]
struct RgbImage {
    width: u32,
    height: u32,
    x: Vec<u32>,
    y: Vec<u32>,
    /// R, G, B of each point, two hex digits each.
    rgb: String,
}

impl RgbImage {
    fn expected(&self, i: usize) -> [u8; 3] {
        std::array::from_fn(|c| {
            u8::from_str_radix(&self.rgb[6 * i + 2 * c..][..2], 16).expect("hex byte")
        })
    }
}

#[derive(serde::Deserialize)]
struct ReferenceGolden {
    images: BTreeMap<String, ReferenceImage>,
}

#[derive(serde::Deserialize)]
struct ReferenceImage {
    /// `[x, y, w, h, category, class]`, the box clipped to the frame.
    objects: Vec<[u32; 6]>,
    /// `[object, ox, oy, r, g, b]`: the reference's uint8 resized crop at output pixel (ox, oy).
    samples: Vec<[u32; 6]>,
}

fn golden<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = common::root().join("tests/data/golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Decode every image of `data/visdrone/<folder>/images` with the `images` source (GStreamer's
/// jpegdec, as the pipeline does) and hand each frame to `f` with its golden key.
fn each_frame(data: &Path, folder: &str, mut f: impl FnMut(&str, Frame)) -> usize {
    let location = data.join("visdrone").join(folder).join("images");
    let config = SourceConfig::new(SourceKind::Images {
        location: location.display().to_string(),
    });
    let mut src = source::open(&config, BufferPool::new()).expect("images source");
    let mut n = 0;
    while let Some(frame) = src.next_frame().expect("decoded frame") {
        assert_eq!(frame.layout.format, PixelFormat::I420, "{}", frame.source);
        assert_eq!(frame.colorimetry, Colorimetry::JPEG, "{}", frame.source);
        let key = format!("{folder}/{}", frame.source);
        f(&key, frame);
        n += 1;
    }
    n
}

/// Values on the 0..255 scale, RGB, NHWC.
fn raw_config() -> PreprocessConfig {
    PreprocessConfig {
        mean: [0.0; 3],
        std: [1.0; 3],
        scale: 1.0,
        layout: Layout::Nhwc,
        channels: ChannelOrder::Rgb,
        threads: 2,
        ..PreprocessConfig::default()
    }
}

/// Run the CPU backend on `frame` with `boxes`, every crop resized to `ow`x`oh`.
fn crops(frame: Frame, boxes: &[[u32; 4]], ow: u32, oh: u32) -> CropBatch {
    let mut frame = frame;
    frame.detections = boxes.iter().map(|b| Detection::new(*b)).collect();
    let mut batch = CropBatch::default();
    batch.push_frame(frame, ow, oh, 3);
    batch.build_blocks(256, 4);
    CpuBackend::new(raw_config())
        .unwrap()
        .run(&mut batch)
        .unwrap();
    batch
}

/// The RGB octopipe samples from GStreamer's I420 equals cv2.imread's at every golden point:
/// through `frame_to_rgb` (the row converter the crops use) and through 1x1 crops of 3x1 boxes
/// centred on the point (the per-pixel sampler of strongly downscaled crops).
#[test]
fn jpeg_rgb_equals_opencv_at_golden_points() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let golden: RgbGolden = golden("jpeg_rgb.json");
    let (mut points, mut exact_rows, mut exact_taps, mut taps) = (0usize, 0usize, 0usize, 0usize);
    let mut first_miss = Vec::new();
    let mut seen = 0;
    for folder in FOLDERS {
        seen += each_frame(&data, folder, |key, frame| {
            let g = golden
                .images
                .get(key)
                .unwrap_or_else(|| panic!("{key}: not in jpeg_rgb.json"));
            let (w, h) = (frame.layout.width, frame.layout.height);
            assert_eq!((w, h), (g.width, g.height), "{key}");
            let rgb = frame_to_rgb(&frame).expect("host frame");
            let mut boxes = Vec::new();
            for (i, (&x, &y)) in g.x.iter().zip(&g.y).enumerate() {
                let want = g.expected(i);
                let k = (y as usize * w as usize + x as usize) * 3;
                let got = [rgb[k], rgb[k + 1], rgb[k + 2]];
                points += 1;
                if got == want {
                    exact_rows += 1;
                } else if first_miss.len() < 8 {
                    first_miss.push(format!("{key} ({x}, {y}): {got:?}, OpenCV {want:?}"));
                }
                if x >= 1 && x + 1 < w {
                    boxes.push(([x - 1, y, 3, 1], want));
                }
            }
            let b: Vec<[u32; 4]> = boxes.iter().map(|(b, _)| *b).collect();
            let out = crops(frame, &b, 1, 1);
            let values = out.tensor.as_f32().unwrap();
            for (crop, (bx, want)) in out.crops.iter().zip(&boxes) {
                let v = &values[crop.out_offset as usize..][..3];
                taps += 1;
                if v.iter().zip(want).all(|(a, b)| *a == *b as f32) {
                    exact_taps += 1;
                } else if first_miss.len() < 8 {
                    first_miss.push(format!("{key} 3x1 box {bx:?}: {v:?}, OpenCV {want:?}"));
                }
            }
        });
    }
    assert_eq!(seen, golden.images.len(), "every golden image decoded");
    eprintln!(
        "RGB equal to OpenCV's: {exact_rows}/{points} points ({:.3}%) by row, \
         {exact_taps}/{taps} ({:.3}%) by 1x1 crop",
        100.0 * exact_rows as f64 / points as f64,
        100.0 * exact_taps as f64 / taps as f64
    );
    assert!(
        exact_rows == points && exact_taps == taps,
        "RGB differs from libjpeg-turbo's, e.g.:\n{}",
        first_miss.join("\n")
    );
}

/// The resized crops the classifier sees are within 1 level (0..255 scale) of the reference's
/// uint8 `cv2.resize` at the golden sample points (OpenCV's fixed-point resize rounds; octopipe's
/// float resize does not).
#[test]
fn resized_crops_are_within_one_level_of_the_reference() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let golden: ReferenceGolden = golden("jpeg_reference.json");
    let (mut worst, mut n, mut sum, mut over) = (0f32, 0usize, 0f64, Vec::new());
    for folder in FOLDERS {
        each_frame(&data, folder, |key, frame| {
            let g = &golden.images[key];
            let mut picked: Vec<u32> = g.samples.iter().map(|s| s[0]).collect();
            picked.dedup();
            let boxes: Vec<[u32; 4]> = picked
                .iter()
                .map(|&i| {
                    let o = g.objects[i as usize];
                    [o[0], o[1], o[2], o[3]]
                })
                .collect();
            let out = crops(frame, &boxes, 64, 64);
            let values = out.tensor.as_f32().unwrap();
            for s in &g.samples {
                let crop = &out.crops[picked.iter().position(|&i| i == s[0]).unwrap()];
                let p = crop.out_offset as usize + (s[2] as usize * 64 + s[1] as usize) * 3;
                for c in 0..3 {
                    let d = (values[p + c] - s[3 + c] as f32).abs();
                    if d > 1.0 {
                        over.push(format!(
                            "{key} object {} at ({}, {}) channel {c}: {} vs reference {}",
                            s[0],
                            s[1],
                            s[2],
                            values[p + c],
                            s[3 + c]
                        ));
                    }
                    worst = worst.max(d);
                    sum += d as f64;
                    n += 1;
                }
            }
        });
    }
    eprintln!(
        "crop values vs the reference's uint8 resize: {n} values, mean |d| {:.3}, max {worst:.3}, \
         {} over 1",
        sum / n as f64,
        over.len()
    );
    assert!(
        over.is_empty(),
        "{} values more than 1 level from the reference, e.g.:\n{}",
        over.len(),
        over[..over.len().min(8)].join("\n")
    );
}

/// Class id per (source, box) of the pipeline's JSONL, in output order.
fn labels_of(objects: &[serde_json::Value]) -> BTreeMap<(String, [u64; 4]), Vec<u64>> {
    let mut m: BTreeMap<_, Vec<u64>> = BTreeMap::new();
    for o in objects {
        let b = o["bbox"].as_array().unwrap();
        let bbox = std::array::from_fn(|i| b[i].as_f64().unwrap() as u64);
        // The image's file name, the end of the source's file URI.
        let source = o["source"].as_str().unwrap();
        let name = source.rsplit('/').next().unwrap_or(source);
        m.entry((name.to_string(), bbox))
            .or_default()
            .push(o["class_id"].as_u64().unwrap());
    }
    m
}

/// Run `pipelines/visdrone-classify.pipe` over a shared folder: (objects labelled as the
/// reference labels them, as annotated, total).
fn classify_folder(data: &Path, folder: &str, golden: &ReferenceGolden) -> (usize, usize, usize) {
    let out = common::temp_dir(&format!("jpeg-{folder}")).join("objects.jsonl");
    let pipe = "pipelines/visdrone-classify.pipe";
    let text = std::fs::read_to_string(common::root().join(pipe)).unwrap();
    let vars = common::vars(&[
        ("root", &data.join("visdrone").join(folder)),
        ("model", &data.join("models/visdrone-crops-64.onnx")),
        ("out", &out),
    ]);
    let desc = describe::parse(pipe, &text, &vars).unwrap();
    let outcome = Pipeline::build(describe::build(&desc).unwrap())
        .unwrap()
        .run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let objects = common::read_jsonl(&out);
    let ours = labels_of(&objects);
    let mut theirs: BTreeMap<(String, [u64; 4]), Vec<u64>> = BTreeMap::new();
    for (key, img) in golden.images.iter() {
        let Some(name) = key.strip_prefix(&format!("{folder}/")) else {
            continue;
        };
        for o in &img.objects {
            let bbox = [o[0], o[1], o[2], o[3]].map(u64::from);
            theirs
                .entry((name.to_string(), bbox))
                .or_default()
                .push(o[5] as u64);
        }
    }
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "{folder}: the same boxes, clipped the same way"
    );
    let mut same = 0;
    for (key, a) in &ours {
        let b = &theirs[key];
        assert_eq!(a.len(), b.len(), "{key:?}");
        same += a.iter().zip(b).filter(|(x, y)| x == y).count();
    }
    let (annotated, total) = common::accuracy(&objects);
    (same, annotated, total)
}

/// Labels against the reference preprocessing (cv2 + ONNX Runtime): at least 99.5% of the unseen
/// val-frames' objects get the reference's label, and at least 99.1% of the clip's objects are
/// labelled as annotated (the reference: 99.16%).
#[test]
fn labels_agree_with_the_reference_preprocessing() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let golden: ReferenceGolden = golden("jpeg_reference.json");
    let (same, annotated, total) = classify_folder(&data, "val-frames", &golden);
    assert_eq!(total, 861, "the val-frames have 861 classifiable objects");
    let agreement = same as f64 / total as f64;
    eprintln!(
        "val-frames: reference label on {same}/{total} ({:.2}%); as annotated {annotated}/{total}",
        agreement * 100.0
    );
    let (clip_same, clip_right, clip_total) = classify_folder(&data, "clip-9999999", &golden);
    assert_eq!(clip_total, 2012, "the clip has 2,012 classifiable objects");
    let accuracy = clip_right as f64 / clip_total as f64;
    eprintln!(
        "clip: as annotated {clip_right}/{clip_total} ({:.2}%); reference label on {clip_same} ({:.2}%)",
        accuracy * 100.0,
        clip_same as f64 / clip_total as f64 * 100.0
    );
    assert!(
        agreement >= 0.995,
        "val-frames: only {:.2}% of objects get the reference's label",
        agreement * 100.0
    );
    assert!(
        accuracy >= 0.991,
        "clip: only {:.2}% labelled as annotated",
        accuracy * 100.0
    );
}
