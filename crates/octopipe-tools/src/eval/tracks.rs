//! Scoring a run's track ids against MOT ground truth (`octopipe eval tracks`): the objects a
//! `jsonl` sink wrote after a `track` stage, against a file of `frame,id,x,y,w,h,score,category,
//! truncation,occlusion` rows (VisDrone MOT; `octopipe pan` writes one for its video).
//!
//! ```text
//! octopipe eval tracks --objects tracks.jsonl --truth pan/gt.txt
//! ```
//!
//! - **Frames.** An object's MOT frame index is the number its image's name ends with when its
//!   `source` is an image file (`000012.jpg` is frame 12, as the `boxes` stage matches MOT rows
//!   to images), else its `frame` number plus one (a video's frames count from 0 by
//!   presentation time; MOT indices from 1).
//! - **Boxes.** Objects with a `track` are the prediction; objects without one (a tentative
//!   track, a box under the tracker's `low`) are counted apart and not scored. The truth is
//!   [`MotSequence::load`]'s: objects of categories 1 to 10 with score 1.
//! - **Scores** ([`super::mot::score`]): IDF1 with its precision and recall, CLEAR MOT ID
//!   switches and MOTA, at IoU >= 0.5.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use super::mot::{score, IdBoxes, MotScore, MotSequence, MATCH_IOU};
use super::EvalError;
use octopipe_core::files::FileError;
use octopipe_stages::track::iou_u32;

/// The fields of a JSONL object read here.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    stream: u32,
    frame: u64,
    #[serde(default)]
    source: String,
    bbox: [u32; 4],
    track: Option<u32>,
}

/// A run's tracks, frame by frame (frame `k` is MOT frame index `k + 1`).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct RunTracks {
    /// Per frame, the boxes with a track id and their ids.
    pub frames: Vec<IdBoxes>,
    /// Objects with no track (not scored).
    pub untracked: u64,
    /// The stream scored.
    pub stream: u32,
}

/// The MOT frame index of an object: the number its image's name ends with, else `frame + 1`.
pub fn frame_index(source: &str, frame: u64) -> u64 {
    let name = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let image = name
        .rsplit_once('.')
        .filter(|(_, ext)| matches!(ext.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"));
    let number = image.and_then(|(stem, _)| {
        let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        stem[stem.len() - digits..].parse::<u64>().ok()
    });
    number.unwrap_or(frame + 1)
}

/// The tracks of JSONL text (`path` names it in errors), of `stream` (needed when the objects
/// hold several streams).
pub(crate) fn parse_tracks(
    text: &str,
    path: &str,
    stream: Option<u32>,
) -> Result<RunTracks, EvalError> {
    let mut lines = Vec::new();
    let mut streams = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let object: Line = serde_json::from_str(line).map_err(|e| {
            FileError::parse(
                path,
                i + 1,
                format!("not an object with frame and bbox: {e}"),
            )
        })?;
        streams.insert(object.stream);
        lines.push(object);
    }
    let stream = match (stream, streams.len()) {
        (Some(s), _) => s,
        (None, 0 | 1) => streams.first().copied().unwrap_or(0),
        (None, _) => {
            let list: Vec<String> = streams.iter().map(u32::to_string).collect();
            return Err(EvalError::Streams {
                path: path.to_string(),
                streams: list.join(", "),
            });
        }
    };
    let mut run = RunTracks {
        stream,
        ..Default::default()
    };
    for o in lines.into_iter().filter(|o| o.stream == stream) {
        let Some(id) = o.track else {
            run.untracked += 1;
            continue;
        };
        let k = frame_index(&o.source, o.frame).max(1) as usize - 1;
        if run.frames.len() <= k {
            run.frames.resize(k + 1, Vec::new());
        }
        run.frames[k].push((id, o.bbox));
    }
    Ok(run)
}

/// A run's tracks scored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TracksEvaluation {
    /// The scores.
    pub score: MotScore,
    /// Frames of the ground truth.
    pub frames: usize,
    /// Frames with a tracked object.
    pub predicted_frames: usize,
    /// Objects with no track (not scored).
    pub untracked: u64,
    /// The stream scored.
    pub stream: u32,
}

impl fmt::Display for TracksEvaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.score;
        writeln!(
            f,
            "IDF1 {:.3} (ID precision {:.3}, ID recall {:.3}); ID switches {}; MOTA {:.3}",
            s.idf1, s.idp, s.idr, s.id_switches, s.mota
        )?;
        writeln!(
            f,
            "true: {} boxes in {} tracks over {} frames; tracked: {} boxes in {} tracks over {} frames (stream {})",
            s.true_boxes,
            s.true_tracks,
            self.frames,
            s.predicted_boxes,
            s.predicted_tracks,
            self.predicted_frames,
            self.stream
        )?;
        write!(
            f,
            "not scored: {} objects with no track; match at IoU >= {MATCH_IOU}",
            self.untracked
        )
    }
}

/// Score `run` against `truth`.
pub fn evaluate(truth: &MotSequence, run: &RunTracks) -> TracksEvaluation {
    TracksEvaluation {
        score: score(&truth.frames, &run.frames),
        frames: truth.frames.len(),
        predicted_frames: run.frames.iter().filter(|f| !f.is_empty()).count(),
        untracked: run.untracked,
        stream: run.stream,
    }
}

