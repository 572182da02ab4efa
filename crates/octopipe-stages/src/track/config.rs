//! A tracker's settings ([`TrackConfig`], checked: [`TrackError`]) and the `track` stage's
//! properties declared once ([`TrackProps`]).

use octopipe_core::stage::Properties;
/// Settings of a tracker (the `track` stage's properties).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackConfig {
    /// Boxes scoring at least this are matched first, against every track, and may start tracks.
    pub high: f32,
    /// Boxes scoring from `low` up to `high` are matched only to the tracks the first round left;
    /// boxes below `low` are not tracked (their `track` is cleared).
    pub low: f32,
    /// Least IoU between a track's predicted box and a box for them to match (the second round
    /// asks for at least [`LOW_SCORE_IOU`](super::LOW_SCORE_IOU)).
    pub iou: f64,
    /// A track not matched for more than this many frames ends.
    pub max_age: u64,
    /// Matched frames in a row before a new track is confirmed and gets an id (1: at once). On a
    /// stream's first frame tracks are confirmed at once, as nothing came before.
    pub min_hits: u32,
    /// Estimate the camera's motion from the boxes and move every track by it before matching
    /// ([`Tracker::camera_shift`](super::Tracker::camera_shift)): a drone's camera that pans or
    /// jerks moves the whole scene by more than a small object's size between two frames.
    pub camera_motion: bool,
}

impl Default for TrackConfig {
    /// Each property's declared default ([`TrackProps`]).
    fn default() -> Self {
        TrackConfig::from(TrackProps::default())
    }
}

/// Settings a tracker cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TrackError {
    /// A score threshold or IoU outside `0..=1` (or not a number).
    #[error("track: {name} must be a number from 0 to 1, found {value}")]
    OutOfRange {
        /// The setting (`high`, `low`, `iou`).
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// `low` above `high`.
    #[error(
        "track: low={low} is above high={high}: low-score boxes are those from low up to high"
    )]
    LowAboveHigh {
        /// The low threshold.
        low: f32,
        /// The high threshold.
        high: f32,
    },
    /// `iou` of 0: every track would match every box.
    #[error("track: iou must be above 0 (a track and a box that do not overlap never match)")]
    ZeroIou,
    /// `min_hits` of 0.
    #[error("track: min-hits must be at least 1")]
    ZeroMinHits,
}

impl TrackConfig {
    /// Check the settings.
    pub fn validate(&self) -> Result<(), TrackError> {
        for (name, value) in [
            ("high", self.high as f64),
            ("low", self.low as f64),
            ("iou", self.iou),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(TrackError::OutOfRange { name, value });
            }
        }
        if self.low > self.high {
            return Err(TrackError::LowAboveHigh {
                low: self.low,
                high: self.high,
            });
        }
        if self.iou <= 0.0 {
            return Err(TrackError::ZeroIou);
        }
        if self.min_hits == 0 {
            return Err(TrackError::ZeroMinHits);
        }
        Ok(())
    }
}

/// The track stage's properties, declared once ([`TRACK`](super::TRACK)); [`TrackConfig`] is made
/// from them.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_the_declared_one() {
        let d = TrackConfig::default();
        assert_eq!((d.high, d.low, d.iou), (0.5, 0.1, 0.2));
        assert_eq!((d.max_age, d.min_hits), (30, 2));
        assert!(d.camera_motion);
    }
}
