//! The batch stage at run time: the [`Assembler`] as a stage, opened from its settings.

use std::time::Instant;

use super::assemble::Assembler;
use super::config::{BatchConfig, AREA_INPUT_PER_BLOCK};
use crate::preprocess::{Interpolation, PreprocessConfig, DEFAULT_SIZE};
use octopipe_core::crops::CropBatch;
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::{Element, OpenContext, Reinfer, Running, Stage};

impl Stage<Frame, CropBatch> for Assembler {
    fn process(&mut self, frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        Ok(self.push(frame, out)?)
    }
    fn deadline(&self) -> Option<Instant> {
        Assembler::deadline(self)
    }
    fn timeout(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.flush()?);
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.flush()?);
        Ok(())
    }
}

impl Element for BatchConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        // The preprocess settings (the model settled their size): blocks sized by the source
        // pixels they read when it averages areas, and the crops' output size (64x64 before
        // anything says).
        let preprocess = ctx.caps.get::<PreprocessConfig>();
        if preprocess.is_some_and(|p| p.interpolation == Interpolation::Area) {
            config.input_per_block.get_or_insert(AREA_INPUT_PER_BLOCK);
        }
        let crop_size = preprocess.map_or(DEFAULT_SIZE, PreprocessConfig::out_size);
        let assembler = Assembler::new(
            config,
            crop_size,
            ctx.budget,
            ctx.downstream.clone(),
            ctx.live_interval,
            ctx.tally.clone(),
        );
        // The classifier (opened before) says whether tracks' labels are reused.
        let assembler = match ctx.caps.get::<Reinfer>() {
            Some(reinfer) => assembler.reuse_labels(reinfer),
            None => assembler,
        };
        Ok(Running::stage(Box::new(assembler)))
    }
}
