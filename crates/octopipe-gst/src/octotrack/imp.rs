//! The `octotrack` element: the `track` stage on each frame.

use octopipe_core::frame::Frame;
use octopipe_stages::track::TRACK;

use crate::common::stages::{alone, open_stages, settings, Driven};

/// The track stage.
pub(crate) struct TrackWork {
    stage: Driven<Frame>,
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
        let [track] = open_stages([settings(&TRACK, values, &[])?], alone)?;
        let stage = Driven::new(track.stage()?);
        Ok(TrackWork { stage })
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        let mut out = Vec::with_capacity(1);
        self.stage.run(frame, &mut out)?;
        out.pop()
            .ok_or_else(|| PluginError::Buffer("the track stage kept the frame".into()))
    }
}

octo_element!(OctoTrackImp, OctoTrack, TrackWork, "GstOctoTrack");
