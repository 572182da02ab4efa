//! The crop mosaic: the first crops as the classifier saw them, de-normalized, in a labelled grid.

use std::path::{Path, PathBuf};
use std::time::Duration;

use image::{Rgb, RgbImage};

use octopipe_core::budget::Report;
use octopipe_core::observer::Observer;
use octopipe_stages::batch::CropBatch;
use octopipe_stages::preprocess::{ChannelOrder, Layout, PreprocessConfig};

use super::draw::{draw_text, save_png, text_width, GLYPH};

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
