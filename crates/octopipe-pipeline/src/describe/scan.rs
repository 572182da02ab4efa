//! The scanner: a description's text into stages and properties, `${name}` replaced on the way.

use std::collections::HashSet;

use octopipe_core::description::{error_at, DescribeError, Description, Prop, Span, StageDesc};

/// Where `${name}` values come from, and what to say when one is missing.
pub(super) struct Vars<'a> {
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
    pub(super) missing: &'a dyn Fn(&str) -> String,
    /// Where each use of a variable is recorded, name and span (for [`variables`](super::variables)).
    pub(super) seen: Option<&'a std::cell::RefCell<Vec<(String, Span)>>>,
}

// One pass of a hand-written scanner over the bytes: its states (stage, key, quoted value,
// comment) share the position and the error context, which splitting would thread through.
pub(super) fn scan(origin: &str, text: &str, vars: &Vars) -> Result<Description, DescribeError> {
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
