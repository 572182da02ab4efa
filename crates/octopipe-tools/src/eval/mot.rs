//! Multi-object tracking scores: IDF1, ID switches and MOTA of predicted ids against true
//! ones, and the VisDrone MOT ground-truth files they are read from.
//!
//! **IDF1** (Ristani et al. 2016): every predicted trajectory is matched to at most one true one,
//! globally, to maximise the boxes they share (a box is shared on a frame where both have one at
//! IoU >= 0.5); `IDF1 = 2 IDTP / (2 IDTP + IDFP + IDFN)` where IDTP counts the shared boxes of
//! matched pairs, IDFP the predicted boxes and IDFN the true boxes left over. **ID switches**
//! (CLEAR MOT): frame by frame, a true box keeps the prediction it was matched to while they
//! overlap at IoU >= 0.5, the rest are matched optimally; a true object matched to a different
//! prediction than the last time is a switch.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use octopipe_core::files::FileError;
use octopipe_core::frame::Detection;
use octopipe_stages::boxes::BoxesError;
use octopipe_stages::track::{iou_u32, max_weight_matching, TrackConfig, TrackError, Tracker};

/// Least IoU of a predicted box with a true one for them to be the same object.
pub const MATCH_IOU: f64 = 0.5;

/// Where the ground-truth files are under the shared data folder.
pub const MOT_DIR: &str = "visdrone/mot-test-dev-annotations";

/// Errors of the tracking benchmark; each names the file it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MotError {
    /// A file or folder that cannot be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// A malformed ground-truth line.
    #[error(transparent)]
    Parse(#[from] BoxesError),
    /// Tracker settings it cannot work with.
    #[error(transparent)]
    Track(#[from] TrackError),
}

/// One frame's boxes, each with its id (true or predicted).
pub type IdBoxes = Vec<(u32, [u32; 4])>;

/// A ground-truth sequence: per frame (`frame_index - 1`), its objects with their true ids.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MotSequence {
    /// The file's name without `.txt`.
    pub name: String,
    /// Frames 0.. up to the last annotated one (frames with no objects are empty).
    pub frames: Vec<IdBoxes>,
}

impl MotSequence {
    /// Read a VisDrone MOT ground-truth file. Kept: objects (score 1, categories 1 to 10, not
    /// ignored regions or "others") with a box at least 1 pixel wide and high once its left and
    /// top are clipped at 0.
    pub fn load(path: &Path) -> Result<MotSequence, MotError> {
        let text = std::fs::read(path).map_err(|e| FileError::io(path.display().to_string(), e))?;
        let rows = octopipe_stages::boxes::parse_mot(&text[..], &path.display().to_string())?;
        let last = rows.iter().map(|(f, _)| *f).max().unwrap_or(0);
        let mut frames = vec![Vec::new(); last as usize];
        for (index, row) in rows {
            let Some(id) = row.track else { continue };
            if row.score == 0.0 || !(1..=10).contains(&row.category) {
                continue;
            }
            let [x, y, w, h] = row.bbox;
            let (x0, y0) = (x.max(0), y.max(0));
            let (w, h) = (x + w - x0, y + h - y0);
            if w < 1 || h < 1 {
                continue;
            }
            let b = [x0, y0, w, h].map(|v| u32::try_from(v).unwrap_or(u32::MAX));
            frames[index as usize - 1].push((id, b));
        }
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(MotSequence { name, frames })
    }

    /// Every `*.txt` ground-truth file under `data_dir`'s [`MOT_DIR`], sorted by name.
    pub fn files(data_dir: &Path) -> Result<Vec<PathBuf>, MotError> {
        let dir = data_dir.join(MOT_DIR);
        let io = |e: std::io::Error| FileError::io(dir.display().to_string(), e);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(FileError::refused(
                dir.display().to_string(),
                "no ground-truth files (*.txt)",
            )
            .into());
        }
        Ok(files)
    }

    /// True objects over all frames.
    pub fn boxes(&self) -> usize {
        self.frames.iter().map(Vec::len).sum()
    }

    /// Distinct true ids.
    pub fn tracks(&self) -> usize {
        distinct(&self.frames)
    }
}

