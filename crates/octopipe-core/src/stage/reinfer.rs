//! Reusing a track's label: `classify reinfer-interval=N`.
//!
//! A tracked object is classified when its track first appears and then once every N frames of
//! its stream; in between it takes its track's last label, and no crop is made of it (no
//! preprocess, no inference). The decision is taken where crops are made: the batch stage's
//! [`CropPlan`] lists the boxes it makes no crop for in [`Frame::reused`]; the classify stage's
//! [`TrackLabels`] keeps each `(stream, track)`'s last label and gives it to them. Boxes with no
//! track are always classified. The two share a [`Reinfer`], which the classify stage publishes
//! in [`Caps::reinfer`](crate::stage::Caps) when it opens (stages open sink to source, so before
//! the batch stage).
//!
//! A reused box whose track has no label (the crop that was to give it one had non-finite
//! logits, or its batch was dropped on a live edge) is written with `"reused":true` and no
//! label, counted in the report (`+ R reused (U with no label ...)`), and its track's next box
//! gets a crop.
//!
//! Several classifiers one after the other on the same boxes (a chain) share one [`Reinfer`]
//! (the description's builder gives it to each; their intervals must be equal, as the batch
//! stage makes one crop plan for them): each keeps its own labels ([`Reinfer::chain_labels`])
//! and gives a reused box its own entry under its name, the first also the box's main result;
//! any of them missing a label asks the one plan for a crop.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::crops::CropBatch;
use crate::frame::{Classification, Frame, NamedClassification};

/// A box whose width or height is more than this factor larger or smaller than at its track's
/// last crop is cropped again, whatever the interval: its label was given to other pixels (an
/// object entering the frame through its edge, a zoom, an occlusion that ends). Measured on a
/// panned video of the clip (tests/detect/track.rs), such boxes were all of the labels that changed.
pub const REINFER_MAX_RESIZE: f64 = 1.25;

/// What the classify stage tells the batch stage about reusing labels: the interval, and the
/// tracks whose next box must be cropped because their label is missing.
#[derive(Debug, Clone)]
pub struct Reinfer {
    interval: u64,
    recrop: Arc<Mutex<HashSet<(u32, u32)>>>,
}

/// Two are equal when they are the same plan (clones of one `Reinfer`).
impl PartialEq for Reinfer {
    fn eq(&self, other: &Self) -> bool {
        self.interval == other.interval && Arc::ptr_eq(&self.recrop, &other.recrop)
    }
}

impl Eq for Reinfer {}

impl Reinfer {
    /// Classify each track every `interval` frames (at least 1).
    pub fn new(interval: u64) -> Self {
        Reinfer {
            interval: interval.max(1),
            recrop: Arc::default(),
        }
    }

    /// Frames between two classifications of a track.
    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// The batch stage's side.
    pub fn plan(&self) -> CropPlan {
        CropPlan {
            reinfer: self.clone(),
            last_crop: HashMap::new(),
            latest: HashMap::new(),
            kept: 0,
        }
    }

    /// The classify stage's side, for a classifier alone on its boxes: its labels are the
    /// boxes' main results.
    pub fn labels(&self) -> TrackLabels {
        TrackLabels {
            reinfer: self.clone(),
            own: None,
            main: true,
            labels: HashMap::new(),
            latest: HashMap::new(),
            kept: 0,
        }
    }

    /// The classify stage's side, for the classifier named `name` in a chain (`first`: the one
    /// whose answer is the boxes' main result): its labels are its own entries
    /// ([`Detection::classifications`](crate::frame::Detection::classifications)).
    pub fn chain_labels(&self, name: Arc<str>, first: bool) -> TrackLabels {
        TrackLabels {
            own: Some(name),
            main: first,
            ..self.labels()
        }
    }

    /// Ask for a crop of `(stream, track)`'s next box.
    fn ask_recrop(&self, key: (u32, u32)) {
        if let Ok(mut r) = self.recrop.lock() {
            r.insert(key);
        }
    }
}

