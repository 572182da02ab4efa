//! The `octoclassify` element: the `batch`, `preprocess` and `classify` stages on each frame,
//! the element's own or shared with other elements (`shared`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::base_transform::GenerateOutputSuccess;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use octopipe_core::crops::CropBatch;
use octopipe_core::frame::{Frame, Part};
use octopipe_core::stage::Stage;
use octopipe_core::Error;
use octopipe_onnx::classify::CLASSIFY;
use octopipe_stages::batch::BATCH;
use octopipe_stages::preprocess::PREPROCESS;

use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::shared::{attach, Handle};
use crate::common::stages::{alone, open_stages, settings, Driven};
use crate::common::{PluginError, Values, Work};

/// The three stages as one that takes frames and gives them back classified, whole (a frame of
/// more boxes than a batch holds travels in parts, put together again here).
struct Chain {
    batch: Box<dyn Stage<Frame, CropBatch>>,
    preprocess: Box<dyn Stage<CropBatch, CropBatch>>,
    classify: Box<dyn Stage<CropBatch, CropBatch>>,
    /// Parts of a frame not yet all back, by stream and frame.
    parts: HashMap<(u32, u64), Vec<Frame>>,
}

impl Chain {
    /// The stages with the element's properties. `own`: one frame a batch (the element alone
    /// uses it, and hands each buffer on before the next comes); else batches of the frames of
    /// every element sharing it, closed by the batch stage's rule.
    fn open(values: &Values, own: bool) -> Result<Chain, PluginError> {
        let max_crops = values.text("max-batch").unwrap_or("256").to_string();
        let mut fixed = vec![("max-crops", max_crops.as_str())];
        if own {
            fixed.push(("max-frames", "1"));
        }
        let batch = settings(&BATCH, &Values::default(), &fixed)?;
        let preprocess = settings(&PREPROCESS, values, &[])?;
        let classify = settings(&CLASSIFY, values, &[])?;
        // One chain, opened sink to source as the runner opens one: the model settles the crop
        // size before the stages that make the crops open.
        let [batch, preprocess, classify] = open_stages([batch, preprocess, classify], |ctx| {
            if own {
                alone(ctx)
            }
        })?;
        Ok(Chain {
            batch: batch.stage()?,
            preprocess: preprocess.stage()?,
            classify: classify.stage()?,
            parts: HashMap::new(),
        })
    }

    /// Preprocess and classify `batches`, handing on each frame once all its parts are back.
    fn classify(&mut self, batches: Vec<CropBatch>, out: &mut Vec<Frame>) -> Result<(), Error> {
        for batch in batches {
            let mut preprocessed = Vec::with_capacity(1);
            self.preprocess.process(batch, &mut preprocessed)?;
            let mut done = Vec::with_capacity(1);
            for batch in preprocessed {
                self.classify.process(batch, &mut done)?;
            }
            for frame in done.iter_mut().flat_map(|b| std::mem::take(&mut b.frames)) {
                if frame.part.count <= 1 {
                    out.push(frame);
                    continue;
                }
                let (key, count) = ((frame.stream, frame.seq), frame.part.count);
                let held = self.parts.entry(key).or_default();
                held.push(frame);
                if held.len() as u32 >= count {
                    let parts = self.parts.remove(&key).unwrap_or_default();
                    out.extend(whole(parts));
                }
            }
        }
        Ok(())
    }
}

/// A frame back whole from its parts.
fn whole(mut parts: Vec<Frame>) -> Option<Frame> {
    parts.sort_by_key(|f| f.part.index);
    let mut parts = parts.into_iter();
    let mut frame = parts.next()?;
    for part in parts {
        let first = frame.detections.len() as u32;
        frame.detections.extend(part.detections);
        frame.skipped.extend(part.skipped);
        frame
            .non_finite
            .extend(part.non_finite.iter().map(|i| i + first));
        frame.reused.extend(part.reused.iter().map(|i| i + first));
    }
    frame.part = Part::WHOLE;
    Some(frame)
}

impl Stage<Frame, Frame> for Chain {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        let mut batches = Vec::new();
        self.batch.process(frame, &mut batches)?;
        self.classify(batches, out)
    }
    fn deadline(&self) -> Option<Instant> {
        self.batch.deadline()
    }
    fn timeout(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        let mut batches = Vec::new();
        self.batch.timeout(&mut batches)?;
        self.classify(batches, out)
    }
    fn finish(&mut self, out: &mut Vec<Frame>) -> Result<(), Error> {
        let mut batches = Vec::new();
        self.batch.finish(&mut batches)?;
        self.classify(batches, out)
    }
}

/// How the element runs its chain.
enum Run {
    Own(Driven<Frame>),
    Shared(Handle),
}

/// The chain, and the names the objects' structures carry.
pub(crate) struct ClassifyWork {
    run: Run,
    /// The element's name: the name of its structure on each object.
    name: String,
    /// The model file's name.
    model: String,
}

impl Work for ClassifyWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&CLASSIFY, &PREPROCESS];
    const PIXELS: bool = true;
    const READS_OBJECTS: bool = true;
    const WRITES_OBJECTS: bool = true;
    const SHAREABLE: bool = true;

    fn start(values: &Values, element: &str, shared: Option<&str>) -> Result<Self, PluginError> {
        let run = match shared {
            Some(name) => Run::Shared(attach(name, "classify", values, || {
                Ok(Box::new(Chain::open(values, false)?) as Box<dyn Stage<Frame, Frame>>)
            })?),
            None => Run::Own(Driven::new(Box::new(Chain::open(values, true)?))),
        };
        let model = values.text("model").unwrap_or_default();
        let model = std::path::Path::new(model)
            .file_name()
            .map_or_else(|| model.to_string(), |n| n.to_string_lossy().into_owned());
        // A structure's name is a GstStructure name: letters, digits and `-_/+:.` only.
        let name = element
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || "-_/+:.".contains(c) {
                    true => c,
                    false => '_',
                },
            )
            .collect();
        Ok(ClassifyWork { run, name, model })
    }

    fn shared(&self) -> Option<&Handle> {
        match &self.run {
            Run::Shared(handle) => Some(handle),
            Run::Own(_) => None,
        }
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        match &mut self.run {
            Run::Shared(handle) => handle.run(frame),
            Run::Own(chain) => {
                let mut out = Vec::with_capacity(1);
                chain.run(frame, &mut out)?;
                out.pop()
                    .ok_or_else(|| PluginError::Buffer("the batch stage kept the frame".into()))
            }
        }
    }

    fn classifier(&self) -> Option<(&str, &str)> {
        Some((&self.name, &self.model))
    }
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoClassify",
        gst::DebugColorFlags::empty(),
        Some("octopipe crop classifier"),
    )
});

/// The `octoclassify` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoClassifyImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<ClassifyWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoClassifyImp {
    type Work = ClassifyWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<ClassifyWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoClassifyImp {
    const NAME: &'static str = "GstOctoClassify";
    type Type = super::OctoClassify;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoClassifyImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoClassifyImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoClassifyImp {}

impl ElementImpl for OctoClassifyImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe crop classifier",
                "Crops every ROI of the frame, resizes and normalizes it, and labels it with an ONNX classifier",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<ClassifyWork>);
        TEMPLATES.as_ref()
    }

    fn set_context(&self, context: &gst::Context) {
        self.note_context(context);
        self.parent_set_context(context)
    }
}

impl BaseTransformImpl for OctoClassifyImp {
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
