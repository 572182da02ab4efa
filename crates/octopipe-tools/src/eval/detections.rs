//! Scoring a detector's boxes against VisDrone DET ground truth, the way the shared data's
//! reference scores its detector (`models/coco-centernet-512.onnx` in the shared data README):
//! per frame and per object group, detections are matched greedily by descending score to
//! unmatched ground truth of the same group at IoU >= 0.5; the scores are each group's recall
//! (matched ground truth / ground truth) and the false positives per frame (detections of a
//! group that matched nothing, over every frame evaluated, frames with no detection included).
//!
//! ```text
//! octopipe eval detections --objects objects.jsonl \
//!     --truth ../shared/data/visdrone/clip-9999999/annotations \
//!     --images ../shared/data/visdrone/clip-9999999/images
//! ```
//!
//! - **Groups.** Ground truth: people = VisDrone categories 1, 2; vehicles = 4, 5, 6, 9;
//!   two-wheelers = 3, 7, 8, 10; boxes with score 0 (ignored regions) and categories 0 and 11
//!   are not counted. Detections: by their detector's class name through a [`ClassMap`]
//!   ([`ClassMap::coco`]: person -> people; car, bus, truck -> vehicles; bicycle, motorcycle ->
//!   two-wheelers); other classes are not counted at all. Detections inside ignored regions are
//!   not excused (the reference does not excuse them either).
//! - **Frames.** A detection belongs to the frame whose image file name is its `source` (the
//!   JSONL field); the frames are the images of a folder, each with its ground truth
//!   `ANNOTATIONS/STEM.txt`. A detection of an image that is not among them is an error naming
//!   it, so a mismatched folder never scores silently.
//! - **Matching.** Within a frame and group, detections in descending score (ties in input
//!   order); each takes the unmatched ground truth box of highest IoU, if that IoU is >= 0.5
//!   ([`IOU_THRESHOLD`]); boxes are `[x, y, w, h]` in pixels, compared as continuous areas.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::Deserialize;

pub use super::EvalError;
use octopipe_core::files::FileError;
use octopipe_stages::boxes::parse_det;
use octopipe_stages::track::iou;

/// A detection and a ground truth box match at this IoU or more.
pub const IOU_THRESHOLD: f64 = 0.5;

/// The object groups scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Group {
    /// Pedestrians and people (VisDrone 1, 2; COCO person).
    People,
    /// Cars, vans, trucks and buses (VisDrone 4, 5, 6, 9; COCO car, bus, truck).
    Vehicles,
    /// Bicycles, tricycles, awning-tricycles and motors (VisDrone 3, 7, 8, 10; COCO bicycle,
    /// motorcycle).
    TwoWheelers,
}

impl Group {
    /// Every group, in table order.
    pub const ALL: [Group; 3] = [Group::People, Group::Vehicles, Group::TwoWheelers];

