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

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use image::{Rgb, RgbImage};

use crate::batch::CropBatch;
use crate::budget::Report;
use crate::frame::{Colorimetry, Detection, Frame, FrameLayout, PooledBuf};
use crate::pipeline::Observer;
use crate::preprocess::cpu::frame_to_rgb;
use crate::preprocess::{ChannelOrder, Layout, PreprocessConfig};

use super::ObserveError;

/// Box colours by class id (cycled), chosen to stand out from aerial footage.
const PALETTE: [[u8; 3]; 6] = [
    [255, 0, 255],
    [0, 255, 255],
    [0, 255, 0],
    [255, 140, 0],
    [255, 255, 0],
    [160, 110, 255],
];

/// Glyph cell of the built-in font, in pixels at scale 1.
pub const GLYPH: u32 = 8;

/// Width in pixels of `text` at `scale`.
pub fn text_width(text: &str, scale: u32) -> u32 {
    text.chars().count() as u32 * GLYPH * scale
}

/// Draw `text` with its top-left corner at (`x`, `y`) in `color`, each font pixel `scale` pixels
/// wide, over a `background` rectangle when given. Non-ASCII characters draw as `?`; whatever
/// falls outside the image is clipped.
pub fn draw_text(
    img: &mut RgbImage,
    x: i64,
    y: i64,
    text: &str,
    color: [u8; 3],
    scale: u32,
    background: Option<[u8; 3]>,
) {
    let scale = scale.max(1) as i64;
    if let Some(bg) = background {
        let w = text_width(text, scale as u32) as i64;
        fill_rect(img, x, y, w, GLYPH as i64 * scale, bg);
    }
    for (i, c) in text.chars().enumerate() {
        let glyph = font8x8::legacy::BASIC_LEGACY[if c.is_ascii() {
            c as usize
        } else {
            b'?' as usize
        }];
        let gx = x + i as i64 * GLYPH as i64 * scale;
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                if bits & (1 << col) != 0 {
                    fill_rect(
                        img,
                        gx + col * scale,
                        y + row as i64 * scale,
                        scale,
                        scale,
                        color,
                    );
                }
            }
        }
    }
}

/// Fill the rectangle at (`x`, `y`) of `w`x`h`, clipped to the image.
fn fill_rect(img: &mut RgbImage, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
    let (iw, ih) = (img.width() as i64, img.height() as i64);
    for py in y.max(0)..(y + h).min(ih) {
        for px in x.max(0)..(x + w).min(iw) {
            img.put_pixel(px as u32, py as u32, Rgb(color));
        }
    }
}

/// Draw the outline of box `[x, y, w, h]`, `thickness` pixels wide, inside the box.
pub fn draw_box(img: &mut RgbImage, bbox: [u32; 4], color: [u8; 3], thickness: u32) {
    let [x, y, w, h] = bbox.map(i64::from);
    let t = (thickness as i64).min(w / 2).min(h / 2).max(1);
    fill_rect(img, x, y, w, t, color);
    fill_rect(img, x, y + h - t, w, t, color);
    fill_rect(img, x, y, t, h, color);
    fill_rect(img, x + w - t, y, t, h, color);
}

/// Write `img` as a PNG: fast compression for frame after frame, or the smallest file.
pub(crate) fn save_png(img: &RgbImage, path: &Path, small: bool) -> Result<(), ObserveError> {
    use image::codecs::png::{CompressionType, FilterType};
    let fail = |e: Box<dyn std::error::Error + Send + Sync>| ObserveError::Write {
        path: path.display().to_string(),
        source: e,
    };
    let file = std::fs::File::create(path).map_err(|e| fail(e.into()))?;
    let (level, filter) = if small {
        (CompressionType::Best, FilterType::Adaptive)
    } else {
        (CompressionType::Fast, FilterType::Sub)
    };
    octopipe_stages::sink::output::write_png(
        file,
        img.as_raw(),
        img.dimensions(),
        image::ExtendedColorType::Rgb8,
        level,
        filter,
    )
    .map_err(|e| fail(e.into()))
}

/// One object to draw: box, colour and its caption.
struct Mark {
    bbox: [u32; 4],
    color: [u8; 3],
    caption: String,
}

