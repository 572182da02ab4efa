//! What a stream added while running is admitted with, and what is kept of it once it ended:
//! its id (an id-less add takes the next one in the automatic range, whatever ids were asked
//! for beyond it), the UDP port it receives on (two streams on one port would share its
//! packets), its description as shown (cut), and how long a removal may take.

use std::time::Duration;

use crate::describe::Description;

/// Ids an add without an id takes: `0..AUTO_IDS`. An id asked for beyond (4294967295) is
/// taken as asked but does not move the automatic numbering.
pub const AUTO_IDS: u32 = 1 << 31;

/// A removed stream whose threads have not ended this long after its removal (a source that
/// does not stop: a server that keeps sending headers) is detached: its threads are left to end
/// on their own, it stops counting toward `--max-streams`, and the report says so.
pub const REMOVE_DEADLINE: Duration = Duration::from_secs(10);

/// The most characters of a stream's description kept to show it (`GET /streams`): what a
/// stream costs once it ended is its report row and this.
pub const SHOWN_SOURCE: usize = 512;

/// The id an add without one takes: the next after the highest of `taken` in the automatic
/// range, else the lowest free one there. `None` when the range is full.
pub(super) fn next_id(taken: impl Iterator<Item = u32> + Clone) -> Option<u32> {
    let highest = taken.clone().filter(|id| *id < AUTO_IDS).max();
    match highest {
        None => Some(0),
        Some(h) if h + 1 < AUTO_IDS => Some(h + 1),
        Some(_) => {
            let used: std::collections::BTreeSet<u32> = taken.filter(|id| *id < AUTO_IDS).collect();
            (0..AUTO_IDS).find(|id| !used.contains(id))
        }
    }
}

/// The UDP port a stream's source receives on, when it is one that does: `rtp port=P`, a head
/// of `udpsrc port=P` (5004 when it names none, GStreamer's default), or `media
/// location=udp://HOST:P` (`rtp://` too).
pub(super) fn udp_port(desc: &Description) -> Option<u16> {
    let first = desc.stages.first()?;
    let prop = |key: &str| {
        first
            .props
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    };
    match first.kind.as_str() {
        "rtp" => prop("port")?.parse().ok(),
        "udpsrc" => match prop("uri") {
            Some(uri) => uri_port(uri),
            None => prop("port").map_or(Some(5004), |p| p.parse().ok()),
        },
        "media" => uri_port(prop("location")?),
        _ => None,
    }
}

/// The port of a `udp://` or `rtp://` URI.
fn uri_port(uri: &str) -> Option<u16> {
    let (scheme, rest) = uri.split_once("://")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "udp" | "rtp") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// The most characters kept of why a stream failed (`GET /streams`' `error`, the report's line).
pub const SHOWN_REASON: usize = 1024;

/// `text` as a stream is shown once added: credentials in URIs and secrets in their queries
/// hidden, control characters escaped (one line in a log or report), cut to [`SHOWN_SOURCE`]
/// characters.
pub(super) fn shown(text: &str) -> String {
    cut(&octopipe_core::redact::shown(text), SHOWN_SOURCE)
}

/// `text` cut to `max` characters, saying how long it was.
pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}... ({} bytes in all)", &text[..at], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn ids_beyond_the_automatic_range_leave_it_alone() {
        assert_eq!(next_id([].into_iter()), Some(0));
        assert_eq!(next_id([3, 7].into_iter()), Some(8));
        assert_eq!(next_id([3, u32::MAX].into_iter()), Some(4));
        assert_eq!(next_id([u32::MAX, AUTO_IDS].into_iter()), Some(0));
        assert_eq!(next_id([0, AUTO_IDS - 1].into_iter()), Some(1));
    }

    #[test]
    fn the_port_a_stream_receives_on() {
        let port = |text: &str| {
            let d = crate::describe::parse("<t>", text, &HashMap::new()).unwrap();
            udp_port(&d)
        };
        assert_eq!(port("rtp port=5006 ! boxes"), Some(5006));
        assert_eq!(port("udpsrc ! boxes"), Some(5004));
        assert_eq!(port("udpsrc port=7000 ! boxes"), Some(7000));
        assert_eq!(
            port("media location=udp://127.0.0.1:5008 ! boxes"),
            Some(5008)
        );
        assert_eq!(port("media location=UDP://@:5010 ! boxes"), Some(5010));
        assert_eq!(port("media location=rtsp://h:554/x ! boxes"), None);
        assert_eq!(port("testsrc ! boxes"), None);
    }

    #[test]
    fn a_long_description_is_cut() {
        let long = format!("testsrc pattern={} ! boxes", "x".repeat(10_000));
        let s = shown(&long);
        assert!(s.len() < SHOWN_SOURCE + 64, "{}", s.len());
        assert!(s.ends_with("(10024 bytes in all)"), "{s}");
        assert_eq!(shown("testsrc ! boxes"), "testsrc ! boxes");
    }
}