/// The batch stage's side of [`Reinfer`]: which tracked boxes get a crop.
#[derive(Debug)]
pub struct CropPlan {
    reinfer: Reinfer,
    /// The frame number and box size of each `(stream, track)`'s last crop.
    last_crop: HashMap<(u32, u32), (u64, [u32; 2])>,
    /// Each stream's latest frame number.
    latest: HashMap<u32, u64>,
    /// Entries after the last pruning.
    kept: usize,
}

impl CropPlan {
    /// Decide which of `frame`'s boxes get a crop, listing the others in `frame.reused`: a box
    /// of a track last cropped fewer than `interval` frames before gets none, unless its size
    /// changed by more than [`REINFER_MAX_RESIZE`] since or its track's label is missing. Boxes
    /// without a track always get one.
    pub fn plan(&mut self, frame: &mut Frame) {
        frame.reused.clear();
        let interval = self.reinfer.interval;
        if interval <= 1 || frame.detections.iter().all(|d| d.track.is_none()) {
            return;
        }
        let (stream, seq) = (frame.stream, frame.seq);
        let latest = self.latest.entry(stream).or_insert(seq);
        *latest = (*latest).max(seq);
        let mut recrop = self.reinfer.recrop.lock().ok();
        for (i, d) in frame.detections.iter().enumerate() {
            let Some(track) = d.track else { continue };
            let key = (stream, track);
            let missing = recrop.as_mut().is_some_and(|r| r.remove(&key));
            let size = [d.bbox[2], d.bbox[3]];
            match self.last_crop.get(&key) {
                Some(&(last, was))
                    if !missing && seq >= last && seq - last < interval && similar(size, was) =>
                {
                    frame.reused.push(i as u32);
                }
                _ => {
                    self.last_crop.insert(key, (seq, size));
                }
            }
        }
        drop(recrop);
        // Entries as old as the interval decide nothing (the next box is cropped either way).
        if self.last_crop.len() > 2 * self.kept + 64 {
            let latest = &self.latest;
            self.last_crop.retain(|(s, _), (last, _)| {
                latest
                    .get(s)
                    .is_some_and(|l| *l < last.saturating_add(interval))
            });
            self.kept = self.last_crop.len();
        }
    }
}

/// Whether a box of size `a` is within [`REINFER_MAX_RESIZE`] of size `b`, both sides.
fn similar(a: [u32; 2], b: [u32; 2]) -> bool {
    a.iter().zip(b).all(|(&a, b)| {
        let (a, b) = (f64::from(a.max(1)), f64::from(b.max(1)));
        a <= b * REINFER_MAX_RESIZE && b <= a * REINFER_MAX_RESIZE
    })
}

/// The classify stage's side of [`Reinfer`]: each track's last label.
#[derive(Debug)]
pub struct TrackLabels {
    reinfer: Reinfer,
    /// The classifier's name in a chain: its label is its entry of that name.
    own: Option<Arc<str>>,
    /// Whether its label is also the box's main result.
    main: bool,
    /// Each `(stream, track)`'s last label, and the frame its track was last seen on.
    labels: HashMap<(u32, u32), (Classification, u64)>,
    /// Each stream's latest frame number.
    latest: HashMap<u32, u64>,
    /// Entries after the last pruning.
    kept: usize,
}

