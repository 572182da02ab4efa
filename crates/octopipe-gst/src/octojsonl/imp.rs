//! The `octojsonl` element: the `jsonl` sink stage on each frame, as a batch of one frame.

use std::sync::{LazyLock, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use octopipe_core::crops::{BatchPool, CropBatch};
use octopipe_core::frame::Frame;
use octopipe_core::stage::Stage;
use octopipe_stages::sink::JSONL;

use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::stages::{alone, open_stages, settings};
use crate::common::{PluginError, Values, Work};

/// The jsonl stage, and the empty batches a frame travels in.
pub(crate) struct JsonlWork {
    stage: Box<dyn Stage<CropBatch, CropBatch>>,
    pool: BatchPool,
}

impl Work for JsonlWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&JSONL];
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = true;
    const WRITES_OBJECTS: bool = false;
    const REPORTS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        let [jsonl] = open_stages([settings(&JSONL, values, &[])?], alone)?;
        let stage = jsonl.stage::<CropBatch, CropBatch>()?;
        Ok(JsonlWork {
            stage,
            pool: BatchPool::new(),
        })
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        let mut batch = self.pool.batch();
        batch.frames.push(frame);
        let mut out = Vec::with_capacity(1);
        self.stage.process(batch, &mut out)?;
        out.pop()
            .and_then(|mut b| b.frames.pop())
            .ok_or_else(|| PluginError::Buffer("the jsonl stage kept the frame".into()))
    }

    fn eos(&mut self) -> Result<(), PluginError> {
        self.stage.finish(&mut Vec::new())?;
        Ok(())
    }
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoJsonl",
        gst::DebugColorFlags::empty(),
        Some("octopipe JSON Lines writer"),
    )
});

/// The `octojsonl` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoJsonlImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<JsonlWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoJsonlImp {
    type Work = JsonlWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<JsonlWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoJsonlImp {
    const NAME: &'static str = "GstOctoJsonl";
    type Type = super::OctoJsonl;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoJsonlImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoJsonlImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoJsonlImp {}

impl ElementImpl for OctoJsonlImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe JSON Lines writer",
                "Writes one JSON line per object of the ROI metadata (octopipe's jsonl schema) to a file",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<JsonlWork>);
        TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for OctoJsonlImp {
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