    /// The group's name in tables and class maps.
    pub fn name(self) -> &'static str {
        match self {
            Group::People => "people",
            Group::Vehicles => "vehicles",
            Group::TwoWheelers => "two-wheelers",
        }
    }

    /// The group named `name` (as [`Group::name`] writes it).
    pub fn parse(name: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.name() == name)
    }

    /// The group of a VisDrone category; `None` for 0 (ignored region) and 11 (others).
    pub(crate) fn of_category(category: u8) -> Option<Group> {
        match category {
            1 | 2 => Some(Group::People),
            4 | 5 | 6 | 9 => Some(Group::Vehicles),
            3 | 7 | 8 | 10 => Some(Group::TwoWheelers),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which group a detector's class name counts in; classes not in the map are not counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassMap(HashMap<String, Group>);

impl ClassMap {
    /// COCO class names: person -> people; car, bus, truck -> vehicles; bicycle, motorcycle ->
    /// two-wheelers; the names `pipelines/visdrone-detect.pipe` maps them to (vehicle,
    /// two-wheeler); and VisDrone's category names (pedestrian, people; car, van, truck, bus;
    /// bicycle, tricycle, awning-tricycle, motor).
    pub fn coco() -> Self {
        ClassMap(
            [
                ("person", Group::People),
                ("car", Group::Vehicles),
                ("bus", Group::Vehicles),
                ("truck", Group::Vehicles),
                ("bicycle", Group::TwoWheelers),
                ("motorcycle", Group::TwoWheelers),
                ("vehicle", Group::Vehicles),
                ("two-wheeler", Group::TwoWheelers),
                // VisDrone's own names: boxes replayed from annotations, or a detector trained
                // on VisDrone.
                ("pedestrian", Group::People),
                ("people", Group::People),
                ("van", Group::Vehicles),
                ("tricycle", Group::TwoWheelers),
                ("awning-tricycle", Group::TwoWheelers),
                ("motor", Group::TwoWheelers),
            ]
            .into_iter()
            .map(|(name, group)| (name.to_string(), group))
            .collect(),
        )
    }

    /// A map written `CLASS=GROUP,CLASS=GROUP,...` (groups: people, vehicles, two-wheelers).
    pub fn parse(text: &str) -> Result<Self, EvalError> {
        let bad = |reason: String| EvalError::ClassMap {
            text: text.to_string(),
            reason,
        };
        let mut map = HashMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (class, group) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not CLASS=GROUP")))?;
            let group = Group::parse(group.trim()).ok_or_else(|| {
                bad(format!(
                    "'{}' is not a group (people, vehicles, two-wheelers)",
                    group.trim()
                ))
            })?;
            map.insert(class.trim().to_string(), group);
        }
        if map.is_empty() {
            return Err(bad("no CLASS=GROUP pairs".into()));
        }
        Ok(ClassMap(map))
    }

    /// The group of detector class `label`, if it is counted.
    pub fn group(&self, label: &str) -> Option<Group> {
        self.0.get(label).copied()
    }
}

/// One detection to score.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Scored {
    /// The image file name of its frame (the JSONL `source`).
    pub source: String,
    /// `[x, y, w, h]` in pixels.
    pub bbox: [f64; 4],
    /// The detector's class name.
    pub label: String,
    /// The detector's score.
    pub score: f32,
}

/// One ground truth box that counts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct TruthBox {
    /// `[x, y, w, h]` in pixels.
    pub bbox: [f64; 4],
    /// Its group.
    pub group: Group,
}

/// The frames evaluated and their ground truth, by image file stem.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Truth {
    frames: BTreeMap<String, Vec<TruthBox>>,
}

impl Truth {
    /// Ground truth of given frames: `(image stem, boxes)`; boxes of no group must be left out.
    pub fn from_frames(frames: impl IntoIterator<Item = (String, Vec<TruthBox>)>) -> Self {
        Truth {
            frames: frames.into_iter().collect(),
        }
    }

    /// The frames are the images (`.jpg`, `.jpeg`, `.png`) of folder `images`; each has its
    /// VisDrone DET ground truth `annotations/STEM.txt`, of which boxes with score 0 or
    /// category 0 or 11 are left out.
    pub(crate) fn for_images(annotations: &Path, images: &Path) -> Result<Self, EvalError> {
        let io = |path: &Path, e: std::io::Error| FileError::io(path.display().to_string(), e);
        let mut frames = BTreeMap::new();
        for entry in std::fs::read_dir(images).map_err(|e| io(images, e))? {
            let file = entry.map_err(|e| io(images, e))?.path();
            let is_image = file
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"));
            let Some(stem) = file.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if !is_image {
                continue;
            }
            let path = annotations.join(format!("{stem}.txt"));
            if !path.is_file() {
                return Err(EvalError::MissingTruth {
                    path: path.display().to_string(),
                    image: file.display().to_string(),
                });
            }
            let text = std::fs::read(&path).map_err(|e| io(&path, e))?;
            let boxes = parse_det(&text[..], &path.display().to_string())?
                .into_iter()
                .filter(|row| row.score != 0.0)
                .filter_map(|row| {
                    Some(TruthBox {
                        bbox: row.bbox.map(|v| v as f64),
                        group: Group::of_category(row.category)?,
                    })
                })
                .collect();
            frames.insert(stem.to_string(), boxes);
        }
        if frames.is_empty() {
            return Err(FileError::refused(
                images.display().to_string(),
                "no .jpg, .jpeg or .png files",
            )
            .into());
        }
        Ok(Truth { frames })
    }

