//! Frames: decoded pixels, where they came from and when, and what the pipeline learned about them.
//!
//! A [`Frame`] is what a source emits and what every later stage refers to. Its planes live in
//! host memory (a [`PooledBuf`]: dropping the frame, or [`Frame::release_pixels`], returns it to
//! its [`BufferPool`]) or in CUDA device memory ([`DeviceFrame`], kept alive by its owner); the
//! [`Planes`] say which. Its [`Detection`]s carry the boxes and, once classified, the classifier's
//! answer; its [`FrameTimes`] the instant it passed each stage.
//!
//! A frame with more boxes than one batch may hold travels in [`Part`]s ([`Frame::into_parts`]):
//! each part shares the frame's planes and carries a run of its boxes, and the frame is done when
//! its last part is.

mod memory;
mod objects;
mod pixels;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use crate::buffer::{DeviceBuffer, Memory};
pub use memory::{BufferPool, DeviceFrame, PageLockedError, Planes, PooledBuf};
pub use objects::{
    clip_box, BoxOrigin, ClassScore, Classification, Detection, NamedClassification, PixelSums,
    SkipReason, TileStats, MIN_BOX_SIZE,
};
pub use pixels::{ChromaSite, Colorimetry, FrameLayout, LayoutError, Matrix, PixelFormat, Range};

/// A stage's row in the budget report: its index in the pipeline's list of stage names
/// (`Pipeline::stage_names`). Stages of different branches at the same place share a row.
pub type StageSlot = u16;

/// When a frame arrived and when it passed each stage.
#[derive(Debug, Clone)]
pub struct FrameTimes {
    /// When the frame was due: for a paced (live-rate) source its scheduled presentation instant,
    /// for a live GStreamer head when it was captured, for a pushed frame when it was pushed,
    /// otherwise when the source was asked for it.
    pub arrival: Instant,
    /// `(stage, when)` in the order the frame passed them.
    marks: Vec<(StageSlot, Instant)>,
    /// `(stage, how long)` the frame waited in the queue before each stage that took it from
    /// one: from the previous mark (or arrival) to when the stage took it.
    queued: Vec<(StageSlot, Duration)>,
}

impl FrameTimes {
    /// Times of a frame that arrives at `arrival`.
    pub fn new(arrival: Instant) -> Self {
        FrameTimes {
            arrival,
            marks: Vec::new(),
            queued: Vec::new(),
        }
    }

    /// Record that stage `slot` took the frame from its queue at `at`: the time since the
    /// frame's last mark is its wait in that queue (the report's `wait`, apart from the stage's
    /// own work).
    pub fn took(&mut self, slot: StageSlot, at: Instant) {
        let since = self.marks.last().map_or(self.arrival, |(_, t)| *t);
        self.queued
            .push((slot, at.saturating_duration_since(since)));
    }

    /// How long the frame waited in the queue before each stage that took it, in order.
    pub fn queued(&self) -> &[(StageSlot, Duration)] {
        &self.queued
    }

    /// Record that the frame passed stage `slot` at `at`.
    pub fn mark(&mut self, slot: StageSlot, at: Instant) {
        self.marks.push((slot, at));
    }

    /// When the frame passed stage `slot`, if it did.
    pub fn get(&self, slot: StageSlot) -> Option<Instant> {
        self.marks.iter().find(|(s, _)| *s == slot).map(|(_, t)| *t)
    }

    /// The marks in passing order.
    pub fn marks(&self) -> &[(StageSlot, Instant)] {
        &self.marks
    }

    /// Time spent in each stage passed: from the previous mark (or arrival) to its own, in order.
    pub fn stages(&self) -> impl Iterator<Item = (StageSlot, Duration)> + '_ {
        let mut prev = self.arrival;
        self.marks.iter().map(move |(slot, at)| {
            let start = std::mem::replace(&mut prev, *at);
            (*slot, at.saturating_duration_since(start))
        })
    }

    /// Arrival to the last mark.
    pub fn total(&self) -> Option<Duration> {
        let (_, last) = self.marks.last()?;
        Some(last.saturating_duration_since(self.arrival))
    }
}

