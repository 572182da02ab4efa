//! `octopipe eval detections` (in every build): a detector's boxes scored against VisDrone DET
//! ground truth (per group recall at IoU >= 0.5, false positives per frame), on JSONL made from
//! the clip's ground truth itself, and on the objects a real run writes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// COCO class of a VisDrone category, as a COCO detector would name it.
fn coco_label(category: u64) -> &'static str {
    match category {
        1 | 2 => "person",
        4 | 5 => "car",
        6 => "truck",
        9 => "bus",
        3 | 10 => "bicycle",
        _ => "motorcycle",
    }
}

/// Group (people, vehicles, two-wheelers) of a counted ground truth row.
fn group(category: u64) -> usize {
    match category {
        1 | 2 => 0,
        4 | 5 | 6 | 9 => 1,
        _ => 2,
    }
}

/// The clip's images and ground truth folders.
fn clip(data: &Path) -> (PathBuf, PathBuf) {
    let root = data.join("visdrone/clip-9999999");
    (root.join("images"), root.join("annotations"))
}

/// Every counted ground truth row of the clip as (image file name, [x, y, w, h], category), in
/// image order.
fn counted_truth(data: &Path) -> Vec<(String, [i64; 4], u64)> {
    let (images, annotations) = clip(data);
    let mut names: Vec<String> = std::fs::read_dir(images)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut rows = Vec::new();
    for name in names {
        let stem = name.trim_end_matches(".jpg");
        let text = std::fs::read_to_string(annotations.join(format!("{stem}.txt"))).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Vec<i64> = line.split(',').map(|f| f.trim().parse().unwrap()).collect();
            if v[4] != 0 && !matches!(v[5], 0 | 11) {
                rows.push((name.clone(), [v[0], v[1], v[2], v[3]], v[5] as u64));
            }
        }
    }
    rows
}

fn eval(objects: &Path, truth: &Path, images: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_octopipe"));
    cmd.args(["eval", "detections", "--objects"])
        .arg(objects)
        .arg("--truth")
        .arg(truth)
        .arg("--images")
        .arg(images)
        .args(extra);
    common::output_within(&mut cmd, Duration::from_secs(30))
}

/// The table's row for `group`: (ground truth, matched, recall, FP/frame).
fn row(table: &str, group: &str) -> (u64, u64, String, f64) {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(group))
        .unwrap_or_else(|| panic!("no {group} row in:\n{table}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    (
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].to_string(),
        f[4].parse().unwrap(),
    )
}

fn succeeds(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_ground_truth_as_detections_scores_recall_1_and_no_false_positives() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let (images, annotations) = clip(&data);
    let truth = counted_truth(&data);
    let mut per_group = [0u64; 3];
    truth.iter().for_each(|(_, _, c)| per_group[group(*c)] += 1);
    let dir = common::temp_dir("eval-truth");
    let objects = dir.join("objects.jsonl");
    let mut lines: Vec<String> = truth
        .iter()
        .map(|(name, b, c)| {
            format!(
                r#"{{"source":"{name}","bbox":[{},{},{},{}],"detection":{{"label":"{}","score":0.9}}}}"#,
                b[0], b[1], b[2], b[3], coco_label(*c)
            )
        })
        .collect();
    // A class in no group is not counted.
    lines.push(format!(
        r#"{{"source":"{}","bbox":[0,0,10,10],"detection":{{"label":"traffic light","score":0.9}}}}"#,
        truth[0].0
    ));
    std::fs::write(&objects, lines.join("\n")).unwrap();
    let table = succeeds(&eval(&objects, &annotations, &images, &[]));
    eprintln!("{table}");
    for (k, name) in ["people", "vehicles", "two-wheelers"].iter().enumerate() {
        assert_eq!(
            row(&table, name),
            (per_group[k], per_group[k], "1.000".into(), 0.0),
            "{table}"
        );
    }
    let all: u64 = per_group.iter().sum();
    assert_eq!(all, 2012, "the clip's classifiable objects");
    assert_eq!(row(&table, "all"), (all, all, "1.000".into(), 0.0));
    assert!(
        table.contains(&format!(
            "frames: 34; detections: {} (1 of classes in no group, not counted)",
            all + 1
        )),
        "{table}"
    );

    // Every vehicle of the first frame twice more, the copies moved 60% of their width: each
    // copy is a false positive, over the 34 frames.
    let first = &truth[0].0;
    let moved: Vec<String> = truth
        .iter()
        .filter(|(name, _, c)| name == first && group(*c) == 1)
        .map(|(name, b, _)| {
            format!(
                r#"{{"source":"{name}","bbox":[{},{},{},{}],"detection":{{"label":"car","score":0.5}}}}"#,
                b[0] as f64 + 0.6 * b[2] as f64, b[1], b[2], b[3]
            )
        })
        .collect();
    let extra = moved.len() as u64;
    assert!(extra > 0);
    lines.extend(moved.iter().cloned());
    std::fs::write(&objects, lines.join("\n")).unwrap();
    let table = succeeds(&eval(&objects, &annotations, &images, &[]));
    let (gt, matched, recall, fp) = row(&table, "vehicles");
    assert_eq!(
        (gt, matched, recall),
        (per_group[1], per_group[1], "1.000".into())
    );
    assert_eq!(
        fp,
        ((extra as f64 / 34.0) * 100.0).round() / 100.0,
        "{table}"
    );
}

