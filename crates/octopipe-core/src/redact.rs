//! Credentials in URIs never leave the process: `rtsp://admin:secret@cam/stream` is shown as
//! `rtsp://***@cam/stream`, `rtsp://cam/admin:secret@stream` as `rtsp://cam/***@stream`, and
//! `srt://h:9000?passphrase=s3cret&latency=80` as `srt://h:9000?passphrase=***&latency=80`
//! (a parameter's name is matched after percent-decoding: `pass%70hrase=` is hidden too),
//! wherever octopipe names a source (`GET /streams`, logs, errors, the report, the frames'
//! `source`). Only the GStreamer pipeline itself gets the URI as written. [`shown`] also
//! escapes control characters, so that a value written in a log line or a report stays on
//! its line (a newline in a location cannot forge a line of its own).

use std::borrow::Cow;
use std::fmt::Write as _;

/// What stands in for the user information of a URI.
pub const HIDDEN: &str = "***";

/// `text` with the user information (`user:password@`) of every URI in it, credentials in its
/// path (`/user:password@`), and the values of its query's secret parameters ([`is_secret`]:
/// `password=`, `passphrase=`, `token=`, `jwt=`, `session=`, ...), replaced by [`HIDDEN`]. A
/// URI is `scheme://authority...`; its authority ends at `/`, `?`, `#`, white space or a
/// quote, and its user information is what comes before the authority's last `@`; a path
/// segment holding `:` before `@` is credentials up to its last `@`; its query parameters
/// follow `?`, `&` or `;` until white space or a quote.
pub fn credentials(text: &str) -> Cow<'_, str> {
    match user_information(text) {
        Cow::Borrowed(b) => query_secrets(b),
        Cow::Owned(o) => Cow::Owned(query_secrets(&o).into_owned()),
    }
}

/// `text` as octopipe shows a value a user gave (in a log line, a report, an answer):
/// [`credentials`] hidden and control characters escaped ([`controls`]).
pub fn shown(text: &str) -> Cow<'_, str> {
    match credentials(text) {
        Cow::Borrowed(b) => controls(b),
        Cow::Owned(o) => Cow::Owned(controls(&o).into_owned()),
    }
}

/// `text` with every control character escaped: `\n`, `\r`, `\t`, and others (C0, DEL, C1,
/// the terminal's ESC among them) as `\u{..}`. What is left is one line with no terminal
/// control sequence.
pub fn controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether a URI query parameter named `name` holds a secret: a password, passphrase, token,
/// secret, key, signature, session or credential by its name (case-insensitive, after
/// percent-decoding: `pass%77ord` is `password`).
pub fn is_secret(name: &str) -> bool {
    let name = percent_decoded(name).to_ascii_lowercase();
    // Whole names, or the last word of a name (`x-api-key`, `aws_sig`).
    const WORDS: &[&str] = &[
        "pass", "pwd", "key", "sig", "sid", "auth", "jwt", "code", "streamid", "cookie",
    ];
    // Anywhere in a name.
    const PARTS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "token",
        "secret",
        "signature",
        "session",
        "credential",
        "apikey",
        "api_key",
        "api-key",
        "access_key",
        "private",
        "authori",
        "jwt",
    ];
    let last = name.rsplit(['-', '_', '.']).next().unwrap_or(&name);
    WORDS.contains(&name.as_str())
        || WORDS.contains(&last)
        || PARTS.iter().any(|w| name.contains(w))
}

