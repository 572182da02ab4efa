//! What runs on a stage's thread: one step of a running pipeline.

use std::time::Instant;

use crate::Error;

/// One step of a running pipeline: takes `I`, gives `O`. The runner owns its thread and
/// channels, stamps its outputs with the time and sends them on.
pub trait Stage<I, O>: Send {
    /// Handle one input, pushing any outputs.
    fn process(&mut self, input: I, out: &mut Vec<O>) -> Result<(), Error>;
    /// When [`Stage::timeout`] must run if no input comes first.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Called at the deadline.
    fn timeout(&mut self, _out: &mut Vec<O>) -> Result<(), Error> {
        Ok(())
    }
    /// Called once at end of stream: push what is still held.
    fn finish(&mut self, _out: &mut Vec<O>) -> Result<(), Error> {
        Ok(())
    }
}
