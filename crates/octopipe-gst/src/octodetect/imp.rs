//! The `octodetect` element: the `detect` stage on each frame, its own or shared.

use std::sync::{LazyLock, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::base_transform::GenerateOutputSuccess;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use octopipe_core::frame::Frame;
use octopipe_core::stage::Stage;
use octopipe_onnx::detect::DETECT;
use octopipe_stages::track::{DetectScore, Tracked};

use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::shared::{attach, Handle};
use crate::common::stages::{alone, open_stages, settings, told, Driven};
use crate::common::{PluginError, Values, Work};

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
            Some(name) => Detector::Shared(attach(name, "detect", values, || open(values, false))?),
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

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoDetect",
        gst::DebugColorFlags::empty(),
        Some("octopipe detector"),
    )
});

/// The `octodetect` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoDetectImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<DetectWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoDetectImp {
    type Work = DetectWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<DetectWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoDetectImp {
    const NAME: &'static str = "GstOctoDetect";
    type Type = super::OctoDetect;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoDetectImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoDetectImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoDetectImp {}

impl ElementImpl for OctoDetectImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe detector",
                "Detects objects with an ONNX detector (tiles, NMS, interval) and attaches them as ROI metadata",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<DetectWork>);
        TEMPLATES.as_ref()
    }

    fn set_context(&self, context: &gst::Context) {
        self.note_context(context);
        self.parent_set_context(context)
    }
}

impl BaseTransformImpl for OctoDetectImp {
    const MODE: BaseTransformMode = BaseTransformMode::AlwaysInPlace;
    const PASSTHROUGH_ON_SAME_CAPS: bool = false;
    const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

    fn start(&self) -> Result<(), gst::ErrorMessage> {
        self.start_work()
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        self.stop_work()
    }

    fn query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
        self.answer_query(direction, query)
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

    fn submit_input_buffer(
        &self,
        is_discont: bool,
        buf: gst::Buffer,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        self.submit(is_discont, buf)
    }

    fn generate_output(&self) -> Result<GenerateOutputSuccess, gst::FlowError> {
        self.generate()
    }
}
