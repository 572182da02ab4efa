//! Image sequences: JPEG or PNG files played in file-name order.
//!
//! ```text
//! appsrc (one file per buffer) ! jpegdec idct-method=islow (or pngdec) ! videoconvert
//!   ! video/x-raw,format={I420,NV12,RGB,BGR,RGBA,BGRA,RGBx,BGRx} ! appsink
//! ```
//!
//! A sequence whose first file is a 16-bit greyscale PNG (IHDR bit depth 16, colour type 0 or 4:
//! `pngdec` gives `GRAY16_BE`) is decoded as one 16-bit band instead: `videoconvert` swaps it to
//! `GRAY16_LE` ([`PixelFormat::Gray16`](crate::frame::PixelFormat::Gray16)) and the appsink takes
//! that format only, so every file of the sequence arrives as 16-bit grey, values unchanged.
//!
//! Image files are read by a feeder thread that pushes one file per buffer with `pts = index /
//! framerate`; `appsrc` holds at most [`IMAGE_QUEUE`] files, so memory stays bounded whatever the size
//! of the folder. With a time segment `jpegdec` and `pngdec` decode each buffer as one picture, and
//! each decoded frame is mapped back to its file through its pts.
//!
//! The feeder checks each file's structure before it pushes it (`damage::image_damage`: a JPEG cut
//! short, corrupt entropy data, a file that is not of the sequence's kind): a damaged file is
//! pushed anyway (`on-damaged=keep`), left out (`skip`, the default: its index gets no frame) or
//! ends the stream with an error naming it (`fail`). What it found is noted by index
//! ([`DamageLog`]) for the source to count and log when the frames around it come out.

mod feed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::damage::OnDamaged;
use super::elements::{enum_value, link_error, make, missing, PLUGINS_BASE, PLUGINS_GOOD};
use super::header;
use super::props::ImagesProps;
use super::SourceError;
use crate::files::RunPath;
use crate::frame::{Colorimetry, ImageFile};
use crate::stage::{Properties, Role, StageDecl};
pub(super) use feed::Feeder;
use feed::{image_pts, spawn_feeder, DamageLog, Damaged};

/// Image files the `appsrc` may hold before the feeder thread waits.
const IMAGE_QUEUE: u64 = 2;

/// The largest image file read (a file is one buffer in memory while it is decoded).
const MAX_IMAGE_FILE: u64 = 256 << 20;

/// The files of an image sequence, as listed before any GStreamer work.
pub(super) struct ImageList {
    location: String,
    /// In file-name order.
    files: Vec<PathBuf>,
    kind: ImageKind,
    /// The first file is a 16-bit greyscale PNG: the sequence is decoded as GRAY16_LE.
    gray16: bool,
}

/// An image sequence being decoded: its files and which of them the decoder is at.
pub(super) struct Images {
    /// The folder or glob, as the user wrote it.
    pub(super) location: String,
    files: Arc<[PathBuf]>,
    /// File names, shared by every frame of the file.
    names: Vec<Arc<str>>,
    /// The files as `file://` URIs of their absolute paths.
    uris: Vec<Arc<str>>,
    /// What each file name says (the number it ends with), for the frames of the file.
    numbers: Vec<ImageFile>,
    kind: ImageKind,
    /// Decoded as one 16-bit band ([`ImageList::gray16`]).
    gray16: bool,
    framerate: f64,
    /// Index of the next image expected from the decoder.
    next: usize,
    /// Index (buffer offset) of the image the decoder is working on, `u64::MAX` before the first:
    /// an error on the bus is about this file.
    decoding: Arc<AtomicU64>,
    /// Times the sequence is played; image `index` of the stream is file `index % files.len()`.
    loops: u32,
    /// What the feeder does with a damaged file.
    on_damaged: OnDamaged,
    /// Damaged files the feeder found, by image index, not yet reported.
    damage: Arc<Mutex<DamageLog>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageKind {
    Jpeg,
    Png,
}

impl ImageList {
    /// Whether the sequence is JPEG files (what nvJPEG decodes).
    pub(super) fn is_jpeg(&self) -> bool {
        self.kind == ImageKind::Jpeg
    }
}

impl ImageKind {
    fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jpg" | "jpeg" => Some(ImageKind::Jpeg),
            "png" => Some(ImageKind::Png),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "JPEG",
            ImageKind::Png => "PNG",
        }
    }

    fn decoder(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "jpegdec",
            ImageKind::Png => "pngdec",
        }
    }

    fn caps(self) -> gst::Caps {
        match self {
            ImageKind::Jpeg => gst::Caps::new_empty_simple("image/jpeg"),
            ImageKind::Png => gst::Caps::new_empty_simple("image/png"),
        }
    }

    /// The picture's (width, height) as the file's header declares it
    /// ([`header::png_size`], [`header::jpeg_size`]).
    fn declared_size(self, bytes: &[u8]) -> Option<(u64, u64)> {
        match self {
            ImageKind::Png => header::png_size(bytes),
            ImageKind::Jpeg => header::jpeg_size(bytes),
        }
    }

    /// Whether `bytes` start like a file of this kind.
    fn has_magic(self, bytes: &[u8]) -> bool {
        match self {
            ImageKind::Jpeg => bytes.starts_with(&[0xFF, 0xD8]),
            ImageKind::Png => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        }
    }
}

