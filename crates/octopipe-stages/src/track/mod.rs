//! Track stage: follows each stream's boxes from frame to frame and writes their track ids.
//!
//! ```text
//! images location=${root}/images framerate=30 ! boxes format=det location=${root}/annotations
//!   ! track high=0.5 low=0.1 iou=0.2 max-age=30 min-hits=2
//!   ! classify model=${model} reinfer-interval=10 ! jsonl location=objects.jsonl
//! ```
//!
//! The tracker is ByteTrack's: each track's box moves by a constant-velocity Kalman filter on its
//! centre and size ([`BoxFilter`]). On each frame the camera's motion is first estimated from the
//! boxes and every track moved by it (`camera-motion`, [`Tracker::camera_shift`]: drone video pans
//! by more than a small object's size between frames). Then boxes scoring at least `high` are
//! matched against every confirmed track (those matched on the last frame and those coasting),
//! boxes scoring from `low` up to `high` against the tracks matched on the last frame that the
//! first round left (at IoU at least [`LOW_SCORE_IOU`]), and the tentative tracks against the
//! high-score boxes left. Matching is optimal, not greedy: the pairs at IoU at least `iou` whose
//! summed overlap above it is largest ([`max_weight_matching`], the Hungarian algorithm on each
//! connected block of overlapping pairs). A high-score box nothing took starts a tentative track,
//! confirmed (and given an id) after `min-hits` matched frames in a row, at once on a stream's
//! first frame; a tentative track missed once is dropped; a confirmed track unmatched for more
//! than `max-age` frames ends.
//!
//! Every box's `track` is written, overwriting what the box source said: the id of its confirmed
//! track, or none (a box of a tentative track, or scoring under `low`). Ids count from 1 in
//! each stream: the stage keeps one tracker per stream ([`crate::frame::Frame::stream`]), so
//! streams that share the stage never mix, and `(stream, track)` names a track in the output.
//! Frames come in order per stream; a gap in frame numbers (frames the decoder lost) is
//! predicted over frame by frame, so a track coasts across it. At the end of a run each stream
//! gets a report line: `track: stream 0: 57 tracks born, 49 ended, 8 open at the end`.

mod assign;
mod kalman;
mod tracker;

use std::collections::BTreeMap;

use crate::budget::Tally;
use crate::description::DescribeError;
use crate::frame::Frame;
use crate::stage::{Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl};
use crate::Error;

pub use assign::{iou, iou_u32, max_weight_matching};
pub use kalman::BoxFilter;
pub use tracker::{
    TrackConfig, TrackError, Tracker, LOW_SCORE_IOU, MAX_COAST, SHIFT_BIN, SHIFT_RANGE,
    SHIFT_SUPPORT,
};

/// In the caps: the score threshold of the detector before the stage being configured, on its
/// branch (a detector tells it with `Caps::insert_for_branch`, so it is forgotten where the next
/// branch starts). A `track` after it follows it unless its `high` is given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectScore(pub f32);

/// In the caps: a `track` stage follows the boxes (told when it opens), so a detector before it
/// may leave frames to the tracker's predictions (`detect interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracked;

/// One tracker per stream, made as the stream's first frame comes.
#[derive(Debug, Clone)]
pub struct Tracks {
    config: TrackConfig,
    streams: BTreeMap<u32, Tracker>,
}

impl Tracks {
    /// Trackers with `config` (checked).
    pub fn new(config: TrackConfig) -> Result<Self, TrackError> {
        config.validate()?;
        Ok(Tracks {
            config,
            streams: BTreeMap::new(),
        })
    }

    /// Track `frame`'s boxes with its stream's tracker; a frame the detector skipped
    /// ([`Frame::predicted`]) gets the tracks' predicted boxes instead.
    pub fn update(&mut self, frame: &mut Frame) {
        let config = self.config;
        let tracker = self
            .streams
            .entry(frame.stream)
            .or_insert_with(|| Tracker::checked(config));
        if frame.predicted {
            frame.detections = tracker.predict(frame.seq, frame.layout.width, frame.layout.height);
        } else {
            tracker.update(frame.seq, &mut frame.detections);
        }
    }

    /// The tracker of `stream`, once a frame of it came.
    pub fn stream(&self, stream: u32) -> Option<&Tracker> {
        self.streams.get(&stream)
    }

    /// The report's sections: per stream, tracks born, ended and open, frames out of order;
    /// `high_from` says where the `high` threshold came from.
    pub fn sections(&self, high_from: HighFrom) -> Vec<TrackSection> {
        self.streams
            .iter()
            .map(|(stream, t)| TrackSection {
                stream: *stream,
                born: t.born(),
                ended: t.ended(),
                open: t.open(),
                unconfirmed: t.unconfirmed(),
                out_of_order: t.out_of_order(),
                min_hits: self.config.min_hits,
                high: self.config.high,
                low: self.config.low,
                high_from,
            })
            .collect()
    }

    /// Report lines: per stream, tracks born, ended and open; frames out of order if any.
    pub fn report_lines(&self) -> Vec<String> {
        let sections = self.sections(HighFrom::Track);
        sections.iter().map(|s| s.to_string()).collect()
    }
}

