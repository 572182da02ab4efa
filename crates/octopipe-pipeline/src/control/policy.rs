//! What a stream described over the network may be: octopipe's own stages with typed
//! properties; GStreamer elements only those the operator listed at start (`--allow-element`);
//! files only under the directories the operator allowed (`--allow-dir`, none by default);
//! locations otherwise URIs of the schemes a camera or a server speaks. Checked on the parsed
//! description, before any stage is made (a stage may read a file as it is made).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::describe::Description;
use crate::stage::{PropType, Registry};

/// URI schemes a stream's location may have (a camera or a server it connects to).
pub const URI_SCHEMES: &[&str] = &[
    "rtsp", "rtsps", "rtspt", "rtspu", "http", "https", "srt", "udp", "rtmp", "rtmps",
];

/// Why a stream was refused: `forbidden` (403) or a bad description (400), and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// 403 (not allowed here) rather than 400 (not a stream).
    pub forbidden: bool,
    /// What was refused and what would be taken instead.
    pub message: String,
}

fn forbidden(message: String) -> Refusal {
    Refusal {
        forbidden: true,
        message,
    }
}

/// What the operator allows streams from the network to use.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Directories (canonical) whose files streams may read.
    dirs: Vec<PathBuf>,
    /// GStreamer elements streams may name.
    elements: BTreeSet<String>,
}

impl Policy {
    /// Nothing but octopipe's stages, and no file.
    pub fn new() -> Policy {
        Policy::default()
    }

    /// Let streams read files under `dir` (its real path: symlinks resolved now). An error
    /// names the directory when it cannot be resolved or is not a directory.
    pub fn allow_dir(&mut self, dir: &Path) -> Result<(), std::io::Error> {
        let real = std::fs::canonicalize(dir)?;
        if !real.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        self.dirs.push(real);
        Ok(())
    }

    /// Let streams name the GStreamer element `name` (the operator takes on what it can do:
    /// `filesrc` reads any file, `souphttpsrc` connects anywhere).
    pub fn allow_element(&mut self, name: &str) {
        self.elements.insert(name.to_string());
    }

    /// The directories allowed.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Check a stream's description: every stage octopipe's, or an element listed; every file
    /// under an allowed directory; every location a file so allowed or a URI of
    /// [`URI_SCHEMES`].
    pub fn check(&self, desc: &Description, registry: &Registry) -> Result<(), Refusal> {
        for st in &desc.stages {
            let Some(decl) = registry.get(&st.kind) else {
                if st.kind.contains('/') {
                    self.check_caps(&st.kind)?;
                } else if !self.elements.contains(&st.kind) {
                    return Err(forbidden(format!(
                        "GStreamer element '{}' is not allowed in a stream added over HTTP: describe \
                         the stream with octopipe's sources (media, images, rtp, testsrc), or start \
                         the station with --allow-element {}",
                        st.kind, st.kind
                    )));
                }
                continue;
            };
            if decl.name == "app" {
                return Err(Refusal {
                    forbidden: false,
                    message: "an app stream is fed by a program (Streams::add), not over HTTP"
                        .into(),
                });
            }
            for p in &st.props {
                let is_path = decl
                    .props
                    .iter()
                    .any(|spec| spec.name == p.key && spec.ty == PropType::Path);
                if is_path {
                    let what = format!("{} {}", decl.name, p.key);
                    let uri_ok = decl.name == "media" && p.key == "location";
                    self.check_location(&what, &p.value, uri_ok)?;
                }
            }
        }
        Ok(())
    }

    /// Caps in a head: no quoting of their own (GStreamer's parser would read a quoted string
    /// on past the caps).
    fn check_caps(&self, caps: &str) -> Result<(), Refusal> {
        match caps.contains(['"', '\'', '\\']) {
            true => Err(forbidden(format!(
                "caps '{caps}': quotes and backslashes are not taken in caps over HTTP"
            ))),
            false => Ok(()),
        }
    }

