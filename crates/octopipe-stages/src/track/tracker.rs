//! ByteTrack on one stream: Kalman prediction, then two rounds of IoU matching (high-score boxes
//! against every track, low-score boxes against the tracks left), then tentative tracks.

use std::collections::HashMap;

use octopipe_core::frame::{BoxOrigin, Detection};

use super::assign::{iou, max_weight_matching};
use super::config::{TrackConfig, TrackError};
use super::kalman::BoxFilter;

/// Most frames a track's motion is predicted over at once (a gap in frame numbers longer than
/// this moves coasting tracks as far as this many frames would).
pub const MAX_COAST: u64 = 1000;
/// The most boxes of one frame a tracker matches: the highest-scoring; the others get no track
/// (counted, [`Tracker::untracked`]). With [`MAX_TRACKS`], what one frame costs is bounded
/// (at most `MAX_TRACKS x MAX_BOXES` overlaps a round), whatever a frame brings.
pub const MAX_BOXES: usize = 1024;
/// The most tracks a tracker keeps: no track starts beyond.
pub const MAX_TRACKS: usize = 2048;
/// Camera motion: bin size of the displacement votes, in pixels.
pub const SHIFT_BIN: f64 = 4.0;
/// Camera motion: farthest a box may be from a track's predicted box to vote, in box sizes.
pub const SHIFT_RANGE: f64 = 4.0;
/// Camera motion: fewest votes that agree for a shift to be applied.
pub const SHIFT_SUPPORT: usize = 3;

/// The median of `v` (reordered), `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(match n % 2 {
        1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    })
}

/// Least IoU in the second round (low-score boxes), as ByteTrack: a box the detector is unsure
/// of must overlap its track well.
pub const LOW_SCORE_IOU: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not confirmed yet: no id; ends at its first miss.
    Tentative,
    /// Matched on the last frame.
    Tracked,
    /// Confirmed, missed since `last_seen`: coasting on its prediction.
    Lost,
}

#[derive(Debug, Clone)]
struct Track {
    /// Given when confirmed.
    id: Option<u32>,
    filter: BoxFilter,
    state: State,
    /// Matched frames in a row.
    hits: u32,
    /// The frame it was last matched on.
    last_seen: u64,
    /// The class, name and score of the box it was last matched with (what a frame the
    /// detector skipped shows of it).
    class_id: Option<u32>,
    origin: BoxOrigin,
    label: Option<std::sync::Arc<str>>,
    score: f32,
}

/// One stream's tracker (ByteTrack): give it each frame's boxes in order with
/// [`Tracker::update`]; it writes each box's `track`.
///
/// ```
/// use octopipe_core::frame::Detection;
/// use octopipe_stages::track::{TrackConfig, Tracker};
///
/// let mut tracker = Tracker::new(TrackConfig { min_hits: 1, ..Default::default() })?;
/// for seq in 0..10u32 {
///     // One box moving 4 px a frame to the right.
///     let mut boxes = vec![Detection::new([100 + 4 * seq, 50, 30, 20])];
///     tracker.update(seq as u64, &mut boxes);
///     assert_eq!(boxes[0].track, Some(1));
/// }
/// assert_eq!((tracker.born(), tracker.ended(), tracker.open()), (1, 0, 1));
/// # Ok::<(), octopipe_stages::track::TrackError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Tracker {
    config: TrackConfig,
    tracks: Vec<Track>,
    next_id: u32,
    /// The tracker's clock: frames since the stream's first, gaps included (out-of-order
    /// frames count one each).
    now: Option<u64>,
    /// The highest frame number seen.
    last_seq: Option<u64>,
    born: u64,
    ended: u64,
    unconfirmed: u64,
    out_of_order: u64,
    /// Boxes past [`MAX_BOXES`] of their frame, given no track.
    untracked: u64,
    /// The camera's shift found on the last frame with boxes, repeated over predicted frames.
    last_shift: Option<[f64; 2]>,
}

