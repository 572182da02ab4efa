//! An image sequence: its files as listed ([`ImageList`]), of one kind ([`ImageKind`]), and as
//! decoded ([`Images`]): which file a frame came from, and the damaged files the feeder noted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gstreamer as gst;

use crate::damage::OnDamaged;
use crate::header;
use crate::SourceError;
use octopipe_core::frame::{Colorimetry, ImageFile};
/// The files of an image sequence, as listed before any GStreamer work.
pub(crate) struct ImageList {
    pub(super) location: String,
    /// In file-name order.
    pub(super) files: Vec<PathBuf>,
    pub(super) kind: ImageKind,
    /// The first file is a 16-bit greyscale PNG: the sequence is decoded as GRAY16_LE.
    pub(super) gray16: bool,
}

/// An image sequence being decoded: its files and which of them the decoder is at.
pub(crate) struct Images {
    /// The folder or glob, as the user wrote it.
    pub(crate) location: String,
    pub(super) files: Arc<[PathBuf]>,
    /// File names, shared by every frame of the file.
    pub(super) names: Vec<Arc<str>>,
    /// The files as `file://` URIs of their absolute paths.
    pub(super) uris: Vec<Arc<str>>,
    /// What each file name says (the number it ends with), for the frames of the file.
    pub(super) numbers: Vec<ImageFile>,
    pub(super) kind: ImageKind,
    /// Decoded as one 16-bit band ([`ImageList::gray16`]).
    pub(super) gray16: bool,
    pub(super) framerate: f64,
    /// Index of the next image expected from the decoder.
    pub(super) next: usize,
    /// Index (buffer offset) of the image the decoder is working on, `u64::MAX` before the first:
    /// an error on the bus is about this file.
    pub(super) decoding: Arc<AtomicU64>,
    /// Times the sequence is played; image `index` of the stream is file `index % files.len()`.
    pub(super) loops: u32,
    /// What the feeder does with a damaged file.
    pub(super) on_damaged: OnDamaged,
    /// Damaged files the feeder found, by image index, not yet reported.
    pub(super) damage: Arc<Mutex<DamageLog>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ImageKind {
    Jpeg,
    Png,
}

impl ImageList {
    /// Whether the sequence is JPEG files (what nvJPEG decodes).
    pub(crate) fn is_jpeg(&self) -> bool {
        self.kind == ImageKind::Jpeg
    }
}

impl ImageKind {
    pub(super) fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jpg" | "jpeg" => Some(ImageKind::Jpeg),
            "png" => Some(ImageKind::Png),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "JPEG",
            ImageKind::Png => "PNG",
        }
    }

    pub(super) fn decoder(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "jpegdec",
            ImageKind::Png => "pngdec",
        }
    }

    pub(super) fn caps(self) -> gst::Caps {
        match self {
            ImageKind::Jpeg => gst::Caps::new_empty_simple("image/jpeg"),
            ImageKind::Png => gst::Caps::new_empty_simple("image/png"),
        }
    }

    /// The picture's (width, height) as the file's header declares it
    /// ([`header::png_size`], [`header::jpeg_size`]).
    pub(super) fn declared_size(self, bytes: &[u8]) -> Option<(u64, u64)> {
        match self {
            ImageKind::Png => header::png_size(bytes),
            ImageKind::Jpeg => header::jpeg_size(bytes),
        }
    }

    /// Whether `bytes` start like a file of this kind.
    pub(super) fn has_magic(self, bytes: &[u8]) -> bool {
        match self {
            ImageKind::Jpeg => bytes.starts_with(&[0xFF, 0xD8]),
            ImageKind::Png => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        }
    }
}

impl Images {
    /// The sequence of `list`'s files played `loops` times at `framerate`; damaged files get
    /// `on_damaged`.
    pub(crate) fn new(list: ImageList, framerate: f64, loops: u32, on_damaged: OnDamaged) -> Self {
        Images {
            names: list.files.iter().map(|f| file_name(f).into()).collect(),
            uris: list.files.iter().map(|f| file_uri(f)).collect(),
            numbers: list
                .files
                .iter()
                .map(|f| ImageFile::from_name(&file_name(f)))
                .collect(),
            location: list.location,
            files: list.files.into(),
            kind: list.kind,
            gray16: list.gray16,
            framerate,
            next: 0,
            decoding: Arc::new(AtomicU64::new(u64::MAX)),
            loops,
            on_damaged,
            damage: Arc::default(),
        }
    }

    /// The damaged files noted before the image expected next (`all`: every one noted), in
    /// order, taken out of the log: the source counts and logs each once.
    pub(crate) fn take_damage(&self, all: bool) -> Vec<Damaged> {
        let Ok(mut log) = self.damage.lock() else {
            return Vec::new();
        };
        let rest = match all {
            false => log.found.split_off(&self.next),
            true => BTreeMap::new(),
        };
        std::mem::replace(&mut log.found, rest)
            .into_values()
            .collect()
    }

    /// Whether image `index` was left out by the feeder (damaged, not kept).
    fn skipped(&self, index: usize) -> bool {
        self.damage.lock().is_ok_and(|log| {
            log.found
                .get(&index)
                .is_some_and(|d| d.action == OnDamaged::Skip)
        })
    }

