//! Reading values from their text: booleans, sizes, triples of numbers.

/// The spellings of a boolean every front end takes (a description, the command line, a stream
/// added over HTTP, Python), true's then false's; letters in any case (`TRUE`, `On`).
pub const BOOL_SPELLINGS: &str = "true/false, yes/no, on/off, 1/0 (any case)";

/// A boolean property's value: `true`, `yes`, `on`, `1` or `false`, `no`, `off`, `0`, letters
/// in any case ([`BOOL_SPELLINGS`]); anything else is none.
pub fn parse_bool(s: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "on", "1"];
    const FALSE: [&str; 4] = ["false", "no", "off", "0"];
    if TRUE.iter().any(|t| s.eq_ignore_ascii_case(t)) {
        Some(true)
    } else if FALSE.iter().any(|f| s.eq_ignore_ascii_case(f)) {
        Some(false)
    } else {
        None
    }
}

pub(super) fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    Some((
        w.parse::<u32>().ok().filter(|v| *v > 0)?,
        h.parse::<u32>().ok().filter(|v| *v > 0)?,
    ))
}

pub(super) fn parse_floats3(s: &str) -> Option<[f32; 3]> {
    let v: Vec<f32> = s
        .split(',')
        .map(|x| x.trim().parse().ok().filter(|f: &f32| f.is_finite()))
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_set_of_boolean_spellings_in_any_case() {
        for t in ["true", "yes", "on", "1", "TRUE", "Yes", "oN"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "no", "off", "0", "FALSE", "No", "OFF"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["", "y", "n", "t", "2", "enabled", " true", "true "] {
            assert_eq!(parse_bool(bad), None, "{bad:?}");
        }
    }
}
