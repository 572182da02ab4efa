//! A continuous test video made from one real drone frame: a camera panning and zooming over a
//! VisDrone DET image, encoded as H.264, with the ground truth its motion implies in MOT format
//! (each annotated object keeps its id from frame to frame). The shared clip's frames are 34
//! separate views, not a video: this is what the tracker is tried on (`octopipe pan`,
//! `pipelines/pan-track.pipe`).
//!
//! ```text
//! octopipe pan --out pan     # pan/video.mp4 and pan/gt.txt, from $OCTOPIPE_DATA's clip
//! ```
//!
//! **The camera** ([`Camera::window`]): a window of the output's aspect ratio over the source
//! image moves from its top-left part to its bottom-right part while zooming in from
//! `zoom_from` to `zoom_to` of the image's width, easing in and out (smoothstep) over the
//! frames; each output pixel is sampled bilinearly from the source at its centre.
//!
//! **The ground truth** (`gt.txt`, VisDrone MOT rows `frame,id,x,y,w,h,score,category,
//! truncation,occlusion`): every annotation box of the source mapped through the window,
//! rounded to whole pixels and clipped to the frame; a box is kept on a frame while at least
//! half of its area is inside (truncation 1 when cut, else 0; occlusion 0). Its id is its line
//! number in the annotation file, the same on every frame; score and category are the
//! annotation's (ignored regions keep score 0). Frame indices count from 1 (the video's frame
//! `k` at `k / fps` s is MOT frame `k + 1`), so `boxes format=mot location=gt.txt` replays the
//! boxes on the video by presentation time, and `octopipe eval tracks` scores a tracker's ids
//! against it.
//!
//! The objects do not move in the scene (it is one photograph); the camera does, which is the
//! motion drone video has most of and the tracker's camera-motion estimate is for.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use image::RgbImage;

use octopipe_stages::boxes::parse_det;

/// Default output size.
pub(crate) const DEFAULT_SIZE: (u32, u32) = (1280, 720);
/// Default number of frames (5 s at 30 fps).
pub const DEFAULT_FRAMES: u32 = 150;
/// Frame rate of the video.
pub const FPS: u32 = 30;
/// The source image the shared data's video is made from (the clip's frame with the most
/// vehicles that stay in view), relative to the shared data folder.
pub const DEFAULT_IMAGE: &str = "visdrone/clip-9999999/images/9999999_00043_d_0000009.jpg";

/// Errors of making the video; each names the file it is about.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
#[non_exhaustive]
pub struct PanError {
    /// The file or folder.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

fn error(path: &Path, reason: impl Into<String>) -> PanError {
    PanError {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// What to make.
#[derive(Debug, Clone, PartialEq)]
pub struct PanOptions {
    /// The source image (JPEG or PNG).
    pub image: PathBuf,
    /// Its VisDrone DET annotation file.
    pub annotations: PathBuf,
    /// The folder to write `video.mp4` and `gt.txt` into (made if missing).
    pub out: PathBuf,
    /// Output width and height.
    pub size: (u32, u32),
    /// Frames.
    pub frames: u32,
    /// Replace an earlier video and ground truth in `out`.
    pub overwrite: bool,
}

impl PanOptions {
    /// The default video of the shared data folder `data` ([`DEFAULT_IMAGE`] and its
    /// annotations) into `out`.
    pub fn shared(data: &Path, out: &Path) -> Self {
        let image = data.join(DEFAULT_IMAGE);
        let stem = image.file_stem().unwrap_or_default().to_owned();
        let annotations = image
            .parent()
            .and_then(Path::parent)
            .map(|clip| clip.join("annotations"))
            .unwrap_or_default()
            .join(stem)
            .with_extension("txt");
        PanOptions {
            image,
            annotations,
            out: out.to_path_buf(),
            size: DEFAULT_SIZE,
            frames: DEFAULT_FRAMES,
            overwrite: false,
        }
    }
}

/// The camera's path over a source image.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Camera {
    /// Source image size.
    pub source: (u32, u32),
    /// Output size.
    pub out: (u32, u32),
    /// Frames of the path.
    pub frames: u32,
    /// Window width at the first frame, as a share of the source's width.
    pub zoom_from: f64,
    /// Window width at the last frame, as a share of the source's width.
    pub zoom_to: f64,
}

/// Where the camera looks on one frame: the window's top-left corner in source pixels and the
/// scale from source to output pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Window {
    /// Left edge, source pixels.
    pub x: f64,
    /// Top edge, source pixels.
    pub y: f64,
    /// Output pixels per source pixel.
    pub scale: f64,
}

impl Camera {
    /// The default path: from 85% to 64% of the source's width.
    pub fn new(source: (u32, u32), out: (u32, u32), frames: u32) -> Self {
        Camera {
            source,
            out,
            frames,
            zoom_from: 0.85,
            zoom_to: 0.64,
        }
    }

