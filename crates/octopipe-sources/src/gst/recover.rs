//! How a [`GstSource`] gets over what goes wrong: reconnects after an error or end of stream
//! (`retry`, `retry-interval`), waits judged (`timeout`, `start-timeout`, `stall-timeout`), the
//! bus read, and damaged data in a stream (garbage packets on an RTP port, a corrupt access
//! unit): what a depayloader, parser or decoder of a live or network source says about its data
//! is counted and the stream goes on; when the damage stopped the data flow, the pipeline is
//! built again at once ("resync") without spending a reconnect.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;

use super::super::images::Feeder;
use super::super::watch::{backoff, secs, Verdict, Wait};
use super::super::SourceError;
use super::build::Input;
use super::source::{GstSource, POLL};
use octopipe_core::redact;

/// Where a decoder that `decodebin` could not find usually lives.
const DECODER_PACKAGES: &str =
    "a decoder for it (gstreamer1.0-libav, gstreamer1.0-plugins-bad or gstreamer1.0-plugins-ugly)";

/// Damage this recent makes a stopped data flow a resync rather than a failure.
const DAMAGE_WINDOW: Duration = Duration::from_secs(2);
/// Warn again about damage after this many more.
const DAMAGE_WARN_EVERY: u64 = 100;
/// Damage with no frame after it for this long: the pipeline's state is poisoned (a
/// depayloader that kept a garbage parameter set), build it again.
const DAMAGE_STALL: Duration = Duration::from_secs(2);
/// Warn about packets kept out of an RTP stream at the first and every this many.
const FOREIGN_WARN_EVERY: u64 = 1000;
impl GstSource {
    /// Count an event of this source in the report.
    pub(super) fn event(&self, what: &str) {
        if let Some(tally) = &self.tally {
            tally.with(|t| t.source_event(self.stream, what));
        }
    }

    /// Whether the end of the pipeline (an end of stream, or `error`) is followed by a
    /// reconnect: retries are left, no stop was asked for, and the error is about the stream
    /// (a missing element or a bad setting stays what it is).
    pub(super) fn may_retry(&self, error: Option<&SourceError>) -> bool {
        self.in_a_row < self.limits.retry
            && !self.interrupted.load(Ordering::SeqCst)
            && error.is_none_or(|e| matches!(e, SourceError::Stream { .. }))
    }

    /// `error` as the final one: after reconnects, it says how many failed.
    pub(super) fn after_retries(&self, error: SourceError) -> SourceError {
        match error {
            SourceError::Stream {
                source_name,
                message,
                debug,
            } if self.in_a_row > 0 => SourceError::Stream {
                source_name,
                message: format!(
                    "{message} (after {} in a row)",
                    match self.in_a_row {
                        1 => "1 reconnect".to_string(),
                        n => format!("{n} reconnects"),
                    }
                ),
                debug,
            },
            e => e,
        }
    }

