//! Credentials in URIs never leave the process: `rtsp://admin:secret@cam/stream` is shown as
//! `rtsp://***@cam/stream`, and `srt://h:9000?passphrase=s3cret&latency=80` as
//! `srt://h:9000?passphrase=***&latency=80`, wherever octopipe names a source (`GET /streams`,
//! logs, errors, the report, the frames' `source`). Only the GStreamer pipeline itself gets the
//! URI as written.

use std::borrow::Cow;

/// What stands in for the user information of a URI.
pub const HIDDEN: &str = "***";

/// `text` with the user information (`user:password@`) of every URI in it, and the values of
/// its query's secret parameters ([`is_secret`]: `password=`, `passphrase=`, `token=`, ...),
/// replaced by [`HIDDEN`]. A URI is `scheme://authority...`; its authority ends at `/`, `?`,
/// `#`, white space or a quote, and its user information is what comes before the authority's
/// last `@`; its query parameters follow `?`, `&` or `;` until white space or a quote.
pub fn credentials(text: &str) -> Cow<'_, str> {
    match user_information(text) {
        Cow::Borrowed(b) => query_secrets(b),
        Cow::Owned(o) => Cow::Owned(query_secrets(&o).into_owned()),
    }
}

/// Whether a URI query parameter named `name` holds a secret: a password, passphrase, token,
/// secret, key or signature by its name (case-insensitive).
pub fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    const EXACT: &[&str] = &[
        "pass",
        "pwd",
        "key",
        "apikey",
        "api_key",
        "auth",
        "sig",
        "signature",
        "credential",
        "credentials",
        "authorization",
        "access_key",
        "streamid",
    ];
    EXACT.contains(&name.as_str())
        || [
            "password",
            "passwd",
            "passphrase",
            "token",
            "secret",
            "signature",
        ]
        .iter()
        .any(|w| name.contains(w))
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
    }
    out.push_str(rest);
    Cow::Owned(out)
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
        ];
        for (text, want) in cases {
            assert_eq!(credentials(text), want, "{text}");
        }
    }

    proptest::proptest! {
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