    /// The window of frame `k`.
    pub fn window(&self, k: u32) -> Window {
        let t = match self.frames {
            0 | 1 => 0.0,
            n => f64::from(k) / f64::from(n - 1),
        };
        let t = t * t * (3.0 - 2.0 * t);
        let (sw, sh) = (f64::from(self.source.0), f64::from(self.source.1));
        let aspect = f64::from(self.out.1) / f64::from(self.out.0);
        // The window fits the source at every zoom.
        let width = (sw * (self.zoom_from + (self.zoom_to - self.zoom_from) * t))
            .min(sh / aspect)
            .max(1.0);
        let height = width * aspect;
        Window {
            x: (sw - width) * (0.1 + 0.8 * t),
            y: (sh - height) * (0.15 + 0.7 * t),
            scale: f64::from(self.out.0) / width,
        }
    }
}

impl Window {
    /// `[x, y, w, h]` of the source as whole output pixels clipped to `out`, and whether it
    /// was cut; `None` when less than half of it is inside (or it is under 2 px).
    pub fn place(&self, bbox: [i64; 4], out: (u32, u32)) -> Option<([u32; 4], bool)> {
        let map = |v: i64, o: f64| ((v as f64 - o) * self.scale).round() as i64;
        let (x0, y0) = (map(bbox[0], self.x), map(bbox[1], self.y));
        let (x1, y1) = (
            map(bbox[0] + bbox[2], self.x),
            map(bbox[1] + bbox[3], self.y),
        );
        let (cx0, cy0) = (x0.max(0), y0.max(0));
        let (cx1, cy1) = (x1.min(i64::from(out.0)), y1.min(i64::from(out.1)));
        let (w, h) = (cx1 - cx0, cy1 - cy0);
        let whole = (x1 - x0) * (y1 - y0);
        if w < 2 || h < 2 || 2 * w * h < whole {
            return None;
        }
        let cut = (cx0, cy0, cx1, cy1) != (x0, y0, x1, y1);
        Some(([cx0, cy0, w, h].map(|v| v as u32), cut))
    }

