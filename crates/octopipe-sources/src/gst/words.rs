//! GStreamer's messages in plain words: what a user who gave a file that is not a video reads
//! (`flight.mp4: not a video (GStreamer found plain text)`), rather than GStreamer's own
//! phrasing of what its type finder or demuxer saw. Its debug detail (the element and the
//! source line) stays apart, for `octopipe run -v`.

/// GStreamer's message of `error` in plain words: the type finder's and demuxers' messages about
/// a file that holds no video say so; any other message is GStreamer's own.
pub(crate) fn plain(error: &gstreamer::glib::Error) -> String {
    let message = error.to_string();
    for (gst_says, we_say) in WORDS {
        if message.contains(gst_says) {
            return we_say.to_string();
        }
    }
    message
}

/// (what GStreamer says, what octopipe says), the first match wins.
const WORDS: [(&str, &str); 4] = [
    (
        "appears to be a text file",
        "not a video (GStreamer found plain text)",
    ),
    (
        "Stream contains no data",
        "not a video (GStreamer found no data: an empty file?)",
    ),
    (
        "contains no playable streams",
        "no video GStreamer can play (a truncated file that lost its index?)",
    ),
    (
        "Could not determine type of stream",
        "not a video (GStreamer cannot tell what the file holds)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use gstreamer as gst;

    #[test]
    fn a_text_file_is_said_in_plain_words() {
        let e = gst::glib::Error::new(
            gst::StreamError::WrongType,
            "This appears to be a text file.",
        );
        assert_eq!(plain(&e), "not a video (GStreamer found plain text)");
        let other = gst::glib::Error::new(gst::StreamError::Decode, "Could not decode stream.");
        assert_eq!(plain(&other), "Could not decode stream.");
    }
}
