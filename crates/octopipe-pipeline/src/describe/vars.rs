//! A description's variables (`${name}`): where their values come from, and the errors for
//! one not set or one set that the description never uses, in the words of the front end that
//! sets them.

use std::collections::HashMap;

use super::scan::{scan, Vars};
use octopipe_core::description::{closest, error_at, DescribeError, Description, Span};

/// Who sets a description's variables, for the advice of a message about one not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// The command line: `octopipe run --set name=VALUE`.
    CommandLine,
    /// Python: `octopipe.run(..., vars={'name': ...})`, `Pipeline(..., vars=...)`.
    Python,
}

impl SetBy {
    /// How to set the variables `names`: `--set a=VALUE --set b=VALUE`, `vars={'a': ..., 'b': ...}`.
    fn advice(self, names: &[&str]) -> String {
        match self {
            SetBy::CommandLine => names
                .iter()
                .map(|n| format!("--set {n}=VALUE"))
                .collect::<Vec<_>>()
                .join(" "),
            SetBy::Python => format!(
                "vars={{{}}}",
                names
                    .iter()
                    .map(|n| format!("'{n}': ..."))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Parse `text` (from `origin`, used in messages), replacing `${name}` with `vars`. Every
/// variable not set is named in the one error, which points at the first.
pub fn parse(
    origin: &str,
    text: &str,
    vars: &HashMap<String, String>,
) -> Result<Description, DescribeError> {
    parse_set_by(origin, text, vars, SetBy::CommandLine)
}

/// [`parse`] for a front end whose variables are set as `set_by` says: an unset variable's
/// error advises setting it that way (`vars={'model': ...}` in Python).
pub fn parse_set_by(
    origin: &str,
    text: &str,
    vars: &HashMap<String, String>,
    set_by: SetBy,
) -> Result<Description, DescribeError> {
    let lookup = |name: &str| vars.get(name).cloned();
    scan_with(origin, text, &lookup, "", set_by)
}

/// [`parse`], with the environment's variables for those `vars` does not set (`${OCTOPIPE_DATA}`
/// after `. scripts/env.sh`; `--set` wins). For descriptions the user writes (`octopipe run`),
/// never for ones that come over a network (`POST /streams`), which must not read the
/// environment. A variable of `vars` that the description never uses is an error (a misspelt
/// `--set modle=...` would otherwise be ignored), with the closest name it uses.
pub fn parse_with_env(
    origin: &str,
    text: &str,
    vars: &HashMap<String, String>,
) -> Result<Description, DescribeError> {
    let used = variables(origin, text);
    let mut given: Vec<&String> = vars.keys().collect();
    given.sort();
    if let Some(name) = given
        .into_iter()
        .find(|name| !used.iter().any(|(u, _)| u == *name))
    {
        return Err(unused_variable(origin, text, name, &used));
    }
    let lookup = |name: &str| vars.get(name).cloned().or_else(|| std::env::var(name).ok());
    scan_with(
        origin,
        text,
        &lookup,
        ", or set it in the environment",
        SetBy::CommandLine,
    )
}

/// The variables `text` uses (`${name}`), each once with the span of its first use, in order.
/// A text that does not parse gives those before the error.
pub fn variables(origin: &str, text: &str) -> Vec<(String, Span)> {
    let seen = std::cell::RefCell::new(Vec::new());
    let _ = scan(
        origin,
        text,
        &Vars {
            lookup: &|_| Some(String::new()),
            missing: &|_| String::new(),
            seen: Some(&seen),
        },
    );
    let mut out: Vec<(String, Span)> = Vec::new();
    for (name, span) in seen.into_inner() {
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, span));
        }
    }
    out
}

/// Scan `text` with `lookup`; the error for variables not set names all of them, with `env`
/// after the `--set` advice.
fn scan_with(
    origin: &str,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    env: &str,
    set_by: SetBy,
) -> Result<Description, DescribeError> {
    let unset: Vec<String> = variables(origin, text)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| lookup(name).is_none())
        .collect();
    let missing = |name: &str| match unset.len() {
        0 | 1 => format!(
            "variable '{name}' is not set (give it with {}{env})",
            set_by.advice(&[name])
        ),
        _ => {
            let names: Vec<String> = unset.iter().map(|n| format!("'{n}'")).collect();
            let all: Vec<&str> = unset.iter().map(String::as_str).collect();
            let env = env.replace(" it ", " them ");
            format!(
                "variables {} are not set (give them with {}{env})",
                names.join(", "),
                set_by.advice(&all)
            )
        }
    };
    scan(
        origin,
        text,
        &Vars {
            lookup,
            missing: &missing,
            seen: None,
        },
    )
}

/// The error for `--set name=...` that `text` never uses: at the use of the closest name when
/// one is close (a misspelling), else at the start.
fn unused_variable(origin: &str, text: &str, name: &str, used: &[(String, Span)]) -> DescribeError {
    let near = closest(name, used.iter().map(|(n, _)| n.as_str()));
    let names: Vec<&str> = used.iter().map(|(n, _)| n.as_str()).collect();
    let uses = match names.is_empty() {
        true => "it uses no variables".to_string(),
        false => format!("it uses {}", names.join(", ")),
    };
    let (span, hint) = match near.and_then(|n| used.iter().find(|(u, _)| u == n)) {
        Some((n, span)) => (*span, format!("did you mean '{n}'? {uses}")),
        None => (Span { start: 0, len: 1 }, uses),
    };
    error_at(
        origin,
        text,
        span,
        format!("--set {name}=...: the description never uses ${{{name}}} ({hint})"),
    )
}
