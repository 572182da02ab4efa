//! The `octooverlay` element: the objects drawn on each frame in place.

use gstreamer_video as gst_video;
use gstreamer_video::prelude::VideoFrameExt;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{PropSpec, PropType};
use octopipe_observe::{draw_objects, FrameCanvas, Style};

/// The overlay's properties (it runs no stage: these are its own).
const PROPS: &[PropSpec] = &[
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

/// What is drawn, from the properties.
pub(crate) struct OverlayWork {
    style: Style,
}

impl Work for OverlayWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[];
    const OWN_PROPS: &'static [PropSpec] = PROPS;
    const LONG_NAME: &'static str = "octopipe overlay";
    const DESCRIPTION: &'static str =
        "Draws each object of the ROI metadata (box, label, score, track id) onto the frame in place";
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

octo_element!(OctoOverlayImp, OctoOverlay, OverlayWork, "GstOctoOverlay");