/// Run a tracker with `config` over `input` (frame `k` is `input[k]`, all boxes score 1) and
/// return its boxes with their track ids (boxes it gave no id are left out).
pub fn run_tracker(input: &[Vec<[u32; 4]>], config: TrackConfig) -> Result<Vec<IdBoxes>, MotError> {
    let mut tracker = Tracker::new(config)?;
    let mut out = Vec::with_capacity(input.len());
    for (seq, boxes) in input.iter().enumerate() {
        let mut dets: Vec<Detection> = boxes.iter().map(|b| Detection::new(*b)).collect();
        tracker.update(seq as u64, &mut dets);
        out.push(
            dets.iter()
                .filter_map(|d| d.track.map(|t| (t, d.bbox)))
                .collect(),
        );
    }
    Ok(out)
}

/// How well predicted ids follow the true ones.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MotScore {
    /// `2 IDTP / (true boxes + predicted boxes)`.
    pub idf1: f64,
    /// ID precision: IDTP / predicted boxes.
    pub idp: f64,
    /// ID recall: IDTP / true boxes.
    pub idr: f64,
    /// Boxes shared by matched trajectories.
    pub idtp: u64,
    /// True boxes.
    pub true_boxes: u64,
    /// Predicted boxes (with an id).
    pub predicted_boxes: u64,
    /// CLEAR MOT ID switches.
    pub id_switches: u64,
    /// CLEAR MOT accuracy: `1 - (misses + false positives + switches) / true boxes`.
    pub mota: f64,
    /// Distinct true ids.
    pub true_tracks: usize,
    /// Distinct predicted ids.
    pub predicted_tracks: usize,
}

