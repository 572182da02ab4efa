//! Unit tests of the detection evaluation: matching, class groups, reading the detections.

use super::*;

fn truth(boxes: &[(&str, [f64; 4], Group)], empty_frames: &[&str]) -> Truth {
    let mut frames: BTreeMap<String, Vec<TruthBox>> = BTreeMap::new();
    for (frame, bbox, group) in boxes {
        frames.entry(frame.to_string()).or_default().push(TruthBox {
            bbox: *bbox,
            group: *group,
        });
    }
    for f in empty_frames {
        frames.entry(f.to_string()).or_default();
    }
    Truth::from_frames(frames)
}

fn det(frame: &str, bbox: [f64; 4], label: &str, score: f32) -> Scored {
    Scored {
        source: format!("{frame}.jpg"),
        bbox,
        label: label.into(),
        score,
    }
}

const A: [f64; 4] = [0.0, 0.0, 100.0, 100.0];
const B: [f64; 4] = [300.0, 300.0, 40.0, 20.0];

#[test]
fn a_perfect_set_has_recall_1_and_no_false_positives() {
    let t = truth(
        &[
            ("f1", A, Group::Vehicles),
            ("f1", B, Group::People),
            ("f2", A, Group::TwoWheelers),
        ],
        &["f3"],
    );
    let d = [
        det("f1", A, "car", 0.9),
        det("f1", B, "person", 0.8),
        det("f2", A, "motorcycle", 0.7),
    ];
    let e = evaluate(&t, &d, &ClassMap::coco()).unwrap();
    for g in Group::ALL {
        assert_eq!(e.group(g).recall(), Some(1.0), "{g:?}");
    }
    assert_eq!(e.all().false_positives, 0);
    assert_eq!((e.frames, e.per_frame(e.all())), (3, 0.0));
}

#[test]
fn iou_just_under_a_half_is_a_miss_and_a_false_positive() {
    let t = truth(&[("f", A, Group::Vehicles)], &[]);
    // [0, 0, 49, 100] inside A: IoU 4900 / 10000 = 0.49.
    let under = [0.0, 0.0, 49.0, 100.0];
    assert!((iou(under, A) - 0.49).abs() < 1e-12);
    let e = evaluate(&t, &[det("f", under, "truck", 0.9)], &ClassMap::coco()).unwrap();
    assert_eq!(
        e.group(Group::Vehicles),
        GroupScore {
            truth: 1,
            matched: 0,
            false_positives: 1
        }
    );
    // IoU exactly 0.5 matches.
    let half = [0.0, 0.0, 50.0, 100.0];
    let e = evaluate(&t, &[det("f", half, "truck", 0.9)], &ClassMap::coco()).unwrap();
    assert_eq!(e.group(Group::Vehicles).matched, 1);
    // Shifted along x: IoU (100 - dx) / (100 + dx).
    assert!((iou([50.0, 0.0, 100.0, 100.0], A) - 50.0 / 150.0).abs() < 1e-12);
    assert_eq!(iou(A, [200.0, 0.0, 10.0, 10.0]), 0.0);
}

#[test]
fn a_duplicate_detection_is_one_match_and_one_false_positive() {
    let t = truth(&[("f", A, Group::People)], &["g"]);
    let d = [
        det("f", [1.0, 1.0, 100.0, 100.0], "person", 0.6),
        det("f", A, "person", 0.9),
    ];
    let e = evaluate(&t, &d, &ClassMap::coco()).unwrap();
    assert_eq!(
        e.group(Group::People),
        GroupScore {
            truth: 1,
            matched: 1,
            false_positives: 1
        }
    );
    assert_eq!(e.per_frame(e.all()), 0.5, "1 false positive over 2 frames");
}

#[test]
fn detections_take_boxes_in_descending_score() {
    // X (0.9) overlaps both ground truth boxes, `left` best (IoU 0.667, `right` 0.538); Y (0.5)
    // overlaps only `left` (0.9; `right` 0.267). X goes first and takes `left`: Y is a false
    // positive, and `right` stays unmatched (Y first would have matched both).
    let left = [0.0, 0.0, 100.0, 100.0];
    let right = [50.0, 0.0, 100.0, 100.0];
    let t = truth(
        &[("f", left, Group::Vehicles), ("f", right, Group::Vehicles)],
        &[],
    );
    let d = [
        det("f", [0.0, 0.0, 90.0, 100.0], "car", 0.5),
        det("f", [20.0, 0.0, 100.0, 100.0], "car", 0.9),
    ];
    let e = evaluate(&t, &d, &ClassMap::coco()).unwrap();
    assert_eq!(
        e.group(Group::Vehicles),
        GroupScore {
            truth: 2,
            matched: 1,
            false_positives: 1
        }
    );
}

