//! The `octotrack` element: the `track` stage on each frame.

use octopipe_core::frame::Frame;
use octopipe_core::stage::Caps;
use octopipe_stages::track::{DetectScore, TRACK};

use crate::common::stages::{alone, open_stages_after, settings, Driven};

/// The track stage, opened at the first frame: it follows the score threshold of the detector
/// before it, which the frame meta tells (as `track` follows `detect` in `octopipe run`).
pub(crate) struct TrackWork {
    values: Values,
    stage: Option<Driven<Frame>>,
}

impl Work for TrackWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&TRACK];
    const LONG_NAME: &'static str = "octopipe tracker";
    const DESCRIPTION: &'static str =
        "Follows the ROI metadata's boxes from frame to frame (ByteTrack) and writes their track ids";
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = true;
    const WRITES_OBJECTS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        // The settings are checked now, so a refused value fails the start.
        settings(&TRACK, values, &[])?;
        Ok(TrackWork {
            values: values.clone(),
            stage: None,
        })
    }

    fn follow_detector(&mut self, score: Option<f32>) -> Result<(), PluginError> {
        if self.stage.is_some() {
            return Ok(());
        }
        // What a detector before the tracker tells it in `octopipe run`'s caps.
        let mut caps = Caps::default();
        if let Some(score) = score {
            caps.insert(DetectScore(score));
        }
        let [track] = open_stages_after(&mut caps, [settings(&TRACK, &self.values, &[])?], alone)?;
        self.stage = Some(Driven::new(track.stage()?));
        Ok(())
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        if self.stage.is_none() {
            self.follow_detector(None)?;
        }
        let Some(stage) = self.stage.as_mut() else {
            return Err(PluginError::Buffer("the track stage is not open".into()));
        };
        let mut out = Vec::with_capacity(1);
        stage.run(frame, &mut out)?;
        out.pop()
            .ok_or_else(|| PluginError::Buffer("the track stage kept the frame".into()))
    }
}

octo_element!(OctoTrackImp, OctoTrack, TrackWork, "GstOctoTrack");
