//! The `tilesink` sink: the kept tiles as image files, and an index of every tile.
//!
//! ```text
//! ... ! tiles min=128 max=512 seed=1 ! tilestats keep="mean>0.535" ! tilesink location=out/ format=png
//! ```
//!
//! `out/tile-S-FFFFFF-TTTT.png` (stream S, frame F, tile T of the frame): each kept tile's pixels
//! at full resolution, a 16-bit greyscale PNG for a 16-bit frame, 8-bit RGB otherwise; with
//! `format=npy`, the raw samples as a NumPy file (`<u2` `[h, w]`, or `|u1` `[h, w, 3]` RGB).
//! `out/index.jsonl`: one line per tile, kept or not, `{"file":"tile-0-000000-0003.png", ...}`
//! (`file` only for a written tile) followed by the object's fields: stream, frame, source,
//! `bbox` (the tile's rectangle), `stats` (mean, std, min, max, above, pixels, and the exact
//! integer `sums`) and `kept`. Without a `tilestats` stage before it, every tile is written.
//!
//! A folder that already holds an index or tiles is refused (with `overwrite=true` they are
//! removed first), and each tile file is created only if it does not exist. When a write fails,
//! the partial tile file is removed and the index ends with its last complete line; a run that
//! fails before writing anything leaves no empty index (nor the folder, if it made it).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::SinkError;
use super::file::{open_folder, written_whole, FileSink, FileWriter};
use super::lines::JsonLines;
use super::object::Object;
use super::tensors::{write_npy, NpyData};
use crate::batch::CropBatch;
use crate::preprocess::cpu::rect_to_rgb;
use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::frame::{Frame, PixelFormat};
use octopipe_core::stage::{
    Element, OpenContext, PropChoice, Properties, Role, Running, StageDecl,
};

/// How kept tiles are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum TileFormat {
    /// PNG: 16-bit grey for 16-bit frames, else 8-bit RGB.
    #[default]
    Png,
    /// NumPy `.npy` of the raw samples.
    Npy,
}

/// Settings of the tile sink, its properties declared once ([`TILESINK`]).
#[derive(Debug, Clone, PartialEq, Eq, Properties)]
pub struct TileSinkConfig {
    /// output folder (created if missing; must not hold earlier output)
    #[prop(required)]
    pub location: PathBuf,
    /// tile files: PNG, or the raw samples as NumPy .npy
    #[prop(default = "png")]
    pub format: TileFormat,
    /// Replace an earlier run's files in the folder (else the folder is refused).
    #[prop(spec = super::jsonl::OVERWRITE)]
    pub overwrite: bool,
}

/// `tilesink location=DIR format=png|npy`.
pub const TILESINK: StageDecl = StageDecl {
    name: "tilesink",
    role: Role::Sink,
    doc: "kept tiles as PNG (16-bit grey or RGB) or .npy files, plus index.jsonl of every tile",
    props: TileSinkConfig::PROPS,
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: |p| Ok(Box::new(TileSinkConfig::from_props(p)?)),
};

impl Element for TileSinkConfig {
    fn open(mut self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        self.overwrite |= ctx.overwrite;
        Ok(TileSink::new(&self)?.running(ctx))
    }
    fn outputs(&self) -> Vec<RunPath> {
        vec![RunPath::folder("tilesink location", &self.location)]
    }
}

/// One line of `index.jsonl`.
#[derive(Serialize)]
struct IndexLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(flatten)]
    object: Object,
}

/// The tile sink: a [`FileSink`] writing [`TileFiles`].
pub type TileSink = FileSink<TileFiles>;

/// What the tile sink writes: each kept tile as a file, and an index line for every tile.
pub struct TileFiles {
    dir: PathBuf,
    format: TileFormat,
    index: JsonLines,
    /// Tiles written so far.
    written: u64,
}

impl TileSink {
    /// Create the folder (or take one with no earlier output) and the index.
    pub fn new(config: &TileSinkConfig) -> Result<Self, SinkError> {
        let dir = config.location.clone();
        let ours = |n: &str| n == "index.jsonl" || n.starts_with("tile-");
        let (index, leftover) = open_folder(&dir, ours, config.overwrite)?;
        let files = TileFiles {
            index,
            dir,
            format: config.format,
            written: 0,
        };
        Ok(FileSink::writing(files, leftover))
    }

