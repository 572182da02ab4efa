//! The feeder thread of an image sequence: it reads each file, checks its structure
//! ([`image_damage`]) and pushes it into the `appsrc` as one buffer (`pts = index / framerate`,
//! offset = index), or leaves a damaged one out (`on-damaged=skip`), noting it by index in the
//! [`DamageLog`] before any later file goes in; a file it cannot use ends the stream, its error
//! kept for whoever sees the end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use gstreamer as gst;
use gstreamer_app as gst_app;

use super::sequence::{image_pts, DamageLog, Damaged, ImageKind, Images};
use crate::damage::{image_damage, OnDamaged};
use crate::SourceError;

/// The largest image file read (a file is one buffer in memory while it is decoded).
const MAX_IMAGE_FILE: u64 = 256 << 20;

/// What the feeder calls with each file it reads (its image index and bytes), before pushing
/// it: nvJPEG's route asks for the file's decode there.
pub(crate) type OnFile = Box<dyn Fn(u64, &gst::Buffer) + Send>;

/// The thread that pushes image files into `appsrc`.
pub(crate) struct Feeder {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// A file the feeder could not use; reported once the frames before it are out.
    error: Arc<Mutex<Option<SourceError>>>,
}

impl Feeder {
    /// The file the feeder could not use, once.
    pub(crate) fn take_error(&self) -> Option<SourceError> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }

    /// Ask the thread to push nothing more (it may be blocked on a full `appsrc` until the
    /// pipeline flushes).
    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub(crate) fn stop_and_join(&mut self) {
        self.request_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the feeder thread owns.
struct ImageFeed {
    appsrc: gst_app::AppSrc,
    files: Arc<[PathBuf]>,
    loops: u32,
    kind: ImageKind,
    framerate: f64,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<SourceError>>>,
    on_damaged: OnDamaged,
    damage: Arc<Mutex<DamageLog>>,
    /// Told of each file before it is pushed (nvJPEG's read-ahead).
    on_file: Option<OnFile>,
}

impl ImageFeed {
    /// Push every file as one buffer, then end of stream. A file that cannot be read, or a damaged
    /// one with `on-damaged=fail`, ends the stream early (the frames before it still come out) and
    /// is left in `error`, set before the end of stream so that whoever sees the end finds it.
    /// Other damaged files are noted in `damage` first, then pushed (`keep`) or left out.
    fn run(self) {
        let total = self.files.len() * self.loops as usize;
        for index in 0..total {
            let path = &self.files[index % self.files.len()];
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let unread = match self.read(path) {
                Ok(bytes) => match image_damage(self.kind.name(), &bytes) {
                    None => Ok(bytes),
                    Some(reason) => Err((Unread::Damaged(reason), Some(bytes))),
                },
                Err(Unread::Kind(kind)) => {
                    Err((Unread::Damaged(format!("not a {kind} file")), None))
                }
                Err(e) => Err((e, None)),
            };
            let bytes = match unread {
                Ok(bytes) => bytes,
                Err((Unread::Damaged(reason), bytes)) if self.on_damaged != OnDamaged::Fail => {
                    // A file with no picture in it cannot be kept: it is left out.
                    let action = match bytes {
                        Some(_) => self.on_damaged,
                        None => OnDamaged::Skip,
                    };
                    if let Ok(mut log) = self.damage.lock() {
                        let path = path.clone();
                        log.found.insert(
                            index,
                            Damaged {
                                path,
                                reason,
                                action,
                            },
                        );
                    }
                    match (action, bytes) {
                        (OnDamaged::Keep, Some(bytes)) => bytes,
                        _ => continue,
                    }
                }
                Err((reason, _)) => {
                    if let Ok(mut slot) = self.error.lock() {
                        *slot = Some(reason.at(path));
                    }
                    let _ = self.appsrc.end_of_stream();
                    return;
                }
            };
            let mut buffer = gst::Buffer::from_mut_slice(bytes);
            if let Some(b) = buffer.get_mut() {
                b.set_pts(image_pts(index, self.framerate));
                b.set_duration(
                    image_pts(index + 1, self.framerate) - image_pts(index, self.framerate),
                );
                b.set_offset(index as u64);
            }
            if let Some(on_file) = &self.on_file {
                on_file(index as u64, &buffer);
            }
            if self.appsrc.push_buffer(buffer).is_err() {
                return; // flushing: the pipeline is stopping
            }
        }
        let _ = self.appsrc.end_of_stream();
    }

    /// The bytes of `path` (at most [`MAX_IMAGE_FILE`]), which must start like a file of the
    /// sequence's kind and declare a picture a frame may be
    /// ([`frame_fits`](octopipe_core::stage::limits::frame_fits)): checked before the decoder
    /// allocates it.
    fn read(&self, path: &Path) -> Result<Vec<u8>, Unread> {
        let bytes = octopipe_core::files::read_bounded(path, MAX_IMAGE_FILE).map_err(Unread::Io)?;
        if !self.kind.has_magic(&bytes) {
            return Err(Unread::Kind(self.kind.name()));
        }
        if let Some((w, h)) = self.kind.declared_size(&bytes) {
            if let Some(why) = octopipe_core::stage::limits::frame_too_large(w, h) {
                return Err(Unread::TooLarge(why));
            }
        }
        Ok(bytes)
    }
}

/// Why an image file was not read.
enum Unread {
    /// Not a file of the sequence's kind (named).
    Kind(&'static str),
    /// Damaged, and `on-damaged=fail`: what is wrong with it.
    Damaged(String),
    /// Reading it failed.
    Io(std::io::Error),
    /// Its header declares a picture too large to decode (why).
    TooLarge(String),
}

impl Unread {
    /// The error of the file at `path`.
    fn at(self, path: &Path) -> SourceError {
        match self {
            Unread::Kind(kind) => SourceError::input(path.display(), format!("not a {kind} file")),
            Unread::Damaged(reason) => SourceError::input(
                path.display(),
                format!(
                    "{reason} (on-damaged=fail; on-damaged=skip leaves such a file out, keep decodes what is there)"
                ),
            ),
            Unread::Io(e) => SourceError::io(path.display(), e),
            Unread::TooLarge(why) => SourceError::input(
                path.display(),
                format!("its picture is too large to decode: {why}"),
            ),
        }
    }
}

/// Start the thread that pushes `images`' files into `appsrc`.
pub(super) fn spawn_feeder(
    appsrc: gst_app::AppSrc,
    images: &Images,
    on_file: Option<OnFile>,
) -> Result<Feeder, SourceError> {
    let stop = Arc::new(AtomicBool::new(false));
    let error = Arc::new(Mutex::new(None));
    let feed = ImageFeed {
        appsrc,
        files: images.files.clone(),
        loops: images.loops,
        kind: images.kind,
        framerate: images.framerate,
        stop: stop.clone(),
        error: error.clone(),
        on_damaged: images.on_damaged,
        damage: images.damage.clone(),
        on_file,
    };
    let thread = std::thread::Builder::new()
        .name("octopipe-images".into())
        .spawn(move || feed.run())
        .map_err(|e| SourceError::Init(format!("cannot start the image feeder thread: {e}")))?;
    Ok(Feeder {
        thread: Some(thread),
        stop,
        error,
    })
}
