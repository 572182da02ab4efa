//! A network URI read as GStreamer reads it (`gst_uri_from_string`, which `srtsrc`, `udpsrc`
//! and `ristsrc` take their settings from): the scheme in lower case; the host without its
//! brackets, its escapes decoded; the port as digits; the query split at `&` (and `;`), each
//! key and value decoded as GLib decodes them (`g_uri_unescape_string`), a key given twice
//! taking its last value (GStreamer keeps them in a hash table). And the addresses that mean
//! "every interface", in every spelling the system's resolver takes (`[::]`, `[::0]`,
//! `[::ffff:0.0.0.0]`, `0`, `0x0`, `00.0.0.0`, an empty host).

use std::net::Ipv6Addr;

/// Schemes whose source connects to the URI's host (`rtspsrc`, `souphttpsrc`): an empty or
/// unspecified host there reaches the station's own machine.
pub(super) const CONNECTING: &[&str] = &[
    "rtsp", "rtspt", "rtspu", "rtsps", "rtspsu", "rtspst", "rtsph", "rtspsh", "http", "https",
];

/// Why the station's relay cannot bound what a server of `scheme` answers (TLS or a tunnel to
/// the server itself, which the relay does not read), for the refusal of such a URI unless the
/// operator allows its scheme (`--allow-scheme`); `None` for a scheme the relay reads or one
/// it has nothing to do with.
pub(super) fn uncapped(scheme: &str) -> Option<&'static str> {
    match scheme {
        "rtsps" | "rtspsu" | "rtspst" | "https" => Some(
            "its server's answers come over TLS, which the station's relay does not read, so \
             they are not bounded by the station (docs/security.md, \"Peers' answers\")",
        ),
        "rtsph" | "rtspsh" => Some(
            "RTSP tunnelled over HTTP is not read by the station's relay, so the server's \
             answers are not bounded by the station (docs/security.md, \"Peers' answers\")",
        ),
        _ => None,
    }
}

/// Why a URI whose source connects to its host ([`CONNECTING`]) would reach the station's own
/// machine: its host is every interface, or none, in any spelling; `None` otherwise.
pub(super) fn connects_to_itself(u: &Uri) -> Option<String> {
    (CONNECTING.contains(&u.scheme.as_str()) && is_unspecified(&u.host)).then(|| {
        format!(
            "host '{}' is every interface, or none: a connection there reaches this station's \
             own machine; name the camera's host",
            octopipe_core::redact::shown(&u.host)
        )
    })
}

/// A URI's parts, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Uri {
    /// The scheme, lower case.
    pub scheme: String,
    /// The host, decoded, without brackets (empty when there is none).
    pub host: String,
    /// The port as written after the host's `:` (`None`: no `:`).
    pub port: Option<String>,
    /// The query's keys and values, decoded, in order (a key without `=` has an empty value).
    pub query: Vec<(String, String)>,
}

impl Uri {
    /// Read `value` (`scheme://[userinfo@]host[:port][/path][?query][#fragment]`); an error
    /// says what GStreamer could not read the same way (an escape that is not one, a host in
    /// brackets left open, a `:` in a host not in brackets).
    pub fn parse(value: &str) -> Result<Uri, String> {
        let (scheme, rest) = value
            .split_once("://")
            .ok_or_else(|| "not a URI (scheme://...)".to_string())?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let after = &rest[end..];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = match host_port.strip_prefix('[') {
            Some(inner) => {
                let (host, tail) = inner
                    .split_once(']')
                    .ok_or_else(|| "a host in '[' left without its ']'".to_string())?;
                let port = match tail {
                    "" => None,
                    t => Some(
                        t.strip_prefix(':')
                            .ok_or_else(|| format!("'{t}' after the host's ']'"))?,
                    ),
                };
                (host, port)
            }
            None => match host_port.split_once(':') {
                Some((_, p)) if p.contains(':') => {
                    return Err(
                        "a ':' in a host not in brackets (an IPv6 host is [ADDRESS])".into(),
                    )
                }
                Some((h, p)) => (h, Some(p)),
                None => (host_port, None),
            },
        };
        if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit())) {
            return Err("a port that is not a number".into());
        }
        let query = match after.split_once('?') {
            None => Vec::new(),
            Some((_, q)) => {
                let q = q.split_once('#').map_or(q, |(q, _)| q);
                q.split(['&', ';'])
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        Ok((unescape(k)?, unescape(v)?))
                    })
                    .collect::<Result<_, String>>()?
            }
        };
        Ok(Uri {
            scheme: scheme.to_ascii_lowercase(),
            host: unescape(host)?,
            port: port.map(str::to_string),
            query,
        })
    }

    /// Every value given to `key` (case-insensitive), in order: GStreamer takes the last.
    pub fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.query
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

