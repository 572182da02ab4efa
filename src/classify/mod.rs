//! Classify stage: ONNX Runtime on the preprocessed crops.

/// The classifier's answer for one crop.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// Top-1 class index.
    pub class_id: u32,
    /// Top-1 softmax score.
    pub score: f32,
    /// Further `(class_id, score)` pairs when top-k > 1, best first (excluding the top-1).
    pub topk: Vec<(u32, f32)>,
}