    /// The output frame of `source`: each pixel sampled bilinearly at its centre.
    pub fn render(&self, source: &RgbImage, out: (u32, u32)) -> RgbImage {
        let (sw, sh) = (source.width() as i64, source.height() as i64);
        let src = source.as_raw();
        let mut img = RgbImage::new(out.0, out.1);
        let inv = 1.0 / self.scale;
        // Column sample positions are the same on every row.
        let cols: Vec<(usize, usize, f32)> = (0..out.0)
            .map(|i| {
                let sx = (f64::from(i) + 0.5) * inv + self.x - 0.5;
                let x0 = sx.floor().clamp(0.0, (sw - 1) as f64) as i64;
                let fx = (sx - x0 as f64).clamp(0.0, 1.0) as f32;
                let x1 = (x0 + 1).min(sw - 1);
                (x0 as usize * 3, x1 as usize * 3, fx)
            })
            .collect();
        let stride = sw as usize * 3;
        for (j, row) in img.chunks_exact_mut(out.0 as usize * 3).enumerate() {
            let sy = (j as f64 + 0.5) * inv + self.y - 0.5;
            let y0 = sy.floor().clamp(0.0, (sh - 1) as f64) as i64;
            let fy = (sy - y0 as f64).clamp(0.0, 1.0) as f32;
            let y1 = (y0 + 1).min(sh - 1);
            let (r0, r1) = (y0 as usize * stride, y1 as usize * stride);
            for (px, &(a, b, fx)) in row.chunks_exact_mut(3).zip(&cols) {
                for c in 0..3 {
                    let top =
                        f32::from(src[r0 + a + c]) * (1.0 - fx) + f32::from(src[r0 + b + c]) * fx;
                    let bottom =
                        f32::from(src[r1 + a + c]) * (1.0 - fx) + f32::from(src[r1 + b + c]) * fx;
                    px[c] = (top + (bottom - top) * fy).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
        img
    }
}

/// What was made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PanVideo {
    /// The H.264 MP4.
    pub video: PathBuf,
    /// The MOT ground truth.
    pub truth: PathBuf,
    /// Frames.
    pub frames: u32,
    /// Ground-truth rows (objects over all frames, ignored regions included).
    pub rows: usize,
    /// Distinct objects (ids) in them.
    pub objects: usize,
}

/// The MOT ground truth of `camera` over the annotation rows of `annotations` (its text),
/// `file` naming it in errors: the file's text and (rows, distinct ids).
pub(crate) fn ground_truth(
    annotations: &[u8],
    file: &str,
    camera: &Camera,
) -> Result<(String, usize, usize), octopipe_stages::boxes::BoxesError> {
    let rows = parse_det(annotations, file)?;
    let mut text = String::new();
    let (mut n, mut seen) = (0, vec![false; rows.len()]);
    for k in 0..camera.frames {
        let window = camera.window(k);
        for (i, row) in rows.iter().enumerate() {
            let Some((b, cut)) = window.place(row.bbox, camera.out) else {
                continue;
            };
            let _ = writeln!(
                text,
                "{},{},{},{},{},{},{},{},{},{}",
                k + 1,
                i + 1,
                b[0],
                b[1],
                b[2],
                b[3],
                row.score as u32,
                row.category,
                u8::from(cut),
                0
            );
            n += 1;
            seen[i] = true;
        }
    }
    Ok((text, n, seen.iter().filter(|s| **s).count()))
}

/// Make the video and its ground truth ([`PanOptions`]): `out/video.mp4` and `out/gt.txt`, new
/// files unless `overwrite`; a failure leaves neither.
pub fn make(opts: &PanOptions) -> Result<PanVideo, PanError> {
    let (w, h) = opts.size;
    if w < 16 || h < 16 || w % 2 == 1 || h % 2 == 1 || opts.frames == 0 {
        return Err(error(
            &opts.out,
            format!(
                "{w}x{h} and {} frames: the video needs an even width and height of at least 16 and at least 1 frame",
                opts.frames
            ),
        ));
    }
    let source = image::open(&opts.image)
        .map_err(|e| error(&opts.image, format!("cannot read the image: {e}")))?
        .to_rgb8();
    let text =
        std::fs::read(&opts.annotations).map_err(|e| error(&opts.annotations, e.to_string()))?;
    let camera = Camera::new(source.dimensions(), opts.size, opts.frames);
    let (gt, rows, objects) = ground_truth(&text, &opts.annotations.display().to_string(), &camera)
        .map_err(|e| error(&opts.annotations, e.to_string()))?;
    std::fs::create_dir_all(&opts.out).map_err(|e| error(&opts.out, e.to_string()))?;
    let video = opts.out.join("video.mp4");
    let truth = opts.out.join("gt.txt");
    let new = |path: &Path| {
        octopipe_stages::sink::output::create_file(path, opts.overwrite).map_err(|e| {
            error(
                path,
                e.reason.replace(
                    "overwrite=true on the sink (octopipe run --force) replaces it",
                    "--force replaces it",
                ),
            )
        })
    };
    // A failure from here on removes what was made.
    let mut files = Remove(vec![], false);
    new(&truth)?;
    files.0.push(truth.clone());
    new(&video)?;
    files.0.push(video.clone());
    std::fs::write(&truth, gt).map_err(|e| error(&truth, e.to_string()))?;
    let interval = Duration::from_nanos(1_000_000_000 / u64::from(FPS));
    let mut encoder =
        octopipe_observe::Mp4Encoder::check(&video).map_err(|e| error(&video, e.to_string()))?;
    for k in 0..opts.frames {
        let frame = camera.window(k).render(&source, opts.size);
        encoder
            .push(frame, interval * k, interval)
            .map_err(|e| error(&video, e.to_string()))?;
    }
    encoder.finish().map_err(|e| error(&video, e.to_string()))?;
    files.1 = true;
    Ok(PanVideo {
        video,
        truth,
        frames: opts.frames,
        rows,
        objects,
    })
}

/// Files removed when dropped, unless kept (`.1`) once they are complete.
struct Remove(Vec<PathBuf>, bool);

impl Drop for Remove {
    fn drop(&mut self) {
        if self.1 {
            return;
        }
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_camera_pans_and_zooms_in_and_boxes_follow_it() {
        let cam = Camera::new((2000, 1500), (1280, 720), 150);
        let (a, b) = (cam.window(0), cam.window(149));
        assert!(b.x > a.x + 500.0 && b.y > a.y + 300.0, "{a:?} {b:?}");
        assert!(b.scale > a.scale, "zooms in");
        // A box well inside: moved by the window and scaled.
        let (placed, cut) = a
            .place([a.x as i64 + 100, a.y as i64 + 50, 40, 20], cam.out)
            .unwrap();
        assert!(!cut);
        let s = a.scale;
        assert_eq!(placed[2], (40.0 * s).round() as u32);
        // Half out of the left edge or more: gone; a little out: cut.
        assert!(a.place([a.x as i64 - 30, 300, 40, 20], cam.out).is_none());
        let (cutbox, cut) = a.place([a.x as i64 - 5, 300, 40, 20], cam.out).unwrap();
        assert!(cut && cutbox[0] == 0);
        // Rendering the window's top-left pixel samples the source there.
        let mut src = RgbImage::new(200, 100);
        src.put_pixel(50, 20, image::Rgb([200, 100, 50]));
        let w = Window {
            x: 50.0,
            y: 20.0,
            scale: 1.0,
        };
        assert_eq!(w.render(&src, (16, 16)).get_pixel(0, 0).0, [200, 100, 50]);
    }

    #[test]
    fn ground_truth_keeps_ids_and_counts_frames_from_1() {
        let cam = Camera::new((2000, 1500), (1280, 720), 3);
        let ann = b"1000,800,40,20,1,4,0,1\n10,10,30,30,0,0,0,0\n";
        let (text, rows, objects) = ground_truth(ann, "a.txt", &cam).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(rows, lines.len());
        assert!(lines[0].starts_with("1,1,"), "{text}");
        assert!(lines
            .iter()
            .all(|l| l.split(',').nth(7) != Some("4") || l.split(',').nth(1) == Some("1")));
        assert!(objects >= 1);
    }
}
