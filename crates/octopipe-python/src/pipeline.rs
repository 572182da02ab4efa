//! `octopipe.Pipeline`: a pipeline built from its description, run on threads of its own, fed
//! and read from Python.
//!
//! The pipeline is built (every stage opened) when the object is made, and starts running at
//! the first `push()`, the first result or batch asked for, or `close()`. Results are collected
//! when `results()` was called before it started; then a reader that falls behind holds the
//! pipeline back (a bounded channel of [`RESULTS_CAPACITY`](object::RESULTS_CAPACITY) frames),
//! and `close()` keeps what was not read yet for the iterator.

mod inner;
mod iter;
mod object;
mod open;

pub use iter::{Batches, Results};
pub use object::Pipeline;