    /// Move `next` past the images the feeder left out.
    fn pass_skipped(&mut self, upto: usize) {
        while self.next < upto && self.skipped(self.next) {
            self.next += 1;
        }
    }

    /// The file name, what the name says and the fallback colorimetry of the decoded frame
    /// stamped `pts`; the next frame is expected from the image after it.
    pub(crate) fn origin(
        &mut self,
        pts: Option<gst::ClockTime>,
    ) -> Result<(Arc<str>, Arc<str>, ImageFile, Colorimetry), SourceError> {
        let index = self.index_of(pts)?;
        self.next = index + 1;
        // jpegdec 1.22 puts `colorimetry=1:4:0:0` (full range, BT.601) and `chroma-site=jpeg` in
        // its caps, which maps to Colorimetry::JPEG; what the caps leave unknown (e.g. after
        // videoconvert turned a 4:4:4 or grey JPEG into I420) defaults to JFIF's own definition,
        // which is Colorimetry::JPEG too.
        let file = index % self.names.len();
        Ok((
            self.names[file].clone(),
            self.uris[file].clone(),
            self.numbers[file],
            Colorimetry::JPEG,
        ))
    }

    /// The image a decoded frame came from, checked against the pts the feeder gave it.
    fn index_of(&mut self, pts: Option<gst::ClockTime>) -> Result<usize, SourceError> {
        let stray = || SourceError::Stream {
            source_name: self.location.clone(),
            message: format!("decoded frame with pts {pts:?} matches no image"),
            debug: None,
        };
        let pts = pts.ok_or_else(stray)?;
        let index = (pts.nseconds() as f64 * self.framerate / 1e9).round() as usize;
        if index >= self.total() || image_pts(index, self.framerate) != pts || index < self.next {
            return Err(stray());
        }
        self.pass_skipped(index);
        if index > self.next {
            // jpegdec and pngdec drop a picture they cannot decode (with at most a warning).
            return Err(self.no_frame(self.next, None));
        }
        Ok(index)
    }

    /// At end of stream: an image that produced no frame is an error, with the last warning on the
    /// bus as detail.
    pub(crate) fn check_end(&mut self, warning: Option<&str>) -> Result<(), SourceError> {
        self.pass_skipped(self.total());
        if self.next < self.total() {
            return Err(self.no_frame(self.next, warning.map(str::to_string)));
        }
        Ok(())
    }

    /// (source name, message) of a decoder error: the file being decoded, and what failed (jpegdec
    /// fails some broken files with a bare flow error).
    pub(crate) fn decode_failure(&self, error: &gst::glib::Error) -> (String, String) {
        (
            self.decoding_name(),
            format!("cannot decode this {} file: {}", self.kind.name(), error),
        )
    }

    /// Images in the stream: every file, `loops` times.
    pub(crate) fn total(&self) -> usize {
        self.files.len() * self.loops as usize
    }

    /// The file the decoder was working on (the folder or glob before the first).
    fn decoding_name(&self) -> String {
        self.name_at(self.decoding.load(Ordering::SeqCst))
    }

    /// The file of image `index` of the stream (a buffer's offset), the folder or glob when
    /// there is none.
    pub(crate) fn name_at(&self, index: u64) -> String {
        let file = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.total())
            .and_then(|i| self.files.get(i % self.files.len()));
        match file {
            Some(path) => path.display().to_string(),
            None => self.location.clone(),
        }
    }

    fn no_frame(&self, index: usize, debug: Option<String>) -> SourceError {
        SourceError::Stream {
            source_name: self.files[index % self.files.len()].display().to_string(),
            message: format!(
                "{} produced no picture from this file (corrupt {}?)",
                self.kind.decoder(),
                self.kind.name()
            ),
            debug,
        }
    }
}

/// `path` as a `file://` URI of its canonical path (as `media` gives a file's URI).
fn file_uri(path: &Path) -> Arc<str> {
    let absolute = std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf());
    match gst::glib::filename_to_uri(&absolute, None) {
        Ok(uri) => uri.as_str().into(),
        Err(_) => octopipe_core::frame::source_uri(&absolute.display().to_string()).into(),
    }
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A damaged image file the feeder found.
#[derive(Debug, Clone)]
pub(crate) struct Damaged {
    /// The file.
    pub(crate) path: PathBuf,
    /// What is wrong with it.
    pub(crate) reason: String,
    /// What was done with it (`Keep` becomes `Skip` for a file with no picture in it).
    pub(crate) action: OnDamaged,
}

/// Damaged files by image index, noted by the feeder before it pushes (or leaves out) the file,
/// so they are known when any later image's frame comes out.
#[derive(Debug, Default)]
pub(crate) struct DamageLog {
    pub(super) found: BTreeMap<usize, Damaged>,
}

/// Presentation time of image `index` of a sequence played at `framerate`.
pub(crate) fn image_pts(index: usize, framerate: f64) -> gst::ClockTime {
    gst::ClockTime::from_nseconds((index as f64 * 1e9 / framerate).round() as u64)
}