/// `octopipe eval tracks`: the objects of a JSONL file against a MOT ground-truth file.
pub fn evaluate_files(
    objects: &Path,
    truth: &Path,
    stream: Option<u32>,
) -> Result<TracksEvaluation, EvalError> {
    let sequence = MotSequence::load(truth)?;
    let text = std::fs::read_to_string(objects)
        .map_err(|e| FileError::io(objects.display().to_string(), e))?;
    let path = objects.display().to_string();
    let run = parse_tracks(&text, &path, stream)?;
    check_fit(&sequence, &run, &path, &truth.display().to_string())?;
    Ok(evaluate(&sequence, &run))
}

/// Refuse what would score near 0 for a reason that is no tracker's: objects with no track,
/// objects of frames past the ground truth's last, or tracks of which no box overlaps a true
/// box (another sequence's objects).
fn check_fit(
    truth: &MotSequence,
    run: &RunTracks,
    path: &str,
    truth_path: &str,
) -> Result<(), EvalError> {
    let tracked: usize = run.frames.iter().map(Vec::len).sum();
    if tracked == 0 && run.untracked > 0 {
        return Err(EvalError::NoTracks {
            path: path.to_string(),
            count: run.untracked,
            stream: run.stream,
        });
    }
    let mismatch = |reason: String| EvalError::Mismatch {
        path: path.to_string(),
        truth: truth_path.to_string(),
        reason,
    };
    if let Some(last) = run.frames.iter().rposition(|f| !f.is_empty()) {
        if last >= truth.frames.len() {
            return Err(mismatch(format!(
                "tracked boxes in frame {}, past the ground truth's {} frames",
                last + 1,
                truth.frames.len()
            )));
        }
    }
    let overlaps = truth.frames.iter().zip(&run.frames).any(|(t, r)| {
        r.iter()
            .any(|(_, b)| t.iter().any(|(_, g)| iou_u32(*b, *g) >= MATCH_IOU))
    });
    if tracked > 0 && truth.frames.iter().any(|f| !f.is_empty()) && !overlaps {
        return Err(mismatch(format!(
            "none of the {tracked} tracked boxes overlaps a true box of its frame at IoU >= {MATCH_IOU}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_numbered_by_image_name_or_position() {
        assert_eq!(frame_index("0000012.jpg", 3), 12);
        assert_eq!(frame_index("/a/b/pan-007.PNG", 0), 7);
        assert_eq!(frame_index("pan/video.mp4", 4), 5);
        assert_eq!(frame_index("cover.jpg", 0), 1);
    }

    #[test]
    fn tracks_are_read_per_stream_and_scored() {
        let text = [
            r#"{"stream":0,"frame":0,"source":"v.mp4","bbox":[0,0,10,10],"track":1}"#,
            r#"{"stream":0,"frame":1,"source":"v.mp4","bbox":[1,0,10,10],"track":1}"#,
            r#"{"stream":0,"frame":1,"source":"v.mp4","bbox":[50,0,10,10]}"#,
            r#"{"stream":1,"frame":0,"source":"v.mp4","bbox":[0,0,10,10],"track":4}"#,
        ]
        .join("\n");
        let e = parse_tracks(&text, "o.jsonl", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "o.jsonl: objects of streams 0, 1: give the one the ground truth is of (--stream N)"
        );
        let run = parse_tracks(&text, "o.jsonl", Some(0)).unwrap();
        assert_eq!(run.frames.len(), 2);
        assert_eq!(run.untracked, 1);
        let truth = MotSequence {
            name: "t".into(),
            frames: vec![vec![(7, [0, 0, 10, 10])], vec![(7, [1, 0, 10, 10])]],
        };
        let e = evaluate(&truth, &run);
        assert_eq!((e.score.idf1, e.score.id_switches), (1.0, 0));
        assert!(e.to_string().starts_with("IDF1 1.000"), "{e}");
        check_fit(&truth, &run, "o.jsonl", "gt.txt").expect("the run fits its truth");
        let bad = parse_tracks("{\"frame\":1}", "o.jsonl", None).unwrap_err();
        assert!(
            bad.to_string().starts_with("o.jsonl:1: not an object"),
            "{bad}"
        );
    }

    #[test]
    fn runs_that_do_not_fit_their_truth_are_refused() {
        let truth = MotSequence {
            name: "t".into(),
            frames: vec![vec![(7, [0, 0, 10, 10])], vec![(7, [1, 0, 10, 10])]],
        };
        let fit = |text: &str| {
            let run = parse_tracks(text, "o.jsonl", None).unwrap();
            check_fit(&truth, &run, "o.jsonl", "gt.txt")
                .unwrap_err()
                .to_string()
        };
        let untracked = r#"{"frame":0,"source":"v.mp4","bbox":[0,0,10,10]}"#;
        assert_eq!(
            fit(untracked),
            "o.jsonl: none of the 1 objects of stream 0 carries a track: run the objects through a `track` stage first"
        );
        let late = r#"{"frame":5,"source":"v.mp4","bbox":[0,0,10,10],"track":1}"#;
        assert_eq!(
            fit(late),
            "o.jsonl: tracked boxes in frame 6, past the ground truth's 2 frames: are the objects and the ground truth gt.txt of the same sequence?"
        );
        let elsewhere = r#"{"frame":0,"source":"v.mp4","bbox":[300,300,10,10],"track":1}"#;
        assert!(
            fit(elsewhere).starts_with(
                "o.jsonl: none of the 1 tracked boxes overlaps a true box of its frame at IoU >= "
            ),
            "{}",
            fit(elsewhere)
        );
    }
}
