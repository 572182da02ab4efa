//! Hostile numbers and names (issue 50, round 3): every float property of every registered
//! stage given nan, inf, -inf, 1e300, 1e-300 and -1 is refused with an error naming the stage
//! and the property, never a panic (`cannot convert float seconds to Duration` was one: the
//! command line exited 101); a megabyte-long stage name is refused at once with a short
//! message (it took 70 s to find no close name).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::time::{Duration, Instant};

use octopipe::describe::{self, Builtin};
use octopipe::stage::{PropType, Registry};

/// The values a red team sends a number: none may panic.
pub const HOSTILE: [&str; 6] = ["nan", "inf", "-inf", "1e300", "1e-300", "-1"];

/// Every float property of every registered stage: (stage, property, type).
pub fn float_props(registry: &Registry) -> Vec<(&'static str, &'static str, PropType)> {
    let mut all = Vec::new();
    for decl in registry.decls() {
        for spec in decl.props {
            if matches!(spec.ty, PropType::Float { .. } | PropType::Floats3 { .. }) {
                all.push((decl.name, spec.name, spec.ty));
            }
        }
    }
    all
}

/// Whether `value` is one the type takes as written (then it need not be refused, only not
/// panic): only `-1`, where a range takes negative numbers.
fn in_range(ty: PropType, value: &str) -> bool {
    value == "-1"
        && ty.accepts(if matches!(ty, PropType::Floats3 { .. }) {
            "-1,-1,-1"
        } else {
            "-1"
        })
}

#[test]
fn every_float_property_of_every_stage_refuses_hostile_numbers_naming_it() {
    let registry = Registry::builtin();
    let props = float_props(&registry);
    assert!(props.len() >= 10, "float properties found: {props:?}");
    let mut refused = 0;
    for (stage, prop, ty) in &props {
        let decl = registry.get(stage).unwrap();
        for v in HOSTILE {
            let value = match ty {
                PropType::Floats3 { .. } => format!("{v},{v},{v}"),
                _ => v.to_string(),
            };
            // As the description builder makes each stage (check, then the stage's settings).
            let made = catch_unwind(AssertUnwindSafe(|| decl.element(&[(prop, &value)])));
            let made = made.unwrap_or_else(|_| panic!("{stage} {prop}={value}: a panic"));
            match made {
                // A value in its range may still be an error for another reason (a model
                // not given): only one out of range must be refused naming the property.
                Err(_) if in_range(*ty, v) => {}
                Err(e) => {
                    let message = e.to_string();
                    assert!(
                        message.contains(&format!("{stage}: {prop} must be")),
                        "{stage} {prop}={value}: {message}"
                    );
                    refused += 1;
                }
                Ok(_) => assert!(in_range(*ty, v), "{stage} {prop}={value} was taken"),
            }
        }
    }
    eprintln!(
        "{} float properties, {refused} of {} hostile values refused",
        props.len(),
        props.len() * HOSTILE.len()
    );
}

#[test]
fn a_whole_description_with_a_hostile_duration_is_an_error_and_the_command_line_exits_2() {
    let texts = [
        "testsrc timeout=1e300 num-buffers=1 ! jsonl location=/dev/null",
        "testsrc start-timeout=nan num-buffers=1 ! jsonl location=/dev/null",
        "testsrc framerate=1e-300 num-buffers=1 ! jsonl location=/dev/null",
        "media location=/nonexistent.mp4 start-timeout=-1 ! jsonl location=/dev/null",
        "testsrc num-buffers=1 ! boxes format=synthetic ! batch max-wait-ms=1e300 ! jsonl location=/dev/null",
    ];
    for text in texts {
        let built = catch_unwind(|| {
            describe::parse("<p>", text, &HashMap::new()).and_then(|d| describe::build(&d))
        })
        .unwrap_or_else(|_| panic!("{text}: a panic"));
        let e = built.err().unwrap_or_else(|| panic!("{text}: built"));
        assert!(e.to_string().contains("must be"), "{text}: {e}");
    }
    // The command line: an error (exit 1 or 2), not a panic (101).
    let cases: [(&[&str], &str); 3] = [
        (&["run", texts[0]], "testsrc: timeout must be"),
        (
            &[
                "run",
                "testsrc num-buffers=1 ! boxes format=synthetic ! jsonl location=/dev/null",
                "--budget-ms",
                "1e300",
            ],
            "--budget-ms must be",
        ),
        (
            &[
                "run",
                "testsrc num-buffers=1 ! boxes format=synthetic ! jsonl location=/dev/null",
                "--budget-ms",
                "1e-300",
            ],
            "--budget-ms must be",
        ),
    ];
    for (args, words) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_octopipe"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: {:?}: {stderr}",
            out.status
        );
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
}

#[test]
fn a_megabyte_long_stage_name_is_refused_at_once_with_a_short_message() {
    let name = "a".repeat(1 << 20);
    for text in [
        format!("{name} ! jsonl location=/dev/null"),
        format!("testsrc ! {name}x"),
    ] {
        let start = Instant::now();
        let Err(e) =
            describe::parse("<p>", &text, &HashMap::new()).and_then(|d| describe::build(&d))
        else {
            panic!("a megabyte-long name was taken");
        };
        let took = start.elapsed();
        let message = e.to_string();
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert!(
            message.contains("unknown stage 'aaaa"),
            "{}",
            &message[..200]
        );
        assert!(message.contains("(1048576 bytes)") || message.contains("(1048577 bytes)"));
        assert!(message.len() < 4096, "a message of {} bytes", message.len());
        eprintln!("refused in {took:?}: {} bytes of message", message.len());
    }
}
