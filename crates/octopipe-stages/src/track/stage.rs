//! The `track` stage: what it tells the stages around it in the caps ([`DetectScore`],
//! [`Tracked`]), its settings as the description gave them, its declaration ([`TRACK`]) and the
//! stage at run time.

use std::collections::BTreeMap;

use super::config::{TrackConfig, TrackError, TrackProps};
use super::tracks::{HighFrom, Tracks};
use octopipe_core::budget::Tally;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{
    Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl,
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
    fn configure(&mut self, caps: &mut octopipe_core::stage::Caps) {
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
