//! Credentials in URIs never leave the process: `rtsp://admin:secret@cam/stream` is shown as
//! `rtsp://***@cam/stream` wherever octopipe names a source (`GET /streams`, logs, errors, the
//! report, the frames' `source`). Only the GStreamer pipeline itself gets the URI as written.

use std::borrow::Cow;

/// What stands in for the user information of a URI.
pub const HIDDEN: &str = "***";

/// `text` with the user information (`user:password@`) of every URI in it replaced by
/// [`HIDDEN`]. A URI is `scheme://authority...`; its authority ends at `/`, `?`, `#`, white
/// space or a quote, and its user information is what comes before the authority's last `@`.
pub fn credentials(text: &str) -> Cow<'_, str> {
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
    }
}