/// Which part of its frame a [`Frame`] is. A frame whose boxes do not fit in one batch travels
/// as several parts, in order, each in a batch of its own; all share the frame's planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// 0-based number of this part.
    pub index: u32,
    /// How many parts the frame travels in.
    pub count: u32,
    /// Index of this part's first box among all the frame's boxes.
    pub first_box: u32,
}

impl Part {
    /// A frame that travels whole.
    pub const WHOLE: Part = Part {
        index: 0,
        count: 1,
        first_box: 0,
    };

    /// Whether this is the frame's last part (or the whole frame): the frame is done with it.
    pub fn is_last(&self) -> bool {
        self.index + 1 >= self.count
    }
}

impl Default for Part {
    fn default() -> Self {
        Part::WHOLE
    }
}

/// What a frame of an image sequence knows from its file name (the name itself is
/// [`Frame::source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageFile {
    /// The number the file name ends with before its extension, if it ends with digits:
    /// `0000007.jpg` and `9999999_00023_d_0000007.jpg` both give 7 (VisDrone names a sequence's
    /// images by their 1-based frame index). Annotation replay keyed by frame index reads it.
    pub number: Option<u64>,
}

impl ImageFile {
    /// What the file name `name` says: the decimal number its stem ends with (`None` when the
    /// stem does not end with a digit, or the number does not fit 64 bits).
    pub fn from_name(name: &str) -> Self {
        let stem = std::path::Path::new(name)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("");
        let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        ImageFile {
            number: stem[stem.len() - digits..].parse().ok(),
        }
    }
}

