//! Reading a message head (RTSP or HTTP) within the relay's caps.

use super::shared::{MAX_HEAD, MAX_HEADERS};

/// Where a message head ends (after its blank line: CRLF CRLF, or LF LF).
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The end of the head `bytes` start with once whole (`None`: more is needed), or why it passes
/// a cap ([`MAX_HEAD`] bytes, [`MAX_HEADERS`] lines).
pub(super) fn whole_head(bytes: &[u8]) -> Result<Option<usize>, String> {
    let within = &bytes[..bytes.len().min(MAX_HEAD)];
    let Some(end) = head_end(within) else {
        return match bytes.len() >= MAX_HEAD {
            true => Err(format!(
                "a message head of more than {MAX_HEAD} bytes (at most {MAX_HEAD})"
            )),
            false => Ok(None),
        };
    };
    // The status line, the headers, the blank line and what follows its newline.
    let lines = bytes[..end]
        .split(|b| *b == b'\n')
        .count()
        .saturating_sub(3);
    if lines > MAX_HEADERS {
        return Err(format!(
            "a message of {lines} header lines (at most {MAX_HEADERS})"
        ));
    }
    Ok(Some(end))
}

/// The value of header `name` (case-insensitive; the last given) in `head`.
pub(super) fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .last()
}

/// The status code of a response's head (`RTSP/1.0 302 Found`, `HTTP/1.1 200 OK`).
pub(super) fn status(head: &str) -> Option<u16> {
    let line = head.lines().next()?;
    let mut words = line.split_whitespace();
    let version = words.next()?;
    if !(version.starts_with("RTSP/") || version.starts_with("HTTP/")) {
        return None;
    }
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_whole_and_within_the_caps() {
        assert_eq!(whole_head(b"HTTP/1.1 200 OK\r\nA: b\r\n"), Ok(None));
        assert_eq!(
            whole_head(b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nxy"),
            Ok(Some(25))
        );
        let lines = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: y\r\n".repeat(129));
        let why = whole_head(lines.as_bytes()).unwrap_err();
        assert!(why.contains("129 header lines (at most 128)"), "{why}");
        let ok = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: y\r\n".repeat(128));
        assert!(whole_head(ok.as_bytes()).unwrap().is_some());
        let head = "HTTP/1.1 302 Found\r\nlocation: a\r\nLocation: b\r\n";
        assert_eq!(header(head, "LOCATION"), Some("b"));
        assert_eq!(status(head), Some(302));
        assert_eq!(status("RTSP/1.0 301 Moved\r\n"), Some(301));
        assert_eq!(status("DESCRIBE rtsp://x RTSP/1.0\r\n"), None);
    }
}
