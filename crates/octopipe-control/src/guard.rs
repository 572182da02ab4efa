//! Who may talk to the streams: the API token (compared in constant time), the `Host` a request
//! names (DNS rebinding: a page of `evil.example` that resolves to 127.0.0.1 still says
//! `Host: evil.example`), its `Origin` (a page of another origin), and its `Content-Type`
//! (a browser's simple cross-origin POST is a form or text, never JSON without a preflight).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use hyper::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use subtle::ConstantTimeEq;

use super::consts::TOKEN_ENV;
use super::error::ControlError;

/// The shortest API token taken.
pub const MIN_TOKEN_LEN: usize = 16;

/// A bearer token the control plane takes for its streams. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// `secret` (leading and trailing white space trimmed) as a token; `what` names where it
    /// came from in the error (`OCTOPIPE_API_TOKEN`, `--api-token-file PATH`).
    pub fn new(secret: &str, what: &str) -> Result<Token, ControlError> {
        let secret = secret.trim();
        let len = secret.chars().count();
        if len < MIN_TOKEN_LEN {
            return Err(ControlError::Token {
                what: what.to_string(),
                reason: format!(
                    "the API token must be at least {MIN_TOKEN_LEN} characters long (it has {len})"
                ),
                source: None,
            });
        }
        if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ControlError::Token {
                what: what.to_string(),
                reason: "the API token is one word: no spaces or control characters".into(),
                source: None,
            });
        }
        Ok(Token(secret.to_string()))
    }

    /// The token in [`TOKEN_ENV`], if it is set (an empty one counts as unset).
    pub(crate) fn from_env() -> Result<Option<Token>, ControlError> {
        match std::env::var(TOKEN_ENV) {
            Ok(v) if !v.trim().is_empty() => Token::new(&v, TOKEN_ENV).map(Some),
            _ => Ok(None),
        }
    }

    /// The token in the file `path` (its first line).
    pub(crate) fn from_file(path: &Path) -> Result<Token, ControlError> {
        let what = format!("--api-token-file {}", path.display());
        let bytes =
            octopipe_core::files::read_bounded(path, 4096).map_err(|e| ControlError::Token {
                what: what.clone(),
                reason: e.to_string(),
                source: Some(e),
            })?;
        let text = String::from_utf8(bytes).map_err(|_| ControlError::Token {
            what: what.clone(),
            reason: "not UTF-8 text".into(),
            source: None,
        })?;
        Token::new(text.lines().next().unwrap_or(""), &what)
    }

    /// Whether `given` is this token, in time that does not depend on where they differ.
    fn matches(&self, given: &str) -> bool {
        self.0.as_bytes().ct_eq(given.as_bytes()).into()
    }
}

/// Why a request was turned away: its status and message.
pub(super) type Refused = (hyper::StatusCode, String);

/// The message of a 401.
pub const NEED_TOKEN: &str = "a bearer token is needed: Authorization: Bearer TOKEN, the token \
     the station was given (OCTOPIPE_API_TOKEN or --api-token-file)";

/// With `tokens`, the request must carry one of them as `Authorization: Bearer TOKEN`.
pub(super) fn authorized(headers: &HeaderMap, tokens: &[Token]) -> Result<(), Refused> {
    if tokens.is_empty() {
        return Ok(());
    }
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    // Every token is compared, so the time taken says nothing about which one came close.
    let ok = given.is_some_and(|g| tokens.iter().fold(false, |ok, t| t.matches(g) | ok));
    match ok {
        true => Ok(()),
        false => Err((hyper::StatusCode::UNAUTHORIZED, NEED_TOKEN.to_string())),
    }
}

/// The `Host` must name this station: an IP address (what DNS rebinding cannot forge),
/// `localhost`, or a name the operator listed (`hosts`).
pub(super) fn host_allowed(headers: &HeaderMap, hosts: &[String]) -> Result<(), Refused> {
    let refused = |message: String| Err((hyper::StatusCode::FORBIDDEN, message));
    let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
        return refused("a request needs a Host header naming this station".into());
    };
    if name_allowed(host_name(host), hosts) {
        return Ok(());
    }
    refused(format!(
        "Host '{host}' is not this station: use its IP address or localhost, or start it with --allow-host NAME"
    ))
}

/// A browser's `Origin`, when there is one, must be this station as the request names it
/// (`http://HOST`).
pub(super) fn origin_allowed(headers: &HeaderMap) -> Result<(), Refused> {
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("?");
    let host = headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let same = origin
        .strip_prefix("http://")
        .is_some_and(|o| o.eq_ignore_ascii_case(host));
    match same {
        true => Ok(()),
        false => Err((
            hyper::StatusCode::FORBIDDEN,
            format!("Origin '{origin}' is not this station: requests from other origins' pages are refused"),
        )),
    }
}

/// A body must be JSON (`application/json`, parameters allowed).
pub(super) fn json_body(headers: &HeaderMap) -> Result<(), Refused> {
    let kind = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let essence = kind.map(|k| {
        k.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        _ => Err((
            hyper::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type must be application/json (got {})",
                kind.map_or("none".to_string(), |k| format!("'{k}'"))
            ),
        )),
    }
}

/// The host part of a `Host` value (`[::1]:9184` -> `::1`, `name:9184` -> `name`).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

fn name_allowed(name: &str, hosts: &[String]) -> bool {
    name.parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Whether every address `addr` names is a loopback one.
pub(super) fn loopback_only(addrs: &[SocketAddr]) -> bool {
    !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn tokens_are_long_compared_whole_and_never_shown() {
        assert!(Token::new("short", "x").is_err());
        assert!(Token::new("with a space in it", "x").is_err());
        let t = Token::new("  0123456789abcdef  ", "x").unwrap();
        assert_eq!(format!("{t:?}"), "Token(***)");
        let tokens = [t];
        let auth = |v: &str| authorized(&headers(&[("authorization", v)]), &tokens);
        assert!(auth("Bearer 0123456789abcdef").is_ok());
        assert!(auth("Bearer 0123456789abcde").is_err());
        assert!(auth("Bearer 0123456789abcdefg").is_err());
        assert!(auth("bearer 0123456789abcdef").is_err());
        assert!(authorized(&HeaderMap::new(), &tokens).is_err());
        assert!(authorized(&HeaderMap::new(), &[]).is_ok());
    }

    #[test]
    fn hosts_and_origins() {
        let ok =
            |host: &str| host_allowed(&headers(&[("host", host)]), &["station-7".into()]).is_ok();
        assert!(ok("127.0.0.1:9184") && ok("[::1]:9184") && ok("localhost:1") && ok("10.0.0.5"));
        assert!(ok("Station-7:9184"));
        assert!(!ok("evil.example:9184") && !ok("localhost.evil.example"));
        let origin =
            |o: &str| origin_allowed(&headers(&[("host", "127.0.0.1:9"), ("origin", o)])).is_ok();
        assert!(origin("http://127.0.0.1:9"));
        assert!(
            !origin("http://127.0.0.1:10") && !origin("https://127.0.0.1:9") && !origin("null")
        );
        let json = |t: &str| json_body(&headers(&[("content-type", t)])).is_ok();
        assert!(json("application/json") && json("Application/JSON; charset=utf-8"));
        assert!(!json("text/plain") && !json("application/x-www-form-urlencoded"));
        assert!(loopback_only(&[
            "127.0.0.1:1".parse().unwrap(),
            "[::1]:1".parse().unwrap()
        ]));
        assert!(!loopback_only(&["0.0.0.0:1".parse().unwrap()]) && !loopback_only(&[]));
    }
}