impl Images {
    /// The sequence of `list`'s files played `loops` times at `framerate`; damaged files get
    /// `on_damaged`.
    pub(super) fn new(list: ImageList, framerate: f64, loops: u32, on_damaged: OnDamaged) -> Self {
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
    pub(super) fn take_damage(&self, all: bool) -> Vec<Damaged> {
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
    pub(super) fn origin(
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
    pub(super) fn check_end(&mut self, warning: Option<&str>) -> Result<(), SourceError> {
        self.pass_skipped(self.total());
        if self.next < self.total() {
            return Err(self.no_frame(self.next, warning.map(str::to_string)));
        }
        Ok(())
    }

    /// (source name, message) of a decoder error: the file being decoded, and what failed (jpegdec
    /// fails some broken files with a bare flow error).
    pub(super) fn decode_failure(&self, error: &gst::glib::Error) -> (String, String) {
        (
            self.decoding_name(),
            format!("cannot decode this {} file: {}", self.kind.name(), error),
        )
    }

    /// Images in the stream: every file, `loops` times.
    pub(super) fn total(&self) -> usize {
        self.files.len() * self.loops as usize
    }

    /// The file the decoder was working on (the folder or glob before the first).
    fn decoding_name(&self) -> String {
        self.name_at(self.decoding.load(Ordering::SeqCst))
    }

    /// The file of image `index` of the stream (a buffer's offset), the folder or glob when
    /// there is none.
    pub(super) fn name_at(&self, index: u64) -> String {
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
        Err(_) => crate::frame::source_uri(&absolute.display().to_string()).into(),
    }
}

/// The image files of a folder or glob, in file-name order, all of one kind.
pub(super) fn list_images(location: &str) -> Result<ImageList, SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::input(path.display(), reason);
    let files = matching_files(location)?;
    let Some(first) = files.first() else {
        return Err(SourceError::input(location, "no .jpg, .jpeg or .png files"));
    };
    let kind = ImageKind::of(first)
        .ok_or_else(|| input_error(first, "not a .jpg, .jpeg or .png file".into()))?;
    if let Some(odd) = files.iter().find(|f| ImageKind::of(f) != Some(kind)) {
        let reason = match ImageKind::of(odd) {
            Some(other) => format!(
                "is {} but {} starts a {} sequence: mixed image formats are not supported",
                other.name(),
                file_name(first),
                kind.name()
            ),
            None => "not a .jpg, .jpeg or .png file".into(),
        };
        return Err(input_error(odd, reason));
    }
    Ok(ImageList {
        location: location.to_string(),
        gray16: kind == ImageKind::Png && is_gray16_png(first),
        files,
        kind,
    })
}

/// Whether the PNG file at `path` holds one 16-bit grey band: its IHDR chunk (bytes 16..29 of the
/// file) says bit depth 16 and colour type 0 (grey) or 4 (grey and alpha, the alpha dropped).
fn is_gray16_png(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 26];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    read.is_ok() && &head[12..16] == b"IHDR" && head[24] == 16 && matches!(head[25], 0 | 4)
}

/// The files `location` names, sorted by file name: those matching its last component when that
/// is a glob, the one image a file is (a sequence of one frame), else the image files of the
/// folder.
pub(super) fn matching_files(location: &str) -> Result<Vec<PathBuf>, SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::input(path.display(), reason);
    let path = Path::new(location);
    if path.is_file() {
        return match ImageKind::of(path) {
            Some(_) => Ok(vec![path.to_path_buf()]),
            None => Err(input_error(
                path,
                "is a file but not a .jpg, .jpeg or .png image: `images` plays one image, a folder of them or a glob (location=\"DIR/*.jpg\"); a video file is `media location=...`".into(),
            )),
        };
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (dir, pattern) = if name.contains(['*', '?']) {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        (dir, Some(name))
    } else {
        (path, None)
    };
    let entries = std::fs::read_dir(dir).map_err(|e| SourceError::io(dir.display(), e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io(dir.display(), e))?;
        let file = entry.path();
        let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let wanted = match pattern {
            Some(pattern) => glob_match(pattern, name),
            None => ImageKind::of(&file).is_some(),
        };
        if wanted && file.is_file() {
            files.push(file);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// Shell-style match of a file name: `*` any run of characters, `?` one character.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic greedy matcher with backtracking to the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// What the feeder calls with each file it reads (its image index and bytes), before pushing
/// it: nvJPEG's route asks for the file's decode there.
pub(crate) type OnFile = Box<dyn Fn(u64, &gst::Buffer) + Send>;

/// `appsrc ! jpegdec|pngdec ! videoconvert ! appsink`, fed by a thread; with `undecoded`
/// (nvJPEG decodes a JPEG sequence, `images decoder=nvjpeg`), `appsrc ! appsink`: the samples
/// are the files, each handed to `undecoded` as the feeder reads it.
pub(super) fn build_images(
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

/// What an `images` location reads: the folder, the one image, or the files its glob matches (a
/// folder or glob that cannot be read reads nothing; opening the source reports it).
pub(crate) fn inputs(location: &str) -> Vec<RunPath> {
    let name = std::path::Path::new(location)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if std::path::Path::new(location).is_file() {
        return vec![RunPath::file("images location", location)];
    }
    if !name.contains(['*', '?']) {
        return vec![RunPath::folder("images location", location)];
    }
    matching_files(location)
        .unwrap_or_default()
        .into_iter()
        .map(|file| RunPath::file("images location", file))
        .collect()
}

/// `images location=DIR framerate=30`: JPEG/PNG images in file-name order.
pub const IMAGES: StageDecl = StageDecl {
    name: "images",
    role: Role::Source,
    doc: "JPEG/PNG images in file-name order, decoded by GStreamer",
    props: ImagesProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(ImagesProps::from_props(p)?.config())),
};

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob() {
        assert!(glob_match("*.jpg", "a.jpg"));
        assert!(glob_match("img_??.png", "img_01.png"));
        assert!(!glob_match("img_??.png", "img_1.png"));
        assert!(glob_match("*_d_*.jpg", "9999999_00023_d_0000001.jpg"));
        assert!(!glob_match("*.jpg", "a.jpeg"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
    }
}