    /// How many frames are evaluated.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }
}

/// A group's scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GroupScore {
    /// Ground truth boxes.
    pub truth: usize,
    /// Ground truth boxes a detection matched.
    pub matched: usize,
    /// Detections of the group that matched nothing.
    pub false_positives: usize,
}

impl GroupScore {
    /// Matched ground truth over ground truth; `None` when there is none.
    pub fn recall(&self) -> Option<f64> {
        (self.truth > 0).then(|| self.matched as f64 / self.truth as f64)
    }
}

/// The scores of a set of detections.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Evaluation {
    /// Per group, in [`Group::ALL`] order.
    pub groups: [GroupScore; 3],
    /// Frames evaluated (the false positives' denominator).
    pub frames: usize,
    /// Detections read.
    pub detections: usize,
    /// Detections whose class is in no group (not counted).
    pub not_counted: usize,
    /// Those classes, each with how many detections carry it.
    pub not_counted_classes: BTreeMap<String, u64>,
}

impl Evaluation {
    /// The scores of `group`.
    pub fn group(&self, group: Group) -> GroupScore {
        self.groups[group.index()]
    }

    /// All groups together.
    pub fn all(&self) -> GroupScore {
        self.groups
            .iter()
            .fold(GroupScore::default(), |a, g| GroupScore {
                truth: a.truth + g.truth,
                matched: a.matched + g.matched,
                false_positives: a.false_positives + g.false_positives,
            })
    }

    /// False positives of `score` per frame evaluated.
    pub fn per_frame(&self, score: GroupScore) -> f64 {
        score.false_positives as f64 / self.frames.max(1) as f64
    }
}

impl fmt::Display for Evaluation {
    /// The table: group, ground truth, matched, recall, false positives per frame.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<14} {:>12} {:>8} {:>7} {:>9}",
            "group", "ground truth", "matched", "recall", "FP/frame"
        )?;
        let rows = Group::ALL
            .iter()
            .map(|g| (g.name(), self.group(*g)))
            .chain([("all", self.all())]);
        for (name, s) in rows {
            let recall = s.recall().map_or("-".to_string(), |r| format!("{r:.3}"));
            writeln!(
                f,
                "{name:<14} {:>12} {:>8} {recall:>7} {:>9.2}",
                s.truth,
                s.matched,
                self.per_frame(s)
            )?;
        }
        write!(
            f,
            "frames: {}; detections: {} ({} of classes in no group, not counted); match at IoU >= {IOU_THRESHOLD}",
            self.frames, self.detections, self.not_counted
        )?;
        if !self.not_counted_classes.is_empty() {
            let classes = super::labels::counted(&self.not_counted_classes);
            write!(f, "\nnot counted, by class: {classes}")?;
        }
        Ok(())
    }
}

/// The image stem a detection's `source` names.
fn stem(source: &str) -> &str {
    let name = source.rsplit(['/', '\\']).next().unwrap_or(source);
    name.rsplit_once('.').map_or(name, |(stem, _)| stem)
}