    /// Tile files written so far.
    pub fn written(&self) -> u64 {
        self.writer().written
    }
}

impl FileWriter for TileFiles {
    /// Write `batch`'s kept tiles and an index line for each of its boxes.
    fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        for frame in &batch.frames {
            let timestamp: std::sync::Arc<str> = super::object::timestamp(frame).into();
            for (i, det) in frame.detections.iter().enumerate() {
                let kept = det.stats.is_none_or(|s| s.kept);
                let file = if kept {
                    let ext = match self.format {
                        TileFormat::Png => "png",
                        TileFormat::Npy => "npy",
                    };
                    let name = format!("tile-{}-{:06}-{i:04}.{ext}", frame.stream, frame.seq);
                    self.write_tile(frame, det.bbox, &self.dir.join(&name))?;
                    self.written += 1;
                    Some(name)
                } else {
                    None
                };
                self.index.push(&IndexLine {
                    file,
                    object: Object::of(frame, &timestamp, i as u32, det),
                })?;
            }
        }
        // On failure the index ends with its last complete line; every line naming a file names
        // a whole one.
        self.index.commit()
    }
}

impl TileFiles {
    /// Write the pixels of `rect` of `frame` to `path`, a new file; a partial file is removed.
    fn write_tile(&self, frame: &Frame, rect: [u32; 4], path: &Path) -> Result<(), SinkError> {
        let err = |reason: String| SinkError::io(path.display().to_string(), reason);
        let [_, _, w, h] = rect;
        let pixels = match frame.layout.format {
            PixelFormat::Gray16 => gray16_rect(frame, rect).map(Pixels::Gray16),
            _ => rect_to_rgb(frame, rect).map(Pixels::Rgb),
        }
        .ok_or_else(|| {
            err(format!(
                "frame {} of stream {} has no host pixels to write (put tilesink before any stage that releases them)",
                frame.seq, frame.stream
            ))
        })?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| err(format!("cannot create: {e}")).caused_by(e))?;
        let (h, w) = (h as usize, w as usize);
        let written = match (self.format, &pixels) {
            (TileFormat::Png, _) => write_png(file, &pixels, rect[2], rect[3]),
            (TileFormat::Npy, Pixels::Gray16(v)) => {
                write_npy(file, "<u2", &[h, w], NpyData::U16(v))
            }
            (TileFormat::Npy, Pixels::Rgb(v)) => {
                write_npy(file, "|u1", &[h, w, 3], NpyData::Bytes(v))
            }
        };
        written_whole(path, written)
    }
}

/// The 16-bit samples of `rect` of a GRAY16 frame, row by row.
fn gray16_rect(frame: &Frame, [x, y, w, h]: [u32; 4]) -> Option<Vec<u16>> {
    let data = frame.data()?;
    let l = &frame.layout;
    let mut out = Vec::with_capacity(w as usize * h as usize);
    for row in y..y + h {
        let start = l.offsets[0] + row as usize * l.strides[0] + x as usize * 2;
        let bytes = data.get(start..start + w as usize * 2)?;
        out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]])),
        );
    }
    Some(out)
}

/// A tile's pixels: 16-bit grey samples, or 8-bit RGB bytes.
enum Pixels {
    Gray16(Vec<u16>),
    Rgb(Vec<u8>),
}

/// A PNG of `w`x`h` pixels: 16-bit grey or 8-bit RGB.
fn write_png(file: std::fs::File, pixels: &Pixels, w: u32, h: u32) -> std::io::Result<()> {
    use image::codecs::png::{CompressionType, FilterType};
    use image::ExtendedColorType;
    let (bytes, color) = match pixels {
        // The encoder takes 16-bit samples in native byte order.
        Pixels::Gray16(v) => (
            Cow::Owned(v.iter().flat_map(|s| s.to_ne_bytes()).collect()),
            ExtendedColorType::L16,
        ),
        Pixels::Rgb(v) => (Cow::Borrowed(v.as_slice()), ExtendedColorType::Rgb8),
    };
    let (fast, adaptive) = (CompressionType::Fast, FilterType::Adaptive);
    super::output::write_png(file, &bytes, (w, h), color, fast, adaptive).map_err(|e| match e {
        super::output::PngError::Write(e) => e,
        e => std::io::Error::other(e),
    })
}