    /// A location: a URI of an allowed scheme (when `uri_ok`), or a file (a `file://` URI
    /// too) whose real path is under an allowed directory.
    fn check_location(&self, what: &str, value: &str, uri_ok: bool) -> Result<(), Refusal> {
        let shown = crate::redact::credentials(value);
        let path = match scheme(value) {
            Some("file") => match gstreamer::glib::filename_from_uri(value) {
                Ok((path, _)) => path,
                Err(e) => return Err(forbidden(format!("{what} '{shown}': {e}"))),
            },
            Some(s) if uri_ok && URI_SCHEMES.contains(&s.to_ascii_lowercase().as_str()) => {
                return Ok(())
            }
            Some(s) => {
                let expected = match uri_ok {
                    true => format!("a URI ({}://...) or ", URI_SCHEMES.join("://, ")),
                    false => String::new(),
                };
                return Err(forbidden(format!(
                    "{what} '{shown}': scheme '{s}' is not allowed over HTTP: expected {expected}a file under a directory the station allows (--allow-dir)"
                )));
            }
            None => PathBuf::from(value),
        };
        let real = real_path(&path);
        match real {
            Some(real) if self.dirs.iter().any(|d| real.starts_with(d)) => Ok(()),
            _ => Err(forbidden(format!(
                "{what} '{shown}' is outside the directories this station allows for streams added over HTTP ({})",
                match self.dirs.is_empty() {
                    true => "none: start it with --allow-dir DIR".to_string(),
                    false => self
                        .dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            ))),
        }
    }
}

/// The scheme of a URI (`scheme://...`), if `value` is one.
fn scheme(value: &str) -> Option<&str> {
    let (scheme, _) = value.split_once("://")?;
    let mut chars = scheme.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    ok.then_some(scheme)
}

/// Where `path` really is: its longest existing ancestor resolved (symlinks, `..`), then the
/// rest as written, which may hold no `..` (and is not looked into: it does not exist yet).
/// A glob's wildcards are in the rest. `None` when nothing of it resolves.
fn real_path(path: &Path) -> Option<PathBuf> {
    let absolute = match path.is_absolute() {
        true => path.to_path_buf(),
        false => std::env::current_dir().ok()?.join(path),
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut real = real;
            for part in rest.iter().rev() {
                real.push(part);
            }
            return Some(real);
        }
        let name = existing.file_name()?;
        if matches!(
            Path::new(name).components().next(),
            Some(Component::ParentDir)
        ) {
            return None;
        }
        rest.push(name.to_os_string());
        existing = existing.parent()?;
        if rest.iter().any(|p| p == "..") {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::Builtin;
    use std::collections::HashMap;

    fn check(policy: &Policy, text: &str) -> Result<(), Refusal> {
        let desc = crate::describe::parse("<test>", text, &HashMap::new()).unwrap();
        policy.check(&desc, &Registry::builtin())
    }

    #[test]
    fn files_only_under_allowed_directories() {
        let dir = std::env::temp_dir().join(format!("octopipe-policy-{}", std::process::id()));
        let allowed = dir.join("allowed");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::write(dir.join("secret"), "x").unwrap();
        let _ = std::os::unix::fs::symlink(dir.join("secret"), allowed.join("link.mp4"));
        let mut p = Policy::new();
        let a = allowed.display();
        assert!(
            check(&p, &format!("media location={a}/x.mp4 ! boxes")).is_err(),
            "none allowed"
        );
        p.allow_dir(&allowed).unwrap();
        for ok in [
            format!("media location={a}/not-yet.mp4 ! boxes"),
            format!("media location=file://{a}/x.mp4 ! boxes"),
            format!("images location={a}/*.jpg ! boxes"),
            "media location=rtsp://u:p@cam/s ! boxes".to_string(),
            "rtp port=5004 ! boxes format=synthetic".to_string(),
        ] {
            assert_eq!(check(&p, &ok), Ok(()), "{ok}");
        }
        for bad in [
            format!("media location={a}/../secret ! boxes"),
            format!("media location={a}/link.mp4 ! boxes"),
            format!("media location={a}/sub/../../secret ! boxes"),
            "media location=/dev/zero ! boxes".to_string(),
            "media location=fd://0 ! boxes".to_string(),
            format!("testsrc ! boxes format=mot location=rtsp://x/{a}"),
            "filesrc location=/x ! decodebin ! boxes".to_string(),
        ] {
            let e = check(&p, &bad).unwrap_err();
            assert!(e.forbidden, "{bad}: {e:?}");
        }
        let e = check(
            &p,
            "media location=rtsp://admin:hunter2@x/../../etc ! boxes",
        );
        assert_eq!(e, Ok(()), "a URI is the camera's business");
        let e = check(&p, "media location=smb://admin:hunter2@x/y ! boxes").unwrap_err();
        assert!(!e.message.contains("hunter2"), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn elements_only_when_listed() {
        let mut p = Policy::new();
        let text = "videotestsrc ! video/x-raw,width=64 ! boxes format=synthetic";
        let e = check(&p, text).unwrap_err();
        assert!(e.message.contains("--allow-element videotestsrc"), "{e:?}");
        p.allow_element("videotestsrc");
        assert_eq!(check(&p, text), Ok(()));
        assert!(check(&p, "videotestsrc ! video/x-raw,format=\"I420 ! boxes").is_err());
        assert!(!check(&p, "app name=a").unwrap_err().forbidden);
    }
}
