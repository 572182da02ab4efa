//! The classifier's first runs, at start-up: ONNX Runtime plans and allocates on them.

use octopipe_core::alloc::{bytes, try_vec};

use super::classifier::{Classifier, Input};
use super::error::ClassifyError;
use octopipe_stages::preprocess::Layout;

impl Classifier {
    /// Inference now: ONNX Runtime allocates and plans on its first runs, which would otherwise
    /// land on the first frames' budget. The smallest batch must run (it proves the model runs at
    /// all, and gives its number of classes); the largest only sizes the memory arena once,
    /// here: if it fails, the first batch that size reports the error with its frames.
    pub(super) fn warm_up(&mut self) -> Result<(), ClassifyError> {
        let (w, h) = (self.size.0 as usize, self.size.1 as usize);
        let layout = self.layout;
        let shape = |n: usize| match layout {
            Layout::Nchw => [n, 3, h, w],
            Layout::Nhwc => [n, h, w, 3],
        };
        let smallest = self.input.batch.unwrap_or(1);
        let rows = self.rows(smallest, usize::MAX);
        let zeros = bytes(&[rows, 3, w, h])
            .and_then(|len| try_vec(len, 0.0))
            .map_err(|e| ClassifyError::Model {
                path: self.config.model.display().to_string(),
                reason: format!("the input of its first run ({rows} rows) {e}"),
            })?;
        self.run_chunk(shape(rows), smallest, Input::Host(&zeros))?;
        self.classes = self.scores.len() / smallest.max(1);
        let largest = self.input.batch.unwrap_or(self.config.max_batch.max(1));
        // On CUDA every padded size has its session, planned here rather than on a live batch.
        let mut sizes = vec![largest];
        if self.sessions.cuda().is_some() {
            sizes = std::iter::successors(Some(rows * 2), |r| Some(r * 2))
                .take_while(|&r| r <= self.rows(largest, usize::MAX))
                .collect();
        }
        let sizes: Vec<usize> = sizes.into_iter().filter(|&n| n > smallest).collect();
        for &n in &sizes {
            let rows = self.rows(n, usize::MAX);
            if let Ok(zeros) = bytes(&[rows, 3, w, h]).and_then(|len| try_vec(len, 0.0)) {
                let _ = self.run_chunk(shape(rows), n, Input::Host(&zeros));
            }
        }
        // A first run from device memory plans anew too: each size once more, from there.
        let most = sizes.last().map_or(rows, |&n| self.rows(n, usize::MAX));
        if let Some(zeros) = self.sessions.device_zeros(most * 3 * w * h)? {
            let device = Input::Device {
                ptr: zeros.ptr,
                device: zeros.device,
            };
            for n in std::iter::once(smallest).chain(sizes) {
                let _ = self.run_chunk(shape(self.rows(n, usize::MAX)), n, device);
            }
        }
        Ok(())
    }
}
