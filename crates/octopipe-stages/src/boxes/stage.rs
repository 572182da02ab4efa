//! The boxes stage's element and its running stage: boxes attached to each frame, the notes at
//! the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{Element, OpenContext, Running, Stage};

use super::replay::Boxes;
use super::settings::{BoxSource, BoxesConfig};

/// The boxes stage at run time: the replay, where its end-of-run notes go, and whether the
/// run was cut short (which changes what the notes can say about frames not seen).
/// The stage: its boxes, the report, the run's stop flag, and the stream it served.
struct BoxesStage(Boxes, Tally, Arc<AtomicBool>, Option<u32>);

impl Stage<Frame, Frame> for BoxesStage {
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.3 = Some(frame.stream);
        self.0.attach(&mut frame)?;
        out.push(frame);
        Ok(())
    }
    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        // Its stream failed (a truncated file ends it alone): the rows after were not reached.
        let failed = self
            .3
            .and_then(|s| self.1.with(|t| t.stream_failed(s)))
            .unwrap_or(false);
        let notes = self.0.end_notes(failed || self.2.load(Ordering::SeqCst));
        self.1
            .with(|t| notes.into_iter().for_each(|n| t.add_line(n)));
        Ok(())
    }
}

impl Element for BoxesConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let boxes = Boxes::new(*self)?;
        Ok(Running::stage(Box::new(BoxesStage(
            boxes,
            ctx.tally.clone(),
            ctx.stopped_early.clone(),
            None,
        ))))
    }
    fn inputs(&self) -> Vec<octopipe_core::files::RunPath> {
        use octopipe_core::files::RunPath;
        match &self.source {
            BoxSource::Det { location } => vec![RunPath::folder("boxes location", location)],
            BoxSource::Mot { location } => vec![RunPath::file("boxes location", location)],
            BoxSource::Synthetic { .. } => Vec::new(),
        }
    }
}
