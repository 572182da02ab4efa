//! The `appsink` stage: writes nothing, the application reads the results.

use crate::batch::CropBatch;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::stage::{Element, OpenContext, Props, Role, Running, Stage, StageDecl};

/// The `appsink` stage: writes nothing; the application reads the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AppSinkConfig;

/// Passes batches on untouched.
struct PassOn;

impl Stage<CropBatch, CropBatch> for PassOn {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.push(batch);
        Ok(())
    }
}

impl Element for AppSinkConfig {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(PassOn)))
    }
}

/// `appsink`: the application reads objects (`Pipeline::results`) or whole batches with their
/// tensors (`Pipeline::batches`); nothing is written.
pub const APPSINK: StageDecl = StageDecl {
    name: "appsink",
    role: Role::Sink,
    doc: "writes nothing: the application reads objects or batches (Pipeline::results, ::batches)",
    props: &[],
    needs: &[Role::Batch],
    provides: &[],
    make: |_: &Props| -> Result<Box<dyn Element>, DescribeError> { Ok(Box::new(AppSinkConfig)) },
};
