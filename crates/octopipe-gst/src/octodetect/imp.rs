//! The `octodetect` element: the `detect` stage on each frame, its own or shared.

use octopipe_core::frame::Frame;
use octopipe_core::stage::Stage;
use octopipe_onnx::detect::DETECT;
use octopipe_stages::track::{DetectScore, Tracked};

use crate::common::shared::{attach, Handle};
use crate::common::stages::{alone, open_stages, settings, told, Driven};

/// The detect stage: the element's own, or one shared with other elements (`shared`).
pub(crate) enum Detector {
    Own(Driven<Frame>),
    Shared(Handle),
}

/// The detect stage, and its score threshold (for a tracker after the element).
pub(crate) struct DetectWork {
    detector: Detector,
    score: Option<f32>,
}

/// The detect stage with the element's properties; `own` when the element alone uses it (its
/// collector then closes at once: no other frame can join).
fn open(values: &Values, own: bool) -> Result<Box<dyn Stage<Frame, Frame>>, PluginError> {
    let detect = settings(&DETECT, values, &[])?;
    let [detect] = open_stages([detect], |ctx| {
        // With `interval`, the frames between are left to an `octotrack` downstream, which the
        // element cannot see from here: it is taken to be there (without one those frames
        // simply have no boxes).
        ctx.caps.insert(Tracked);
        if own {
            alone(ctx)
        }
    })?;
    detect.stage()
}

impl Work for DetectWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&DETECT];
    const LONG_NAME: &'static str = "octopipe detector";
    const DESCRIPTION: &'static str =
        "Detects objects with an ONNX detector (tiles, NMS, interval) and attaches them as ROI metadata";
    const PIXELS: bool = true;
    const READS_OBJECTS: bool = false;
    const WRITES_OBJECTS: bool = true;
    const SHAREABLE: bool = true;

    fn start(values: &Values, _element: &str, shared: Option<&str>) -> Result<Self, PluginError> {
        // What the stage tells a `track` after it in `octopipe run`: its score threshold.
        let score = told(settings(&DETECT, values, &[])?)
            .get::<DetectScore>()
            .map(|s| s.0);
        let detector = match shared {
            Some(name) => Detector::Shared(attach(name, values, || open(values, false))?),
            None => Detector::Own(Driven::new(open(values, true)?)),
        };
        Ok(DetectWork { detector, score })
    }

    fn shared(&self) -> Option<&Handle> {
        match &self.detector {
            Detector::Shared(handle) => Some(handle),
            Detector::Own(_) => None,
        }
    }

    fn detect_score(&self) -> Option<f32> {
        self.score
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        match &mut self.detector {
            Detector::Shared(handle) => handle.run(frame),
            Detector::Own(stage) => {
                let mut out = Vec::with_capacity(1);
                stage.run(frame, &mut out)?;
                out.pop()
                    .ok_or_else(|| PluginError::Buffer("the detect stage kept the frame".into()))
            }
        }
    }
}

octo_element!(OctoDetectImp, OctoDetect, DetectWork, "GstOctoDetect");
