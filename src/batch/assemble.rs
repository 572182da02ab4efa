//! Collecting frames into batches.

/// Placeholder.
pub struct Assembler;
