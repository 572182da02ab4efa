//! The iterators a pipeline hands out: its finished frames and its `appinfer` batches.

use std::sync::Arc;

use pyo3::prelude::*;

use super::inner::Inner;
use crate::batch::Batch;
use crate::results::Frame;

/// The pipeline's finished frames, in the order they finish (each stream's in order). Ends
/// when the pipeline has ended; raises `octopipe.Error` then if the run failed.
#[pyclass(module = "octopipe")]
pub struct Results {
    pub(crate) inner: Arc<Inner>,
}

#[pymethods]
impl Results {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Frame>> {
        Ok(self.inner.next_result(py)?.map(Frame::from))
    }
}

/// The batches of the pipeline's `appinfer` stage, as they come. Ends when the stage ended.
#[pyclass(module = "octopipe")]
pub struct Batches {
    pub(crate) inner: Arc<Inner>,
}

#[pymethods]
impl Batches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Batch>> {
        match self.inner.next_batch(py)? {
            Some(b) => Ok(Some(Batch::new(py, b)?)),
            None => Ok(None),
        }
    }
}
