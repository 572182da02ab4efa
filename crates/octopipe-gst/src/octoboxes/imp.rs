//! The `octoboxes` element: the `boxes` stage on each frame.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use octopipe_core::frame::Frame;
use octopipe_stages::boxes::BOXES;

use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::stages::{alone, open_stages, settings, Driven};
use crate::common::{PluginError, Values, Work};

/// The boxes stage, and for DET replay the annotation files in name order.
pub(crate) struct BoxesWork {
    stage: Driven<Frame>,
    /// DET: the folder and each file's name without `.txt` (the frame's name, which the stage
    /// matches to `NAME.txt`), frame N taking the Nth.
    det: Option<(PathBuf, Vec<Arc<str>>)>,
}

impl BoxesWork {
    /// The names of the DET files of `folder` (`NAME.txt`), in name order.
    fn det_files(folder: &std::path::Path) -> Result<Vec<Arc<str>>, PluginError> {
        let entries = std::fs::read_dir(folder).map_err(|e| {
            PluginError::Property(format!(
                "location {}: not a folder of DET annotation files: {e}",
                folder.display()
            ))
        })?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".txt").map(str::to_string))
            .collect();
        names.sort();
        Ok(names.into_iter().map(Arc::from).collect())
    }
}

impl Work for BoxesWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&BOXES];
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = false;
    const WRITES_OBJECTS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        let element = settings(&BOXES, values, &[])?;
        let det = match (
            values.text("format").unwrap_or("det"),
            values.text("location"),
        ) {
            ("det", Some(location)) => {
                let folder = PathBuf::from(location);
                let files = Self::det_files(&folder)?;
                Some((folder, files))
            }
            _ => None,
        };
        let [boxes] = open_stages([element], alone)?;
        let stage = Driven::new(boxes.stage()?);
        Ok(BoxesWork { stage, det })
    }

    fn process(&mut self, mut frame: Frame) -> Result<Frame, PluginError> {
        if let Some((folder, files)) = &self.det {
            let name = usize::try_from(frame.seq)
                .ok()
                .and_then(|n| files.get(n))
                .ok_or_else(|| {
                    PluginError::Buffer(format!(
                        "frame {} has no annotation file: {} holds {} (frame N takes the Nth in name order)",
                        frame.seq,
                        folder.display(),
                        files.len()
                    ))
                })?;
            frame.uri = octopipe_core::frame::source_uri(name).into();
            frame.source = name.clone();
        }
        let mut out = Vec::with_capacity(1);
        self.stage.run(frame, &mut out)?;
        out.pop()
            .ok_or_else(|| PluginError::Buffer("the boxes stage kept the frame".into()))
    }
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoBoxes",
        gst::DebugColorFlags::empty(),
        Some("octopipe annotation boxes"),
    )
});

/// The `octoboxes` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoBoxesImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<BoxesWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoBoxesImp {
    type Work = BoxesWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<BoxesWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoBoxesImp {
    const NAME: &'static str = "GstOctoBoxes";
    type Type = super::OctoBoxes;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoBoxesImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoBoxesImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoBoxesImp {}

impl ElementImpl for OctoBoxesImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe annotation boxes",
                "Attaches boxes (VisDrone DET/MOT annotations or the synthetic generator) as ROI metadata",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<BoxesWork>);
        TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for OctoBoxesImp {
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
