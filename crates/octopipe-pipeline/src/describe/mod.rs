//! Pipeline descriptions in gst-launch style: `stage prop=value ! stage ...`.
//!
//! ```text
//! # pipelines/visdrone-classify.pipe
//! images location=${root}/images framerate=30
//!   ! boxes format=det location=${root}/annotations
//!   ! preprocess channels=rgb layout=nchw
//!   ! classify model=${model} labels=person,two-wheeler,car,large-vehicle
//!   ! jsonl location=${out}
//! ```
//!
//! Three steps, as gst-launch does: [`parse`] turns text into a [`Description`] (stages with their
//! properties and positions), [`build`] checks every stage and property against the
//! [registry](crate::stage::Registry) and makes the [graph](crate::pipeline::Graph) of typed
//! settings, and only then does [`Pipeline::build`](crate::pipeline::Pipeline::build) start
//! GStreamer, CUDA or ONNX Runtime.
//! `#` starts a comment, newlines are spaces (a trailing `\` is allowed), values may be quoted
//! (`location="my file.mp4"`), and `${name}` is replaced by a variable given with `--set name=value`.
//! A `queue size=N` between two stages sets the capacity of that edge (default 4).
//! `batch devices=all|0,1` spreads the streams of a batch stage over GPUs, one chain per GPU
//! ([`expand_devices`]).
//! Errors give the line and column with a caret and suggest the closest stage or property name.

mod build;
mod caps;
mod devices;
mod graph;
mod queue;
mod quote;
mod registry;
mod vars;
mod written;

use std::collections::HashSet;

pub use build::unknown as unknown_stage;
pub use build::{build, build_branch, build_open, build_with};
pub use devices::{expand_devices, DEVICES};
pub use graph::{Graph, Node};
pub use queue::{
    EdgePolicy, Queue, QueueSettings, DEFAULT_LIVE_BATCH_QUEUE, DEFAULT_LIVE_COLLECTOR_QUEUE,
    DEFAULT_LIVE_QUEUE, DEFAULT_QUEUE, QUEUE,
};
pub use quote::quote;
pub use registry::Builtin;
pub use vars::{parse, parse_set_by, parse_with_env, variables, SetBy};
pub use written::stage_text;

use crate::description::error_at;
pub use crate::description::{closest, DescribeError, Description, Prop, Span, StageDesc};

/// Where an inline description comes from, in messages.
pub const COMMAND_LINE: &str = "<command line>";

/// The text of a description given as `octopipe run PIPELINE` takes it, with its origin for
/// messages: an existing file or a `.pipe` name is read (its path is the origin), anything else
/// is the description itself ([`COMMAND_LINE`]). Every front end that takes descriptions this
/// way (the command line, the Python module) reports the same errors.
pub fn load(pipeline: &str) -> std::io::Result<(String, String)> {
    if std::path::Path::new(pipeline).is_file() || pipeline.ends_with(".pipe") {
        Ok((pipeline.to_string(), std::fs::read_to_string(pipeline)?))
    } else {
        Ok((COMMAND_LINE.to_string(), pipeline.to_string()))
    }
}

/// Where `${name}` values come from, and what to say when one is missing.
struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    missing: &'a dyn Fn(&str) -> String,
    /// Where each use of a variable is recorded, name and span (for [`variables`]).
    seen: Option<&'a std::cell::RefCell<Vec<(String, Span)>>>,
}

