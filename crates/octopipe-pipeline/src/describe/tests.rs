//! The describe module's unit tests: parsing, variables, errors, suggestions.

use super::*;
use std::collections::HashMap;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn stages_props_quotes_comments_variables() {
    let text = "# a comment\nimages location=\"${root}/my images\" \\\n ! boxes format=det # tail\n ! jsonl location=${out}.jsonl";
    let d = parse("t.pipe", text, &vars(&[("root", "/d"), ("out", "o")])).unwrap();
    let kinds: Vec<&str> = d.stages.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["images", "boxes", "jsonl"]);
    assert_eq!(d.stages[0].props[0].value, "/d/my images");
    assert_eq!(d.stages[2].props[0].value, "o.jsonl");
    assert_eq!(d.stages[1].props[0].key, "format");
}

#[test]
fn errors_point_at_line_and_column() {
    let e = parse("p", "images\n  ! boxes location=${nope}", &HashMap::new()).unwrap_err();
    assert_eq!((e.line, e.column), (2, 20));
    assert!(e.message.contains("variable 'nope' is not set"), "{e}");
    assert!(
        e.to_string()
            .ends_with("  ! boxes location=${nope}\n                     ^^^^^^^"),
        "{e}"
    );
    let e = parse("p", "images ! ! jsonl", &HashMap::new()).unwrap_err();
    assert_eq!(e.column, 10);
    let e = parse("p", "images !", &HashMap::new()).unwrap_err();
    assert!(e.message.contains("a stage must follow"), "{e}");
    let e = parse("p", "a x=\"open", &HashMap::new()).unwrap_err();
    assert!(e.message.contains("unterminated quote"), "{e}");
    let e = parse("p", "a x=1 x=2", &HashMap::new()).unwrap_err();
    assert!(e.message.contains("set twice"), "{e}");
}