/// A source's name as a URI: one that is a URI already (`scheme://...`, `octopipe:...`) as it is,
/// an absolute file path as `file://` (percent-encoded), and anything else (an element
/// description, an application's frame name) as `octopipe:` and the name percent-encoded
/// (`videotestsrc pattern=smpte` gives `octopipe:videotestsrc%20pattern=smpte`).
pub fn source_uri(source: &str) -> String {
    let scheme = source.split_once("://").map(|(s, _)| s).filter(|s| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if scheme.is_some() || source.starts_with("octopipe:") {
        return source.to_string();
    }
    if source.starts_with('/') {
        return format!("file://{}", percent_encode(source, "/"));
    }
    format!("octopipe:{}", percent_encode(source, "/=,:"))
}

/// The wall-clock time of instant `at` (a capture time on the monotonic clock), by its age now.
pub fn wall_time(at: Instant) -> SystemTime {
    let age = Instant::now().saturating_duration_since(at);
    let now = SystemTime::now();
    now.checked_sub(age).unwrap_or(now)
}

/// `text` with every byte but RFC 3986's unreserved characters and those in `keep` written as
/// `%XX`.
fn percent_encode(text: &str, keep: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.as_bytes().contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One decoded frame and what the pipeline learned about it.
#[derive(Debug)]
pub struct Frame {
    /// Which input stream (branch) the frame came from.
    pub stream: u32,
    /// 0-based position in its stream by presentation time: a source whose frame interval is
    /// known numbers frames `round(pts / interval)`, so frames the decoder lost leave gaps (the
    /// runner counts them) and the frames after a gap keep their own numbers. Otherwise frames
    /// are numbered in arrival order.
    pub seq: u64,
    /// Presentation timestamp.
    pub pts: Option<Duration>,
    /// The image file name for image sequences, otherwise the URI or element description: how
    /// messages and errors name the frame's source.
    pub source: Arc<str>,
    /// The source as one URI, as the JSONL and messages give it: `file:///abs/path` for a file,
    /// the stream's own URI (`rtsp://...`, credentials redacted), `octopipe:...` for the test
    /// source, launch heads and the application's frames ([`source_uri`] of `source` unless the
    /// source sets it).
    pub uri: Arc<str>,
    /// The frame's wall-clock time: for a live source the capture time (the source clock's,
    /// mapped to wall time), otherwise when it was decoded.
    pub wall: SystemTime,
    /// For a frame of an image sequence, what its file name says ([`ImageFile`]); `None` for
    /// video, launch heads, the test source and the application's frames.
    pub image: Option<ImageFile>,
    /// Plane geometry.
    pub layout: FrameLayout,
    /// YUV to RGB conversion for YUV formats.
    pub colorimetry: Colorimetry,
    /// The planes, host or device (shared by the parts of a frame that travels in parts);
    /// `None` once released after preprocessing.
    pub planes: Option<Arc<Planes>>,
    /// Detections (already clipped to the frame), with the classifier's answers once classified.
    pub detections: Vec<Detection>,
    /// Boxes the box stages dropped, by reason.
    pub skipped: Vec<(SkipReason, u32)>,
    /// Detections (indices into `detections`) the classifier ran on but whose output was not
    /// finite (NaN or infinite logits, kept with `classify non-finite=flag`): they carry no
    /// classification.
    pub non_finite: Vec<u32>,
    /// Detections (indices into `detections`, ascending) the batch stage made no crop for: their
    /// track was classified fewer than `classify reinfer-interval` frames before, and the
    /// classify stage gives them that track's last label (none if it has none yet).
    pub reused: Vec<u32>,
    /// Budget timestamps.
    pub times: FrameTimes,
    /// Which part of its frame this is ([`Part::WHOLE`] unless the frame's boxes were cut into
    /// several batches).
    pub part: Part,
    /// The detector skipped this frame (`detect interval`): its boxes are the tracker's
    /// predictions.
    pub predicted: bool,
}

impl Frame {
    /// A frame whose planes, laid out as `layout`, are in host memory.
    pub fn new(
        stream: u32,
        seq: u64,
        source: &str,
        layout: FrameLayout,
        colorimetry: Colorimetry,
        pixels: PooledBuf,
    ) -> Self {
        Self::with_planes(
            stream,
            seq,
            source,
            layout,
            colorimetry,
            Planes::Host(pixels),
        )
    }

    /// A frame whose planes, laid out as `layout`, are in CUDA device memory.
    pub fn on_device(
        stream: u32,
        seq: u64,
        source: &str,
        layout: FrameLayout,
        colorimetry: Colorimetry,
        planes: DeviceFrame,
    ) -> Self {
        Self::with_planes(
            stream,
            seq,
            source,
            layout,
            colorimetry,
            Planes::Device(planes),
        )
    }

    fn with_planes(
        stream: u32,
        seq: u64,
        source: &str,
        layout: FrameLayout,
        colorimetry: Colorimetry,
        planes: Planes,
    ) -> Self {
        Frame {
            stream,
            seq,
            pts: None,
            source: Arc::from(source),
            uri: Arc::from(source_uri(source)),
            wall: SystemTime::now(),
            image: None,
            layout,
            colorimetry,
            planes: Some(Arc::new(planes)),
            detections: Vec::new(),
            skipped: Vec::new(),
            non_finite: Vec::new(),
            reused: Vec::new(),
            times: FrameTimes::new(Instant::now()),
            part: Part::WHOLE,
            predicted: false,
        }
    }

    /// Host pixel bytes, if the frame holds its planes in host memory.
    pub fn data(&self) -> Option<&[u8]> {
        self.planes.as_deref().and_then(Planes::host)
    }

    /// Whether the frame holds its planes in page-locked host memory (a GPU reads them in place).
    pub fn is_page_locked(&self) -> bool {
        matches!(self.planes.as_deref(), Some(Planes::Host(b)) if b.is_page_locked())
    }

    /// Where the planes are, if still held.
    pub fn memory(&self) -> Option<Memory> {
        self.planes.as_deref().map(Planes::memory)
    }

    /// Cut the frame into parts of at most `max_boxes` boxes each (at least 1), in box order:
    /// every part shares the planes and carries a copy of the times; the skipped-box counts go
    /// with the first part. A frame with no more than `max_boxes` boxes comes back whole. Each
    /// part is sent in a batch of its own, so the memory a batch takes stays bounded by the
    /// batch limits however many boxes one frame has.
    pub fn into_parts(mut self, max_boxes: usize) -> Vec<Frame> {
        let max = max_boxes.max(1);
        let n = self.detections.len();
        if n <= max {
            return vec![self];
        }
        let count = n.div_ceil(max);
        // Cut from the end: each split moves only the boxes of the part it cuts off.
        let mut boxes = std::mem::take(&mut self.detections);
        let mut runs = Vec::with_capacity(count);
        for k in (1..count).rev() {
            runs.push(boxes.split_off(k * max));
        }
        runs.push(boxes);
        runs.reverse();
        let skipped = std::mem::take(&mut self.skipped);
        let mut parts: Vec<Frame> = runs
            .into_iter()
            .enumerate()
            .map(|(k, detections)| Frame {
                stream: self.stream,
                seq: self.seq,
                pts: self.pts,
                source: self.source.clone(),
                uri: self.uri.clone(),
                wall: self.wall,
                image: self.image,
                layout: self.layout,
                colorimetry: self.colorimetry,
                planes: self.planes.clone(),
                detections,
                skipped: Vec::new(),
                // Parts are cut before classification: nothing is flagged yet.
                non_finite: Vec::new(),
                // Parts are cut before the batch stage decides which boxes reuse a label.
                reused: Vec::new(),
                times: self.times.clone(),
                part: Part {
                    index: u32::try_from(k).unwrap_or(u32::MAX),
                    count: u32::try_from(count).unwrap_or(u32::MAX),
                    first_box: u32::try_from(k * max).unwrap_or(u32::MAX),
                },
                predicted: self.predicted,
            })
            .collect();
        parts[0].skipped = skipped;
        parts
    }

    /// Give the planes back (to their pool or owner; for a frame in parts, once every part has
    /// given them back); metadata and detections stay.
    pub fn release_pixels(&mut self) {
        self.planes = None;
    }

    /// Count a skipped box.
    pub fn skip(&mut self, reason: SkipReason) {
        match self.skipped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.skipped.push((reason, 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{source_uri, ImageFile};

    #[test]
    fn every_source_name_becomes_one_uri() {
        assert_eq!(source_uri("rtsp://***@cam/live"), "rtsp://***@cam/live");
        assert_eq!(source_uri("file:///data/a.mp4"), "file:///data/a.mp4");
        assert_eq!(
            source_uri("/data/my clip.mp4"),
            "file:///data/my%20clip.mp4"
        );
        assert_eq!(
            source_uri("videotestsrc pattern=smpte"),
            "octopipe:videotestsrc%20pattern=smpte"
        );
        assert_eq!(source_uri("app:3"), "octopipe:app:3");
        assert_eq!(source_uri("octopipe:testsrc"), "octopipe:testsrc");
    }

    #[test]
    fn image_names_give_the_number_they_end_with() {
        let n = |name: &str| ImageFile::from_name(name).number;
        assert_eq!(n("0000007.jpg"), Some(7));
        assert_eq!(n("9999999_00023_d_0000001.jpg"), Some(1));
        assert_eq!(n("frame_00000.png"), Some(0));
        assert_eq!(n("img12"), Some(12));
        assert_eq!(n("frame.jpg"), None);
        assert_eq!(n("12_frame.jpg"), None);
        assert_eq!(n(".jpg"), None);
        assert_eq!(n("a_99999999999999999999999.jpg"), None, "too big for u64");
    }
}