impl Tracker {
    /// A tracker with `config` (checked).
    pub fn new(config: TrackConfig) -> Result<Self, TrackError> {
        config.validate()?;
        Ok(Tracker::checked(config))
    }

    /// A tracker with `config`, already checked.
    pub(super) fn checked(config: TrackConfig) -> Self {
        Tracker {
            config,
            tracks: Vec::new(),
            next_id: 1,
            now: None,
            last_seq: None,
            born: 0,
            ended: 0,
            unconfirmed: 0,
            out_of_order: 0,
            untracked: 0,
            last_shift: None,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &TrackConfig {
        &self.config
    }

    /// Tracks confirmed so far (each got an id).
    pub fn born(&self) -> u64 {
        self.born
    }

    /// Tracks that ended (unmatched for more than `max_age` frames).
    pub fn ended(&self) -> u64 {
        self.ended
    }

    /// Confirmed tracks not ended (matched on the last frame, or coasting).
    pub fn open(&self) -> u64 {
        self.tracks.iter().filter(|t| t.id.is_some()).count() as u64
    }

    /// New tracks dropped before they were confirmed (missed within `min_hits` frames).
    pub(crate) fn unconfirmed(&self) -> u64 {
        self.unconfirmed
    }

    /// Frames that came with a number not above the one before (counted as the next frame).
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// Track frame `seq`'s boxes: predict every track to this frame (a gap in `seq`, lost
    /// frames, is predicted over frame by frame), match, and write each box's `track` (the id of
    /// its confirmed track, else `None`). Frames must come in order; one whose number is not
    /// above the last is counted ([`Tracker::out_of_order`]) and taken as the next frame.
    pub fn update(&mut self, seq: u64, boxes: &mut [Detection]) {
        if boxes.len() > MAX_BOXES {
            self.update_bounded(seq, boxes);
            return;
        }
        let first = self.now.is_none();
        let now = self.advance(seq);
        for b in boxes.iter_mut() {
            b.track = None;
        }
        self.last_shift = None;
        if self.config.camera_motion {
            if let Some(d) = self.camera_shift(boxes) {
                self.tracks.iter_mut().for_each(|t| t.filter.shift(d));
                self.last_shift = Some(d);
            }
        }
        self.match_frame(first, now, boxes);
    }

    /// Boxes given no track for being past [`MAX_BOXES`] of their frame.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// [`Tracker::update`] of a frame of more than [`MAX_BOXES`] boxes: its [`MAX_BOXES`]
    /// highest-scoring are tracked, the others get no track (counted, said once).
    fn update_bounded(&mut self, seq: u64, boxes: &mut [Detection]) {
        let mut order: Vec<usize> = (0..boxes.len()).collect();
        order.select_nth_unstable_by(MAX_BOXES - 1, |&a, &b| {
            boxes[b].score.total_cmp(&boxes[a].score)
        });
        order.truncate(MAX_BOXES);
        order.sort_unstable();
        let mut kept: Vec<Detection> = order.iter().map(|&i| boxes[i].clone()).collect();
        let left = (boxes.len() - MAX_BOXES) as u64;
        if self.untracked == 0 {
            tracing::warn!(
                "track: a frame of {} boxes: its {MAX_BOXES} highest-scoring are tracked, {left} get no track (at most {MAX_BOXES} a frame)",
                boxes.len()
            );
        }
        self.untracked += left;
        self.update(seq, &mut kept);
        for b in boxes.iter_mut() {
            b.track = None;
        }
        for (&i, k) in order.iter().zip(&kept) {
            boxes[i].track = k.track;
        }
    }

    /// The boxes of frame `seq`, one the detector skipped (`detect interval`): every track
    /// matched on the last frame with boxes, predicted to this frame (and moved by the camera's
    /// last shift), clipped to the `width` x `height` frame, with its id, class and last score.
    /// Nothing is matched, so no track ages, starts or ends; the next frame with boxes is
    /// predicted from here.
    pub fn predict(&mut self, seq: u64, width: u32, height: u32) -> Vec<Detection> {
        self.advance(seq);
        if let Some(d) = self.last_shift {
            self.tracks.iter_mut().for_each(|t| t.filter.shift(d));
        }
        self.tracks
            .iter()
            .filter(|t| t.state == State::Tracked && t.id.is_some())
            .filter_map(|t| {
                let b = t.filter.bbox();
                let r = |v: f64| v.round() as i64;
                let bbox =
                    crate::boxes::clip_box([r(b[0]), r(b[1]), r(b[2]), r(b[3])], width, height)
                        .ok()?;
                Some(Detection {
                    bbox,
                    class_id: t.class_id,
                    origin: t.origin,
                    label: t.label.clone(),
                    score: t.score,
                    track: t.id,
                    classification: None,
                    classifications: Vec::new(),
                    stats: None,
                })
            })
            .collect()
    }

    /// Move the tracker's clock to frame `seq` and predict every track over the frames since
    /// the last (a gap in `seq`, lost frames, is predicted over frame by frame). Returns the
    /// clock.
    fn advance(&mut self, seq: u64) -> u64 {
        let (now, steps) = match (self.now, self.last_seq) {
            (Some(now), Some(last)) if seq > last => (now.saturating_add(seq - last), seq - last),
            (Some(now), Some(last)) => {
                if self.out_of_order == 0 {
                    tracing::warn!(
                        "track: frame {seq} came after frame {last}: taken as the next frame"
                    );
                }
                self.out_of_order += 1;
                (now.saturating_add(1), 1)
            }
            _ => (0, 0),
        };
        self.now = Some(now);
        self.last_seq = Some(self.last_seq.map_or(seq, |l| l.max(seq)));
        // Beyond max_age frames every unmatched track ends anyway; past MAX_COAST frames a
        // prediction means nothing and would only cost time.
        let steps = steps
            .min(self.config.max_age.saturating_add(1))
            .min(MAX_COAST);
        for t in &mut self.tracks {
            if t.state == State::Lost {
                t.filter.freeze_size();
            }
            for _ in 0..steps {
                t.filter.predict();
            }
        }
        now
    }

    /// Match frame `now`'s boxes to the predicted tracks (ByteTrack's three rounds), start and
    /// end tracks, and write each box's `track`.
    fn match_frame(&mut self, first: bool, now: u64, boxes: &mut [Detection]) {
        let bbox = |b: &Detection| b.bbox.map(f64::from);
        let (high, low) = (self.config.high, self.config.low);
        let mut high_boxes: Vec<usize> = (0..boxes.len())
            .filter(|&i| boxes[i].score >= high)
            .collect();
        let low_boxes: Vec<usize> = (0..boxes.len())
            .filter(|&i| boxes[i].score >= low && boxes[i].score < high)
            .collect();

        // Round 1: high-score boxes against every confirmed track (tracked or coasting).
        let confirmed: Vec<usize> = (0..self.tracks.len())
            .filter(|&t| self.tracks[t].state != State::Tentative)
            .collect();
        let pairs = self.match_boxes(&confirmed, &high_boxes, boxes, self.config.iou);
        let mut matched_tracks = vec![false; self.tracks.len()];
        let mut matched_boxes = vec![false; boxes.len()];
        for &(t, b) in &pairs {
            self.hit(t, &boxes[b], now);
            boxes[b].track = self.tracks[t].id;
            matched_tracks[t] = true;
            matched_boxes[b] = true;
        }
        // Round 2: low-score boxes against the tracks matched on the last frame and not now.
        let left: Vec<usize> = confirmed
            .iter()
            .copied()
            .filter(|&t| !matched_tracks[t] && self.tracks[t].state == State::Tracked)
            .collect();
        let second_iou = self.config.iou.max(LOW_SCORE_IOU);
        let pairs = self.match_boxes(&left, &low_boxes, boxes, second_iou);
        for &(t, b) in &pairs {
            self.hit(t, &boxes[b], now);
            boxes[b].track = self.tracks[t].id;
            matched_tracks[t] = true;
            matched_boxes[b] = true;
        }
        for (t, track) in self.tracks.iter_mut().enumerate() {
            if !matched_tracks[t] && track.state == State::Tracked {
                track.state = State::Lost;
                track.hits = 0;
            }
        }
        // Round 3: tentative tracks against the high-score boxes left.
        high_boxes.retain(|&b| !matched_boxes[b]);
        let tentative: Vec<usize> = (0..self.tracks.len())
            .filter(|&t| self.tracks[t].state == State::Tentative)
            .collect();
        let pairs = self.match_boxes(&tentative, &high_boxes, boxes, self.config.iou);
        for &(t, b) in &pairs {
            self.hit(t, &boxes[b], now);
            if self.tracks[t].hits >= self.config.min_hits {
                self.confirm(t);
            }
            boxes[b].track = self.tracks[t].id;
            matched_tracks[t] = true;
            matched_boxes[b] = true;
        }
        // Tracks that end: tentative ones missed once, confirmed ones missed for too long.
        let max_age = self.config.max_age;
        let mut keep = matched_tracks.into_iter();
        self.tracks.retain(|track| {
            let matched = keep.next().unwrap_or(false);
            match track.state {
                State::Tentative if !matched => {
                    self.unconfirmed += 1;
                    false
                }
                State::Lost if now.saturating_sub(track.last_seen) > max_age => {
                    self.ended += 1;
                    false
                }
                _ => true,
            }
        });
        // New tracks from the high-score boxes nothing took.
        for b in high_boxes.into_iter().filter(|&b| !matched_boxes[b]) {
            if self.tracks.len() >= MAX_TRACKS {
                break;
            }
            self.tracks.push(Track {
                id: None,
                filter: BoxFilter::new(bbox(&boxes[b])),
                state: State::Tentative,
                hits: 1,
                last_seen: now,
                class_id: boxes[b].class_id,
                origin: boxes[b].origin,
                label: boxes[b].label.clone(),
                score: boxes[b].score,
            });
            if first || self.config.min_hits <= 1 {
                let t = self.tracks.len() - 1;
                self.confirm(t);
                boxes[b].track = self.tracks[t].id;
            }
        }
    }

    /// The camera's motion since the last frame, as the shift `[dx, dy]` in pixels that moves
    /// the tracks' predicted boxes onto the most boxes, when enough agree.
    ///
    /// Every pair of a track matched on the last frame and a high-score box of about its size
    /// and not too far (within [`SHIFT_RANGE`] times its size) votes for the displacement between
    /// them, in bins of [`SHIFT_BIN`] pixels. Static objects (parked cars, the ground) and objects
    /// moving as predicted all vote for the same bin, what the camera did; wrong pairs scatter.
    /// The densest 3x3 bins win if at least [`SHIFT_SUPPORT`] votes, and a quarter of the tracks,
    /// fall there; the shift is the median displacement of those votes. `None`: no agreement.
    pub fn camera_shift(&self, boxes: &[Detection]) -> Option<[f64; 2]> {
        let voters: Vec<[f64; 4]> = self
            .tracks
            .iter()
            .filter(|t| t.state == State::Tracked)
            .map(|t| t.filter.bbox())
            .collect();
        if voters.len() < SHIFT_SUPPORT {
            return None;
        }
        let centre = |b: [f64; 4]| [b[0] + b[2] / 2.0, b[1] + b[3] / 2.0];
        let candidates: Vec<[f64; 4]> = boxes
            .iter()
            .filter(|b| b.score >= self.config.high)
            .map(|b| b.bbox.map(f64::from))
            .collect();
        let mut votes: Vec<[f64; 2]> = Vec::new();
        let mut bins: HashMap<(i64, i64), u32> = HashMap::new();
        for p in &voters {
            let pc = centre(*p);
            let range = SHIFT_RANGE * p[2].max(p[3]);
            for d in &candidates {
                let (rw, rh) = (d[2] / p[2], d[3] / p[3]);
                if !(0.67..=1.5).contains(&rw) || !(0.67..=1.5).contains(&rh) {
                    continue;
                }
                let dc = centre(*d);
                let v = [dc[0] - pc[0], dc[1] - pc[1]];
                if v[0].abs() > range || v[1].abs() > range {
                    continue;
                }
                votes.push(v);
                let bin = (
                    (v[0] / SHIFT_BIN).round() as i64,
                    (v[1] / SHIFT_BIN).round() as i64,
                );
                *bins.entry(bin).or_default() += 1;
            }
        }
        let around = |(x, y): (i64, i64)| -> u32 {
            let mut n = 0;
            for dx in -1..=1 {
                for dy in -1..=1 {
                    n += bins.get(&(x + dx, y + dy)).copied().unwrap_or(0);
                }
            }
            n
        };
        // Ties go to the bin nearest no motion, then to the smaller coordinates: the same
        // answer whatever the map's order.
        let (peak, support) = bins
            .keys()
            .map(|&b| (b, around(b)))
            .max_by_key(|&((x, y), n)| (n, std::cmp::Reverse((x.abs() + y.abs(), x, y))))?;
        if (support as usize) < SHIFT_SUPPORT.max(voters.len() / 4) {
            return None;
        }
        let (cx, cy) = (peak.0 as f64 * SHIFT_BIN, peak.1 as f64 * SHIFT_BIN);
        let window = 1.5 * SHIFT_BIN;
        let (mut xs, mut ys): (Vec<f64>, Vec<f64>) = votes
            .iter()
            .filter(|v| (v[0] - cx).abs() <= window && (v[1] - cy).abs() <= window)
            .map(|v| (v[0], v[1]))
            .unzip();
        Some([median(&mut xs)?, median(&mut ys)?])
    }

    /// The pairs (track index, box index) of the best matching of `tracks` to `candidates` at
    /// IoU at least `min_iou` with the tracks' predicted boxes.
    fn match_boxes(
        &self,
        tracks: &[usize],
        candidates: &[usize],
        boxes: &[Detection],
        min_iou: f64,
    ) -> Vec<(usize, usize)> {
        if tracks.is_empty() || candidates.is_empty() {
            return Vec::new();
        }
        let predicted: Vec<[f64; 4]> = tracks
            .iter()
            .map(|&t| self.tracks[t].filter.bbox())
            .collect();
        let mut weight = Vec::with_capacity(tracks.len() * candidates.len());
        for p in &predicted {
            for &b in candidates {
                let v = iou(*p, boxes[b].bbox.map(f64::from));
                // Any pair at the threshold or above may match; better overlaps weigh more.
                weight.push(if v >= min_iou {
                    v - min_iou + 1e-9
                } else {
                    0.0
                });
            }
        }
        max_weight_matching(tracks.len(), candidates.len(), &weight)
            .into_iter()
            .map(|(r, c)| (tracks[r], candidates[c]))
            .collect()
    }

    /// Track `t` matched a box `bbox` on frame `now`.
    fn hit(&mut self, t: usize, b: &Detection, now: u64) {
        let track = &mut self.tracks[t];
        track.filter.update(b.bbox.map(f64::from));
        track.class_id = b.class_id;
        track.origin = b.origin;
        track.label = b.label.clone();
        track.score = b.score;
        track.hits += 1;
        track.last_seen = now;
        if track.state == State::Lost {
            track.state = State::Tracked;
        }
    }

    /// Confirm tentative track `t`: it gets the next id.
    fn confirm(&mut self, t: usize) {
        let track = &mut self.tracks[t];
        if track.id.is_none() {
            track.id = Some(self.next_id);
            self.next_id = self.next_id.wrapping_add(1).max(1);
            self.born += 1;
        }
        track.state = State::Tracked;
    }
}

#[cfg(test)]
mod tests;