impl Mark {
    /// How a box is drawn: coloured by its class, captioned `label score`: the classifier's,
    /// else the box source's (a detector's class and score, an annotation's category), `?`
    /// when neither names it; and `#id` first when it has a track.
    fn of(d: &Detection) -> Mark {
        let (class, caption) = match (&d.classification, &d.label) {
            (Some(c), _) => (
                c.best.class_id,
                format!("{} {:.2}", c.best.label, c.best.score),
            ),
            (None, Some(label)) => (
                d.class_id.unwrap_or(u32::MAX),
                format!("{label} {:.2}", d.score),
            ),
            (None, None) => (u32::MAX, "?".into()),
        };
        let caption = match d.track {
            Some(id) => format!("#{id} {caption}"),
            None => caption,
        };
        Mark {
            bbox: d.bbox,
            color: PALETTE[class as usize % PALETTE.len()],
            caption,
        }
    }
}

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
        let scale = if self.layout.width >= 1600 { 2 } else { 1 };
        for m in &self.marks {
            draw_box(&mut img, m.bbox, m.color, scale + 1);
        }
        for m in &self.marks {
            let th = (GLYPH * scale) as i64;
            let above = m.bbox[1] as i64 - th;
            let y = if above >= 0 {
                above
            } else {
                (m.bbox[1] + m.bbox[3]) as i64
            };
            draw_text(
                &mut img,
                m.bbox[0] as i64,
                y,
                &m.caption,
                [0, 0, 0],
                scale,
                Some(m.color),
            );
        }
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
/// call [`Pipeline::keep_pixels`](crate::pipeline::Pipeline::keep_pixels)`(true)`.
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
            let marks = f.detections.iter().map(Mark::of).collect();
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

/// `appsrc ! videoconvert ! x264enc ! mp4mux ! filesink`, started at the first frame (also what
/// `octopipe pan` encodes its video with).
pub struct Mp4Encoder {
    path: PathBuf,
    running: Option<(gst::Pipeline, gst_app::AppSrc, (u32, u32))>,
    frames: u64,
}

impl Mp4Encoder {
    /// Check that GStreamer and its elements are there before the run starts.
    pub fn check(path: &Path) -> Result<Mp4Encoder, ObserveError> {
        gst::init().map_err(ObserveError::Gst)?;
        for (element, package) in [
            ("videoconvert", "gstreamer1.0-plugins-base"),
            ("x264enc", "gstreamer1.0-plugins-ugly"),
            ("mp4mux", "gstreamer1.0-plugins-good"),
        ] {
            if gst::ElementFactory::find(element).is_none() {
                return Err(ObserveError::MissingElement { element, package });
            }
        }
        Ok(Mp4Encoder {
            path: path.to_path_buf(),
            running: None,
            frames: 0,
        })
    }