/// Where the `track` stage's `high` threshold came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HighFrom {
    /// Given: `track high=...`.
    Track,
    /// The detector's `score` before it on its branch (high left out).
    DetectScore,
    /// `high`'s declared default: no detector before it, `high` left out.
    Default,
}

/// The report's section of one stream's tracks (JSON: `sections.track`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TrackSection {
    /// The stream.
    pub stream: u32,
    /// Tracks confirmed (given an id).
    pub born: u64,
    /// Tracks that ended (unmatched for more than `max-age` frames).
    pub ended: u64,
    /// Tracks still open at the end of the run.
    pub open: u64,
    /// New tracks dropped before `min-hits` matched frames.
    pub unconfirmed: u64,
    /// Frames that came out of order (each taken as the next frame).
    pub out_of_order: u64,
    /// The `min-hits` setting.
    pub min_hits: u32,
    /// The score from which boxes start and first continue tracks.
    pub high: f32,
    /// The score under which boxes get no track.
    pub low: f32,
    /// Where `high` came from.
    pub high_from: HighFrom,
}

impl crate::budget::SectionKind for TrackSection {
    const KIND: &'static str = "track";
}

impl std::fmt::Display for TrackSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "track: stream {}: {} tracks born, {} ended, {} open at the end",
            self.stream, self.born, self.ended, self.open
        )?;
        if self.unconfirmed > 0 {
            write!(
                f,
                " ({} new tracks dropped before min-hits={})",
                self.unconfirmed, self.min_hits
            )?;
        }
        if self.high_from == HighFrom::DetectScore {
            write!(f, "; high={} from the detector's score", self.high)?;
        }
        if self.out_of_order > 0 {
            write!(
                f,
                "\ntrack: stream {}: {} frames came out of order (each taken as the next frame)",
                self.stream, self.out_of_order
            )?;
        }
        Ok(())
    }
}

/// The track stage at run time: the trackers and where the end-of-run sections go.
struct TrackStage {
    tracks: Tracks,
    high_from: HighFrom,
    tally: Tally,
}

impl Stage<Frame, Frame> for TrackStage {
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.tracks.update(&mut frame);
        out.push(frame);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        let sections = self.tracks.sections(self.high_from);
        self.tally
            .with(|t| sections.iter().for_each(|s| t.add_section(s)));
        Ok(())
    }
}

/// The track stage's settings: a [`TrackConfig`] checked when the description was built, and
/// which thresholds were given (those left out follow the detector before it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TrackSettings {
    config: TrackConfig,
    high_given: bool,
    low_given: bool,
    high_from: HighFrom,
}

impl TrackSettings {
    /// Follow a detector whose boxes score at least `score`: `high` (when not given) becomes
    /// `score`, so that every box it gives may start a track, but not under a given `low`;
    /// `low` (when not given) is lowered to `high` if above it.
    pub(crate) fn follow_detector(&mut self, score: f32) {
        if self.high_given {
            return;
        }
        let floor = if self.low_given { self.config.low } else { 0.0 };
        self.config.high = score.clamp(floor, 1.0);
        if !self.low_given {
            self.config.low = self.config.low.min(self.config.high);
        }
        self.high_from = HighFrom::DetectScore;
    }
}

impl Element for TrackSettings {
    fn configure(&mut self, caps: &mut crate::stage::Caps) {
        if let Some(&DetectScore(score)) = caps.get::<DetectScore>() {
            self.follow_detector(score);
        }
    }

    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        // follow_detector keeps low <= high: the settings stay as checked.
        // A detector before it may skip frames for the tracker to fill (`detect interval`).
        ctx.caps.insert(Tracked);
        let tracks = Tracks {
            config: self.config,
            streams: BTreeMap::new(),
        };
        Ok(Running::stage(Box::new(TrackStage {
            tracks,
            high_from: self.high_from,
            tally: ctx.tally.clone(),
        })))
    }
}

/// The track stage's properties, declared once ([`TRACK`]); [`TrackConfig`] is made from them.
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct TrackProps {
    /// boxes scoring at least this are matched first, against every track, and may start tracks
    /// (left out after a detect stage: the detector's score)
    #[prop(default = 0.5, range = 0.0..=1.0)]
    pub high: f32,
    /// boxes scoring from low up to high are matched only to tracks the first round left; boxes
    /// under low get no track
    #[prop(default = 0.1, range = 0.0..=1.0)]
    pub low: f32,
    /// least IoU of a box with a track's predicted box for them to match (low-score boxes: at
    /// least 0.5)
    #[prop(default = 0.2, range = 0.0..=1.0, positive)]
    pub iou: f64,
    /// a track unmatched for more than this many frames ends
    #[prop(default = 30, range = 0..=100_000)]
    pub max_age: u64,
    /// matched frames in a row before a new track is confirmed and gets an id (1: at once; a
    /// stream's first frame: at once)
    #[prop(default = 2, range = 1..=1000)]
    pub min_hits: u32,
    /// estimate the camera's shift between frames from the boxes and move the tracks by it
    /// before matching
    #[prop(default = true)]
    pub camera_motion: bool,
}