/// `text` with its `%XX` escapes decoded as GLib decodes them (`g_uri_unescape_string`); an
/// error, where GLib gives none, for an escape that is not one (`%zz`, a lone `%`), a NUL, or
/// bytes that are not UTF-8.
fn unescape(text: &str) -> Result<String, String> {
    if !text.contains('%') {
        return Ok(text.to_string());
    }
    let bad = || {
        format!(
            "'{}' holds an escape that is not one",
            octopipe_core::redact::shown(text)
        )
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        let byte = hex
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(bad)?;
        if byte == 0 || !hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(bad());
        }
        out.push(byte);
        i += 3;
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Whether `host` (decoded, without brackets) means every interface or none: empty, an
/// unspecified IPv6 address (`::`, `::0`, `0:0::0`, `::ffff:0.0.0.0`, with a `%zone`), or
/// 0.0.0.0 in any form `inet_aton` reads (`0`, `0.0`, `00.0.0.0`, `0x0`, `0X00.0`, trailing
/// dots or text after white space).
pub(super) fn is_unspecified(host: &str) -> bool {
    let host = host.split(char::is_whitespace).next().unwrap_or("");
    let host = host.trim_end_matches('.');
    if host.is_empty() {
        return true;
    }
    let v6 = host.split('%').next().unwrap_or(host);
    if let Ok(a) = v6.parse::<Ipv6Addr>() {
        return a.is_unspecified() || a.to_ipv4().is_some_and(|v4| v4.is_unspecified());
    }
    let parts: Vec<&str> = host.split('.').collect();
    let zero = |p: &str| {
        let digits = p
            .strip_prefix("0x")
            .or_else(|| p.strip_prefix("0X"))
            .unwrap_or(p);
        (!digits.is_empty() || p.len() == 2) && digits.bytes().all(|b| b == b'0')
    };
    parts.len() <= 4 && parts.iter().all(|p| zero(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_keys_and_values_are_decoded_and_all_kept_in_order() {
        let u =
            Uri::parse("SRT://u:p@[::0]:7120/x?mode=caller&mo%64e=listener;latency=1#f").unwrap();
        assert_eq!(u.scheme, "srt");
        assert_eq!(u.host, "::0");
        assert_eq!(u.port.as_deref(), Some("7120"));
        assert_eq!(u.values("mode").collect::<Vec<_>>(), ["caller", "listener"]);
        assert_eq!(u.values("latency").collect::<Vec<_>>(), ["1"]);
        let u = Uri::parse("udp://@:5004").unwrap();
        assert_eq!((u.host.as_str(), u.port.as_deref()), ("", Some("5004")));
        for bad in [
            "srt://h:7001?mode=%zz",
            "srt://[::1:7001",
            "udp://h:50%304",
            "srt://a:b:c",
        ] {
            assert!(Uri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schemes_the_relay_cannot_read_say_why() {
        for s in ["rtsps", "rtspsh", "https", "rtsph", "rtspst"] {
            assert!(
                uncapped(s).is_some_and(|w| w.contains("not bounded")),
                "{s}"
            );
            assert!(CONNECTING.contains(&s), "{s}");
        }
        for s in ["rtsp", "rtspt", "http", "srt", "udp"] {
            assert_eq!(uncapped(s), None, "{s}");
        }
    }

    #[test]
    fn every_spelling_of_every_interface_is_unspecified() {
        for h in [
            "",
            "::",
            "::0",
            "0:0:0:0:0:0:0:0",
            "::ffff:0.0.0.0",
            "::0.0.0.0",
            "::%eth0",
            "0",
            "0.0",
            "0.0.0",
            "0.0.0.0",
            "00.0.0.0",
            "0x0",
            "0X00",
            "0x0.0.0.0",
            "000.0x0.00.0",
            "0.0.0.0.",
            "0 x",
            "0x",
        ] {
            assert!(is_unspecified(h), "{h:?}");
        }
        for h in [
            "cam.example",
            "127.0.0.1",
            "::1",
            "10.0.0.0",
            "0.0.0.1",
            "0x1",
            "1",
            "a0",
        ] {
            assert!(!is_unspecified(h), "{h:?}");
        }
    }
}