// One pass of a hand-written scanner over the bytes: its states (stage, key, quoted value,
// comment) share the position and the error context, which splitting would thread through.
fn scan(origin: &str, text: &str, vars: &Vars) -> Result<Description, DescribeError> {
    let err =
        |start: usize, len: usize, msg: String| error_at(origin, text, Span { start, len }, msg);
    let bytes = text.as_bytes();
    let mut stages: Vec<StageDesc> = Vec::new();
    // The keys of the last stage, so a key set twice is found in constant time (a body of
    // thousands of properties from the network costs linear time).
    let mut keys: HashSet<&str> = HashSet::new();
    let mut expect_stage = true;
    let mut chain = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_whitespace()
            || (c == b'\\' && bytes.get(i + 1).is_some_and(|n| *n == b'\n' || *n == b'\r'))
        {
            i += 1;
            continue;
        }
        if c == b'!' {
            if expect_stage {
                return Err(err(i, 1, "'!' must stand between two stages".into()));
            }
            expect_stage = true;
            i += 1;
            continue;
        }
        // A word: a stage kind or key=value.
        let start = i;
        let mut key_end = None;
        while i < bytes.len()
            && !bytes[i].is_ascii_whitespace()
            && bytes[i] != b'!'
            && bytes[i] != b'#'
        {
            if bytes[i] == b'=' {
                key_end = Some(i);
                break;
            }
            i += 1;
        }
        // Caps (`video/x-raw,width=640`, or with no fields `video/x-raw`) stand as an element
        // of a GStreamer fragment.
        let caps = match key_end {
            Some(eq) => text[start..eq].contains('/'),
            None => text[start..i].contains('/'),
        };
        if caps {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'!' {
                i += 1;
            }
        }
        match key_end.filter(|_| !caps) {
            None => {
                let word = &text[start..i];
                if !expect_stage {
                    // A stage with no '!' before it starts a new chain.
                    chain += 1;
                }
                let reference = !caps && word.len() > 1 && word.ends_with('.');
                let name = if reference {
                    &word[..word.len() - 1]
                } else {
                    word
                };
                if !caps
                    && !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    return Err(err(
                        start,
                        i - start,
                        format!("'{word}' is not a stage name"),
                    ));
                }
                keys.clear();
                stages.push(StageDesc {
                    kind: if caps {
                        word.to_string()
                    } else {
                        name.to_string()
                    },
                    span: Span {
                        start,
                        len: i - start,
                    },
                    props: Vec::new(),
                    chain,
                    reference,
                    end: i,
                });
                expect_stage = false;
            }
            Some(eq) => {
                let key = &text[start..eq];
                let Some(stage) = stages.last_mut().filter(|_| !expect_stage) else {
                    return Err(err(
                        start,
                        eq - start,
                        format!("property '{key}' comes before any stage"),
                    ));
                };
                if stage.reference {
                    return Err(err(
                        start,
                        eq - start,
                        format!("a reference ('{}.') takes no properties", stage.kind),
                    ));
                }
                if key.is_empty() {
                    return Err(err(eq, 1, "missing property name before '='".into()));
                }
                i = eq + 1;
                let vstart = i;
                let mut value = String::new();
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    match bytes[i] {
                        b'"' | b'\'' => {
                            let q = bytes[i];
                            let open = i;
                            i += 1;
                            let close = text[i..].find(q as char).ok_or_else(|| {
                                err(open, 1, format!("unterminated quote {}", q as char))
                            })?;
                            expand(&text[i..i + close], i, vars, &mut value, &err)?;
                            i += close + 1;
                        }
                        b'!' | b'#' => break,
                        _ => {
                            let s = i;
                            while i < bytes.len()
                                && !bytes[i].is_ascii_whitespace()
                                && !matches!(bytes[i], b'"' | b'\'' | b'!' | b'#')
                            {
                                i += 1;
                            }
                            expand(&text[s..i], s, vars, &mut value, &err)?;
                        }
                    }
                }
                if !keys.insert(key) {
                    return Err(err(
                        start,
                        eq - start,
                        format!("property '{key}' is set twice"),
                    ));
                }
                stage.end = i;
                stage.props.push(Prop {
                    key: key.to_string(),
                    value,
                    key_span: Span {
                        start,
                        len: eq - start,
                    },
                    value_span: Span {
                        start: vstart,
                        len: (i - vstart).max(1),
                    },
                });
            }
        }
    }
    if stages.is_empty() {
        return Err(err(text.len(), 1, "the description has no stages".into()));
    }
    if expect_stage {
        return Err(err(
            text.trim_end().len().saturating_sub(1),
            1,
            "a stage must follow the last '!'".into(),
        ));
    }
    Ok(Description {
        origin: origin.to_string(),
        text: text.to_string(),
        stages,
    })
}

/// Append `raw` to `out`, replacing `${name}` with its value; `offset` is `raw`'s position.
fn expand(
    raw: &str,
    offset: usize,
    vars: &Vars,
    out: &mut String,
    err: &dyn Fn(usize, usize, String) -> DescribeError,
) -> Result<(), DescribeError> {
    let mut rest = raw;
    let mut pos = offset;
    while let Some(open) = rest.find("${") {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| err(pos + open, 2, "unterminated '${'".into()))?;
        let name = &rest[open + 2..open + close];
        if let Some(seen) = vars.seen {
            let span = Span {
                start: pos + open,
                len: close + 1,
            };
            seen.borrow_mut().push((name.to_string(), span));
        }
        let value =
            (vars.lookup)(name).ok_or_else(|| err(pos + open, close + 1, (vars.missing)(name)))?;
        out.push_str(&value);
        pos += open + close + 1;
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
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
            .filter(|n| n.role == crate::stage::Role::Batch);
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
}
