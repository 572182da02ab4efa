//! The `octotrack` element: the `track` stage on each frame.

use std::sync::{LazyLock, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use octopipe_core::frame::Frame;
use octopipe_core::stage::Caps;
use octopipe_stages::track::{DetectScore, TRACK};

use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::stages::{alone, open_stages_after, settings, Driven};
use crate::common::{PluginError, Values, Work};

/// The track stage, opened at the first frame: it follows the score threshold of the detector
/// before it, which the frame meta tells (as `track` follows `detect` in `octopipe run`).
pub(crate) struct TrackWork {
    values: Values,
    stage: Option<Driven<Frame>>,
}

impl Work for TrackWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&TRACK];
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

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoTrack",
        gst::DebugColorFlags::empty(),
        Some("octopipe tracker"),
    )
});

/// The `octotrack` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoTrackImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<TrackWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoTrackImp {
    type Work = TrackWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<TrackWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoTrackImp {
    const NAME: &'static str = "GstOctoTrack";
    type Type = super::OctoTrack;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoTrackImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoTrackImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoTrackImp {}

impl ElementImpl for OctoTrackImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe tracker",
                "Follows the ROI metadata's boxes from frame to frame (ByteTrack) and writes their track ids",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<TrackWork>);
        TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for OctoTrackImp {
    const MODE: BaseTransformMode = BaseTransformMode::AlwaysInPlace;
    const PASSTHROUGH_ON_SAME_CAPS: bool = false;
    const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

    fn start(&self) -> Result<(), gst::ErrorMessage> {
        self.start_work()
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        self.stop_work()
    }

    fn set_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
        self.take_caps(incaps, outcaps)
    }

    fn sink_event(&self, event: gst::Event) -> bool {
        self.take_event(event)
    }

    fn transform_ip(&self, buf: &mut gst::BufferRef) -> Result<gst::FlowSuccess, gst::FlowError> {
        self.work_in_place(buf)
    }
}
