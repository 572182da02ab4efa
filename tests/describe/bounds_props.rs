//! Property tests of the bounds on sizes, counts and threads (issue 38): random values, in and
//! far out of their ranges, through the builder and short runs (a test source of two frames):
//! never an abort or a panic; a value out of its range is an error naming the stage and the
//! property; values in range build, and run to their end or to an error.

use octopipe::describe;
use octopipe::pipeline::Pipeline;
use proptest::prelude::*;
use std::collections::HashMap;

use crate::common;

/// A property of the test pipeline: its stage, name and range (`size`: a `WxH`, each side
/// in `1..=max`).
struct Knob {
    stage: &'static str,
    prop: &'static str,
    min: i64,
    max: i64,
    size: bool,
}

const fn knob(stage: &'static str, prop: &'static str, min: i64, max: i64) -> Knob {
    Knob {
        stage,
        prop,
        min,
        max,
        size: false,
    }
}

const fn side(stage: &'static str, prop: &'static str, max: i64) -> Knob {
    Knob {
        stage,
        prop,
        min: 1,
        max,
        size: true,
    }
}

/// In description order: `testsrc ! queue ! boxes ! batch ! preprocess ! jsonl`.
static KNOBS: [Knob; 8] = [
    knob("testsrc", "width", 1, 16384),
    knob("testsrc", "height", 1, 16384),
    knob("queue", "size", 1, 1024),
    knob("boxes", "count", 0, 100_000),
    knob("batch", "max-crops", 1, 4096),
    knob("batch", "max-frames", 1, 1024),
    side("preprocess", "size", 4096),
    knob("preprocess", "threads", 0, 256),
];

/// The description with `values` (one per knob, as written).
fn text(values: &[String], out: &str) -> String {
    format!(
        "testsrc width={} height={} num-buffers=2 ! queue size={} ! boxes format=synthetic count={} \
         ! batch max-crops={} max-frames={} ! preprocess size={} threads={} \
         ! jsonl overwrite=true location={out}",
        values[0], values[1], values[2], values[3], values[4], values[5], values[6], values[7]
    )
}

/// A number for `k`: inside its range, at its ends, just past them, or far out (negative, past
/// 32 and 64 bits).
fn number(k: &Knob) -> impl Strategy<Value = i128> {
    let (min, max) = (i128::from(k.min), i128::from(k.max));
    prop_oneof![
        4 => min..=max,
        1 => Just(min),
        1 => Just(max),
        1 => Just(max + 1),
        1 => Just(min - 1),
        1 => Just(i128::from(u32::MAX)),
        1 => Just(i128::from(u64::MAX) + 1),
        1 => -1_000_000i128..0,
    ]
}

/// A value for `k` as written, and whether it is in range.
fn value(k: &'static Knob) -> BoxedStrategy<(String, bool)> {
    let ok = move |n: i128| n >= i128::from(k.min) && n <= i128::from(k.max);
    if k.size {
        (number(k), number(k))
            .prop_map(move |(w, h)| (format!("{w}x{h}"), ok(w) && ok(h)))
            .boxed()
    } else {
        number(k).prop_map(move |n| (n.to_string(), ok(n))).boxed()
    }
}

/// One value per knob.
fn values() -> impl Strategy<Value = Vec<(String, bool)>> {
    KNOBS.iter().map(value).collect::<Vec<_>>()
}

/// A value for `k` that a short run can take on a shared 2-core machine (the test source's
/// frames at most 256x256, at most 32 boxes, outputs at most 128x128, 8 threads).
fn small(k: &'static Knob) -> BoxedStrategy<String> {
    let top = match k.prop {
        "width" | "height" => 256,
        "count" => 32,
        "threads" => 8,
        _ if k.size => 128,
        _ => k.max.min(64),
    };
    if k.size {
        (1..=top, 1..=top)
            .prop_map(|(w, h)| format!("{w}x{h}"))
            .boxed()
    } else {
        (k.min..=top).prop_map(|n| n.to_string()).boxed()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_value_out_of_its_range_is_refused_naming_the_property(values in values()) {
        let written: Vec<String> = values.iter().map(|(v, _)| v.clone()).collect();
        let text = text(&written, "/tmp/never-written.jsonl");
        let built = describe::parse("<p>", &text, &HashMap::new()).and_then(|d| describe::build(&d));
        let bad: Vec<&Knob> = KNOBS.iter().zip(&values).filter(|(_, (_, ok))| !ok).map(|(k, _)| k).collect();
        match built {
            Ok(_) => {
                prop_assert!(bad.is_empty(), "built with {} out of range: {text}", bad[0].prop);
            }
            Err(e) => {
                let message = e.to_string();
                let names_one = bad
                    .iter()
                    .any(|k| message.contains(&format!("{}: {} must be", k.stage, k.prop)));
                // In range one by one, a test frame may still pass the pixels a frame may have:
                // refused naming both (the first stage's error comes first).
                let frame = message.contains("testsrc: width x height:") && values[0].1 && values[1].1;
                prop_assert!(names_one || frame, "{message}\n{text}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn short_runs_with_values_in_range_end_without_an_abort(
        values in KNOBS.iter().map(small).collect::<Vec<_>>()
    ) {
        let dir = common::temp_dir("bounds-props");
        let out = dir.join("o.jsonl");
        let text = text(&values, &out.display().to_string());
        let desc = describe::parse("<p>", &text, &HashMap::new()).unwrap();
        let graph = describe::build(&desc).unwrap();
        let outcome = Pipeline::build(graph).unwrap().run();
        // Two frames of at most 256x256 and 32 boxes fit any machine: the run ends cleanly.
        prop_assert!(outcome.error.is_none(), "{:?}\n{text}", outcome.error);
        prop_assert_eq!(outcome.report.frames_in, 2, "{}", text);
    }
}