/// Score `detections` against `truth`, grouping detector classes with `map`.
pub fn evaluate(
    truth: &Truth,
    detections: &[Scored],
    map: &ClassMap,
) -> Result<Evaluation, EvalError> {
    // Per frame and group, the detections' indices.
    let mut by_frame: BTreeMap<(&str, Group), Vec<usize>> = BTreeMap::new();
    let mut unknown: BTreeMap<&str, usize> = BTreeMap::new();
    let mut not_counted = 0;
    let mut not_counted_classes: BTreeMap<String, u64> = BTreeMap::new();
    for (i, d) in detections.iter().enumerate() {
        let frame = stem(&d.source);
        if !truth.frames.contains_key(frame) {
            *unknown.entry(d.source.as_str()).or_default() += 1;
            continue;
        }
        match map.group(&d.label) {
            Some(group) => by_frame.entry((frame, group)).or_default().push(i),
            None => {
                not_counted += 1;
                *not_counted_classes.entry(d.label.clone()).or_default() += 1;
            }
        }
    }
    if let Some((source, count)) = unknown.into_iter().next() {
        return Err(EvalError::UnknownFrame {
            source_name: source.to_string(),
            count,
            frames: truth.frames(),
            first: truth.frames.keys().next().cloned().unwrap_or_default(),
        });
    }
    let mut groups = [GroupScore::default(); 3];
    for (frame, boxes) in &truth.frames {
        for group in Group::ALL {
            let gt: Vec<[f64; 4]> = boxes
                .iter()
                .filter(|b| b.group == group)
                .map(|b| b.bbox)
                .collect();
            let mut dets = by_frame
                .remove(&(frame.as_str(), group))
                .unwrap_or_default();
            // Descending score; the sort is stable, so ties keep input order.
            dets.sort_by(|a, b| detections[*b].score.total_cmp(&detections[*a].score));
            let mut taken = vec![false; gt.len()];
            let score = &mut groups[group.index()];
            score.truth += gt.len();
            for d in dets {
                let best = gt
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| !taken[*k])
                    .map(|(k, g)| (k, iou(detections[d].bbox, *g)))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                match best {
                    Some((k, v)) if v >= IOU_THRESHOLD => {
                        taken[k] = true;
                        score.matched += 1;
                    }
                    _ => score.false_positives += 1,
                }
            }
        }
    }
    Ok(Evaluation {
        groups,
        frames: truth.frames(),
        detections: detections.len(),
        not_counted,
        not_counted_classes,
    })
}

/// The fields of a JSONL object read here.
#[derive(Deserialize)]
struct Line {
    source: String,
    bbox: [f64; 4],
    detection: Option<LineDetection>,
    annotation: Option<LineAnnotation>,
}

#[derive(Deserialize)]
struct LineDetection {
    label: String,
    score: f32,
}

#[derive(Deserialize)]
struct LineAnnotation {
    category: Option<String>,
}

/// The detections of JSONL text (`path` names it in errors): each line an object as the `jsonl`
/// sink writes it, with `source`, `bbox` and `"detection": {"label", "score"}` (blank lines are
/// skipped). A box from annotations (a replay of ground truth as if it were a detector's, no
/// `detection`) is scored as a detection of its `annotation.category` name, score 1.
pub fn parse_objects(text: &str, path: &str) -> Result<Vec<Scored>, EvalError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let error = |reason: String| FileError::parse(path, i + 1, reason);
        let object: Line = serde_json::from_str(line)
            .map_err(|e| error(format!("not an object with source and bbox: {e}")))?;
        let replayed = object
            .annotation
            .and_then(|a| a.category)
            .map(|label| LineDetection { label, score: 1.0 });
        let detection = object.detection.or(replayed).ok_or_else(|| {
            error("no \"detection\" (the box source's class and score): boxes from a stage that names no classes cannot be scored".into())
        })?;
        out.push(Scored {
            source: object.source,
            bbox: object.bbox,
            label: detection.label,
            score: detection.score,
        });
    }
    Ok(out)
}

/// Read the detections of JSONL file `path` ([`parse_objects`]).
pub(crate) fn read_objects(path: &Path) -> Result<Vec<Scored>, EvalError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| FileError::io(path.display().to_string(), e))?;
    parse_objects(&text, &path.display().to_string())
}

/// `octopipe eval detections`: score the objects of a JSONL file against the ground truth of
/// the images of a folder, with `map` (COCO names when `None`).
pub fn evaluate_files(
    objects: &Path,
    annotations: &Path,
    images: &Path,
    map: Option<&ClassMap>,
) -> Result<Evaluation, EvalError> {
    let truth = Truth::for_images(annotations, images)?;
    let detections = read_objects(objects)?;
    let coco = ClassMap::coco();
    let scores = evaluate(&truth, &detections, map.unwrap_or(&coco))?;
    // Detections of which none counts would score every group 0: a map that does not fit.
    if scores.detections > 0 && scores.not_counted == scores.detections {
        return Err(EvalError::NoGroup {
            path: objects.display().to_string(),
            count: scores.detections,
            classes: super::labels::counted(&scores.not_counted_classes),
        });
    }
    Ok(scores)
}

#[cfg(test)]
mod tests;
