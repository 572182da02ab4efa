//! Annotated output (boxes, labels and scores drawn on the frames, as PNG files or an MP4) and the
//! crop mosaic (the tensors the classifier was fed, de-normalized back to pixels).
//!
//! ```text
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=o.jsonl --annotate frames/ --mosaic crops.png
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=o.jsonl --annotate annotated.mp4
//! ```
//!
//! Text is drawn with a built-in 8x8 bitmap font (no system fonts). The MP4 is encoded by
//! GStreamer: `appsrc ! videoconvert ! x264enc ! mp4mux ! filesink`. Frames are converted to RGB
//! exactly as the CPU backend samples them ([`frame_to_rgb`]); drawing and encoding happen on a
//! thread of their own, which the collector waits for when it falls 4 frames behind (so writing
//! every frame can cost a slow machine its real-time budget).
mod canvas;
mod draw;
mod mosaic;
mod mp4;
mod record;
mod render;
mod yuv;

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use image::RgbImage;

use octopipe_core::budget::Report;
use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, PooledBuf};
use octopipe_core::observer::Observer;
use octopipe_stages::batch::CropBatch;
use octopipe_stages::preprocess::cpu::frame_to_rgb;

use crate::errors::ObserveError;

pub use canvas::{Canvas, FrameCanvas};
pub(crate) use draw::save_png;
pub use draw::{draw_box, draw_text, text_width, GLYPH};
pub use mosaic::Mosaic;
pub use mp4::Mp4Encoder;
pub use record::RecordingCanvas;
use render::{draw_marks, Mark};
pub use render::{draw_objects, Style};
pub use yuv::{yuv_of, YuvRect};

/// One frame to draw, with a copy of its planes.
struct Job {
    stream: u32,
    seq: u64,
    pts: Duration,
    layout: FrameLayout,
    colorimetry: Colorimetry,
    planes: Vec<u8>,
    marks: Vec<Mark>,
}

impl Job {
    /// The frame as RGB with its boxes and captions drawn.
    fn render(self) -> Option<RgbImage> {
        let mut frame = Frame::new(
            self.stream,
            self.seq,
            "",
            self.layout,
            self.colorimetry,
            PooledBuf::unpooled(self.planes),
        );
        frame.pts = Some(self.pts);
        let rgb = frame_to_rgb(&frame)?;
        let mut img = RgbImage::from_raw(self.layout.width, self.layout.height, rgb)?;
        let style = Style::default();
        draw_marks(&mut img, &self.marks, &style);
        let (scale, _) = style.scales(self.layout.width);
        let head = format!(
            "stream {} frame {} ({} objects)",
            self.stream,
            self.seq,
            self.marks.len()
        );
        draw_text(
            &mut img,
            4,
            4,
            &head,
            [255, 255, 255],
            scale,
            Some([0, 0, 0]),
        );
        Some(img)
    }
}

/// Where annotated frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnnotateTarget {
    /// One PNG per frame in this folder, named `s{stream}-{seq:06}.png`.
    PngDir(PathBuf),
    /// One H.264 MP4 (the first stream only, at the budget's frame rate).
    Mp4(PathBuf),
}

impl AnnotateTarget {
    /// `*.mp4` is a video, anything else a folder of PNG files.
    pub fn from_path(path: &Path) -> Self {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mp4"))
        {
            AnnotateTarget::Mp4(path.to_path_buf())
        } else {
            AnnotateTarget::PngDir(path.to_path_buf())
        }
    }
}

/// Draws boxes, labels and scores on every frame and writes them out. Needs the frames' pixels:
/// call `octopipe::Pipeline::keep_pixels(true)`.
pub struct Annotator {
    target: AnnotateTarget,
    tx: Option<Sender<Job>>,
    worker: Option<thread::JoinHandle<Result<u64, ObserveError>>>,
    without_pixels: u64,
    first_stream: Option<u32>,
    skip_when_behind: bool,
    skipped: u64,
}