    fn start(
        &self,
        w: u32,
        h: u32,
        interval: Duration,
    ) -> Result<(gst::Pipeline, gst_app::AppSrc), ObserveError> {
        let fps = (1.0 / interval.as_secs_f64()).round().max(1.0) as i32;
        let text = format!(
            "appsrc name=src format=time ! videoconvert ! video/x-raw,format=I420 \
             ! x264enc speed-preset=veryfast ! mp4mux ! filesink location=\"{}\"",
            self.path.display().to_string().replace('"', "\\\"")
        );
        let pipeline = gst::parse::launch(&text)
            .map_err(|e| ObserveError::mp4_by("cannot build the MP4 pipeline", e))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| ObserveError::mp4("the MP4 pipeline is not a pipeline"))?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or(ObserveError::mp4("no appsrc in the MP4 pipeline"))?;
        src.set_caps(Some(
            &gst::Caps::builder("video/x-raw")
                .field("format", "RGB")
                .field("width", w as i32)
                .field("height", h as i32)
                .field("framerate", gst::Fraction::new(fps, 1))
                .build(),
        ));
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| ObserveError::mp4_by("cannot start the MP4 pipeline", e))?;
        Ok((pipeline, src))
    }

    /// Encode `img` at `pts`, lasting `interval` (frames of another size than the first are
    /// skipped).
    pub fn push(
        &mut self,
        img: RgbImage,
        pts: Duration,
        interval: Duration,
    ) -> Result<(), ObserveError> {
        let size = img.dimensions();
        if self.running.is_none() {
            let (p, s) = self.start(size.0, size.1, interval)?;
            self.running = Some((p, s, size));
        }
        let Some((_, src, want)) = &self.running else {
            return Ok(());
        };
        if *want != size {
            return Ok(()); // a frame of another size: MP4 holds one size
        }
        let mut buffer = gst::Buffer::from_mut_slice(img.into_raw());
        if let Some(b) = buffer.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(pts.as_nanos() as u64));
            b.set_duration(gst::ClockTime::from_nseconds(interval.as_nanos() as u64));
        }
        src.push_buffer(buffer)
            .map_err(|e| ObserveError::mp4_by("MP4 encoder refused a frame", e))?;
        self.frames += 1;
        Ok(())
    }

    /// End the stream and wait for the file to be finished.
    pub fn finish(mut self) -> Result<u64, ObserveError> {
        let Some((pipeline, src, _)) = self.running.take() else {
            return Ok(0);
        };
        let _ = src.end_of_stream();
        let bus = pipeline
            .bus()
            .ok_or(ObserveError::mp4("MP4 pipeline has no bus"))?;
        let result = match bus.timed_pop_filtered(
            gst::ClockTime::from_seconds(30),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) {
            Some(msg) => match msg.view() {
                gst::MessageView::Error(e) => {
                    Err(ObserveError::mp4_by("MP4 encoding failed", e.error()))
                }
                _ => Ok(self.frames),
            },
            None => Err(ObserveError::mp4("MP4 encoder did not finish within 30 s")),
        };
        let _ = pipeline.set_state(gst::State::Null);
        result
    }
}

/// The first crops of the run as the classifier saw them: each crop's tensor de-normalized back
/// to 0..255 RGB (undoing mean/std, channel order and layout), in a grid with its label and score.
pub struct Mosaic {
    path: PathBuf,
    config: PreprocessConfig,
    max: usize,
    scale: u32,
    tiles: Vec<(RgbImage, String)>,
    frames_seen: usize,
}

impl Mosaic {
    /// Collect up to `max` crops (preprocessed with `config`) and write them as a PNG to `path`
    /// at the end of the run, each tile enlarged `scale` times.
    pub fn new(path: &Path, config: PreprocessConfig, max: usize, scale: u32) -> Self {
        Mosaic {
            path: path.to_path_buf(),
            config,
            max,
            scale: scale.max(1),
            tiles: Vec::new(),
            frames_seen: 0,
        }
    }

    /// Crop `i` of `batch` back to RGB pixels, `None` when its tensor is missing.
    pub fn crop_image(config: &PreprocessConfig, batch: &CropBatch, i: usize) -> Option<RgbImage> {
        let c = batch.crops.get(i)?;
        let n = c.out_pixels() as usize;
        let base = c.out_offset as usize;
        let t = batch.tensor.as_f32()?.get(base..base + 3 * n)?;
        let affine = config.affine();
        let mut img = RgbImage::new(c.out_w, c.out_h);
        for (p, px) in img.pixels_mut().enumerate() {
            let mut v = [0u8; 3];
            for (k, (a, b)) in affine.iter().enumerate() {
                let x = match config.layout {
                    Layout::Nchw => t[k * n + p],
                    Layout::Nhwc => t[p * 3 + k],
                };
                v[k] = ((x - b) / a).round().clamp(0.0, 255.0) as u8;
            }
            if config.channels == ChannelOrder::Bgr {
                v.swap(0, 2);
            }
            *px = Rgb(v);
        }
        Some(img)
    }

