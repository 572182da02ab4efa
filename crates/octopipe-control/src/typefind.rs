//! What GStreamer makes of a `media` stream's local file before the stream is added: a file
//! it cannot tell the type of (empty, or no format it knows in its first bytes) is a 400
//! naming it, not a 201 followed by a failed stream.

use std::io::Read as _;

use gstreamer as gst;
use octopipe_core::description::Description;

/// Bytes of a file GStreamer's typefinders are given (every container and elementary format
/// it knows is told within them).
pub(crate) const TYPEFIND_BYTES: u64 = 1 << 20;

/// Why the local file `desc`'s `media` source plays cannot be played: it is empty, or GStreamer
/// finds no format (or only text) in its first [`TYPEFIND_BYTES`]. `None` for anything else
/// (a URI, a file that does not exist: the source's own error says so when it opens).
pub(crate) fn unknown_type(desc: &Description) -> Option<String> {
    let stage = desc.stages.first().filter(|s| s.kind == "media")?;
    let location = &stage.props.iter().find(|p| p.key == "location")?.value;
    let path = match location.strip_prefix("file://") {
        Some(path) => path,
        None if location.contains("://") => return None,
        None => location.as_str(),
    };
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let shown = octopipe_core::redact::credentials(location).into_owned();
    if meta.len() == 0 {
        return Some(format!(
            "media location '{shown}': the file is empty, no video to play"
        ));
    }
    let mut head = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(TYPEFIND_BYTES).read_to_end(&mut head).ok()?;
    gst::init().ok()?;
    let found = gstreamer_base::type_find_helper_for_data(None::<&gst::Object>, &head);
    let known = match &found {
        Ok((caps, probability)) => {
            let text = caps
                .structure(0)
                .is_some_and(|s| s.name().starts_with("text/"));
            !text && *probability >= gst::TypeFindProbability::Likely
        }
        Err(_) => false,
    };
    let what = match found {
        Ok((caps, _)) => format!(" (the likeliest: {caps}, not a likely video)"),
        Err(_) => String::new(),
    };
    (!known).then(|| {
        format!(
            "media location '{shown}': GStreamer cannot tell what kind of file it is from its first {} bytes{what}: not a video it can play",
            head.len()
        )
    })
}
