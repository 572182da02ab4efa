//! The `octooverlay` element: the objects drawn on each frame in place.

use std::sync::{Arc, LazyLock, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::subclass::prelude::*;
use gstreamer_base as gst_base;
use gstreamer_base::subclass::prelude::*;
use gstreamer_base::subclass::BaseTransformMode;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::VideoFrameExt;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{PropSpec, PropType};
use octopipe_observe::{draw_objects, FrameCanvas, RecordingCanvas, Style};
use octopipe_sources::plugin::SharedCuda;

use super::gpu::{GpuOverlay, Nv12Target};
use crate::common::element::{self, OctoElement, State, Streaming};
use crate::common::flow::OctoFlow;
use crate::common::own::Settings;
use crate::common::{cuda, PluginError, Values, Work};

/// The memory type of GStreamer's CUDA memory (`GST_CUDA_MEMORY_TYPE_NAME`).
const CUDA_MEMORY_TYPE: &str = "gst.cuda.memory";

/// The overlay's properties (it runs no stage: these are its own).
const PROPS: &[PropSpec] = &[
    PropSpec::new(
        "device",
        PropType::Int { min: 0, max: 255 },
        "0",
        "the GPU whose frames in CUDA memory are drawn on (its primary context is given to the decoder upstream)",
    ),
    PropSpec::new(
        "labels",
        PropType::Bool,
        "true",
        "draw each object's label (the classifier's, else the box source's class)",
    ),
    PropSpec::new(
        "scores",
        PropType::Bool,
        "true",
        "draw each object's score (the classifier's, else the box source's)",
    ),
    PropSpec::new("tracks", PropType::Bool, "true", "draw each tracked object's id (#id)"),
    PropSpec::new(
        "line-width",
        PropType::Int { min: 0, max: 64 },
        "0",
        "box line width in pixels (0: by the frame's width, 2 under 1600 pixels, else 3)",
    ),
    PropSpec::new(
        "font-scale",
        PropType::Int { min: 0, max: 16 },
        "0",
        "caption size, 8 pixels a glyph at 1 (0: by the frame's width, 1 under 1600 pixels, else 2)",
    ),
];

/// What is drawn, from the properties; for frames in CUDA memory, the kernel that draws them
/// (made at the first such frame, in the context shared with the decoder).
pub(crate) struct OverlayWork {
    style: Style,
    /// The GPU of frames in CUDA memory (`device`).
    device: usize,
    gpu: Mutex<Option<(Arc<SharedCuda>, GpuOverlay)>>,
}

impl Work for OverlayWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[];
    const OWN_PROPS: &'static [PropSpec] = PROPS;
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = true;
    const WRITES_OBJECTS: bool = false;
    const DRAWS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        // The GParamSpecs bound every value: what is set parses.
        let flag = |name: &str| values.text(name) != Some("false");
        let number = |name: &str| values.text(name).and_then(|t| t.parse().ok()).unwrap_or(0);
        Ok(OverlayWork {
            style: Style {
                labels: flag("labels"),
                scores: flag("scores"),
                tracks: flag("tracks"),
                line_width: number("line-width"),
                font_scale: number("font-scale"),
            },
            device: cuda::device(values)?,
            gpu: Mutex::new(None),
        })
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        Ok(frame)
    }

    fn draw(
        &self,
        frame: &Frame,
        buffer: &mut gst::BufferRef,
        info: &gst_video::VideoInfo,
    ) -> Result<(), PluginError> {
        if frame.detections.is_empty() {
            return Ok(());
        }
        let on_device = buffer.n_memory() > 0 && buffer.peek_memory(0).is_type(CUDA_MEMORY_TYPE);
        if on_device {
            return self.draw_on_device(frame, buffer, info);
        }
        let format = octopipe_sources::plugin::pixel_format(info.format()).ok_or_else(|| {
            PluginError::Buffer(format!(
                "format {} is not one octooverlay draws on",
                info.format()
            ))
        })?;
        let mut video = gst_video::VideoFrameRef::from_buffer_ref_writable(buffer, info)
            .map_err(|_| PluginError::Buffer("the frame cannot be mapped for writing".into()))?;
        let mut strides = [0usize; 3];
        for (s, v) in strides.iter_mut().zip(video.plane_stride()) {
            *s = usize::try_from(*v).unwrap_or(0);
        }
        let [a, b, c, _] = video.planes_data_mut();
        let size = (info.width(), info.height());
        let mut canvas = FrameCanvas::new(format, size, frame.colorimetry, [a, b, c], strides)
            .map_err(|e| PluginError::Buffer(e.to_string()))?;
        draw_objects(&mut canvas, &frame.detections, &self.style);
        Ok(())
    }
}

