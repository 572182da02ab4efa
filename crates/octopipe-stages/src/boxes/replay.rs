//! The replay: boxes read from annotation files (or generated) and attached to each frame, and
//! the notes at the end of a run on what went unused.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::annotations::{det_lines, mot_lines, AnnotationRow};
use super::error::BoxesError;
use super::settings::{BoxSource, BoxesConfig, VISDRONE_CATEGORIES};
use super::synthetic::Synthetic;
use octopipe_core::files::FileError;
use octopipe_core::frame::{clip_box, BoxOrigin, Detection, Frame, SkipReason};

/// The MOT rows of one frame index, and its malformed lines when they are skipped.
#[derive(Default)]
struct MotFrame {
    rows: Vec<AnnotationRow>,
    bad_lines: u32,
}

/// Runtime state of the boxes stage.
pub struct Boxes {
    config: BoxesConfig,
    /// MOT rows by frame index (1-based).
    mot: HashMap<u64, MotFrame>,
    /// MOT frame indices some frame asked for.
    asked: HashSet<u64>,
    /// Per stream of image frames: whether its first image's name ends with a number, and that
    /// image; every later image of the stream must agree.
    naming: HashMap<u32, (bool, Arc<str>)>,
    /// Per stream: which image took each frame number, so that two images cannot both take one.
    numbered: HashMap<(u32, u64), Arc<str>>,
    /// Some frame's MOT index came from its image name (the end notes say why indices went
    /// unused accordingly).
    by_name: bool,
    /// Skipped malformed lines not yet counted on a frame (MOT lines with no readable frame index).
    pending_bad_lines: u32,
    /// The first skipped malformed line's error.
    first_bad_line: Option<String>,
    /// Stems of the DET files frames asked for.
    det_used: HashSet<String>,
    /// The highest MOT frame index a frame asked for: after an early stop, unused indices above
    /// it were not reached rather than missing from the stream.
    reached: Option<u64>,
    /// Frames that got no annotation rows at all.
    frames_without_rows: u64,
}

