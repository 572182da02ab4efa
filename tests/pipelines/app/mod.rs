//! The `app` source: frames the application decodes itself and pushes, with its own boxes, through
//! the library API. Real components throughout: the shared clip decoded by the `image` crate, its
//! DET annotations read by a small parser here, the real classifier through ONNX Runtime.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use octopipe::batch::CropBatch;
use octopipe::oneshot::{Classifier, Preprocessor};
use octopipe::preprocess::PreprocessConfig;
use octopipe::{
    describe, AppBox, AppFrame, FrameLayout, Object, Outcome, Pipeline, PixelFormat, PushError,
};

mod pushes;

const LABELS: [&str; 4] = ["person", "two-wheeler", "car", "large-vehicle"];

/// VisDrone's category names, by category number.
const CATEGORIES: [&str; 12] = octopipe::boxes::VISDRONE_CATEGORIES;

/// One pipeline at a time: each starts several threads on a 2-core machine, and the
/// back-pressure and live tests depend on which side is the slower one.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::serial()
}

/// A clip frame decoded by the application: RGB, tightly packed, with its classifiable boxes.
struct ClipFrame {
    name: String,
    width: u32,
    height: u32,
    rgb: Vec<u8>,
    boxes: Vec<AppBox>,
}

impl ClipFrame {
    /// The frame to push as frame `index` of the clip (pts = index / 30 s).
    fn app_frame(&self, index: usize) -> AppFrame {
        AppFrame::packed(PixelFormat::Rgb, self.width, self.height, self.rgb.clone())
            .pts(Duration::from_secs_f64(index as f64 / 30.0))
            .name(self.name.clone())
            .boxes(self.boxes.clone())
    }
}

/// The classifiable boxes of a DET file: ignored regions (score 0 or category 0) and category 11
/// left out, as the `boxes format=det` stage does; class id = category, label = its name.
fn read_det(path: &Path) -> Vec<AppBox> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let v: Vec<i64> = line
                .trim_end_matches(',')
                .split(',')
                .map(|f| {
                    f.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("bad line {line:?}"))
                })
                .collect();
            let (score, category) = (v[4], v[5] as usize);
            (score != 0 && category != 0 && category != 11).then(|| {
                AppBox::new(v[0] as f64, v[1] as f64, v[2] as f64, v[3] as f64)
                    .class(category as u32)
                    .label(CATEGORIES[category])
            })
        })
        .collect()
}

/// The shared data folder and the clip decoded once for all tests (`None`: skipped, said why).
fn clip() -> Option<(PathBuf, &'static [ClipFrame])> {
    static CLIP: OnceLock<Vec<ClipFrame>> = OnceLock::new();
    let data = common::shared_data()?;
    let root = data.join("visdrone/clip-9999999");
    let frames = CLIP.get_or_init(|| {
        let mut images = common::sorted_files(&root.join("images"));
        images.retain(|p| p.extension().is_some_and(|e| e == "jpg"));
        images
            .iter()
            .map(|path| {
                let rgb = image::open(path).unwrap().to_rgb8();
                let (width, height) = rgb.dimensions();
                let stem = path.file_stem().unwrap();
                ClipFrame {
                    name: path.file_name().unwrap().to_string_lossy().into_owned(),
                    width,
                    height,
                    rgb: rgb.into_raw(),
                    boxes: read_det(&root.join("annotations").join(stem).with_extension("txt")),
                }
            })
            .collect()
    });
    assert_eq!(frames.len(), 34, "the clip has 34 frames");
    Some((data, frames))
}

/// The clip, the model, and ONNX Runtime loaded (`None`: skipped, said why).
fn clip_and_model() -> Option<(&'static [ClipFrame], PathBuf)> {
    let (data, frames) = clip()?;
    common::ort_ready().then(|| (frames, data.join("models/visdrone-crops-64.onnx")))
}

fn model_vars(model: &Path) -> HashMap<String, String> {
    HashMap::from([("model".to_string(), model.display().to_string())])
}

/// Run `pipeline`, pushing `frames` into its source `name` from this thread while another thread
/// reads the objects; close, and return them with the outcome.
fn run_pushing(
    mut pipeline: Pipeline,
    name: &str,
    frames: impl IntoIterator<Item = AppFrame>,
) -> (Vec<Object>, Outcome) {
    let source = pipeline.app_source(Some(name)).expect("the app source");
    let objects = pipeline.results(256);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || objects.into_iter().collect::<Vec<_>>());
    for frame in frames {
        source.push(frame).unwrap();
    }
    source.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    (reader.join().unwrap(), outcome)
}