    /// Wait the backoff (interruptibly), then build the pipeline again; a build that fails
    /// leaves its error pending, for the next look to retry or return.
    pub(super) fn reconnect(&mut self, cause: &str) {
        self.in_a_row += 1;
        let wait = backoff(self.limits.interval, self.in_a_row);
        self.event("reconnects");
        tracing::warn!(
            "{}: {cause}; reconnecting in {} s ({} of {} in a row)",
            self.name(),
            secs(wait),
            self.in_a_row,
            self.limits.retry
        );
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            let overdue =
                self.limits.stream && self.seq == 0 && self.opened.elapsed() > self.limits.start;
            if self.interrupted.load(Ordering::SeqCst) || overdue {
                return;
            }
            std::thread::sleep(left.min(Duration::from_nanos(POLL.nseconds())));
        }
        if let Err(e) = self.rebuild() {
            self.pending = Some(e);
        }
    }

    /// Judge the wait so far: warn about a quiet source, fail a timed-out one or a file that
    /// does not start or has stalled.
    pub(super) fn watch(&mut self, wait: &mut Wait) -> Result<(), SourceError> {
        let name = self.name().to_string();
        let stalled = |message: String| SourceError::Stalled {
            source_name: name.clone(),
            message,
        };
        let (start, stall) = (secs(self.limits.start), secs(self.limits.stall));
        let error = match wait.check(&self.limits, self.seq, self.started.elapsed()) {
            Verdict::Fine => return Ok(()),
            Verdict::Quiet { waited, first } => {
                if first {
                    self.event("went quiet");
                }
                let t = secs(self.limits.timeout.unwrap_or(waited));
                let what = if self.seq == 0 { "no frame yet after" } else { "no frame for" };
                tracing::warn!("{name}: {what} {} s (timeout={t}): still waiting", secs(waited));
                return Ok(());
            }
            Verdict::Starting => {
                let what = match self.seq {
                    0 => "no first frame".to_string(),
                    n => format!("no frame after frame {n}"),
                };
                tracing::warn!(
                    "{name}: the decoder has given {what} in {stall} s: still starting (start-timeout={start})"
                );
                return Ok(());
            }
            Verdict::TimedOut => {
                self.event("went quiet");
                SourceError::Quiet {
                    source_name: name.clone(),
                    timeout: self.limits.timeout.unwrap_or_default(),
                    frames: self.seq,
                }
            }
            Verdict::NoStart => stalled(format!(
                "the decoder gave no first frame in {start} s (start-timeout={start}): a damaged file, or a decoder that cannot start?"
            )),
            Verdict::Stalled => stalled(format!(
                "decoding stalled: no frame, no end of stream and no error for {stall} s after frame {} (stall-timeout={stall}; a damaged or truncated file?)",
                self.seq
            )),
        };
        self.finish();
        Err(error)
    }

    /// Handle what is waiting on the bus; the first error ends the stream.
    pub(super) fn poll_bus(&mut self) -> Result<(), SourceError> {
        use gst::MessageType as T;
        while let Some(msg) = self.bus.pop_filtered(&[T::Error, T::Warning, T::Element]) {
            match msg.view() {
                gst::MessageView::Element(_) => self.note_missing(&msg),
                gst::MessageView::Warning(w) => {
                    if let Some(element) = self.damage_from(&msg) {
                        self.damaged(&element, &w.error().to_string());
                        continue;
                    }
                    let debug = w.debug().map(|d| format!(" ({d})")).unwrap_or_default();
                    self.warning = Some(format!("{}{debug}", w.error()));
                    if let Some(element) = self.media_decoder(&msg) {
                        self.decoder_warning = Some(format!("{element}: {}", w.error()));
                    }
                }
                gst::MessageView::Error(err) => {
                    if let Some(element) = self.damage_from(&msg) {
                        self.damaged(&element, &err.error().to_string());
                        continue;
                    }
                    return Err(self.bus_error(err));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// End the stream on an error message from the bus, keeping the frames decoded before it, and
    /// say what went wrong: a file the feeder could not use, a missing decoder, or the error itself.
    fn bus_error(&mut self, err: &gst::message::Error) -> SourceError {
        // Frames decoded before the error are kept: take them before the flush.
        while let Some(sample) = self.appsink.try_pull_sample(gst::ClockTime::ZERO) {
            self.held.push_back(sample);
        }
        // A missing-plugin message already on the bus names the decoder; stopping the pipeline
        // flushes the bus, so read it first.
        while let Some(msg) = self.bus.pop_filtered(&[gst::MessageType::Element]) {
            self.note_missing(&msg);
        }
        self.finish();
        if let Some(feeder_error) = self.feeder.as_ref().and_then(Feeder::take_error) {
            return feeder_error;
        }
        if let Some(refused) = self.guard.take() {
            // Refused for what it is, not a fault of the connection: never retried.
            return SourceError::input(self.name(), refused);
        }
        let not_found = err.error().matches(gst::StreamError::CodecNotFound)
            || err.error().matches(gst::CoreError::MissingPlugin);
        // The message may come after the error (another thread posted it); decodebin's error
        // names the decoder too.
        let missing = self
            .missing
            .take()
            .or_else(|| err.debug().as_deref().and_then(missing_decoder));
        if let Some((name, detail)) = missing.filter(|_| not_found) {
            if self.cuda.is_some() {
                let what = if detail.is_empty() { name } else { detail };
                return SourceError::Nvdec {
                    source_name: self.name().to_string(),
                    reason: format!("no NVIDIA decoder for {what} (decode it with decoder=cpu)"),
                    source: None,
                };
            }
            let element = match (name.is_empty(), detail.is_empty()) {
                (false, _) => name,
                (true, false) => format!("decoder for {detail}"),
                (true, true) => "decoder".to_string(),
            };
            return SourceError::MissingElement {
                element,
                package: DECODER_PACKAGES.to_string(),
            };
        }
        // A decoder often warns with the real reason before the generic flow error.
        let debug = match (err.debug(), self.warning.take()) {
            (Some(d), Some(w)) => Some(format!("{d}; after warning: {w}")),
            (d, w) => d.map(|d| d.to_string()).or(w),
        };
        let (source_name, message) = match &self.input {
            Input::Images(images) => images.decode_failure(&err.error()),
            _ => (self.name().to_string(), super::words::plain(&err.error())),
        };
        SourceError::Stream {
            source_name,
            message: redact::credentials(&message).into_owned(),
            debug: debug.map(|d| redact::credentials(&d).into_owned()),
        }
    }

    /// Keep the first missing-plugin message's decoder name and caps.
    fn note_missing(&mut self, msg: &gst::Message) {
        let gst::MessageView::Element(element) = msg.view() else {
            return;
        };
        if let Some(s) = element.structure().filter(|s| s.name() == "missing-plugin") {
            let name = s.get::<String>("name").unwrap_or_default();
            let detail = s
                .get::<gst::Caps>("detail")
                .map(|c| c.to_string())
                .or_else(|_| s.get::<String>("detail"))
                .unwrap_or_default();
            self.missing.get_or_insert((name, detail));
        }
    }

    /// A stream source that gave no frame within `start-timeout` of being opened, reconnects
    /// included (an RTSP server that accepts the connection and never answers): its error,
    /// not retried.
    pub(super) fn first_frame_overdue(&mut self) -> Result<(), SourceError> {
        if !self.limits.stream || self.seq > 0 || self.opened.elapsed() <= self.limits.start {
            return Ok(());
        }
        self.finish();
        let t = secs(self.limits.start);
        let after = match self.in_a_row {
            0 => String::new(),
            1 => "; 1 reconnect".to_string(),
            n => format!("; {n} reconnects"),
        };
        Err(SourceError::Stalled {
            source_name: self.name().to_string(),
            message: format!(
                "no first frame in {t} s (start-timeout={t}{after}): nothing came since it was opened; is the sender running, and is the server answering?"
            ),
        })
    }

    /// The element that posted `msg`, when it is damage a stream goes on from: a message of a
    /// depayloader, parser or decoder (not a bin) of a live or network source.
    fn damage_from(&self, msg: &gst::Message) -> Option<String> {
        if !self.limits.stream {
            return None;
        }
        let element = msg.src()?.downcast_ref::<gst::Element>()?.clone();
        if element.is::<gst::Bin>() {
            return None;
        }
        let klass = element.factory()?.klass().to_string();
        ["Depayloader", "Parser", "Decoder"]
            .iter()
            .any(|k| klass.contains(k))
            .then(|| element.name().to_string())
    }

    /// Count damaged data `element` reported, and say so (at the first and every so often).
    fn damaged(&mut self, element: &str, message: &str) {
        let g = &mut self.garbage;
        g.count += 1;
        g.last = Some(Instant::now());
        g.frames_then = self.seq;
        let words = format!("{element}: {}", redact::credentials(message));
        g.first.get_or_insert_with(|| words.clone());
        let count = g.count;
        self.event("garbage dropped");
        if count == 1 || count.is_multiple_of(DAMAGE_WARN_EVERY) {
            tracing::warn!(
                "{}: damaged data dropped ({words}); the stream goes on ({count} so far)",
                self.name()
            );
        }
    }

    /// Look at what an RTP stream kept out (garbage on its port), say so now and then; and
    /// build a pipeline again that damage left giving no frame for [`DAMAGE_STALL`].
    pub(super) fn look_after_damage(&mut self) {
        let foreign = match &self.input {
            Input::Launch { rtp: Some(rtp), .. } => rtp.foreign(),
            _ => 0,
        };
        let before = self.garbage.foreign;
        if foreign > before {
            self.garbage.foreign = foreign;
            self.garbage.last = Some(Instant::now());
            self.garbage.frames_then = self.seq;
            if before == 0 || foreign / FOREIGN_WARN_EVERY > before / FOREIGN_WARN_EVERY {
                tracing::warn!(
                    "{}: {foreign} packets that are not this stream's RTP (another sender, another payload type, or not RTP) kept out; the stream goes on",
                    self.name()
                );
            }
            if let Some(tally) = &self.tally {
                tally.with(|t| {
                    for _ in before..foreign {
                        t.source_event(self.stream, "garbage kept out");
                    }
                });
            }
        }
        let stalled = self.limits.stream
            && self.garbage.count > 0
            && self.seq == self.garbage.frames_then
            && self
                .garbage
                .last
                .is_some_and(|t| t.elapsed() > DAMAGE_STALL);
        if stalled {
            let cause = self.stream_error(
                format!("no frame for {} s after damaged data", secs(DAMAGE_STALL)),
                None,
            );
            self.finish();
            self.resync(&cause);
        }
    }

    /// Whether `error` ended the data flow because of damage just reported: the pipeline is
    /// built again at once, spending no reconnect.
    pub(super) fn is_resync(&self, error: &SourceError) -> bool {
        self.limits.stream
            && !self.interrupted.load(Ordering::SeqCst)
            && matches!(error, SourceError::Stream { .. })
            && self
                .garbage
                .last
                .is_some_and(|t| t.elapsed() <= DAMAGE_WINDOW)
    }

    /// Build the pipeline again after damage stopped its data flow.
    pub(super) fn resync(&mut self, cause: &SourceError) {
        self.garbage.resyncs += 1;
        self.garbage.last = None;
        self.event("resyncs");
        tracing::warn!(
            "{}: damaged data stopped the stream ({cause}); building it again (resync {}, no reconnect spent)",
            self.name(),
            self.garbage.resyncs
        );
        if let Err(e) = self.rebuild() {
            self.pending = Some(e);
        }
    }

    /// The report's line of the damage this source went on from, once.
    pub(super) fn tell_garbage(&mut self) {
        if let Input::Launch { rtp: Some(rtp), .. } = &self.input {
            self.garbage.foreign = rtp.foreign();
        }
        let g = &mut self.garbage;
        if (g.count == 0 && g.foreign == 0) || g.told {
            return;
        }
        g.told = true;
        let mut parts = Vec::new();
        if g.foreign > 0 {
            parts.push(format!("{} packets not of the stream kept out", g.foreign));
        }
        if g.count > 0 {
            parts.push(format!(
                "{} damaged packets or frames dropped (first: {})",
                g.count,
                g.first.as_deref().unwrap_or("?")
            ));
        }
        match g.resyncs {
            0 => {}
            1 => parts.push("1 resync".to_string()),
            n => parts.push(format!("{n} resyncs")),
        }
        let line = format!(
            "stream {}: garbage: {}; the stream went on",
            self.stream,
            parts.join(", ")
        );
        if let Some(tally) = &self.tally {
            tally.with(|t| t.add_line(line));
        }
    }
}

/// The decoder decodebin names in its error's debug text (`Missing decoder: MPEG-4 Video (Simple
/// Profile) (video/mpeg, ...)`): its description as a name, and its caps.
fn missing_decoder(debug: &str) -> Option<(String, String)> {
    let line = debug
        .lines()
        .find_map(|l| l.trim().strip_prefix("Missing decoder: "))?;
    // The caps are the last parenthesised part; the description may hold parentheses itself.
    let (name, caps) = match line.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((name, caps)) if caps.contains('/') => (name, caps),
        _ => (line, ""),
    };
    Some((format!("{name} decoder"), caps.to_string()))
}

#[cfg(test)]
mod tests {
    use super::missing_decoder;

    #[test]
    fn decodebins_error_names_the_missing_decoder() {
        // The debug text of a CI run where the missing-plugin message came after the error.
        let debug = "../gst/playback/gsturidecodebin.c(1049): no_more_pads_full (): /GstPipeline:pipeline65/GstURIDecodeBin:uridecodebin7:\nno suitable plugins found:\n../gst/playback/gstdecodebin2.c(4704): gst_decode_bin_expose (): /GstPipeline:pipeline65/GstURIDecodeBin:uridecodebin7/GstDecodeBin:decodebin8:\nno suitable plugins found:\nMissing decoder: MPEG-4 Video (Simple Profile) (video/mpeg, mpegversion=(int)4, systemstream=(boolean)false, width=(int)64, profile=(string)simple)\n";
        let (name, caps) = missing_decoder(debug).expect("named");
        assert_eq!(name, "MPEG-4 Video (Simple Profile) decoder");
        assert!(caps.starts_with("video/mpeg, mpegversion=(int)4"), "{caps}");
        assert_eq!(missing_decoder("no suitable plugins found"), None);
    }
}