impl TrackLabels {
    /// After `batch` was classified, in frame order: note each tracked box's fresh label as its
    /// track's last, and give each reused box (`Frame::reused`) its track's last label. Returns
    /// how many reused boxes found none (their track's next box will be cropped).
    pub fn fill(&mut self, batch: &mut CropBatch) -> u64 {
        let mut unlabelled = 0;
        for frame in &mut batch.frames {
            let (stream, seq) = (frame.stream, frame.seq);
            let latest = self.latest.entry(stream).or_insert(seq);
            *latest = (*latest).max(seq);
            for (i, d) in frame.detections.iter_mut().enumerate() {
                let i = i as u32;
                let reused = frame.reused.binary_search(&i).is_ok();
                let Some(track) = d.track else {
                    // Only tracked boxes are reused; anything else is a box with no answer.
                    unlabelled += u64::from(reused);
                    continue;
                };
                let key = (stream, track);
                if reused {
                    match self.labels.get_mut(&key) {
                        Some((label, seen)) => {
                            if let Some(name) = &self.own {
                                d.classifications.push(NamedClassification {
                                    classifier: name.clone(),
                                    classification: label.clone(),
                                });
                            }
                            if self.main {
                                d.classification = Some(label.clone());
                            }
                            *seen = (*seen).max(seq);
                        }
                        None => {
                            if self.main {
                                d.classification = None;
                            }
                            unlabelled += 1;
                            self.reinfer.ask_recrop(key);
                        }
                    }
                    continue;
                }
                let fresh = match &self.own {
                    Some(name) => d
                        .classifications
                        .iter()
                        .find(|c| c.classifier == *name)
                        .map(|c| &c.classification),
                    None => d.classification.as_ref(),
                };
                if let Some(label) = fresh {
                    self.labels.insert(key, (label.clone(), seq));
                } else {
                    // Cropped but no answer (non-finite logits): the track keeps its last
                    // label, and its next box is cropped.
                    self.reinfer.ask_recrop(key);
                }
            }
        }
        if unlabelled > 0 {
            tracing::debug!("reinfer: {unlabelled} reused boxes found no label for their track");
        }
        // A track unseen for two intervals has ended or will be cropped when it comes back.
        if self.labels.len() > 2 * self.kept + 64 {
            let horizon = self.reinfer.interval.saturating_mul(2);
            let latest = &self.latest;
            self.labels.retain(|(s, _), (_, seen)| {
                latest
                    .get(s)
                    .is_some_and(|l| *l <= seen.saturating_add(horizon))
            });
            self.kept = self.labels.len();
        }
        unlabelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{ClassScore, Colorimetry, Detection, FrameLayout, PixelFormat, PooledBuf};

    fn frame(seq: u64, tracks: &[Option<u32>]) -> Frame {
        let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
        let pixels = PooledBuf::unpooled(vec![0; layout.size()]);
        let mut f = Frame::new(0, seq, "test", layout, Colorimetry::default(), pixels);
        f.detections = tracks
            .iter()
            .enumerate()
            .map(|(i, t)| Detection {
                track: *t,
                ..Detection::new([i as u32, 0, 4, 4])
            })
            .collect();
        f
    }

    fn label(name: &str) -> Classification {
        Classification {
            best: ClassScore {
                class_id: 0,
                label: Arc::from(name),
                score: 0.9,
            },
            topk: Vec::new(),
        }
    }

    #[test]
    fn tracks_are_cropped_every_interval_frames_and_untracked_boxes_always() {
        let reinfer = Reinfer::new(4);
        let mut plan = reinfer.plan();
        let mut reused = Vec::new();
        for seq in 0..10 {
            // Track 7 from frame 0, track 9 from frame 2, one untracked box.
            let tracks: Vec<Option<u32>> = match seq {
                0 | 1 => vec![Some(7), None],
                _ => vec![Some(7), None, Some(9)],
            };
            let mut f = frame(seq, &tracks);
            plan.plan(&mut f);
            reused.push(f.reused.clone());
        }
        // Track 7 cropped at 0, 4, 8; track 9 at 2, 6.
        assert_eq!(
            reused,
            [
                vec![],
                vec![0],
                vec![0],
                vec![0, 2],
                vec![2],
                vec![0, 2],
                vec![0],
                vec![0, 2],
                vec![2],
                vec![0, 2]
            ]
        );
        // A box that grew or shrank by more than a quarter is cropped again (and sets the new
        // size); one that changed less is not.
        let mut plan = Reinfer::new(4).plan();
        let mut sized = |seq: u64, w: u32, h: u32| {
            let mut f = frame(seq, &[Some(3)]);
            f.detections[0].bbox = [0, 0, w, h];
            plan.plan(&mut f);
            f.reused.is_empty()
        };
        let cropped: Vec<bool> = [(40, 20), (48, 24), (40, 31), (40, 30), (40, 24)]
            .iter()
            .enumerate()
            .map(|(seq, &(w, h))| sized(seq as u64, w, h))
            .collect();
        assert_eq!(cropped, [true, false, true, false, true]);
        // Interval 1: nothing is ever reused.
        let mut plan = Reinfer::new(1).plan();
        let mut f = frame(0, &[Some(1)]);
        plan.plan(&mut f);
        plan.plan(&mut f);
        assert!(f.reused.is_empty());
    }

    /// The batch of frames `f0` and `f1`, with a crop of each box neither reuses.
    fn batch_of(f0: Frame, f1: Frame) -> CropBatch {
        let mut batch = CropBatch::default();
        batch.push_frame(f0, 8, 8, 3);
        batch.push_frame(f1, 8, 8, 3);
        batch
    }

    #[test]
    fn reused_boxes_take_their_tracks_last_label_or_ask_for_a_crop() {
        let reinfer = Reinfer::new(10);
        let (mut plan, mut labels) = (reinfer.plan(), reinfer.labels());
        // Frame 0: track 1 cropped and labelled "car"; track 2 cropped but with no answer.
        let mut f0 = frame(0, &[Some(1), Some(2)]);
        plan.plan(&mut f0);
        f0.detections[0].classification = Some(label("car"));
        // Frame 1: both reused.
        let mut f1 = frame(1, &[Some(1), Some(2)]);
        plan.plan(&mut f1);
        assert_eq!(f1.reused, [0, 1]);
        let mut batch = batch_of(f0, f1);
        // Only frame 0's two boxes were cropped.
        assert_eq!(batch.crops.len(), 2);
        assert_eq!(labels.fill(&mut batch), 1);
        let f1 = &batch.frames[1];
        assert_eq!(f1.detections[0].classification, Some(label("car")));
        assert_eq!(f1.detections[1].classification, None);
        // Track 2's next box is cropped, track 1's is not.
        let mut f2 = frame(2, &[Some(1), Some(2)]);
        plan.plan(&mut f2);
        assert_eq!(f2.reused, [0]);
    }

    /// `name`'s answer `l` on a box, as a chain's classifier writes it.
    fn entry(name: &str, l: &str) -> NamedClassification {
        NamedClassification {
            classifier: Arc::from(name),
            classification: label(l),
        }
    }

    #[test]
    fn a_chains_classifiers_each_give_reused_boxes_their_own_answer_from_one_plan() {
        let reinfer = Reinfer::new(10);
        let mut plan = reinfer.plan();
        let mut kind = reinfer.chain_labels(Arc::from("kind"), true);
        let mut color = reinfer.chain_labels(Arc::from("color"), false);
        // Frame 0: tracks 1 and 2 cropped; both classifiers answer track 1, only `kind` track 2.
        let mut f0 = frame(0, &[Some(1), Some(2)]);
        plan.plan(&mut f0);
        f0.detections[0].classification = Some(label("car"));
        f0.detections[0].classifications = vec![entry("kind", "car"), entry("color", "red")];
        f0.detections[1].classification = Some(label("van"));
        f0.detections[1].classifications = vec![entry("kind", "van")];
        let mut f1 = frame(1, &[Some(1), Some(2)]);
        plan.plan(&mut f1);
        assert_eq!(f1.reused, [0, 1]);
        let mut batch = batch_of(f0, f1);
        assert_eq!(kind.fill(&mut batch), 0);
        assert_eq!(color.fill(&mut batch), 1, "color has no answer for track 2");
        let f1 = &batch.frames[1];
        // Each classifier's own answer under its name; the first's is the main result.
        assert_eq!(f1.detections[0].classification, Some(label("car")));
        assert_eq!(
            f1.detections[0].classifications,
            [entry("kind", "car"), entry("color", "red")]
        );
        assert_eq!(f1.detections[1].classification, Some(label("van")));
        assert_eq!(f1.detections[1].classifications, [entry("kind", "van")]);
        // The later classifier's missing answer asks the one plan for a crop of track 2.
        let mut f2 = frame(2, &[Some(1), Some(2)]);
        plan.plan(&mut f2);
        assert_eq!(f2.reused, [0]);
        assert_eq!(reinfer, reinfer.clone());
        assert_ne!(reinfer, Reinfer::new(10), "another plan");
    }
}
