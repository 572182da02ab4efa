//! Several classifiers on the same boxes, one after the other: each one's answer is kept on the
//! object under its name, and the first's stays the object's main result.

use crate::common;

use std::path::Path;

use octopipe::describe;
use octopipe::pipeline::Pipeline;

/// The VisDrone clip's annotated boxes classified by `classifiers` (one or more `classify`
/// stages, `${model}` the shared classifier), written to `out`.
fn run_clip(data: &Path, classifiers: &str, out: &Path) -> octopipe::pipeline::Outcome {
    let text = format!(
        "images location=${{root}}/images framerate=30 ! boxes format=det location=${{root}}/annotations \
         ! batch max-crops=256 \
         ! preprocess channels=rgb layout=nchw mean=0.485,0.456,0.406 std=0.229,0.224,0.225 \
         ! {classifiers} ! jsonl location=${{out}}"
    );
    let vars = common::vars(&[
        ("root", &data.join("visdrone/clip-9999999")),
        ("model", &data.join("models/visdrone-crops-64.onnx")),
        ("out", out),
    ]);
    let desc = describe::parse("classifiers", &text, &vars).unwrap();
    Pipeline::build(describe::build(&desc).unwrap())
        .unwrap()
        .run()
}

const LABELS: &str = "person,two-wheeler,car,large-vehicle";

#[test]
fn two_classifiers_in_a_chain_keep_both_answers_and_the_first_stays_the_main_one() {
    let _serial = common::serial();
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("classifiers");
    let (one, two) = (dir.join("one.jsonl"), dir.join("two.jsonl"));
    let first = format!("classify model=${{model}} labels={LABELS}");
    let outcome = run_clip(&data, &first, &one);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    // The same model again, named, with labels of its own and two classes per crop.
    let second = "classify name=color model=${model} labels=p,t,c,l top-k=2";
    let outcome = run_clip(&data, &format!("{first} ! {second}"), &two);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.report.objects, 2012, "every object classified once");

    let alone = common::read_jsonl(&one);
    let chained = common::read_jsonl(&two);
    assert_eq!(alone.len(), 2012);
    assert_eq!(chained.len(), alone.len());
    assert!(
        alone.iter().all(|o| o.get("classifiers").is_none()),
        "one classifier writes no 'classifiers'"
    );
    let short = |l: &str| l.chars().next().unwrap().to_string();
    for (a, c) in alone.iter().zip(&chained) {
        let mut main = c.clone();
        let by_name = main
            .as_object_mut()
            .unwrap()
            .remove("classifiers")
            .unwrap_or_else(|| panic!("no 'classifiers' in {c}"));
        let untimed = |o: &serde_json::Value| {
            let mut o = o.clone();
            o.as_object_mut().unwrap().remove("timestamp");
            o
        };
        assert_eq!(
            untimed(&main),
            untimed(a),
            "the main result is the first classifier's"
        );
        let by_name = by_name.as_object().unwrap();
        assert_eq!(by_name.len(), 2, "{by_name:?}");
        let classify = &by_name["classify"];
        assert_eq!(classify["label"], a["label"]);
        assert_eq!(classify["class_id"], a["class_id"]);
        assert_eq!(classify["score"], a["score"]);
        assert!(classify.get("topk").is_none());
        let color = &by_name["color"];
        let label = a["label"].as_str().unwrap();
        assert_eq!(color["label"], short(label), "the second's own labels");
        assert_eq!(color["class_id"], a["class_id"]);
        assert_eq!(
            color["score"], a["score"],
            "the same model on the same crop"
        );
        assert_eq!(
            color["topk"].as_array().unwrap().len(),
            1,
            "top-k=2: one more"
        );
    }
    // Written in chain order.
    let text = std::fs::read_to_string(&two).unwrap();
    let line = text.lines().next().unwrap();
    let (at_first, at_second) = (
        line.find("\"classify\":{").unwrap(),
        line.find("\"color\":{").unwrap(),
    );
    assert!(at_first < at_second, "{line}");
}