/// `name` with its `%XX` escapes decoded (as a URI's query is read); an escape that is not
/// one (`%zz`, a lone `%`) is kept as written, bytes that are not UTF-8 shown as U+FFFD.
fn percent_decoded(name: &str) -> Cow<'_, str> {
    if !name.contains('%') {
        return Cow::Borrowed(name);
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).and_then(|b| hex(*b)),
            bytes.get(i + 2).and_then(|b| hex(*b)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// `text` with the values of URIs' secret query parameters hidden (one pass: a parameter is a
/// URI's when `://` came before it in the same word).
fn query_secrets(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains(['?', '&', ';']) {
        return Cow::Borrowed(text);
    }
    let ends_value =
        |c: char| matches!(c, '&' | ';' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace();
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut in_uri = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() || matches!(c, b'"' | b'\'') {
            in_uri = false;
        } else if bytes[i..].starts_with(b"://") {
            in_uri = true;
        } else if in_uri && matches!(c, b'?' | b'&' | b';') {
            let name_start = i + 1;
            let name_len = text[name_start..]
                .find(|c: char| c == '=' || ends_value(c))
                .unwrap_or(text.len() - name_start);
            let value_start = name_start + name_len + 1;
            let named = bytes.get(name_start + name_len) == Some(&b'=');
            if named && is_secret(&text[name_start..name_start + name_len]) {
                let value_end = text[value_start..]
                    .find(ends_value)
                    .map_or(text.len(), |e| value_start + e);
                out.push_str(&text[copied..value_start]);
                out.push_str(HIDDEN);
                copied = value_end;
                i = value_end;
                continue;
            }
        }
        i += 1;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// `text` with the user information of every URI hidden.
fn user_information(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let authority_start = at + 3;
        out.push_str(&rest[..authority_start]);
        let tail = &rest[authority_start..];
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(user_end) => {
                out.push_str(HIDDEN);
                out.push_str(&authority[user_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
        // The path, up to its query, its end or the next URI: `/user:password@` in a segment.
        let path_end = rest
            .find(|c: char| matches!(c, '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace())
            .unwrap_or(rest.len());
        // The next URI's scheme stays to be read with it.
        let path_end = rest[..path_end]
            .find("://")
            .map_or(path_end, |uri| scheme_start(&rest[..uri]));
        out.push_str(&path_credentials(&rest[..path_end]));
        rest = &rest[path_end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Where the scheme of a URI whose `://` ends `before` starts: after the last character that
/// cannot be in a scheme (RFC 3986: letters, digits, `+`, `-`, `.`), or at 0. Always a character
/// boundary of `before`, whatever characters it holds.
pub fn scheme_start(before: &str) -> usize {
    before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// A URI's `path` with each segment that holds credentials (`user:password@rest`: a `:`
/// before the segment's last `@`) shown as `***@rest`.
fn path_credentials(path: &str) -> Cow<'_, str> {
    if !path.contains('@') {
        return Cow::Borrowed(path);
    }
    let segments: Vec<String> = path
        .split('/')
        .map(|seg| match seg.rfind('@') {
            Some(at) if seg[..at].contains(':') => format!("{HIDDEN}{}", &seg[at..]),
            _ => seg.to_string(),
        })
        .collect();
    Cow::Owned(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_hidden_and_the_rest_kept() {
        let cases = [
            (
                "rtsp://admin:hunter2@10.0.0.7:554/cam",
                "rtsp://***@10.0.0.7:554/cam",
            ),
            (
                "media location=rtsp://u@h/s ! boxes",
                "media location=rtsp://***@h/s ! boxes",
            ),
            (
                "http://a:b@h?x=@y and srt://c:d@e",
                "http://***@h?x=@y and srt://***@e",
            ),
            ("rtsp://p:a@ss@host/x", "rtsp://***@host/x"),
            ("file:///data/a@b.mp4", "file:///data/a@b.mp4"),
            ("no uri here @ all", "no uri here @ all"),
            ("rtsp://host/path@x", "rtsp://host/path@x"),
            ("x=\"rtsp://u:p@h\"", "x=\"rtsp://***@h\""),
            (
                "srt://h:9000?mode=caller&passphrase=s3cret-pass&latency=80",
                "srt://h:9000?mode=caller&passphrase=***&latency=80",
            ),
            (
                "media location=http://h/p.m3u8?token=abc123 ! boxes",
                "media location=http://h/p.m3u8?token=*** ! boxes",
            ),
            (
                "rtsp://u:p@h/s?Password=x;user=me#f",
                "rtsp://***@h/s?Password=***;user=me#f",
            ),
            (
                "https://h/x?api_key=k&X-Amz-Signature=s&a=1",
                "https://h/x?api_key=***&X-Amz-Signature=***&a=1",
            ),
            ("no uri?password=x", "no uri?password=x"),
            ("a ?token=x b", "a ?token=x b"),
            ("é rtsp://h/é?token=é&b=é", "é rtsp://h/é?token=***&b=é"),
            (
                "https://h/x?jwt=eyJ.a.b&session=s1&SessionId=s2&x-api-key=k&n=1",
                "https://h/x?jwt=***&session=***&SessionId=***&x-api-key=***&n=1",
            ),
            (
                "srt://h:9?pass%70hrase=p&%74oken=t&access%5Ftoken=a&latency=80",
                "srt://h:9?pass%70hrase=***&%74oken=***&access%5Ftoken=***&latency=80",
            ),
            (
                "rtsp://cam:554/admin:hunter2@stream/1?x=1",
                "rtsp://cam:554/***@stream/1?x=1",
            ),
            (
                "http://proxy/a:b@c/http://u:p@cam/s",
                "http://proxy/***@c/http://***@cam/s",
            ),
            ("rtsp://h//u:p@cam/s", "rtsp://h//***@cam/s"),
            ("rtsp://h/a@b:c", "rtsp://h/a@b:c"),
            // A character of several bytes just before a second URI's `://` (its scheme's
            // start was once taken one byte after it, inside it: a panic).
            ("rtsp://u@h/pathé://x", "rtsp://***@h/pathé://x"),
            ("rtsp://u@h/a😀b://u:p@c/s", "rtsp://***@h/a😀b://***@c/s"),
        ];
        for (text, want) in cases {
            assert_eq!(credentials(text), want, "{text}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        let text = "rtsp://u:p@h/a\nb\r\tc\u{1b}[31md\u{85}e\u{7f}";
        assert_eq!(
            shown(text),
            "rtsp://***@h/a\\nb\\r\\tc\\u{1b}[31md\\u{85}e\\u{7f}"
        );
        assert!(matches!(shown("plain é"), Cow::Borrowed("plain é")));
        assert!(!shown("x\ny").contains('\n'));
    }

    #[test]
    fn a_schemes_start_is_a_character_boundary() {
        assert_eq!(scheme_start("see rtsp"), 4);
        assert_eq!(scheme_start("a+b-c.d"), 0);
        assert_eq!(scheme_start("pathé"), "pathé".len());
        assert_eq!(scheme_start("xé1"), "xé".len());
        assert_eq!(scheme_start(""), 0);
    }

    proptest::proptest! {
        /// Any text, of any characters, around URIs' marks (`://`, `@`, `?`, `=`): shown
        /// without a panic, and without the password of the URI written in the middle of it.
        #[test]
        fn any_text_is_shown_without_a_panic(
            before in "(\\PC|://|@|\\?|=|/){0,12}",
            after in "(\\PC|://|@|\\?|=|/|&){0,12}",
        ) {
            let text = format!("{before} rtsp://me:hunter2@cam/s {after}");
            let seen = shown(&text);
            proptest::prop_assert!(!seen.contains("hunter2"), "{}", seen);
            let _ = credentials(&before);
            let _ = credentials(&after);
        }

        #[test]
        fn a_password_never_survives(user in "[a-z]{1,8}", pass in "[!-~]{1,16}", host in "[a-z]{1,8}") {
            let pass = pass.replace(['/', '?', '#', '"', '\'', '<', '>'], "x");
            let uri = format!("rtsp://{user}:{pass}@{host}/s");
            let shown = credentials(&uri);
            proptest::prop_assert_eq!(shown.as_ref(), format!("rtsp://***@{host}/s"));
        }

        #[test]
        fn a_query_secret_never_survives(key in "(password|passphrase|token|access_token|secret)", value in "[!-~]{1,16}", host in "[a-z]{1,8}") {
            let value = value.replace(['&', ';', '#', '"', '\'', '<', '>'], "x");
            let uri = format!("srt://{host}:9000?latency=1&{key}={value}&x=1");
            let shown = credentials(&uri);
            proptest::prop_assert_eq!(shown.as_ref(), format!("srt://{host}:9000?latency=1&{key}=***&x=1"));
        }
    }
}
