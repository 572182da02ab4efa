//! Writing values so that the parser reading them gets them back exactly, whatever their bytes:
//! [`quote`] for a description (what [`parse`](super::parse) reads), [`gst_value`] for a value
//! octopipe hands to GStreamer's own launch parser (a GStreamer head's properties). A value
//! that ended in `\` once ate the ` ! ` put after it in a head, so GStreamer saw another graph
//! than the one checked; property tests below hold both writers to every value, against the
//! real parsers.

/// `value` as a description value that [`parse`](super::parse) reads back as `value`, and
/// that cannot end its stage or chain: bare when it is plain, else in quotes (`'...'`, with
/// `"..."` for a `'`), a `$` alone in its quotes so no `${` is read as a variable.
pub fn quote(value: &str) -> String {
    let plain = |c: char| !c.is_ascii() || (c.is_ascii_graphic() && !"\"'!#$\\".contains(c));
    if !value.is_empty() && value.chars().all(plain) {
        return value.to_string();
    }
    if value.is_empty() {
        return "''".to_string();
    }
    let mut out = String::with_capacity(value.len() + 4);
    // The quote of the open segment, if one is open.
    let mut open: Option<char> = None;
    for c in value.chars() {
        let q = if c == '\'' { '"' } else { '\'' };
        if open != Some(q) {
            if let Some(o) = open {
                out.push(o);
            }
            out.push(q);
            open = Some(q);
        }
        out.push(c);
        if c == '$' {
            out.push(q);
            open = None;
        }
    }
    if let Some(o) = open {
        out.push(o);
    }
    out
}

/// Whether `key` can stand as a property name in GStreamer launch text (a GObject property,
/// or `child::property` for a child proxy).
pub(crate) fn gst_key(key: &str) -> bool {
    key.split("::").all(|part| {
        let mut chars = part.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// `value` as GStreamer launch text gives it back to a property (1.22's `parse.l` and
/// `grammar.y`): every character that could end or re-quote the token is escaped with `\`
/// (which the parser takes off); a value the string deserializer would read otherwise (`NULL`,
/// or one starting and ending in `"`), or one ending in `\`, is wrapped as `gst_string_wrap`
/// does (the deserializer unwraps it); the empty value is `""`. Control characters have no such text: an error.
pub(crate) fn gst_value(value: &str) -> Result<String, &'static str> {
    if value.chars().any(|c| c.is_control()) {
        return Err("a control character (a line break, a tab, ...) cannot be given to GStreamer");
    }
    if value.is_empty() {
        return Ok("\"\"".to_string());
    }
    let wrapped;
    // A token ending in `\` would swallow the white space after it (flex takes the longest
    // match, and `\` + space is an escaped space): such a value is wrapped too.
    let wrap_it = value == "NULL"
        || (value.starts_with('"') && value.ends_with('"'))
        || value.ends_with('\\');
    let value = if wrap_it {
        wrapped = wrap(value);
        &wrapped
    } else {
        value
    };
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() && !"_-+/:.,=@%~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(out)
}

/// GStreamer's `gst_string_wrap`: in double quotes, `[A-Za-z0-9_+/:.-]` as they are, other
/// printable ASCII after a `\`, every other byte as `\ooo`.
fn wrap(value: &str) -> String {
    let mut out = String::from("\"");
    for b in value.bytes() {
        match b {
            b if b.is_ascii_alphanumeric() || b"_-+/:.".contains(&b) => out.push(b as char),
            b if !(0x20..0x7f).contains(&b) => out += &format!("\\{:03o}", b),
            b => {
                out.push('\\');
                out.push(b as char);
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gstreamer as gst;
    use gstreamer::prelude::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn plain_values_stay_bare() {
        assert_eq!(quote("rtsp://cam:554/s"), "rtsp://cam:554/s");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(quote("${x}"), "'$''{x}'");
        assert_eq!(gst_value("w\\").unwrap(), "\\\"w\\\\\\\\\\\"");
        assert_eq!(gst_value("a b").unwrap(), "a\\ b");
        assert!(gst_key("location") && gst_key("src::caps") && !gst_key("lo\"c") && !gst_key(""));
    }

    /// A description with `value` quoted in its first stage.
    fn parsed(value: &str) -> super::super::Description {
        let text = format!("testsrc pattern={} ! boxes format=synthetic", quote(value));
        super::super::parse("<test>", &text, &HashMap::new())
            .unwrap_or_else(|e| panic!("{value:?} as {text:?}: {e}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any value, quoted, is read back as itself and leaves the chain as it was.
        #[test]
        fn a_quoted_value_is_read_back_whole(value in any::<String>()) {
            let d = parsed(&value);
            prop_assert_eq!(d.stages.len(), 2);
            prop_assert_eq!(d.stages[0].props.len(), 1);
            prop_assert_eq!(&d.stages[0].props[0].value, &value);
            prop_assert_eq!(d.stages[1].kind.as_str(), "boxes");
        }

        /// The same for the characters that matter most, more often.
        #[test]
        fn quotes_backslashes_and_dollars(value in "[\\\\\"'$!#{} \\n=a]{0,12}") {
            let d = parsed(&value);
            prop_assert_eq!(d.stages.len(), 2);
            prop_assert_eq!(&d.stages[0].props[0].value, &value);
        }
    }

    /// `filesrc location=V ! fakesink name=end` through GStreamer's launch parser: the two
    /// elements, and the location as given.
    fn through_gstreamer(value: &str) -> Result<(usize, String), String> {
        let text = format!(
            "filesrc location={} ! fakesink name=end",
            gst_value(value).map_err(String::from)?
        );
        let bin = gst::parse::bin_from_description(&text, false).map_err(|e| e.to_string())?;
        let elements = bin
            .iterate_elements()
            .into_iter()
            .filter_map(Result::ok)
            .count();
        let src = bin
            .iterate_elements()
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.factory().is_some_and(|f| f.name() == "filesrc"))
            .ok_or("no filesrc")?;
        let location: Option<String> = src.property("location");
        Ok((elements, location.unwrap_or_default()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Any value without control characters reaches its GStreamer property whole, and the
        /// launch text keeps its two elements (no value ends its own chain).
        #[test]
        fn a_gstreamer_value_reaches_its_property_whole(value in "[^\\p{Cc}]{0,24}") {
            gst::init().unwrap();
            prop_assert_eq!(through_gstreamer(&value), Ok((2, value.clone())));
        }

        #[test]
        fn gstreamer_quotes_backslashes_and_spaces(value in "[\\\\\"' !a=N/UL@]{0,10}") {
            gst::init().unwrap();
            prop_assert_eq!(through_gstreamer(&value), Ok((2, value.clone())));
        }
    }

    #[test]
    fn the_escape_of_the_issue_stays_one_value() {
        gst::init().unwrap();
        for value in [
            "w\\",
            "w\\\\",
            "\"",
            "\"a\"",
            "NULL",
            "a\\\"",
            "'",
            "x' ! filesink location='y",
        ] {
            assert_eq!(
                through_gstreamer(value),
                Ok((2, value.to_string())),
                "{value:?}"
            );
        }
        assert!(gst_value("a\nb").is_err());
    }
}