impl OverlayWork {
    /// Draw `frame`'s objects on `buffer`, an NV12 frame in CUDA memory, where it is: the
    /// renderer's rectangles recorded (clipped, in the frame's Y, U, V), then filled by the
    /// overlay kernel (byte-identical to drawing the frame in system memory).
    fn draw_on_device(
        &self,
        frame: &Frame,
        buffer: &mut gst::BufferRef,
        info: &gst_video::VideoInfo,
    ) -> Result<(), PluginError> {
        let size = (info.width(), info.height());
        let mut recorder = RecordingCanvas::new(size, frame.colorimetry);
        draw_objects(&mut recorder, &frame.detections, &self.style);
        if recorder.rects().is_empty() {
            return Ok(());
        }
        let mut gpu = self.gpu.lock().unwrap();
        let (shared, overlay) = match gpu.as_mut() {
            Some(made) => made,
            None => {
                let shared = cuda::shared(self.device)?;
                let overlay = GpuOverlay::new(shared.device()).map_err(|e| {
                    PluginError::Cuda(format!(
                        "the overlay kernel cannot start on GPU {}: {e}",
                        shared.device()
                    ))
                })?;
                gpu.insert((shared, overlay))
            }
        };
        let mapped = shared
            .device_frame_mut(buffer, info)
            .map_err(PluginError::Buffer)?;
        let target = Nv12Target {
            size,
            planes: mapped.planes(),
            producer: mapped.stream(),
        };
        overlay
            .draw(recorder.rects(), &target)
            .map_err(|e| PluginError::Cuda(format!("drawing on the frame in CUDA memory: {e}")))?;
        // Unmapped only once the kernel is done (`draw` waits for it).
        drop(mapped);
        Ok(())
    }
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "octopipe-OctoOverlay",
        gst::DebugColorFlags::empty(),
        Some("octopipe overlay"),
    )
});

/// The `octooverlay` element: its property values and, while started, its state.
#[derive(Default)]
pub struct OctoOverlayImp {
    settings: Mutex<Settings>,
    state: Mutex<Option<State<OverlayWork>>>,
    streaming: Streaming,
}

impl OctoElement for OctoOverlayImp {
    type Work = OverlayWork;

    fn cat() -> gst::DebugCategory {
        *CAT
    }

    fn settings(&self) -> &Mutex<Settings> {
        &self.settings
    }

    fn state(&self) -> &Mutex<Option<State<OverlayWork>>> {
        &self.state
    }

    fn streaming(&self) -> &Streaming {
        &self.streaming
    }
}

#[glib::object_subclass]
impl ObjectSubclass for OctoOverlayImp {
    const NAME: &'static str = "GstOctoOverlay";
    type Type = super::OctoOverlay;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for OctoOverlayImp {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> =
            LazyLock::new(OctoOverlayImp::param_specs);
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        self.set_setting(value, pspec)
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.setting(pspec)
    }
}

impl GstObjectImpl for OctoOverlayImp {}

impl ElementImpl for OctoOverlayImp {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            element::metadata(
                "octopipe overlay",
                "Draws each object of the ROI metadata (box, label, score, track id) onto the frame in place",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> =
            LazyLock::new(element::pad_templates::<OverlayWork>);
        TEMPLATES.as_ref()
    }

    fn set_context(&self, context: &gst::Context) {
        self.note_context(context);
        self.parent_set_context(context)
    }
}

impl BaseTransformImpl for OctoOverlayImp {
    const MODE: BaseTransformMode = BaseTransformMode::AlwaysInPlace;
    const PASSTHROUGH_ON_SAME_CAPS: bool = false;
    const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

    fn start(&self) -> Result<(), gst::ErrorMessage> {
        self.start_work()
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        self.stop_work()
    }

    // The decoder upstream asks for the CUDA context to decode into: the one the kernel draws in.
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
}
