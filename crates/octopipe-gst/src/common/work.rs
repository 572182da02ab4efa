//! What an element does to each frame ([`Work`]), between `start` and `stop`.

use gstreamer as gst;
use gstreamer_video as gst_video;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{PropSpec, StageDecl};

use super::error::PluginError;
use super::props::Values;
use super::shared;

/// What an element does to each frame, between `start` (READY to PAUSED: the stages open) and
/// `stop` (the element's [`State`](super::element::State) holds it): the element is a
/// BaseTransform around it ([`OctoElement`](super::element::OctoElement)), in place, the video
/// untouched and the objects read from and written to the buffer's ROI metas.
pub(crate) trait Work: Sized + Send + 'static {
    /// The stages whose declared properties are the element's properties (in this order).
    const DECLS: &'static [&'static StageDecl];
    /// Properties the element declares itself, after its stages' (an element with no stage:
    /// `octooverlay`), made into GParamSpecs and kept as text in the same way.
    const OWN_PROPS: &'static [PropSpec] = &[];
    /// Whether it reads the frame's pixels (then only the formats octopipe reads are accepted,
    /// in system memory, or NV12 in CUDA memory; else any raw video, in any memory).
    const PIXELS: bool;
    /// Whether the objects already on the buffer (any element's ROI metas) are its input (a
    /// box source starts from none and adds its own).
    const READS_OBJECTS: bool;
    /// Whether it writes the objects back (the JSONL writer only reads them).
    const WRITES_OBJECTS: bool;
    /// Whether it has the `shared` property: elements naming the same instance share one stage
    /// (one model session, one collector across their branches: [`shared`]).
    const SHAREABLE: bool = false;
    /// Whether it draws on the frame in place ([`Work::draw`]): then it takes the formats
    /// octopipe reads (in system memory, and NV12 in CUDA memory), and its buffers are made
    /// writable.
    const DRAWS: bool = false;
    /// Whether it records the frames' timings and posts octopipe's budget report at end of
    /// stream ([`report`](super::report): the element that writes the objects out).
    const REPORTS: bool = false;

    /// Open the stages with the properties set (`element` names the element, for messages), or
    /// join the instance named `shared` (opening it if it is the first).
    fn start(values: &Values, element: &str, shared: Option<&str>) -> Result<Self, PluginError>;

    /// Do the work on one frame.
    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError>;

    /// The shared stage the element hands its frames to, when it uses one: then it keeps
    /// several buffers in flight ([`flight`](super::flight)) instead of processing each in turn.
    fn shared(&self) -> Option<&shared::Handle> {
        None
    }

    /// For a classifier: the name of its structure on each object and its model's name.
    fn classifier(&self) -> Option<(&str, &str)> {
        None
    }

    /// For a detector: its score threshold, written in the frame meta for a tracker after it.
    fn detect_score(&self) -> Option<f32> {
        None
    }

    /// Before each frame, for the elements that read the objects: the score threshold of the
    /// detector before, as the frame meta says (`None`: no detector said one), which a tracker
    /// follows unless its `high` is set.
    fn follow_detector(&mut self, _score: Option<f32>) -> Result<(), PluginError> {
        Ok(())
    }

    /// For an element that draws: draw `frame`'s objects on `buffer`'s pixels (of `info`), in
    /// place.
    fn draw(
        &self,
        _frame: &Frame,
        _buffer: &mut gst::BufferRef,
        _info: &gst_video::VideoInfo,
    ) -> Result<(), PluginError> {
        Ok(())
    }

    /// End of stream: push out what is held, close outputs.
    fn eos(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}
