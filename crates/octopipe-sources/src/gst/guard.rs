//! What a source's GStreamer pipeline is kept from doing with what it receives, watched as
//! elements are added to it (decodebin's decoders, an adaptive demuxer's segment sources):
//!
//! - **Decoded sizes are checked from caps before a picture is allocated.** A video or image
//!   decoder's input caps say the picture's size (the parser's or typefinder's `width` and
//!   `height`); one past [`limits::frame_fits`] (8192x8192, 16384 a side) is refused there: the
//!   caps and every buffer after them are dropped, so the decoder never allocates the picture,
//!   and the stream ends with an error naming the input. The decoder's output caps are checked
//!   too, for a decoder whose input caps carry no size.
//! - **A playlist's segments come from its own scheme and host.** A source element an adaptive
//!   demuxer adds for a segment (HLS, DASH) whose URI's scheme is not the input's (an `http`
//!   playlist naming a `file:///` segment) or whose host differs is never started (its state is
//!   locked), and the stream ends with an error naming the segment. A segment source the demuxer
//!   reuses for a later segment of the same scheme is not looked at again.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;

use octopipe_core::redact;
use octopipe_core::stage::limits;

/// Why the pipeline's input was refused, once set: the stream's error.
#[derive(Clone, Default)]
pub(super) struct Guard(Arc<Mutex<Option<String>>>);

impl Guard {
    /// Watch `pipeline`, reading `uri` (a media input's URI; `None` for other inputs, whose
    /// decoders are still watched).
    pub(super) fn install(pipeline: &gst::Pipeline, uri: Option<&str>) -> Guard {
        let guard = Guard::default();
        let origin = uri.and_then(origin_of);
        let g = guard.clone();
        pipeline.connect_deep_element_added(move |bin, _, element| {
            let Some(factory) = element.factory() else {
                return;
            };
            let klass = factory.klass();
            if klass.contains("Decoder") && (klass.contains("Video") || klass.contains("Image")) {
                g.watch_decoder(element, bin.upcast_ref());
            }
            if let Some(origin) = &origin {
                if factory.uri_type() == gst::URIType::Src && in_adaptive_demuxer(element) {
                    g.check_segment(element, origin, bin.upcast_ref());
                }
            }
        });
        guard
    }

    /// The refusal, if any (taken: the stream's error is made once).
    pub(super) fn take(&self) -> Option<String> {
        self.0.lock().ok().and_then(|mut r| r.take())
    }

    /// Set the refusal (the first stays) and post it on the bus as an error of `poster`, so
    /// that the stream ends.
    fn refuse(&self, poster: &gst::Element, message: String) {
        if let Ok(mut slot) = self.0.lock() {
            if slot.is_none() {
                *slot = Some(message.clone());
            }
        }
        let msg = gst::message::Error::builder(gst::StreamError::Failed, &message)
            .src(poster)
            .build();
        let _ = poster.post_message(msg);
    }

    /// Check the picture size of every caps event into and out of `decoder`; past one too
    /// large, drop what comes on that pad.
    fn watch_decoder(&self, decoder: &gst::Element, poster: &gst::Element) {
        for pad in decoder.pads() {
            let g = self.clone();
            // Weak: the pad's probe must not keep the pipeline that holds the pad alive.
            let poster = poster.downgrade();
            let refused = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let types = gst::PadProbeType::EVENT_DOWNSTREAM
                | gst::PadProbeType::BUFFER
                | gst::PadProbeType::BUFFER_LIST;
            pad.add_probe(types, move |_, info| {
                use std::sync::atomic::Ordering;
                if refused.load(Ordering::SeqCst) {
                    return gst::PadProbeReturn::Drop;
                }
                let Some(gst::PadProbeData::Event(event)) = &info.data else {
                    return gst::PadProbeReturn::Ok;
                };
                let gst::EventView::Caps(caps) = event.view() else {
                    return gst::PadProbeReturn::Ok;
                };
                let Some(s) = caps.caps().structure(0) else {
                    return gst::PadProbeReturn::Ok;
                };
                let (Ok(w), Ok(h)) = (s.get::<i32>("width"), s.get::<i32>("height")) else {
                    return gst::PadProbeReturn::Ok;
                };
                let (w, h) = (w.max(0) as u64, h.max(0) as u64);
                match limits::frame_too_large(w, h) {
                    None => gst::PadProbeReturn::Ok,
                    Some(why) => {
                        refused.store(true, Ordering::SeqCst);
                        if let Some(poster) = poster.upgrade() {
                            g.refuse(
                                &poster,
                                format!("its pictures are too large to decode: {why}"),
                            );
                        }
                        gst::PadProbeReturn::Drop
                    }
                }
            });
        }
    }

    /// A source element added inside the pipeline for a segment: refused (never started) when
    /// its URI is not of the input's scheme and host.
    fn check_segment(&self, element: &gst::Element, origin: &Origin, poster: &gst::Element) {
        let Some(handler) = element.dynamic_cast_ref::<gst::URIHandler>() else {
            return;
        };
        let Some(uri) = handler.uri() else {
            return;
        };
        if origin_of(&uri).is_some_and(|o| o.same_site(origin)) {
            return;
        }
        let _ = element.set_locked_state(true);
        self.refuse(
            poster,
            format!(
                "a segment of its playlist is '{}', not on the playlist's own scheme and host ({}://{}): not read",
                redact::credentials(&uri),
                origin.scheme,
                origin.host
            ),
        );
    }
}

/// Whether `element` sits inside an adaptive demuxer (HLS, DASH, Smooth Streaming: their class
/// says `Adaptive`), which adds a source element for its segments.
fn in_adaptive_demuxer(element: &gst::Element) -> bool {
    let mut parent = element.parent();
    while let Some(p) = parent {
        let adaptive = p
            .downcast_ref::<gst::Element>()
            .and_then(|e| e.factory())
            .is_some_and(|f| f.klass().contains("Adaptive"));
        if adaptive {
            return true;
        }
        parent = p.parent();
    }
    false
}

/// A URI's scheme (lower case; `https` counted as `http`'s) and host.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
}

impl Origin {
    /// Whether `other` is the same site: the same host, and the same scheme (`http` and `https`
    /// being one).
    fn same_site(&self, other: &Origin) -> bool {
        let family = |s: &str| match s {
            "https" => "http".to_string(),
            s => s.to_string(),
        };
        family(&self.scheme) == family(&other.scheme) && self.host.eq_ignore_ascii_case(&other.host)
    }
}

/// The scheme and host of `uri` (`None` when it is no `scheme://` URI).
fn origin_of(uri: &str) -> Option<Origin> {
    let (scheme, rest) = uri.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    Some(Origin {
        scheme: scheme.to_ascii_lowercase(),
        host: host.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_of_the_playlists_scheme_and_host() {
        let playlist = origin_of("http://cdn.example:8080/live/x.m3u8").unwrap();
        let same = |u: &str| origin_of(u).is_some_and(|o| o.same_site(&playlist));
        assert!(same("http://cdn.example:8080/live/seg1.ts"));
        assert!(same("https://CDN.example/live/seg1.ts"));
        assert!(same("http://user:pw@cdn.example/seg.ts"));
        assert!(!same("file:///etc/shadow"));
        assert!(!same("http://other.example/seg.ts"));
        assert!(!same("fd://0"));
        assert!(!same("/etc/shadow"));
        assert_eq!(origin_of("http://[::1]:80/x").unwrap().host, "::1");
    }
}