/// The clip through `app ! classify ! appsink`.
fn classify_clip(frames: &[ClipFrame], model: &Path) -> (Vec<Object>, Outcome) {
    let pipeline = Pipeline::from_description(
        "app name=cam framerate=30 \
         ! classify model=${model} labels=person,two-wheeler,car,large-vehicle ! appsink",
        &model_vars(model),
    )
    .unwrap();
    run_pushing(
        pipeline,
        "cam",
        frames.iter().enumerate().map(|(i, f)| f.app_frame(i)),
    )
}

/// The classifier's class of a VisDrone category.
fn class_of(category: Option<u32>) -> Option<u32> {
    common::class_of(category? as u64).map(|c| c as u32)
}

/// Labels of an object list: (source, bbox, category) -> class ids, in order.
type Labels = BTreeMap<(String, [u64; 4], u64), Vec<u64>>;

/// The file name at the end of a source URI (`file:///x/a.jpg`, `octopipe:a.jpg`: `a.jpg`).
fn file_name(uri: &str) -> String {
    uri.rsplit(['/', ':']).next().unwrap_or(uri).to_string()
}

fn labels_of_objects(objects: &[Object]) -> Labels {
    let mut m = Labels::new();
    for o in objects {
        let bbox = o.bbox.map(u64::from);
        let class = o.detection.as_ref().and_then(|d| d.class_id).unwrap();
        let key = (file_name(&o.source), bbox, u64::from(class));
        m.entry(key)
            .or_default()
            .push(u64::from(o.class_id.unwrap()));
    }
    m
}

fn labels_of_jsonl(objects: &[serde_json::Value]) -> Labels {
    let mut m = Labels::new();
    for o in objects {
        let b: Vec<u64> = o["bbox"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let key = (
            file_name(o["source"].as_str().unwrap()),
            [b[0], b[1], b[2], b[3]],
            o["annotation"]["category_id"].as_u64().unwrap(),
        );
        m.entry(key)
            .or_default()
            .push(o["class_id"].as_u64().unwrap());
    }
    m
}

#[test]
fn clip_pushed_by_the_application_is_labelled_like_the_reference_pipeline() {
    let _serial = serial();
    let Some((frames, model)) = clip_and_model() else {
        return;
    };
    let (objects, outcome) = classify_clip(frames, &model);
    let r = &outcome.report;
    eprintln!("{r}");
    assert_eq!(
        (r.frames_in, r.processed, r.dropped_total()),
        (34, 34, 0),
        "{r}"
    );
    assert_eq!(
        r.objects, 2012,
        "the clip has 2,012 classifiable objects\n{r}"
    );
    assert_eq!(objects.len(), 2012);
    let first = &objects[0];
    assert_eq!(&*first.source, "octopipe:9999999_00023_d_0000001.jpg");
    assert_eq!((first.stream, first.frame, first.pts_ms), (0, 0, Some(0.0)));
    assert!(first
        .detection
        .as_ref()
        .is_some_and(|d| d.label.as_deref().is_some_and(|l| CATEGORIES.contains(&l))));
    let last = objects.last().unwrap();
    assert_eq!(last.frame, 33);
    assert!(
        (last.pts_ms.unwrap() - 1100.0).abs() < 1e-6,
        "{:?}",
        last.pts_ms
    );

    let right = objects
        .iter()
        .filter(|o| class_of(o.detection.as_ref().and_then(|d| d.class_id)) == o.class_id)
        .count();
    let share = right as f64 / objects.len() as f64;
    eprintln!(
        "app source (image crate decoding): {right}/{} labelled as annotated ({:.2}%)",
        objects.len(),
        share * 100.0
    );
    assert!(
        share >= 0.98,
        "only {:.2}% labelled as annotated",
        share * 100.0
    );

    // The reference: pipelines/visdrone-classify.pipe (GStreamer's jpegdec, I420, the
    // pipeline's YUV to RGB) on the same clip.
    let out = common::temp_dir("app-reference").join("objects.jsonl");
    let pipe = "pipelines/visdrone-classify.pipe";
    let text = std::fs::read_to_string(common::root().join(pipe)).unwrap();
    let (data, _) = clip().unwrap();
    let vars = common::vars(&[
        ("root", &data.join("visdrone/clip-9999999")),
        ("model", &model),
        ("out", &out),
    ]);
    let desc = describe::parse(pipe, &text, &vars).unwrap();
    let reference = Pipeline::build(describe::build(&desc).unwrap())
        .unwrap()
        .run();
    assert!(reference.error.is_none(), "{:?}", reference.error);
    let reference = common::read_jsonl(&out);
    assert_eq!(reference.len(), 2012);
    let (ref_right, _) = common::accuracy(&reference);

    let ours = labels_of_objects(&objects);
    let theirs = labels_of_jsonl(&reference);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "the same boxes, clipped the same way"
    );
    let mut same = 0;
    for (key, a) in &ours {
        let b = &theirs[key];
        assert_eq!(a.len(), b.len(), "{key:?}");
        same += a.iter().zip(b).filter(|(x, y)| x == y).count();
    }
    let agreement = same as f64 / objects.len() as f64;
    eprintln!(
        "reference pipeline (GStreamer jpegdec): {ref_right}/2012 labelled as annotated ({:.2}%); \
         same label as the app source: {same}/2012 ({:.2}%)",
        ref_right as f64 / 20.12,
        agreement * 100.0
    );
    assert!(
        agreement >= 0.999,
        "only {:.2}% of objects get the reference pipeline's label",
        agreement * 100.0
    );
}