#[test]
fn a_real_runs_objects_are_scored_with_a_class_map_of_its_own() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let (images, annotations) = clip(&data);
    let dir = common::temp_dir("eval-run");
    let objects = dir.join("objects.jsonl");
    // The annotation replay as the detector: its objects carry the VisDrone category names.
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "images location={} ! boxes format=det location={} ! jsonl location={}",
                images.display(),
                annotations.display(),
                objects.display()
            ),
        ]),
        Duration::from_secs(120),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let classes = "pedestrian=people,people=people,car=vehicles,van=vehicles,truck=vehicles,\
                   bus=vehicles,bicycle=two-wheelers,tricycle=two-wheelers,\
                   awning-tricycle=two-wheelers,motor=two-wheelers";
    let table = succeeds(&eval(
        &objects,
        &annotations,
        &images,
        &["--classes", classes],
    ));
    eprintln!("{table}");
    let (gt, matched, recall, fp) = row(&table, "all");
    assert_eq!(gt, 2012);
    // Boxes are clipped to the frame on the way (and those under 2 px dropped): nearly all match.
    assert!(matched as f64 >= 0.99 * gt as f64, "{table}");
    assert!(fp < 0.1, "{table}");
    assert_eq!(recall, format!("{:.3}", matched as f64 / gt as f64));

    // The default map knows VisDrone's names too (issue 52: people scored 0.000 before): the
    // same scores without a map of one's own.
    let default = succeeds(&eval(&objects, &annotations, &images, &[]));
    for group in ["people", "vehicles", "two-wheelers", "all"] {
        assert_eq!(row(&default, group), row(&table, group), "{default}");
    }
}

/// `octopipe eval labels` on what a detector wrote: its classes are no annotated categories, so
/// nothing is scored and the run says what it found.
#[test]
fn labels_of_a_detectors_boxes_are_refused_naming_what_they_carry() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("eval-labels-detector");
    let objects = dir.join("objects.jsonl");
    // The constructed detector: two boxes a frame (classes 2 and 0), on two frames.
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe")).args([
            "run",
            &format!(
                "testsrc width=640 height=480 num-buffers=2 ! detect model={} backend=cpu ! jsonl location={}",
                common::root().join("tests/data/models/det-e2e.onnx").display(),
                objects.display()
            ),
            "--force",
        ]),
        Duration::from_secs(120),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(["eval", "labels", "--objects"])
            .arg(&objects),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1));
    common::fails_with(
        &out,
        &[&format!(
            "octopipe: error: {}: 4 objects carry a detector class, none an annotated category: `eval labels` scores a classifier against annotated categories",
            objects.display()
        )],
    );
    assert!(
        out.stdout.is_empty(),
        "no table: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn detections_of_images_not_in_the_folder_fail_naming_the_image() {
    let Some(data) = common::shared_data() else {
        return;
    };
    let (images, annotations) = clip(&data);
    let dir = common::temp_dir("eval-bad");
    let objects = dir.join("objects.jsonl");
    std::fs::write(
        &objects,
        r#"{"source":"flight_0001.jpg","bbox":[1,2,30,40],"detection":{"label":"car","score":0.8}}"#,
    )
    .unwrap();
    let out = eval(&objects, &annotations, &images, &[]);
    common::fails_with(
        &out,
        &["octopipe: error: 1 detections of 'flight_0001.jpg', which is not among the 34 images evaluated (the first: 9999999_00023_d_0000001)"],
    );
    // An image without its ground truth file.
    let folder = dir.join("images");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("extra.jpg"), b"").unwrap();
    let out = eval(&objects, &annotations, &folder, &[]);
    common::fails_with(
        &out,
        &[&format!(
            "octopipe: error: {}: no ground truth for image '{}'",
            annotations.join("extra.txt").display(),
            folder.join("extra.jpg").display()
        )],
    );
    // A line with no detection.
    std::fs::write(&objects, r#"{"source":"a.jpg","bbox":[1,2,3,4]}"#).unwrap();
    common::fails_with(
        &eval(&objects, &annotations, &images, &[]),
        &[&format!(
            "octopipe: error: {}:1: no \"detection\"",
            objects.display()
        )],
    );
    common::fails_with(
        &eval(&objects, &annotations, &images, &["--classes", "car"]),
        &["octopipe: error: class map 'car': 'car' is not CLASS=GROUP"],
    );
}
