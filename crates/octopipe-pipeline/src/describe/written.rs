//! One stage written from its properties given as values (the Python module's keyword
//! arguments): the description text the parser reads back, checked against the stage's
//! declared properties as the builder checks them, so a front end that takes properties as
//! values reports the builder's own errors.
//!
//! ```
//! use octopipe_core::stage::Registry;
//! use octopipe_pipeline::describe::{stage_text, Builtin};
//!
//! let registry = Registry::builtin();
//! let props = [("num-buffers".to_string(), "30".to_string())];
//! assert_eq!(stage_text(&registry, "testsrc", &props).unwrap(), "testsrc num-buffers=30");
//! let bad = [("num-bufers".to_string(), "30".to_string())];
//! let e = stage_text(&registry, "testsrc", &bad).unwrap_err();
//! assert_eq!(e.message, "stage 'testsrc' has no property 'num-bufers' (did you mean 'num-buffers'?)");
//! ```

use std::collections::HashMap;

use super::build::unknown;
use super::load::COMMAND_LINE;
use super::{parse, quote, DescribeError};
use octopipe_core::description::{error_at, Span};
use octopipe_core::stage::{Props, Registry};

/// Stage `kind` with `props` (`(name, value)`, in order) as description text: `kind name=value
/// ...`, each value quoted so that the parser reads it back as given (`${` included: no
/// variable is read from a value). Checked as the builder checks a stage (origin
/// [`COMMAND_LINE`], the positions those of this text): an unknown stage or property (naming the
/// closest) or a value not of its property's type is the builder's error. Checks across
/// properties (a required one missing, ...) are left to the build of the whole description.
pub fn stage_text(
    registry: &Registry,
    kind: &str,
    props: &[(String, String)],
) -> Result<String, DescribeError> {
    let mut text = kind.to_string();
    for (name, value) in props {
        text += &format!(" {name}={}", quote(value));
    }
    let desc = parse(COMMAND_LINE, &text, &HashMap::new())?;
    let st = match desc.stages.as_slice() {
        [st] if st.kind == kind && !st.reference && st.props.len() == props.len() => st,
        // A kind or a property name that is no word of the language (`a b`, `x ! y`).
        _ => {
            let span = Span {
                start: 0,
                len: text.len().max(1),
            };
            return Err(error_at(
                COMMAND_LINE,
                &text,
                span,
                format!("'{kind}' with these properties is not one stage"),
            ));
        }
    };
    let decl = registry
        .get(kind)
        .ok_or_else(|| unknown(&desc, registry, st))?;
    Props::new(&desc, st, decl).check()?;
    Ok(text)
}