    /// The grid of the crops collected so far (`None` when there are none).
    pub fn render(&self) -> Option<RgbImage> {
        let (tw, th) = self.tiles.first().map(|(t, _)| t.dimensions())?;
        let (cw, ch) = (tw * self.scale, th * self.scale);
        let pad = 4;
        let cols = (self.tiles.len() as f64).sqrt().ceil().max(1.0) as u32;
        let rows = (self.tiles.len() as u32).div_ceil(cols);
        let cell_w = cw.max(text_width("two-wheeler", 1)) + pad;
        let cell_h = ch + 2 * GLYPH + 3 + pad;
        let mut img =
            RgbImage::from_pixel(cols * cell_w + pad, rows * cell_h + pad, Rgb([24, 24, 24]));
        for (i, (tile, caption)) in self.tiles.iter().enumerate() {
            let (col, row) = (i as u32 % cols, i as u32 / cols);
            let (x0, y0) = (pad + col * cell_w, pad + row * cell_h);
            for y in 0..ch.min(tile.height() * self.scale) {
                for x in 0..cw.min(tile.width() * self.scale) {
                    let p = *tile.get_pixel(x / self.scale, y / self.scale);
                    img.put_pixel(x0 + x, y0 + y, p);
                }
            }
            // The label on one line, the score under it, each cut to the cell's width.
            let (name, score) = caption.rsplit_once(' ').unwrap_or((caption, ""));
            for (k, line) in [name, score].into_iter().enumerate() {
                let line: String = line.chars().take((cell_w / GLYPH) as usize).collect();
                let y = y0 + ch + 2 + k as u32 * (GLYPH + 1);
                draw_text(
                    &mut img,
                    x0 as i64,
                    y as i64,
                    &line,
                    [235, 235, 235],
                    1,
                    None,
                );
            }
        }
        Some(img)
    }
}

impl Observer for Mosaic {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        // A few crops per frame, spread over the frame's boxes, so that the grid shows many
        // objects rather than the same ones frame after frame.
        let per_frame = self.max.div_ceil(4).max(1);
        let mut picks = Vec::new();
        for fi in 0..batch.frames.len() {
            let crops: Vec<usize> = (0..batch.crops.len())
                .filter(|&i| batch.crops[i].frame as usize == fi)
                .collect();
            let n = crops.len().min(per_frame);
            let shift = self.frames_seen * 7;
            self.frames_seen += 1;
            picks.extend((0..n).map(|k| crops[(k * crops.len() / n.max(1) + shift) % crops.len()]));
        }
        for i in picks {
            if self.tiles.len() >= self.max {
                return;
            }
            let Some(tile) = Mosaic::crop_image(&self.config, batch, i) else {
                continue;
            };
            let classified = batch.origins.get(i).and_then(|o| {
                batch.frames[o.frame as usize].detections[o.detection as usize]
                    .classification
                    .as_ref()
            });
            let caption = match classified {
                Some(c) => format!("{} {:.2}", c.best.label, c.best.score),
                None => "?".into(),
            };
            self.tiles.push((tile, caption));
        }
    }

    fn finish(&mut self, report: &mut Report) {
        let line = match self.render() {
            None => "mosaic: no crops to show".to_string(),
            Some(img) => match save_png(&img, &self.path, true) {
                Ok(()) => format!(
                    "mosaic: {} crops as the classifier saw them written to {}",
                    self.tiles.len(),
                    self.path.display()
                ),
                Err(e) => {
                    report
                        .not_written
                        .push(format!("--mosaic {}: {e}", self.path.display()));
                    return;
                }
            },
        };
        report.extra.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{ClassScore, Classification};

    #[test]
    fn a_tracked_box_is_captioned_with_its_id() {
        let car = Classification {
            best: ClassScore {
                class_id: 2,
                label: "car".into(),
                score: 0.9,
            },
            topk: Vec::new(),
        };
        let tracked = Detection {
            track: Some(12),
            classification: Some(car.clone()),
            ..Detection::new([1, 2, 30, 20])
        };
        let m = Mark::of(&tracked);
        assert_eq!(
            (m.caption.as_str(), m.color, m.bbox),
            ("#12 car 0.90", PALETTE[2], [1, 2, 30, 20])
        );
        let untracked = Detection {
            track: None,
            ..tracked.clone()
        };
        assert_eq!(Mark::of(&untracked).caption, "car 0.90");
        // Not classified: the box source's class and score (a detector's, an annotation's).
        let detected = Detection {
            classification: None,
            label: Some("vehicle".into()),
            class_id: Some(4),
            score: 0.42,
            ..tracked.clone()
        };
        let m = Mark::of(&detected);
        assert_eq!(
            (m.caption.as_str(), m.color),
            ("#12 vehicle 0.42", PALETTE[4])
        );
        let unlabelled = Detection {
            classification: None,
            label: None,
            ..tracked
        };
        assert_eq!(Mark::of(&unlabelled).caption, "#12 ?");
    }
}
