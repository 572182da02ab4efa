//! The `head` pseudo-stage: how the GStreamer head before it is watched, numbered and decoded.

use octopipe_core::error::Error;
use octopipe_core::stage::{Element, OpenContext, Properties, Role, Running, StageDecl};

use super::config::HeadSettings;
use super::props::HeadProps;

impl Element for HeadSettings {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Err(octopipe_core::error::PipelineError::NotAStage("head").into())
    }
}

/// `GSTREAMER ELEMENTS ! head timeout=2 retry=5 ! ...`: the settings of the GStreamer head
/// before it (a launch fragment has no octopipe properties of its own).
pub const HEAD: StageDecl = StageDecl {
    name: "head",
    role: Role::Head,
    doc: "settings of the GStreamer head before it: timeouts, reconnects, frame rate",
    props: HeadProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(HeadProps::from_props(p)?.settings())),
};
