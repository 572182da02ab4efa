//! What a source's GStreamer pipeline is kept from doing with what it receives, watched as
//! elements are added to it (decodebin's decoders, an adaptive demuxer's segment sources):
//!
//! - **Decoded sizes are checked from caps before a picture is allocated.** A video or image
//!   decoder's input caps say the picture's size (the parser's or typefinder's `width` and
//!   `height`); one past [`limits::frame_fits`] (8192x8192, 16384 a side) is refused there: the
//!   caps and every buffer after them are dropped, so the decoder never allocates the picture,
//!   and the stream ends with an error naming the input. The decoder's output caps are checked
//!   too, for a decoder whose input caps carry no size.
//! - **An image decoder gets no picture whose size was not read first.** Every image into an
//!   image decoder (`jpegdec`, `pngdec`, `gdkpixbufdec`, `webpdec`: a buffer starting with a
//!   JPEG, PNG, GIF, BMP or WebP signature, or the first after the stream starts) has its header
//!   read as the decoder reads it ([`scan_size`]: libjpeg skips stray bytes before a marker, so
//!   does the reader) before the decoder sees it; one too large, or one whose size cannot be
//!   read within its first [`MAX_IMAGE_HEAD`] bytes, is refused and the stream ends naming it.
//! - **A playlist's segments come from its own scheme and host.** A source element an adaptive
//!   demuxer adds for a segment (HLS, DASH) whose URI's scheme is not the input's (an `http`
//!   playlist naming a `file:///` segment) or whose host differs is never started (its state is
//!   locked), and the stream ends with an error naming the segment. A segment source the demuxer
//!   reuses for a later segment of the same scheme is not looked at again.
//! - **What an RTSP server answers is bounded, and its connection ours to close.** An
//!   `rtspsrc` (of an `rtsp`, `rtspt` or `rtspu` URI) connects through a [`Relay`] of the
//!   station's (its `proxy`), which hands it each message of the server only once whole and
//!   within caps (head, `Content-Length`, media sections, time), and whose sockets
//!   [`Guard::close_peers`] closes when the stream stops. Likewise a `souphttpsrc` of an
//!   `http` URI reads from a relay's address instead of its server's (so an HLS or DASH
//!   demuxer resolves its playlist's URIs to the relay too): heads, playlists and the rate of
//!   a media body are capped.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;

use super::relay::{relayed_http, relayed_server, start_http, start_rtsp, Relay};
use crate::header::{scan_size, ImageFormat, SizeScan};
use octopipe_core::redact;
use octopipe_core::stage::limits;

/// The most bytes of an image stream kept to read its header from, when it comes in chunks
/// (a JPEG's APPn segments come first, 64 KiB each at most).
pub(super) const MAX_IMAGE_HEAD: usize = 1 << 20;

/// Why the pipeline's input was refused, once set: the stream's error; and the relays of its
/// RTSP sources.
#[derive(Clone, Default)]
pub(super) struct Guard {
    refusal: Refusal,
    relays: Arc<Mutex<Vec<Relay>>>,
}

/// Why the pipeline's input was refused (the first reason stays).
#[derive(Clone, Default)]
struct Refusal(Arc<Mutex<Option<String>>>);