#[test]
fn chains_references_and_caps() {
    let text = "udpsrc port=5000 caps=\"application/x-rtp, media=video\" ! rtph264depay ! avdec_h264 \
                ! video/x-raw,format=I420 ! boxes format=synthetic ! mux.\n\
                images location=a ! boxes format=synthetic ! batch name=mux ! classify model=m ! jsonl location=o";
    let d = parse("p", text, &HashMap::new()).unwrap();
    let chains: Vec<usize> = d.stages.iter().map(|s| s.chain).collect();
    assert_eq!(chains, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    assert_eq!(d.stages[3].kind, "video/x-raw,format=I420");
    assert!(d.stages[5].reference && d.stages[5].kind == "mux");
    assert_eq!(
        &d.text[d.stages[0].span.start..d.stages[0].end],
        "udpsrc port=5000 caps=\"application/x-rtp, media=video\""
    );
    let e = parse("p", "a ! mux. x=1", &HashMap::new()).unwrap_err();
    assert!(
        e.message
            .contains("a reference ('mux.') takes no properties"),
        "{e}"
    );
}

#[test]
fn the_environment_fills_variables_set_sets_win() {
    let text = "images location=${OCTOPIPE_TEST_ENV_VAR}/i ! jsonl location=${out}";
    let e = parse("p", text, &vars(&[("out", "o")])).unwrap_err();
    assert!(
        e.message
            .ends_with("(give it with --set OCTOPIPE_TEST_ENV_VAR=VALUE)"),
        "{e}"
    );
    let e = parse_with_env("p", text, &vars(&[("out", "o")])).unwrap_err();
    assert!(e.message.ends_with("or set it in the environment)"), "{e}");
    // SAFETY: no other test reads or writes this variable.
    unsafe { std::env::set_var("OCTOPIPE_TEST_ENV_VAR", "/data") };
    let d = parse_with_env("p", text, &vars(&[("out", "o")])).unwrap();
    assert_eq!(d.stages[0].props[0].value, "/data/i");
    let d = parse_with_env(
        "p",
        text,
        &vars(&[("out", "o"), ("OCTOPIPE_TEST_ENV_VAR", "/set")]),
    )
    .unwrap();
    assert_eq!(d.stages[0].props[0].value, "/set/i");
    assert!(
        parse("p", text, &vars(&[("out", "o")])).is_err(),
        "parse alone never reads it"
    );
}

/// Issue 39: a `--set` the description never uses was ignored, and missing variables came
/// one a run.
#[test]
fn an_unused_set_is_an_error_and_every_missing_variable_is_named_at_once() {
    let text = "images location=${root}/i ! classify model=${model} ! jsonl location=${out}";
    let e = parse_with_env(
        "p",
        text,
        &vars(&[("root", "r"), ("modle", "m.onnx"), ("out", "o")]),
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "--set modle=...: the description never uses ${modle} (did you mean 'model'? it uses root, model, out)"
    );
    assert_eq!((e.line, e.column), (1, 44), "the caret under ${{model}}");
    let e = parse_with_env(
        "p",
        "images location=a ! jsonl location=o",
        &vars(&[("x", "1")]),
    )
    .unwrap_err();
    assert!(e.message.ends_with("(it uses no variables)"), "{e}");
    let e = parse("p", text, &vars(&[("model", "m")])).unwrap_err();
    assert_eq!(
        e.message,
        "variables 'root', 'out' are not set (give them with --set root=VALUE --set out=VALUE)"
    );
    assert_eq!(e.column, 17, "the caret under the first");
    let e = parse_with_env("p", text, &vars(&[("model", "m")])).unwrap_err();
    assert!(
        e.message
            .ends_with("--set out=VALUE, or set them in the environment)"),
        "{e}"
    );
    let used: Vec<String> = variables("p", text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(used, ["root", "model", "out"]);
}

#[test]
fn caps_with_no_fields_are_caps() {
    let d = parse(
        "p",
        "videotestsrc ! video/x-raw ! boxes format=synthetic ! jsonl location=o",
        &HashMap::new(),
    )
    .unwrap();
    assert_eq!(d.stages[1].kind, "video/x-raw");
    assert_eq!(d.stages[1].chain, 0);
}

#[test]
fn suggestions() {
    assert_eq!(
        closest("preproces", ["preprocess", "batch"]),
        Some("preprocess")
    );
    assert_eq!(closest("sise", ["size", "mean"]), Some("size"));
    assert_eq!(closest("zzzzzz", ["size", "mean"]), None);
}

/// `devices.rs`'s `a_branch_into_a_streams_stage_goes_to_its_gpu`, built: one batch stage
/// per GPU.
#[test]
fn a_branch_into_a_streams_stage_builds_per_gpu() {
    let text = devices::BRANCH_INTO_STREAMS;
    let desc = parse("t", text, &HashMap::new()).unwrap();
    let graph = build(&desc).unwrap_or_else(|e| panic!("{e}"));
    let batches = graph
        .nodes
        .iter()
        .filter(|n| n.role == octopipe_core::stage::Role::Batch);
    assert_eq!(batches.count(), 2);
}

/// A body from the network may hold thousands of properties: parsing costs linear time
/// (the duplicate check was quadratic: 0.33 s for 11k properties in a release build).
#[test]
fn many_properties_parse_in_linear_time() {
    let text = |n: usize| {
        let props: String = (0..n).map(|i| format!(" p{i}=1")).collect();
        format!("testsrc{props} ! boxes")
    };
    let time = |n: usize| {
        let t = text(n);
        let runs = (0..3).map(|_| {
            let start = std::time::Instant::now();
            let d = parse("<t>", &t, &HashMap::new()).unwrap();
            assert_eq!(d.stages[0].props.len(), n);
            start.elapsed()
        });
        runs.min().unwrap()
    };
    let (small, large) = (time(2_000), time(16_000));
    // Linear: 8 times as long; quadratic: 64 times.
    assert!(
        large < small * 24,
        "2,000 properties in {small:?}, 16,000 in {large:?}"
    );
    let e = parse("p", "a p0=1 p7=1 p1=1 p7=2 ! b p7=1", &HashMap::new()).unwrap_err();
    assert!(e.message.contains("'p7' is set twice"), "{e}");
    let ok = parse("p", "a p7=1 ! b p7=1 ! c p7=1", &HashMap::new());
    assert!(ok.is_ok(), "a key once per stage: {ok:?}");
}
