//! The GStreamer pipeline of an image sequence: `appsrc ! jpegdec|pngdec ! videoconvert !
//! appsink`, fed by the feeder thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::feed::{spawn_feeder, Feeder, OnFile};
use super::sequence::{ImageKind, Images};
use crate::elements::{enum_value, link_error, make, missing, PLUGINS_BASE, PLUGINS_GOOD};
use crate::SourceError;
/// Image files the `appsrc` may hold before the feeder thread waits.
const IMAGE_QUEUE: u64 = 2;

/// `appsrc ! jpegdec|pngdec ! videoconvert ! appsink`, fed by a thread; with `undecoded`
/// (nvJPEG decodes a JPEG sequence, `images decoder=nvjpeg`), `appsrc ! appsink`: the samples
/// are the files, each handed to `undecoded` as the feeder reads it.
pub(crate) fn build_images(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    images: &Images,
    undecoded: Option<OnFile>,
) -> Result<Feeder, SourceError> {
    let appsrc = image_appsrc(images.kind)?;
    if let Some(on_file) = undecoded {
        appsink.set_caps(Some(&images.kind.caps()));
        let elements: [&gst::Element; 2] = [appsrc.upcast_ref(), appsink.upcast_ref()];
        pipeline
            .add_many(elements)
            .and_then(|_| gst::Element::link_many(elements))
            .map_err(|e| link_error(&images.location, e))?;
        watch_decoding(appsink.upcast_ref(), &images.decoding);
        return spawn_feeder(appsrc, images, Some(on_file));
    }
    let decoder = image_decoder(images.kind)?;
    let convert = make("videoconvert", PLUGINS_BASE)?;
    accept_image_formats(appsink, images.gray16);
    let elements = [
        appsrc.upcast_ref(),
        &decoder,
        &convert,
        appsink.upcast_ref(),
    ];
    pipeline
        .add_many(elements)
        .and_then(|_| gst::Element::link_many(elements))
        .map_err(|e| link_error(&images.location, e))?;
    watch_decoding(&decoder, &images.decoding);
    spawn_feeder(appsrc, images, None)
}

/// An `appsrc` for files of `kind` that blocks the feeder once [`IMAGE_QUEUE`] files wait.
fn image_appsrc(kind: ImageKind) -> Result<gst_app::AppSrc, SourceError> {
    let appsrc = make("appsrc", PLUGINS_BASE)?
        .downcast::<gst_app::AppSrc>()
        .map_err(|_| missing("appsrc", PLUGINS_BASE))?;
    appsrc.set_caps(Some(&kind.caps()));
    appsrc.set_format(gst::Format::Time);
    appsrc.set_block(true);
    appsrc.set_max_buffers(IMAGE_QUEUE);
    appsrc.set_max_bytes(0);
    appsrc.set_max_time(gst::ClockTime::ZERO);
    Ok(appsrc)
}

/// The decoder for files of `kind`.
fn image_decoder(kind: ImageKind) -> Result<gst::Element, SourceError> {
    let decoder = make(kind.decoder(), PLUGINS_GOOD)?;
    if kind == ImageKind::Jpeg {
        // The accurate IDCT (libjpeg's own default, the one OpenCV and PIL use) rather than
        // jpegdec's fast, less accurate default.
        if let Ok(islow) = enum_value(&decoder, "idct-method", "islow") {
            decoder.set_property_from_value("idct-method", &islow);
        }
    }
    Ok(decoder)
}

/// The decoded formats taken as they come: the YUV layouts and the RGB ones image decoders give;
/// for a 16-bit grey sequence, GRAY16_LE alone.
fn accept_image_formats(appsink: &gst_app::AppSink, gray16: bool) {
    use gst_video::VideoFormat as F;
    let formats: &[F] = if gray16 {
        &[F::Gray16Le]
    } else {
        &[
            F::I420,
            F::Nv12,
            F::Rgb,
            F::Bgr,
            F::Rgba,
            F::Bgra,
            F::Rgbx,
            F::Bgrx,
        ]
    };
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format_list(formats.iter().copied())
            .build(),
    ));
}

/// Note in `decoding` which file enters `decoder` (the feeder sets each buffer's offset to its
/// index).
fn watch_decoding(decoder: &gst::Element, decoding: &Arc<AtomicU64>) {
    if let Some(pad) = decoder.static_pad("sink") {
        let decoding = decoding.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(buffer) = info.buffer() {
                decoding.store(buffer.offset(), Ordering::SeqCst);
            }
            gst::PadProbeReturn::Ok
        });
    }
}