impl Annotator {
    /// Write annotated frames to `target` (classes named as the classifier names them).
    /// `frame_interval` times the MP4's frames when the source gives no timestamps. The folder
    /// or file is made at the first frame. Fails when (MP4) GStreamer lacks an element.
    pub fn new(
        target: AnnotateTarget,
        frame_interval: Duration,
    ) -> Result<Annotator, ObserveError> {
        let (tx, rx) = bounded::<Job>(4);
        let worker = match &target {
            AnnotateTarget::PngDir(dir) => {
                let dir = dir.clone();
                thread::Builder::new()
                    .name("octopipe-annotate".into())
                    .spawn(move || {
                        let mut n = 0;
                        for job in rx {
                            // Made at the first frame: a run that fails first leaves nothing.
                            if n == 0 {
                                std::fs::create_dir_all(&dir).map_err(|source| {
                                    ObserveError::CreateDir {
                                        path: dir.display().to_string(),
                                        source,
                                    }
                                })?;
                            }
                            let name = dir.join(format!("s{}-{:06}.png", job.stream, job.seq));
                            let Some(img) = job.render() else { continue };
                            save_png(&img, &name, false)?;
                            n += 1;
                        }
                        Ok(n)
                    })
            }
            AnnotateTarget::Mp4(path) => {
                let mut enc = Mp4Encoder::check(path)?;
                let interval = frame_interval.max(Duration::from_millis(1));
                thread::Builder::new()
                    .name("octopipe-annotate".into())
                    .spawn(move || {
                        let mut first: Option<Duration> = None;
                        for job in rx {
                            let pts = job.pts;
                            let t0 = *first.get_or_insert(pts);
                            let Some(img) = job.render() else { continue };
                            enc.push(img, pts.saturating_sub(t0), interval)?;
                        }
                        enc.finish()
                    })
            }
        }
        .map_err(ObserveError::Thread)?;
        Ok(Annotator {
            target,
            tx: Some(tx),
            worker: Some(worker),
            without_pixels: 0,
            first_stream: None,
            skip_when_behind: false,
            skipped: 0,
        })
    }

    /// When the writer falls behind (4 frames queued), skip frames (counted in the report)
    /// instead of making the pipeline wait: for live streams, where waiting costs frames.
    pub fn skip_when_behind(mut self, skip: bool) -> Self {
        self.skip_when_behind = skip;
        self
    }
}

impl Observer for Annotator {
    fn batch(&mut self, batch: &CropBatch, budget: Duration) {
        let Some(tx) = &self.tx else { return };
        for f in &batch.frames {
            let Some(data) = f.data() else {
                self.without_pixels += 1;
                continue;
            };
            if matches!(self.target, AnnotateTarget::Mp4(_))
                && *self.first_stream.get_or_insert(f.stream) != f.stream
            {
                continue;
            }
            // Every box of the frame, reused labels included; a tracked box shows `#id`.
            let marks = f
                .detections
                .iter()
                .map(|d| Mark::of(d, &Style::default()))
                .collect();
            let job = Job {
                stream: f.stream,
                seq: f.seq,
                pts: f.pts.unwrap_or(budget * f.seq as u32),
                layout: f.layout,
                colorimetry: f.colorimetry,
                planes: data[..f.layout.size().min(data.len())].to_vec(),
                marks,
            };
            let sent = if self.skip_when_behind {
                match tx.try_send(job) {
                    Err(crossbeam_channel::TrySendError::Full(_)) => {
                        self.skipped += 1;
                        Ok(())
                    }
                    other => other.map_err(|_| ()),
                }
            } else {
                tx.send(job).map_err(|_| ())
            };
            if sent.is_err() {
                // The worker stopped on an error; finish reports it.
                self.tx = None;
                return;
            }
        }
    }

    fn finish(&mut self, report: &mut Report) {
        self.tx = None;
        let result = self
            .worker
            .take()
            .map(|w| w.join().unwrap_or_else(|_| Err(ObserveError::Panicked)));
        let place = match &self.target {
            AnnotateTarget::PngDir(d) => format!("PNG files in {}", d.display()),
            AnnotateTarget::Mp4(p) => format!("{} (H.264)", p.display()),
        };
        match result {
            Some(Ok(n)) => report
                .extra
                .push(format!("annotated: {n} frames written to {place}")),
            Some(Err(e)) => {
                let (AnnotateTarget::PngDir(path) | AnnotateTarget::Mp4(path)) = &self.target;
                report
                    .not_written
                    .push(format!("--annotate {}: not written: {e}", path.display()))
            }
            None => {}
        }
        if self.skipped > 0 {
            report.extra.push(format!(
                "annotated: {} frames skipped: the writer fell behind the live stream",
                self.skipped
            ));
        }
        if self.without_pixels > 0 {
            report.extra.push(format!(
                "annotated: {} frames had no pixels left (Pipeline::keep_pixels was not set)",
                self.without_pixels
            ));
        }
    }
}

impl Drop for Annotator {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
