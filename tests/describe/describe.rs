//! Pipeline descriptions from files: `valid-*.pipe` must build, `invalid-*.pipe` must fail with the
//! message in their first line (`# error: LINE:COL: message`).

use std::collections::HashMap;

use octopipe::describe;

fn cases(prefix: &str) -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/descriptions");
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

#[test]
fn valid_descriptions_build() {
    for (name, text) in cases("valid-") {
        let desc = describe::parse(&name, &text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}"));
        describe::build(&desc).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn invalid_descriptions_fail_with_their_message() {
    for (name, text) in cases("invalid-") {
        let expected = text
            .lines()
            .next()
            .unwrap()
            .strip_prefix("# error: ")
            .expect("first line: # error: ...");
        let err = describe::parse(&name, &text, &HashMap::new()).and_then(|d| describe::build(&d));
        let err = err.err().unwrap_or_else(|| panic!("{name} should fail"));
        let got = format!("{}:{}: {}", err.line, err.column, err.message);
        assert_eq!(got, expected, "{name}\n{err}");
        assert!(
            err.to_string()
                .lines()
                .last()
                .unwrap()
                .trim_start()
                .starts_with('^'),
            "caret line: {err}"
        );
    }
}

#[test]
fn the_visdrone_pipeline_uses_the_shared_models_contract() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pipelines/visdrone-classify.pipe"
    ))
    .unwrap();
    let vars: HashMap<String, String> = [("root", "/r"), ("model", "/m.onnx"), ("out", "/o")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cfg =
        describe::build(&describe::parse("visdrone-classify.pipe", &text, &vars).unwrap()).unwrap();
    let p = cfg
        .element::<octopipe::preprocess::PreprocessConfig>()
        .unwrap();
    assert_eq!(
        (p.mean, p.std),
        ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    );
    assert_eq!(
        (p.channels, p.layout),
        (
            octopipe::preprocess::ChannelOrder::Rgb,
            octopipe::preprocess::Layout::Nchw
        )
    );
    assert!((p.scale - 1.0 / 255.0).abs() < 1e-9);
    assert_eq!(p.size, None, "the crop size comes from the model (64x64)");
    assert_eq!(
        cfg.element::<octopipe::classify::ClassifyConfig>()
            .unwrap()
            .labels,
        ["person", "two-wheeler", "car", "large-vehicle"]
    );
    assert!(!cfg.is_live(), "file input: backpressure, no drops");
    assert!(cfg
        .nodes
        .iter()
        .all(|n| n.queue == octopipe::pipeline::Queue::FILE));
}