/// A minimal `.npy` reader: `<f4` values after the header, with the shape it gives.
fn read_npy_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "npy 1.0 magic");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert_eq!((10 + len) % 64, 0, "header padded to 64 bytes: {header:?}");
    let shape = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let data: Vec<f32> = bytes[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(data.len(), shape.iter().product::<usize>(), "{header}");
    (shape, data)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn crop_tensors_from_the_pipeline_match_oneshot_and_the_tensors_sink() {
    let _serial = serial();
    let Some((_, frames)) = clip() else { return };
    let picked = [0usize, 7, 19, 33];
    let dir = common::temp_dir("app-tensors").join("out");
    let vars = HashMap::from([("dir".to_string(), dir.display().to_string())]);
    let mut pipeline = Pipeline::from_description(
        "app name=cam ! batch max-crops=100 ! preprocess ! tensors location=${dir}",
        &vars,
    )
    .unwrap();
    let source = pipeline.app_source(None).unwrap();
    let batches = pipeline.batches(64);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || batches.into_iter().collect::<Vec<CropBatch>>());
    for &i in &picked {
        source.push(frames[i].app_frame(i)).unwrap();
    }
    source.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let batches = reader.join().unwrap();
    let r = &outcome.report;
    assert_eq!((r.frames_in, r.processed), (4, 4), "{r}");

    // What the one-call preprocessor gives for the same frames and boxes, by (frame, crop).
    let mut pre = Preprocessor::new(PreprocessConfig::default()).unwrap();
    let crop_len = 3 * 64 * 64;
    let mut expected: HashMap<(u64, usize), Vec<u32>> = HashMap::new();
    for (seq, &i) in picked.iter().enumerate() {
        let p = pre.run(frames[i].app_frame(i)).unwrap();
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        assert_eq!(p.boxes, (0..frames[i].boxes.len()).collect::<Vec<_>>());
        let t = p.tensor.as_f32().unwrap();
        assert_eq!(t.len(), p.boxes.len() * crop_len);
        for (k, crop) in t.chunks_exact(crop_len).enumerate() {
            expected.insert((seq as u64, k), bits(crop));
        }
    }

    // Every crop of every batch the pipeline gives, bit for bit.
    let mut seen = 0;
    for b in &batches {
        let t = b.tensor.as_f32().expect("a host f32 tensor");
        for (c, o) in b.crops.iter().zip(&b.origins) {
            assert_eq!((c.out_w, c.out_h), (64, 64));
            let frame = &b.frames[c.frame as usize];
            let off = c.out_offset as usize;
            let got = bits(&t[off..off + crop_len]);
            let want = &expected[&(frame.seq, o.detection as usize)];
            assert!(
                got == *want,
                "frame {} crop {}: pipeline tensor differs",
                frame.seq,
                o.detection
            );
            seen += 1;
        }
    }
    let total: usize = picked.iter().map(|&i| frames[i].boxes.len()).sum();
    assert_eq!(seen, total);

    // What the tensors sink wrote: the same values at the offsets its index gives.
    let index = common::read_jsonl(&dir.join("index.jsonl"));
    assert_eq!(index.len(), total);
    let mut files: HashMap<String, Vec<f32>> = HashMap::new();
    let mut per_frame: HashMap<u64, usize> = HashMap::new();
    for line in &index {
        let file = line["file"].as_str().unwrap();
        let data = files.entry(file.to_string()).or_insert_with(|| {
            let (shape, data) = read_npy_f32(&dir.join(file));
            assert_eq!(&shape[1..], &[3, 64, 64], "{file}");
            data
        });
        let off = line["offset"].as_u64().unwrap() as usize;
        let seq = line["frame"].as_u64().unwrap();
        // Crops of a frame come in box order: the k-th line of a frame is its k-th box.
        let k = per_frame.entry(seq).or_default();
        let want = &expected[&(seq, *k)];
        assert!(
            bits(&data[off..off + crop_len]) == *want,
            "{line}: npy values differ"
        );
        let name = &frames[picked[seq as usize]].name;
        assert_eq!(line["source"], format!("octopipe:{name}"));
        *k += 1;
    }
    eprintln!(
        "{total} crops of {} frames in {} batches: pipeline, oneshot and .npy bit-identical",
        picked.len(),
        files.len()
    );
}