impl Boxes {
    /// Open the replay: MOT files are read whole here; DET files per frame.
    pub fn new(config: BoxesConfig) -> Result<Self, BoxesError> {
        let mut mot: HashMap<u64, MotFrame> = HashMap::new();
        let mut pending_bad_lines = 0;
        let mut first_bad_line = None;
        if let BoxSource::Mot { location } = &config.source {
            let text = read(location)?;
            let path = location.display().to_string();
            for (index, line) in mot_lines(&text[..], &path) {
                match line {
                    Ok((frame, row)) => mot.entry(frame).or_default().rows.push(row),
                    Err(e) if config.skip_bad_lines => {
                        first_bad_line.get_or_insert_with(|| e.to_string());
                        match index {
                            Some(frame) => mot.entry(frame).or_default().bad_lines += 1,
                            None => pending_bad_lines += 1,
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if let BoxSource::Det { location } = &config.source {
            if !location.is_dir() {
                return Err(FileError::refused(
                    location.display().to_string(),
                    "not a folder of DET annotation files",
                )
                .into());
            }
        }
        Ok(Boxes {
            config,
            mot,
            asked: HashSet::new(),
            naming: HashMap::new(),
            numbered: HashMap::new(),
            by_name: false,
            pending_bad_lines,
            first_bad_line,
            det_used: HashSet::new(),
            reached: None,
            frames_without_rows: 0,
        })
    }

    /// MOT frame indices (1-based, as written) whose rows no frame has asked for: at the end of a
    /// run, annotations for frames the stream does not have. Sorted; empty for other box sources.
    pub fn unused(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .mot
            .keys()
            .filter(|i| !self.asked.contains(i))
            .copied()
            .collect();
        v.sort_unstable();
        v
    }

    /// DET files (`*.txt` in the annotation folder) that no frame matched: at the end of a run,
    /// annotations for images the stream does not have. Sorted; empty for other box sources.
    pub fn unused_det_files(&self) -> Vec<PathBuf> {
        let BoxSource::Det { location } = &self.config.source else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(location) else {
            return Vec::new();
        };
        let mut v: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "txt") && p.is_file())
            .filter(|p| {
                p.file_stem()
                    .is_some_and(|s| !self.det_used.contains(&*s.to_string_lossy()))
            })
            .collect();
        v.sort();
        v
    }

    /// Report lines at the end of a run: MOT frame indices no frame asked for, frames with no
    /// annotation rows, DET files no image matched, and the first malformed line skipped.
    ///
    /// Unused MOT indices below the last one a frame asked for were skipped by the stream (no
    /// image has that number, the decoder lost those frames, or they were dropped before this
    /// stage); those above it have no frame in the stream, or, when `stopped_early` (an error, a
    /// stop request), were not reached.
    pub fn end_notes(&self, stopped_early: bool) -> Vec<String> {
        let mut notes = Vec::new();
        if let BoxSource::Mot { location } = &self.config.source {
            let file = location.display();
            let mut skipped = self.unused();
            let beyond = skipped.split_off(skipped.partition_point(|i| Some(*i) < self.reached));
            if !skipped.is_empty() {
                let why = match self.by_name {
                    true => "no image name ends with them, or dropped before boxes",
                    false => "lost by the decoder or dropped before boxes",
                };
                notes.push(format!(
                    "boxes: {} frame indices of {file} got no frame ({why}): {}",
                    skipped.len(),
                    list_indices(&skipped)
                ));
            }
            if !beyond.is_empty() {
                let (n, list) = (beyond.len(), list_indices(&beyond));
                notes.push(match stopped_early {
                    true => format!(
                        "boxes: stopped early: {n} frame indices of {file} not reached ({list})"
                    ),
                    false => format!(
                        "boxes: {n} frame indices of {file} have no frame in the stream ({list})"
                    ),
                });
            }
        }
        if self.frames_without_rows > 0
            && !matches!(self.config.source, BoxSource::Synthetic { .. })
        {
            let n = self.frames_without_rows;
            notes.push(match n {
                1 => "boxes: 1 frame had no annotation rows (no boxes)".to_string(),
                _ => format!("boxes: {n} frames had no annotation rows (no boxes)"),
            });
        }
        let det = self.unused_det_files();
        if let Some(first) = det.first() {
            notes.push(format!(
                "boxes: {} annotation files matched no frame that reached this stage (no such image, or the frame was dropped before it; first: {})",
                det.len(),
                first.display()
            ));
        }
        if let Some(line) = self.first_bad_line() {
            notes.push(format!("boxes: malformed lines skipped, the first: {line}"));
        }
        notes
    }

    /// The first malformed line skipped (with `skip_bad_lines`), as `file:line: what is wrong`.
    pub fn first_bad_line(&self) -> Option<&str> {
        self.first_bad_line.as_deref()
    }

    /// Attach the frame's boxes (clipped, filtered, skips counted).
    pub fn attach(&mut self, frame: &mut Frame) -> Result<(), BoxesError> {
        let mut bad_lines = std::mem::take(&mut self.pending_bad_lines);
        let rows = match &self.config.source {
            BoxSource::Det { location } => {
                let stem = Path::new(&*frame.source)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let path = location.join(format!("{stem}.txt"));
                if !path.is_file() {
                    return Err(BoxesError::MissingAnnotations {
                        path: path.display().to_string(),
                        frame: frame.source.to_string(),
                    });
                }
                self.det_used.insert(stem);
                let text = read(&path)?;
                let path = path.display().to_string();
                let mut rows = Vec::new();
                for line in det_lines(&text[..], &path) {
                    match line {
                        Ok(row) => rows.push(row),
                        Err(e) if self.config.skip_bad_lines => {
                            self.first_bad_line.get_or_insert_with(|| e.to_string());
                            bad_lines += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
                rows
            }
            BoxSource::Mot { .. } => {
                let index = self.mot_index(frame)?;
                self.reached = self.reached.max(Some(index));
                self.asked.insert(index);
                match self.mot.get(&index) {
                    Some(f) => {
                        bad_lines += f.bad_lines;
                        f.rows.clone()
                    }
                    None => Vec::new(),
                }
            }
            BoxSource::Synthetic { count, seed } => Synthetic::new(*seed).frame_boxes(
                frame.stream,
                frame.seq,
                *count,
                frame.layout.width,
                frame.layout.height,
            ),
        };
        if rows.is_empty() && bad_lines == 0 {
            self.frames_without_rows += 1;
        }
        frame.detections.clear();
        for _ in 0..bad_lines {
            frame.skip(SkipReason::BadLine);
        }
        for row in rows {
            match self.admit(&row, frame.layout.width, frame.layout.height) {
                Ok(d) => frame.detections.push(d),
                Err(reason) => frame.skip(reason),
            }
        }
        Ok(())
    }

    /// The MOT frame index (1-based) of `frame`: the number its image name ends with, or its
    /// position by presentation time plus one (see the module docs).
    fn mot_index(&mut self, frame: &Frame) -> Result<u64, BoxesError> {
        let Some(image) = frame.image else {
            return Ok(frame.seq + 1);
        };
        let (numbered, first) = self
            .naming
            .entry(frame.stream)
            .or_insert_with(|| (image.number.is_some(), frame.source.clone()))
            .clone();
        let reason = match (image.number, numbered) {
            (None, false) => return Ok(frame.seq + 1),
            (Some(0), true) => "its name ends with frame number 0, but MOT frame indices start at 1".to_string(),
            (Some(n), true) => {
                let taken = self
                    .numbered
                    .entry((frame.stream, n))
                    .or_insert_with(|| frame.source.clone());
                if **taken == *frame.source {
                    self.by_name = true;
                    return Ok(n);
                }
                format!("its name ends with frame number {n}, as {taken}'s does: two images cannot both be frame {n}")
            }
            (Some(n), false) => format!(
                "its name ends with frame number {n}, but the sequence's first image, {first}, has no number"
            ),
            (None, true) => format!(
                "its name ends with no frame number, but the sequence's first image, {first}, ends with one"
            ),
        };
        let mot = match &self.config.source {
            BoxSource::Mot { location } => location.display().to_string(),
            _ => String::new(),
        };
        Err(BoxesError::ImageNumber {
            image: frame.source.to_string(),
            mot,
            reason,
        })
    }

    /// Clip `row` to a `w`x`h` frame and decide whether it is classified.
    fn admit(&self, row: &AnnotationRow, w: u32, h: u32) -> Result<Detection, SkipReason> {
        if !self.config.keep_ignored && (row.category == 0 || row.score == 0.0) {
            return Err(SkipReason::IgnoredRegion);
        }
        if self.config.skip_categories.contains(&row.category) {
            return Err(SkipReason::NoClass);
        }
        let bbox = clip_box(row.bbox, w, h)?;
        Ok(Detection {
            bbox,
            class_id: Some(row.category as u32),
            origin: BoxOrigin::Annotation,
            label: VISDRONE_CATEGORIES
                .get(row.category as usize)
                .map(|n| Arc::from(*n)),
            score: row.score,
            track: row.track,
            classification: None,
            classifications: Vec::new(),
            stats: None,
        })
    }
}

/// Sorted frame indices for a report line: all of a few, or the range of many.
fn list_indices(v: &[u64]) -> String {
    match v {
        [first, .., last] if v.len() > 8 => format!("{first}..={last}"),
        _ => v.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
    }
}

/// A file's bytes; the line readers name any byte that is not text they expect. A UTF-16 file
/// (it starts with a UTF-16 byte-order mark) is refused as a whole: every line of it would fail.
fn read(path: &Path) -> Result<Vec<u8>, BoxesError> {
    let bytes = octopipe_core::files::read_bounded(path, octopipe_core::files::MAX_ANNOTATION_FILE)
        .map_err(|e| FileError::io(path.display().to_string(), e))?;
    if let Some(bom @ ([0xFF, 0xFE] | [0xFE, 0xFF])) = bytes.get(..2) {
        return Err(FileError::refused(
            path.display().to_string(),
            format!(
            "UTF-16 text (it starts with the byte-order mark 0x{:02X} 0x{:02X}): save it as UTF-8",
            bom[0], bom[1]
        ),
        )
        .into());
    }
    Ok(bytes)
}