impl Refusal {
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
}

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
            if klass.contains("Decoder") && klass.contains("Image") {
                g.watch_image_input(element, bin.upcast_ref());
            }
            if factory.name() == "rtspsrc" {
                g.relay_rtsp(element, bin.upcast_ref());
            }
            if let Some(origin) = &origin {
                if factory.uri_type() == gst::URIType::Src
                    && in_adaptive_demuxer(element)
                    && !g.on_relay(element)
                {
                    g.check_segment(element, origin, bin.upcast_ref());
                }
            }
            if factory.name() == "souphttpsrc" {
                g.relay_http(element, bin.upcast_ref());
            }
        });
        guard
    }

    /// The refusal, if any (taken: the stream's error is made once).
    pub(super) fn take(&self) -> Option<String> {
        self.refusal.0.lock().ok().and_then(|mut r| r.take())
    }

    /// Set the refusal (the first stays) and post it on the bus as an error of `poster`.
    fn refuse(&self, poster: &gst::Element, message: String) {
        self.refusal.refuse(poster, message);
    }

    /// Close the connections of the pipeline's RTSP sources: an `rtspsrc` blocked reading a
    /// server gets the end of its stream, and its pipeline can stop.
    pub(super) fn close_peers(&self) {
        if let Ok(relays) = self.relays.lock() {
            relays.iter().for_each(Relay::close);
        }
    }

    /// Put `rtspsrc` behind a [`Relay`] to the server of its location (an `rtsp`, `rtspt` or
    /// `rtspu` URI; others are left as they are). A relay that cannot start fails the stream.
    fn relay_rtsp(&self, rtspsrc: &gst::Element, poster: &gst::Element) {
        let location = rtspsrc
            .property_value("location")
            .get::<Option<String>>()
            .ok()
            .flatten();
        let Some(location) = location else {
            return;
        };
        let Some((host, port)) = relayed_server(&location) else {
            self.refuse_unread(rtspsrc, &location, &["rtsp", "rtspt", "rtspu"], poster);
            return;
        };
        let refusal = self.refusal.clone();
        let weak = poster.downgrade();
        let on_refuse = Box::new(move |why: String| {
            if let Some(poster) = weak.upgrade() {
                refusal.refuse(&poster, why);
            }
        });
        match start_rtsp(&host, port, on_refuse) {
            Ok(relay) => {
                rtspsrc.set_property("proxy", format!("127.0.0.1:{}", relay.port()));
                if let Ok(mut relays) = self.relays.lock() {
                    relays.push(relay);
                }
            }
            Err(e) => self.refuse(
                poster,
                format!("cannot start the station's relay to the RTSP server: {e}"),
            ),
        }
    }

    /// Refuse `element` (never started) when `location` is of one of the `relayed` schemes yet
    /// its server (host, port) cannot be read for a relay: the element would read that server
    /// as it understands the URI, with nothing to bound the answer.
    fn refuse_unread(
        &self,
        element: &gst::Element,
        location: &str,
        relayed: &[&str],
        poster: &gst::Element,
    ) {
        let scheme = location.split_once("://").map_or("", |(s, _)| s);
        if !relayed.iter().any(|r| scheme.eq_ignore_ascii_case(r)) {
            return;
        }
        let _ = element.set_locked_state(true);
        self.refuse(
            poster,
            format!(
                "'{}': the station cannot read this URI's host and port to relay what its \
                 server answers (a port past 65535, an empty host?): not opened",
                redact::shown(location)
            ),
        );
    }

    /// Whether `element`'s location is one of this pipeline's HTTP relays (a segment URI
    /// resolved against a playlist read through it): the relay reaches the input's server
    /// only.
    fn on_relay(&self, element: &gst::Element) -> bool {
        let Some(target) = element
            .dynamic_cast_ref::<gst::URIHandler>()
            .and_then(|h| h.uri())
            .and_then(|uri| relayed_http(&uri))
        else {
            return false;
        };
        let ours = |r: &Relay| target.host == "127.0.0.1" && target.port == r.port();
        self.relays
            .lock()
            .is_ok_and(|relays| relays.iter().any(ours))
    }

    /// Make `souphttpsrc` (of an `http` URI) read through a [`Relay`] to its server: its
    /// location becomes the relay's. One already reading from a relay is left as it is. A
    /// relay that cannot start fails the stream.
    fn relay_http(&self, souphttpsrc: &gst::Element, poster: &gst::Element) {
        let location = souphttpsrc
            .property_value("location")
            .get::<Option<String>>()
            .ok()
            .flatten();
        let Some(location) = location else {
            return;
        };
        let Some(target) = relayed_http(&location) else {
            self.refuse_unread(souphttpsrc, &location, &["http"], poster);
            return;
        };
        if self.on_relay(souphttpsrc) {
            return;
        }
        let refusal = self.refusal.clone();
        let weak = poster.downgrade();
        let on_refuse = Box::new(move |why: String| {
            if let Some(poster) = weak.upgrade() {
                refusal.refuse(&poster, why);
            }
        });
        match start_http(&target.host, target.port, on_refuse) {
            Ok(relay) => {
                souphttpsrc.set_property("location", target.through(relay.port()));
                if let Ok(mut relays) = self.relays.lock() {
                    relays.push(relay);
                }
            }
            Err(e) => self.refuse(
                poster,
                format!("cannot start the station's relay to the HTTP server: {e}"),
            ),
        }
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

    /// Read the header of every image into `decoder` before it does ([`ImageHead`]); past
    /// one refused, drop what comes on that pad.
    fn watch_image_input(&self, decoder: &gst::Element, poster: &gst::Element) {
        for pad in decoder.sink_pads() {
            let g = self.clone();
            let poster = poster.downgrade();
            let head = Mutex::new(ImageHead::default());
            let types = gst::PadProbeType::EVENT_DOWNSTREAM
                | gst::PadProbeType::EVENT_FLUSH
                | gst::PadProbeType::BUFFER
                | gst::PadProbeType::BUFFER_LIST;
            pad.add_probe(types, move |_, info| {
                let Ok(mut head) = head.lock() else {
                    return gst::PadProbeReturn::Drop;
                };
                if head.refused {
                    return gst::PadProbeReturn::Drop;
                }
                let verdict = match &info.data {
                    Some(gst::PadProbeData::Event(e)) => {
                        if matches!(
                            e.type_(),
                            gst::EventType::FlushStop
                                | gst::EventType::StreamStart
                                | gst::EventType::Caps
                        ) {
                            *head = ImageHead::default();
                        }
                        Ok(())
                    }
                    Some(gst::PadProbeData::Buffer(b)) => head.check(b),
                    Some(gst::PadProbeData::BufferList(list)) => {
                        list.iter().try_for_each(|b| head.check(b))
                    }
                    _ => Ok(()),
                };
                match verdict {
                    Ok(()) => gst::PadProbeReturn::Ok,
                    Err(why) => {
                        head.refused = true;
                        if let Some(poster) = poster.upgrade() {
                            g.refuse(&poster, why);
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

/// What an image decoder's input pad has seen of the image coming in.
#[derive(Default)]
struct ImageHead {
    /// The image's first bytes, while its size cannot be read from them yet (an image in
    /// chunks); empty when it came whole.
    bytes: Vec<u8>,
    /// The image's size was read and is within bounds: the rest of it passes.
    checked: bool,
    /// An image was refused: nothing more passes.
    refused: bool,
}

impl ImageHead {
    /// Check one buffer into the decoder: a buffer with an image's signature starts a new
    /// image. Its size must be read (from its first [`MAX_IMAGE_HEAD`] bytes) and be within
    /// bounds before the decoder gets it; why not otherwise.
    fn check(&mut self, buffer: &gst::BufferRef) -> Result<(), String> {
        let Ok(map) = buffer.map_readable() else {
            return Err("an image buffer could not be read to check its size".into());
        };
        if ImageFormat::sniff(&map).is_some() {
            self.bytes.clear();
            self.checked = false;
        }
        if self.checked {
            return Ok(());
        }
        let scan = match self.bytes.is_empty() {
            true => scan_size(&map),
            false => SizeScan::NeedMore,
        };
        let scan = match scan {
            SizeScan::NeedMore => {
                let room = MAX_IMAGE_HEAD.saturating_sub(self.bytes.len());
                self.bytes.extend_from_slice(&map[..map.len().min(room)]);
                scan_size(&self.bytes)
            }
            scan => scan,
        };
        match scan {
            SizeScan::Size(w, h) => {
                if let Some(why) = limits::frame_too_large(w, h) {
                    return Err(format!("its pictures are too large to decode: {why}"));
                }
                self.checked = true;
                self.bytes = Vec::new();
                Ok(())
            }
            SizeScan::Unreadable(why) => Err(format!("an image refused before decoding: {why}")),
            SizeScan::NeedMore if self.bytes.len() >= MAX_IMAGE_HEAD => Err(format!(
                "an image refused before decoding: no picture size in its first {MAX_IMAGE_HEAD} bytes"
            )),
            SizeScan::NeedMore => Ok(()),
        }
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