impl From<TrackProps> for TrackConfig {
    fn from(t: TrackProps) -> Self {
        TrackConfig {
            high: t.high,
            low: t.low,
            iou: t.iou,
            max_age: t.max_age,
            min_hits: t.min_hits,
            camera_motion: t.camera_motion,
        }
    }
}

/// `track high=0.5 low=0.1 iou=0.2 max-age=30 min-hits=2`: ByteTrack per stream.
pub const TRACK: StageDecl = StageDecl {
    name: "track",
    role: Role::Track,
    doc: "follow boxes from frame to frame (ByteTrack: Kalman + two-round IoU matching) and write their track ids, per stream",
    props: TrackProps::PROPS,
    needs: &[Role::Boxes],
    provides: &[],
    make: track_config,
};

fn track_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let config = TrackConfig::from(TrackProps::from_props(p)?);
    if let Err(e) = config.validate() {
        let key = match e {
            TrackError::LowAboveHigh { .. } if p.given("low").is_some() => "low",
            TrackError::LowAboveHigh { .. } => "high",
            TrackError::OutOfRange { name, .. } => name,
            TrackError::ZeroIou => "iou",
            TrackError::ZeroMinHits => "min-hits",
        };
        return Err(p.error(key, e.to_string()));
    }
    let high_given = p.given("high").is_some();
    Ok(Box::new(TrackSettings {
        config,
        high_given,
        low_given: p.given("low").is_some(),
        high_from: match high_given {
            true => HighFrom::Track,
            false => HighFrom::Default,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Colorimetry, Detection, FrameLayout, PixelFormat, PooledBuf};

    #[test]
    fn the_default_config_is_the_declared_one() {
        let d = TrackConfig::default();
        assert_eq!((d.high, d.low, d.iou), (0.5, 0.1, 0.2));
        assert_eq!((d.max_age, d.min_hits), (30, 2));
        assert!(d.camera_motion);
    }

    fn frame(stream: u32, seq: u64, boxes: &[[u32; 4]]) -> Frame {
        let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
        let pixels = PooledBuf::unpooled(vec![0; layout.size()]);
        let mut f = Frame::new(stream, seq, "test", layout, Colorimetry::default(), pixels);
        f.detections = boxes.iter().map(|b| Detection::new(*b)).collect();
        f
    }

    #[test]
    fn streams_with_the_same_boxes_get_their_own_tracks() {
        let mut tracks = Tracks::new(TrackConfig {
            min_hits: 1,
            ..Default::default()
        })
        .unwrap();
        let boxes = |seq: u64| {
            [
                [10 + 5 * seq as u32, 10, 40, 40],
                [300, 200 + 3 * seq as u32, 30, 50],
            ]
        };
        // Interleaved as a shared batch stage sees them; stream 1 starts two frames late.
        for seq in 0..10u64 {
            for (stream, s) in [(0, Some(seq)), (1, seq.checked_sub(2))] {
                let Some(s) = s else { continue };
                let mut f = frame(stream, s, &boxes(s));
                tracks.update(&mut f);
                let ids: Vec<_> = f.detections.iter().map(|d| d.track).collect();
                assert_eq!(ids, [Some(1), Some(2)], "stream {stream} frame {s}");
            }
        }
        assert_eq!(
            tracks.report_lines(),
            [
                "track: stream 0: 2 tracks born, 0 ended, 2 open at the end",
                "track: stream 1: 2 tracks born, 0 ended, 2 open at the end"
            ]
        );
    }

    /// Typed sections (the budget's report, shown with the tracker's): their lines end the text report, their fields stand under
    /// `sections.KIND` in the JSON one, with the schema's version.
    #[test]
    fn sections_are_typed_in_json_and_lines_in_text() {
        let mut b = crate::budget::Budget::new(crate::budget::DEFAULT_BUDGET, Vec::new());
        let sections = Tracks::new(Default::default())
            .unwrap()
            .sections(HighFrom::Default);
        assert!(sections.is_empty());
        let track = TrackSection {
            stream: 0,
            born: 5,
            ended: 2,
            open: 3,
            unconfirmed: 0,
            out_of_order: 0,
            min_hits: 2,
            high: 0.3,
            low: 0.1,
            high_from: HighFrom::DetectScore,
        };
        b.add_section(&track);
        b.add_line("plot: written".into());
        let r = b.finish();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(
            lines,
            [
                "track: stream 0: 5 tracks born, 2 ended, 3 open at the end; high=0.3 from the detector's score",
                "plot: written"
            ]
        );
        assert!(r.to_string().ends_with(&lines.join("\n")));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["version"], crate::budget::REPORT_VERSION);
        assert_eq!(json["sections"]["track"][0]["born"], 5);
        assert_eq!(json["sections"]["track"][0]["high_from"], "detect-score");
        assert_eq!(json["extra"], serde_json::json!(["plot: written"]));
        assert_eq!(r.sections::<TrackSection>(), [track]);
    }
}