/// Distinct ids over all frames.
fn distinct(frames: &[IdBoxes]) -> usize {
    let mut ids: Vec<u32> = frames.iter().flatten().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

/// Score predicted ids against true ones, frame by frame (`truth[k]` and `predicted[k]` are
/// frame `k`; a frame missing from the shorter list has no boxes).
pub fn score(truth: &[IdBoxes], predicted: &[IdBoxes]) -> MotScore {
    let frames = truth.len().max(predicted.len());
    let empty: &[(u32, [u32; 4])] = &[];
    fn at<'a>(v: &'a [IdBoxes], k: usize, empty: &'a [(u32, [u32; 4])]) -> &'a [(u32, [u32; 4])] {
        v.get(k).map_or(empty, |f| f.as_slice())
    }
    // Dense indices of true and predicted ids.
    let index = |v: &[IdBoxes]| {
        let mut m: HashMap<u32, usize> = HashMap::new();
        for (id, _) in v.iter().flatten() {
            let n = m.len();
            m.entry(*id).or_insert(n);
        }
        m
    };
    let (ti, pi) = (index(truth), index(predicted));
    let mut shared: HashMap<(usize, usize), u64> = HashMap::new();
    let (mut switches, mut matches) = (0u64, 0u64);
    // CLEAR MOT: the prediction each true id was last matched to.
    let mut last: HashMap<u32, u32> = HashMap::new();
    for k in 0..frames {
        let (t, p) = (at(truth, k, empty), at(predicted, k, empty));
        let mut ious = vec![0.0; t.len() * p.len()];
        for (a, (tid, tb)) in t.iter().enumerate() {
            for (b, (pid, pb)) in p.iter().enumerate() {
                let v = iou_u32(*tb, *pb);
                ious[a * p.len() + b] = v;
                if v >= MATCH_IOU {
                    *shared.entry((ti[tid], pi[pid])).or_default() += 1;
                }
            }
        }
        // Keep last frame's correspondences that still hold, then match the rest.
        let mut t_used = vec![false; t.len()];
        let mut p_used = vec![false; p.len()];
        for (a, (tid, _)) in t.iter().enumerate() {
            let Some(want) = last.get(tid) else { continue };
            let kept = (0..p.len())
                .find(|&b| !p_used[b] && p[b].0 == *want && ious[a * p.len() + b] >= MATCH_IOU);
            if let Some(b) = kept {
                t_used[a] = true;
                p_used[b] = true;
                matches += 1;
            }
        }
        let rows: Vec<usize> = (0..t.len()).filter(|&a| !t_used[a]).collect();
        let cols: Vec<usize> = (0..p.len()).filter(|&b| !p_used[b]).collect();
        let weight: Vec<f64> = rows
            .iter()
            .flat_map(|&a| {
                let ious = &ious;
                cols.iter().map(move |&b| {
                    let v = ious[a * p.len() + b];
                    if v >= MATCH_IOU {
                        v - MATCH_IOU + 1e-9
                    } else {
                        0.0
                    }
                })
            })
            .collect();
        for (r, c) in max_weight_matching(rows.len(), cols.len(), &weight) {
            let (tid, pid) = (t[rows[r]].0, p[cols[c]].0);
            if last.insert(tid, pid).is_some_and(|before| before != pid) {
                switches += 1;
            }
            matches += 1;
        }
    }
    // IDF1: one global matching of true to predicted trajectories.
    let (nt, np) = (ti.len(), pi.len());
    let mut weight = vec![0.0; nt * np];
    for (&(a, b), n) in &shared {
        weight[a * np + b] = *n as f64;
    }
    let idtp: u64 = max_weight_matching(nt, np, &weight)
        .into_iter()
        .map(|(a, b)| weight[a * np + b] as u64)
        .sum();
    let true_boxes: u64 = truth.iter().map(|f| f.len() as u64).sum();
    let predicted_boxes: u64 = predicted.iter().map(|f| f.len() as u64).sum();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let errors = (true_boxes - matches) + (predicted_boxes - matches) + switches;
    MotScore {
        idf1: ratio(2 * idtp, true_boxes + predicted_boxes),
        idp: ratio(idtp, predicted_boxes),
        idr: ratio(idtp, true_boxes),
        idtp,
        true_boxes,
        predicted_boxes,
        id_switches: switches,
        mota: 1.0 - ratio(errors, true_boxes),
        true_tracks: nt,
        predicted_tracks: np,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_ids_score_one_and_a_swap_is_counted() {
        let a = |x: u32| [x, 0, 10, 10];
        let truth: Vec<IdBoxes> = (0..10).map(|k| vec![(1, a(k)), (2, a(100 + k))]).collect();
        let s = score(&truth, &truth);
        assert_eq!((s.idf1, s.id_switches, s.mota), (1.0, 0, 1.0));
        // Other id numbers are no error.
        let renamed: Vec<IdBoxes> = truth
            .iter()
            .map(|f| f.iter().map(|(id, b)| (id + 40, *b)).collect())
            .collect();
        assert_eq!(score(&truth, &renamed).idf1, 1.0);
        // The predicted ids swap at frame 5: 2 switches; the best global matching keeps the
        // longer halves (5 of 10 frames each): IDTP = 10 of 20 boxes each side.
        let swapped: Vec<IdBoxes> = truth
            .iter()
            .enumerate()
            .map(|(k, f)| {
                f.iter()
                    .map(|(id, b)| (if k < 5 { *id } else { 3 - id }, *b))
                    .collect()
            })
            .collect();
        let s = score(&truth, &swapped);
        assert_eq!((s.idtp, s.id_switches), (10, 2));
        assert!((s.idf1 - 0.5).abs() < 1e-12, "{s:?}");
        // A prediction that misses half the boxes: recall 0.5, precision 1.
        let half: Vec<IdBoxes> = truth
            .iter()
            .map(|f| f.iter().take(1).copied().collect())
            .collect();
        let s = score(&truth, &half);
        assert_eq!((s.idp, s.idr), (1.0, 0.5));
        assert!((s.idf1 - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.mota - 0.5).abs() < 1e-12);
    }
}
