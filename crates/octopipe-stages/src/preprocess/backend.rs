//! What a preprocess backend is: the trait the CPU and CUDA backends implement.

use octopipe_core::crops::CropBatch;

use super::error::PreprocessError;

/// A preprocess implementation: fills `batch.tensor` (or `batch.tensor_f16` for
/// [`DType::F16`](octopipe_core::tensor::DType::F16)) from the batch's frames, crops and blocks.
pub trait Backend: Send {
    /// Short name for logs and reports.
    fn name(&self) -> &'static str;
    /// Write every crop's output into `batch.tensor` (resized to `batch.tensor_len(3)`), or for
    /// [`DType::F16`] into `batch.tensor_f16` (and `batch.tensor` cleared).
    ///
    /// [`DType::F16`]: octopipe_core::tensor::DType::F16
    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError>;
    /// A line for the run's report on how the batches ran, if the backend has one to give.
    fn summary(&self) -> Option<String> {
        None
    }
}