#[test]
fn classes_are_grouped_by_the_map_and_groups_never_mix() {
    let t = truth(&[("f", A, Group::People), ("f", B, Group::Vehicles)], &[]);
    let d = [
        // A bus on the person box: a vehicle that matched nothing.
        det("f", A, "bus", 0.9),
        // Not in the COCO map: not counted at all.
        det("f", B, "traffic light", 0.9),
        det("f", B, "bicycle", 0.4),
    ];
    let e = evaluate(&t, &d, &ClassMap::coco()).unwrap();
    assert_eq!(
        e.group(Group::People),
        GroupScore {
            truth: 1,
            matched: 0,
            false_positives: 0
        }
    );
    assert_eq!(
        e.group(Group::Vehicles),
        GroupScore {
            truth: 1,
            matched: 0,
            false_positives: 1
        }
    );
    assert_eq!(
        e.group(Group::TwoWheelers),
        GroupScore {
            truth: 0,
            matched: 0,
            false_positives: 1
        }
    );
    assert_eq!(e.group(Group::TwoWheelers).recall(), None);
    assert_eq!((e.detections, e.not_counted), (3, 1));
    // Every COCO class of the map.
    let coco = ClassMap::coco();
    for (class, group) in [
        ("person", Group::People),
        ("car", Group::Vehicles),
        ("bus", Group::Vehicles),
        ("truck", Group::Vehicles),
        ("bicycle", Group::TwoWheelers),
        ("motorcycle", Group::TwoWheelers),
    ] {
        assert_eq!(coco.group(class), Some(group));
    }
    assert_eq!(coco.group("dog"), None);
    // A map of one's own.
    let own = ClassMap::parse("pedestrian=people, van = vehicles").unwrap();
    assert_eq!(own.group("van"), Some(Group::Vehicles));
    assert_eq!(own.group("car"), None);
    let e = ClassMap::parse("van=lorries").unwrap_err().to_string();
    assert_eq!(
        e,
        "class map 'van=lorries': 'lorries' is not a group (people, vehicles, two-wheelers)"
    );
}

#[test]
fn visdrone_categories_fall_in_their_groups() {
    let groups: Vec<Option<Group>> = (0..=11).map(Group::of_category).collect();
    use Group::*;
    assert_eq!(
        groups,
        [
            None,
            Some(People),
            Some(People),
            Some(TwoWheelers),
            Some(Vehicles),
            Some(Vehicles),
            Some(Vehicles),
            Some(TwoWheelers),
            Some(TwoWheelers),
            Some(Vehicles),
            Some(TwoWheelers),
            None
        ]
    );
}

#[test]
fn detections_of_an_image_not_evaluated_are_an_error() {
    let t = truth(&[("f", A, Group::People)], &[]);
    let e = evaluate(&t, &[det("other", A, "person", 1.0)], &ClassMap::coco())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "1 detections of 'other.jpg', which is not among the 1 images evaluated (the first: f)"
    );
}

#[test]
fn jsonl_lines_give_source_box_label_and_score() {
    let text = r#"{"stream":0,"frame":3,"source":"a_0000004.jpg","pts_ms":100.0,"bbox":[10,20,30,40],"label":"car","class_id":2,"score":0.5,"detection":{"label":"truck","score":0.75}}

{"source":"b.jpg","bbox":[1.5,2,3,4],"detection":{"label":"person","score":0.25}}"#;
    let got = parse_objects(text, "o.jsonl").unwrap();
    assert_eq!(
        got,
        [
            Scored {
                source: "a_0000004.jpg".into(),
                bbox: [10.0, 20.0, 30.0, 40.0],
                label: "truck".into(),
                score: 0.75
            },
            Scored {
                source: "b.jpg".into(),
                bbox: [1.5, 2.0, 3.0, 4.0],
                label: "person".into(),
                score: 0.25
            },
        ]
    );
    let e = parse_objects("{\"source\":\"a.jpg\",\"bbox\":[1,2,3,4]}", "o.jsonl")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("o.jsonl:1: no \"detection\""), "{e}");
    let e = parse_objects("\n{\"source\":\"a.jpg\"}", "o.jsonl")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("o.jsonl:2: not an object with source and bbox: missing field `bbox`"),
        "{e}"
    );
}

#[test]
fn visdrone_names_count_and_classes_in_no_group_are_named() {
    let t = truth(&[("f", A, Group::People), ("f", B, Group::Vehicles)], &[]);
    let dets = [
        det("f", A, "pedestrian", 1.0),
        det("f", B, "van", 1.0),
        det("f", B, "traffic light", 0.5),
    ];
    let e = evaluate(&t, &dets, &ClassMap::coco()).unwrap();
    assert_eq!(e.group(Group::People).matched, 1);
    assert_eq!(e.group(Group::Vehicles).matched, 1);
    assert!(
        e.to_string()
            .ends_with("\nnot counted, by class: traffic light (1)"),
        "{e}"
    );
}

#[test]
fn detections_none_of_which_counts_are_refused_by_class() {
    let dir = std::env::temp_dir().join(format!("octopipe-eval-groups-{}", std::process::id()));
    let (images, annotations) = (dir.join("images"), dir.join("annotations"));
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&annotations).unwrap();
    std::fs::write(images.join("f.jpg"), b"").unwrap();
    std::fs::write(annotations.join("f.txt"), "0,0,100,100,1,1,0,0\n").unwrap();
    let objects = dir.join("o.jsonl");
    let line = |label: &str| {
        format!(
            r#"{{"source":"f.jpg","bbox":[0,0,100,100],"detection":{{"label":"{label}","score":1}}}}"#
        )
    };
    std::fs::write(
        &objects,
        [line("human"), line("human"), line("auto")].join("\n"),
    )
    .unwrap();
    let e = evaluate_files(&objects, &annotations, &images, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("o.jsonl: none of the 3 detections has a class the class map puts in a group (classes: human (2), auto (1)): name them in --classes CLASS=GROUP,..."),
        "{e}"
    );
    let map = ClassMap::parse("human=people,auto=vehicles").unwrap();
    let e = evaluate_files(&objects, &annotations, &images, Some(&map)).unwrap();
    assert_eq!(e.group(Group::People).matched, 1);
    let _ = std::fs::remove_dir_all(&dir);
}
