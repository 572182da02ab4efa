//! What a stream described over the network may be: octopipe's own stages with typed
//! properties; GStreamer elements only those the operator listed at start (`--allow-element`),
//! and no word GStreamer would open through its URI handlers (`file:///x`, `fd://0`); caps
//! only as caps (a media type and fields); files only under the directories the operator
//! allowed (`--allow-dir`, none by default); locations otherwise URIs of the schemes a camera
//! speaks (rtsp, srt as a caller; udp and `rtp port=` on the ports the operator lists,
//! `--allow-udp-port`; others, http(s) and rtsps among them, only with `--allow-scheme`), of a
//! host that is not every interface (a connection there reaches the station itself). Checked
//! on the parsed description, before any stage is made (a stage may read a file as it is made).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use octopipe_core::stage::{PropType, Registry};

mod uri;
use octopipe_pipeline::describe::{closest, Description};

/// URI schemes a stream's location may have by default (a camera it connects to; `srt` as a
/// caller only). `udp` takes the ports of [`Policy::allow_udp_port`]; any other scheme, `http`
/// and `https` among them, only what [`Policy::allow_scheme`] adds. `rtsps` is not among them:
/// the station's relay, which bounds what an RTSP server answers, does not read TLS.
pub const URI_SCHEMES: &[&str] = &["rtsp", "rtspt", "rtspu", "srt"];

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
    /// URI schemes allowed besides [`URI_SCHEMES`] (lower case).
    schemes: BTreeSet<String>,
    /// UDP ports streams may receive on (`udp://`, `rtp port=`).
    udp_ports: BTreeSet<u16>,
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

    /// Let streams' locations be URIs of `scheme` too (`http`: the station then connects
    /// where a client says).
    pub fn allow_scheme(&mut self, scheme: &str) {
        self.schemes.insert(scheme.to_ascii_lowercase());
    }

    /// Let streams receive on UDP port `port` (`udp://@:PORT`, `rtp port=PORT`).
    pub fn allow_udp_port(&mut self, port: u16) {
        self.udp_ports.insert(port);
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
                if scheme(&st.kind).is_some() {
                    return Err(forbidden(format!(
                        "'{}' is a URI, which GStreamer would open with its own handler: not taken \
                         in a stream added over HTTP; describe the stream with octopipe's sources \
                         (media location=URI, images, rtp, testsrc)",
                        octopipe_core::redact::shown(&st.kind)
                    )));
                }
                if st.kind.contains('/') {
                    self.check_caps(&st.kind)?;
                } else if !self.elements.contains(&st.kind) {
                    // A misspelt stage gets the command line's did-you-mean; an installed element
                    // (`queue2`, not a misspelt `queue`) is one the operator may allow.
                    if closest(&st.kind, registry.names()).is_some()
                        && !octopipe_sources::element_exists(&st.kind)
                    {
                        return Err(Refusal {
                            forbidden: false,
                            message: octopipe_pipeline::describe::unknown_stage(desc, registry, st)
                                .to_string(),
                        });
                    }
                    let name = octopipe_core::redact::shown(&st.kind);
                    let name = octopipe_core::description::shown_word(&name);
                    return Err(forbidden(format!(
                        "GStreamer element '{name}' is not allowed in a stream added over HTTP: \
                         describe the stream with octopipe's sources (media, images, rtp, \
                         testsrc), or start the station with --allow-element {name}"
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
            if decl.name == "rtp" {
                let port = st.props.iter().find(|p| p.key == "port");
                if let Some(p) = port {
                    self.check_udp_port(&format!("rtp port={}", p.value), &p.value)?;
                }
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
                    if decl.name == "images" && p.key == "location" {
                        self.check_entries(&what, &p.value)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Caps in a head: a media type (`video/x-raw`, with `(memory:...)` features) and fields
    /// (`,name=value`), nothing GStreamer could read as a URI (`://`) or a quoted string (its
    /// parser would read one on past the caps).
    fn check_caps(&self, caps: &str) -> Result<(), Refusal> {
        if caps.contains(['"', '\'', '\\']) {
            return Err(forbidden(format!(
                "caps '{caps}': quotes and backslashes are not taken in caps over HTTP"
            )));
        }
        match caps_shape(caps) {
            Ok(()) => Ok(()),
            Err(why) => Err(forbidden(format!(
                "'{}' is not caps ({why}): a word with '/' in a stream added over HTTP must be \
                 caps, a media type and fields such as video/x-raw,width=640",
                octopipe_core::redact::shown(caps)
            ))),
        }
    }

    /// Each file a folder or glob of images plays (its location already allowed): its own real
    /// path (a symlink inside the folder may lead out of it) under an allowed directory. A
    /// location that cannot be listed is the source's to refuse when it opens.
    fn check_entries(&self, what: &str, location: &str) -> Result<(), Refusal> {
        let Ok(files) = octopipe_sources::image_files(location) else {
            return Ok(());
        };
        for file in files {
            let real = std::fs::canonicalize(&file).ok();
            if !real
                .as_ref()
                .is_some_and(|r| self.dirs.iter().any(|d| r.starts_with(d)))
            {
                // The link's target is not shown: it is outside what the client may know of.
                return Err(forbidden(format!(
                    "{what} '{location}': {} leads outside the directories this station allows for streams added over HTTP",
                    file.display(),
                )));
            }
        }
        Ok(())
    }

    /// A UDP port a stream receives on: one the operator listed.
    fn check_udp_port(&self, what: &str, port: &str) -> Result<(), Refusal> {
        match port.parse::<u16>() {
            Ok(p) if self.udp_ports.contains(&p) => Ok(()),
            _ => Err(forbidden(format!(
                "{what}: UDP port {port} is not one this station lets streams added over HTTP \
                 receive on ({}): start it with --allow-udp-port {port}",
                match self.udp_ports.is_empty() {
                    true => "none".to_string(),
                    false => self
                        .udp_ports
                        .iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            ))),
        }
    }

    /// A network URI of `scheme` (lower case): a default scheme (`srt` as a caller), `udp` on
    /// an allowed port, or a scheme the operator added. The URI is read as GStreamer reads
    /// it ([`uri::Uri`]: escapes decoded, every value of a key given twice looked at).
    fn check_uri(&self, what: &str, value: &str, scheme: &str) -> Result<(), Refusal> {
        let shown = octopipe_core::redact::shown(value);
        // The schemes whose URI sets where GStreamer listens or connects are read whole.
        let read_whole =
            matches!(scheme, "srt" | "udp" | "rist") || uri::CONNECTING.contains(&scheme);
        let parsed = match read_whole {
            true => Some(uri::Uri::parse(value).map_err(|why| {
                forbidden(format!(
                    "{what} '{shown}': {why}: a URI this station cannot read as GStreamer \
                     would is not taken over HTTP"
                ))
            })?),
            false => None,
        };
        if let Some(why) = parsed.as_ref().and_then(uri::connects_to_itself) {
            return Err(forbidden(format!("{what} '{shown}': {why}")));
        }
        match (scheme, parsed) {
            ("srt", Some(u)) => {
                // Every `mode=` looked at (GStreamer takes the last, decoded): caller only.
                let listener = u.values("mode").find(|m| *m != "caller");
                let unspecified = uri::is_unspecified(&u.host);
                if listener.is_some() || unspecified {
                    let why = match listener {
                        Some(m) => format!("mode={}", octopipe_core::redact::shown(m)),
                        None => format!(
                            "host '{}' (every interface, or none)",
                            octopipe_core::redact::shown(&u.host)
                        ),
                    };
                    return Err(forbidden(format!(
                        "{what} '{shown}': srt only as a caller of a named host over HTTP ({why}: \
                         a listener or rendezvous on this station, as mode=listener or an empty \
                         or unspecified host makes, is not taken)"
                    )));
                }
                Ok(())
            }
            ("udp", Some(u)) => {
                let port = u.port.unwrap_or_default();
                self.check_udp_port(&format!("{what} '{shown}'"), &port)
            }
            (s, _) if URI_SCHEMES.contains(&s) || self.schemes.contains(s) => Ok(()),
            (s, _) if uri::uncapped(s).is_some() => Err(forbidden(format!(
                "{what} '{shown}': scheme '{s}' is not taken over HTTP by default: {}; use a \
                 plain rtsp:// or http:// URI of the camera, or start the station with \
                 --allow-scheme {s} to take such servers' answers unbounded",
                uri::uncapped(s).unwrap_or_default()
            ))),
            (s, _) => Err(forbidden(format!(
                "{what} '{shown}': scheme '{s}' is not allowed over HTTP: expected a URI ({}://...), \
                 a file under a directory the station allows (--allow-dir), or start the station \
                 with --allow-scheme {s}",
                self.allowed_schemes().join("://, ")
            ))),
        }
    }

    /// The schemes a location may have: the defaults, then those added.
    fn allowed_schemes(&self) -> Vec<String> {
        let mut all: Vec<String> = URI_SCHEMES.iter().map(|s| s.to_string()).collect();
        if !self.udp_ports.is_empty() {
            all.push("udp".into());
        }
        all.extend(
            self.schemes
                .iter()
                .filter(|s| !all.contains(s))
                .cloned()
                .collect::<Vec<_>>(),
        );
        all
    }

    /// A location: a URI of an allowed scheme (when `uri_ok`), or a file (a `file://` URI
    /// too) whose real path is under an allowed directory.
    fn check_location(&self, what: &str, value: &str, uri_ok: bool) -> Result<(), Refusal> {
        let shown = octopipe_core::redact::shown(value);
        let path = match scheme(value) {
            Some("file") => match gstreamer::glib::filename_from_uri(value) {
                Ok((path, _)) => path,
                Err(e) => return Err(forbidden(format!("{what} '{shown}': {e}"))),
            },
            Some(s) if uri_ok => return self.check_uri(what, value, &s.to_ascii_lowercase()),
            Some(s) => {
                return Err(forbidden(format!(
                    "{what} '{shown}': scheme '{s}' is not allowed over HTTP: expected a file under a directory the station allows (--allow-dir)"
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

/// Whether `caps` has the shape of caps: `type/subtype`, optional `(feature:...)`, then
/// `,name=value` fields whose values hold no `://`. The error says what is wrong.
fn caps_shape(caps: &str) -> Result<(), &'static str> {
    if caps.contains("://") {
        return Err("it holds '://'");
    }
    let (head, fields) = caps.split_once(',').unwrap_or((caps, ""));
    let (media, features) = match head.split_once('(') {
        Some((m, f)) => (m, Some(f)),
        None => (head, None),
    };
    let token = |t: &str| {
        !t.is_empty()
            && t.starts_with(|c: char| c.is_ascii_alphanumeric())
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-+._".contains(c))
    };
    match media.split_once('/') {
        Some((a, b)) if token(a) && token(b) => {}
        _ => return Err("no media type such as video/x-raw"),
    }
    if let Some(f) = features {
        let inner = f.strip_suffix(')').ok_or("an unclosed '('")?;
        if !inner
            .split(',')
            .all(|x| x.split(':').all(|p| token(p.trim())))
        {
            return Err("features are words such as memory:CUDAMemory");
        }
    }
    if fields.is_empty() {
        return Ok(());
    }
    // Values may be ranges, lists and fractions: [1,100], {I420,NV12}, 30/1, (int)640.
    let (name, _) = fields.split_once('=').ok_or("a field without '='")?;
    if !token(name.trim()) {
        return Err("a field name that is not a word");
    }
    let value_char = |c: char| c.is_ascii_alphanumeric() || "-+._/,=[]{}()<>:".contains(c);
    if !fields.chars().all(value_char) {
        return Err("a field with other characters than caps take");
    }
    Ok(())
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
mod tests;
