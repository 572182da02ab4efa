//! Damaged frames of a [`GstSource`] (`on-damaged=keep|skip|fail`): image files the feeder
//! found damaged (`images::DamageLog`), told when the frames around them come out; video frames
//! the decoder marked corrupted (`GST_BUFFER_FLAG_CORRUPTED`: libav's concealed errors, a frame
//! referring to one that was lost) or warned about just before. Each is counted in the report
//! (`Budget::damaged_frame`) and named in a log line: every one of the first
//! [`TELL_FIRST`], then every [`TELL_EVERY`]th, so a long damaged stream cannot flood the log.

use gstreamer as gst;
use gstreamer::prelude::*;

use super::super::damage::OnDamaged;
use super::super::SourceError;
use super::build::Input;
use super::source::GstSource;

/// Damaged frames each given a log line of their own.
const TELL_FIRST: u64 = 10;
/// After those, one line every this many.
const TELL_EVERY: u64 = 100;

impl GstSource {
    /// Count and log the damaged image files the feeder noted before the image the decoder is at
    /// (`all`: every one noted).
    pub(super) fn tell_image_damage(&mut self, all: bool) {
        let Input::Images(images) = &self.input else {
            return;
        };
        for d in images.take_damage(all) {
            let skipped = d.action == OnDamaged::Skip;
            let what = format!("{}: damaged, {}", d.path.display(), d.action.done());
            self.count_damage(skipped, &what, &d.reason);
        }
    }

    /// For a media file or URI: whether `sample` is damaged (the decoder marked it corrupted, or
    /// warned about its data just before it); if so it is counted and logged, and `Ok(true)`
    /// says to leave it out (`on-damaged=skip`); `on-damaged=fail` ends the stream with an
    /// error naming the input and the frame's time.
    pub(super) fn judge_damage(&mut self, sample: &gst::Sample) -> Result<bool, SourceError> {
        if !matches!(self.input, Input::Media { .. }) {
            return Ok(false);
        }
        let Some(buffer) = sample.buffer() else {
            return Ok(false);
        };
        let warned = self.decoder_warning.take();
        let reason = match (buffer.flags().contains(gst::BufferFlags::CORRUPTED), warned) {
            (true, None) => CORRUPTED.to_string(),
            (true, Some(w)) => format!("{CORRUPTED}; the decoder warned: {w}"),
            (false, Some(w)) => format!("the decoder warned about its data: {w}"),
            (false, None) => return Ok(false),
        };
        let at = buffer.pts().map_or("?".to_string(), |p| {
            format!("{:.3} s", p.nseconds() as f64 / 1e9)
        });
        let action = self.config.on_damaged;
        if action == OnDamaged::Fail {
            self.finish();
            return Err(self.stream_error(
                format!(
                    "damaged frame at pts {at}: {reason} (on-damaged=fail; on-damaged=keep passes such frames on, skip leaves them out)"
                ),
                None,
            ));
        }
        let what = format!(
            "{}: damaged frame at pts {at}, {}",
            self.name(),
            action.done()
        );
        let skipped = action == OnDamaged::Skip;
        self.count_damage(skipped, &what, &reason);
        Ok(skipped)
    }

    /// Count one damaged frame (in the report too) and log `what: reason` if it is one to tell.
    fn count_damage(&mut self, skipped: bool, what: &str, reason: &str) {
        self.damaged += 1;
        self.skipped += u64::from(skipped);
        if let Some(tally) = &self.tally {
            tally.with(|t| t.damaged_frame(self.stream, skipped));
        }
        let n = self.damaged;
        if n <= TELL_FIRST {
            tracing::warn!("{what}: {reason}");
        } else if n.is_multiple_of(TELL_EVERY) {
            tracing::warn!("{what}: {reason} ({n} damaged frames so far)");
        }
    }

    /// The name of the decoder that posted `msg`, for a media file's pipeline.
    pub(super) fn media_decoder(&self, msg: &gst::Message) -> Option<String> {
        if !matches!(self.input, Input::Media { .. }) {
            return None;
        }
        let element = msg.src()?.downcast_ref::<gst::Element>()?.clone();
        let klass = element.factory()?.klass().to_string();
        klass
            .contains("Decoder")
            .then(|| element.name().to_string())
    }
}

/// Why a frame the decoder flagged is damaged.
const CORRUPTED: &str =
    "the decoder marked it corrupted (errors concealed in it, or it refers to a frame that was lost)";
