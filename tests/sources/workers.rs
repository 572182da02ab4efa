//! `classify workers=N`: several classifiers take batches in turn and the batches leave in the
//! order they came, so the output and the report's accounting are those of one classifier.

use crate::common;

use std::path::Path;

use octopipe::Pipeline;

/// The shared clip (DET annotations, small batches so that workers overlap) through the shared
/// classifier with `classify` settings `extra`: the JSON lines, in order, and the report.
fn run(data: &Path, dir: &Path, extra: &str) -> (Vec<String>, String) {
    let out = dir.join(format!("objects-{}.jsonl", extra.replace([' ', '='], "-")));
    let clip = data.join("visdrone/clip-9999999");
    let vars = common::vars(&[
        ("images", &clip.join("images")),
        ("annotations", &clip.join("annotations")),
        ("model", &data.join("models/visdrone-crops-64.onnx")),
        ("out", &out),
    ]);
    let pipeline = Pipeline::from_description(
        &format!(
            "images location=${{images}} ! boxes format=det location=${{annotations}} \
             ! batch max-crops=16 ! preprocess channels=rgb layout=nchw \
             mean=0.485,0.456,0.406 std=0.229,0.224,0.225 \
             ! classify model=${{model}} labels=person,two-wheeler,car,large-vehicle {extra} \
             ! jsonl location=${{out}}"
        ),
        &vars,
    )
    .unwrap();
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{extra}: {:?}", outcome.error);
    (common::untimed_lines(&out), outcome.report.to_string())
}

#[test]
fn workers_give_the_one_classifier_output_in_order() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("workers");
    let (one, one_report) = run(&data, &dir, "ort-threads=1");
    let (three, three_report) = run(&data, &dir, "ort-threads=1 workers=3");
    assert_eq!(one.len(), 2012, "the clip's objects");
    // Same objects, same labels and scores, in the same order (stream, frame, box).
    assert!(one == three, "three workers wrote other lines than one");
    assert_eq!(
        common::frame_accounting(&one_report),
        common::frame_accounting(&three_report)
    );
    assert_eq!(
        common::object_accounting(&one_report),
        common::object_accounting(&three_report)
    );
}

#[test]
fn workers_and_reused_labels_do_not_go_together() {
    let e = Pipeline::from_description(
        "images location=x ! boxes format=synthetic ! track ! batch ! preprocess \
         ! classify model=m.onnx workers=2 reinfer-interval=3 ! jsonl location=-",
        &Default::default(),
    )
    .err()
    .expect("refused");
    let message = e.to_string();
    assert!(
        message.contains("workers") && message.contains("reinfer-interval=1"),
        "{message}"
    );
}
