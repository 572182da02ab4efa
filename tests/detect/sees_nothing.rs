//! A detector that sees nothing says why, and labels fewer than the model's classes are refused
//! (issue 39, item 3): the shared COCO CenterNet (an end-to-end output: its class count shows
//! only in its boxes) through the real binary, on the first frames of the shared clip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common;

/// A folder of links to the first `n` images of the shared clip.
fn first_images(data: &Path, dir: &Path, n: usize) -> PathBuf {
    let to = dir.join("images");
    std::fs::create_dir_all(&to).unwrap();
    for f in common::sorted_files(&data.join("visdrone/clip-9999999/images"))
        .into_iter()
        .take(n)
    {
        std::os::unix::fs::symlink(&f, to.join(f.file_name().unwrap())).unwrap();
    }
    to
}

/// `images ! detect DETECT ! jsonl` on the whole frame (one run per frame).
fn detect(images: &Path, model: &Path, props: &str, out: &Path) -> Output {
    let text = format!(
        "images location={} ! detect model={} {props} ! jsonl location={} overwrite=true",
        images.display(),
        model.display(),
        out.display()
    );
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args(["run", &text]),
        Duration::from_secs(300),
    )
}

#[test]
fn the_shared_detector_fed_0_to_1_warns_once_naming_its_best_score() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("sees-nothing");
    let images = first_images(&data, &dir, 12);
    let model = data.join("models/coco-centernet-512.onnx");
    let out = dir.join("o.jsonl");

    // Without scale=1 the model, trained on 0..255, gets 0..1: no box at all.
    let run = detect(&images, &model, "labels=coco", &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    // Once, after the call that took the count to 10 frames or more (a call may hold several).
    let warning = format!(
        "octopipe: warning: detect: model {}: no box in the first ",
        model.display()
    );
    assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with(&warning)).unwrap();
    let frames: u64 = line[warning.len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((10..=12).contains(&frames), "{line}");
    assert!(
        line.contains(" frames: the highest score the model gave was 0.0"),
        "the best score is named, far under the threshold: {line}"
    );
    assert!(
        stderr.contains("(a box needs score=0.3); is the input what the model was trained on? check scale=1/255 (the model is fed 0..1; scale=1 feeds raw 0..255), mean=0,0,0 and std=1,1,1, and channels=rgb (bgr for a model trained on OpenCV's images)"),
        "{stderr}"
    );
    assert!(common::read_jsonl(&out).is_empty());

    // With scale=1 it sees, and says nothing of the kind.
    let run = detect(&images, &model, "labels=coco scale=1", &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(!stderr.contains("no box in the first"), "{stderr}");
    assert!(!common::read_jsonl(&out).is_empty(), "{stderr}");
}

#[test]
fn fewer_labels_than_the_model_has_classes_are_refused_with_a_did_you_mean() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("fewer-labels");
    let images = first_images(&data, &dir, 2);
    let model = data.join("models/coco-centernet-512.onnx");
    let run = detect(
        &images,
        &model,
        "labels=person,car scale=1",
        &dir.join("o.jsonl"),
    );
    let stderr = common::fails_with(
        &run,
        &[
            &format!("octopipe: error: detect: model {}: it gave a box of class ", model.display()),
            "but the labels name 2 (person,car): give one name per class, in class-index order; to keep only some classes, name them all and pick with classes= (did you mean labels=coco classes=person,car?)",
        ],
    );
    assert!(!stderr.contains("class2"), "{stderr}");
}

/// A model whose metadata states its input range (`octopipe.input_range`) gets that `scale`
/// unless `scale` is given: det-probe answers one box scored the mean of its input channel 0.
#[test]
fn a_model_whose_metadata_states_its_input_range_gets_that_scale() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("input-range");
    let probe = common::root().join("tests/data/models/det-probe.onnx");
    let model = dir.join("probe-0-255.onnx");
    let made = Command::new("python3")
        .args([
            "-c",
            "import onnx, sys; m = onnx.load(sys.argv[1]); p = m.metadata_props.add(); \
             p.key, p.value = 'octopipe.input_range', sys.argv[3]; onnx.save(m, sys.argv[2])",
        ])
        .arg(&probe)
        .arg(&model)
        .arg("0..255")
        .status();
    if !made.is_ok_and(|s| s.success()) {
        common::skip("python3 with onnx is needed to add the metadata");
        return;
    }
    let folder = dir.join("solid");
    std::fs::create_dir_all(&folder).unwrap();
    image::RgbImage::from_pixel(64, 48, image::Rgb([200, 50, 10]))
        .save(folder.join("solid.png"))
        .unwrap();
    let score = |props: &str| {
        let out = dir.join("o.jsonl");
        let run = detect(&folder, &model, &format!("score=0 {props}"), &out);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let objects = common::read_jsonl(&out);
        assert_eq!(objects.len(), 1, "{props}");
        objects[0]["detection"]["score"].as_f64().unwrap()
    };
    assert!((score("") - 200.0).abs() < 1e-3, "raw 0..255, as stated");
    let given = score("scale=0.00392156862745098");
    assert!(
        (given - 200.0 / 255.0).abs() < 1e-4,
        "a given scale wins: {given}"
    );
}
