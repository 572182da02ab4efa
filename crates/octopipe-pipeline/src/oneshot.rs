//! One call per frame, for the simplest embedding: an application with a frame and its boxes
//! wants the crops' tensor, or the classifier's labels, now, without a pipeline.
//!
//! ```no_run
//! use octopipe_core::frame::PixelFormat;
//! use octopipe_pipeline::oneshot::{Classifier, Preprocessor};
//! use octopipe_sources::{AppBox, AppFrame};
//!
//! # fn main() -> Result<(), octopipe_core::error::Error> {
//! # let (w, h, rgb) = (640, 360, vec![0u8; 640 * 360 * 3]);
//! let frame = AppFrame::packed(PixelFormat::Rgb, w, h, rgb)
//!     .boxes([AppBox::new(10.0, 20.0, 40.0, 60.0).label("car")]);
//! let mut classifier = Classifier::new("model.onnx", &["person", "two-wheeler", "car", "large-vehicle"])?;
//! for object in classifier.classify(frame)? {
//!     println!("{:?} {:?} {:?}", object.bbox, object.label, object.score);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Everything the kernels need happens inside (the frame and boxes checked, crops laid out, block
//! metadata built): there is no way to get an unwritten tensor. A box under 2 px after clipping is
//! left out and said so in [`Preprocessed::skipped`].

use std::path::PathBuf;

use octopipe_core::error::Error;
use octopipe_core::frame::SkipReason;
use octopipe_core::tensor::Tensor;
use octopipe_onnx::classify::{Classifier as OnnxClassifier, ClassifyConfig};
use octopipe_sources::AppFrame;
use octopipe_stages::batch::{BatchPool, CropBatch, DEFAULT_TILES_PER_BLOCK, DEFAULT_TILE_PIXELS};
use octopipe_stages::preprocess::{create_backend, Backend, PreprocessConfig};
use octopipe_stages::sink::Object;

/// The tensor of one frame's crops.
#[derive(Debug)]
#[non_exhaustive]
pub struct Preprocessed {
    /// Every crop's values, in box order, packed as `PreprocessConfig` says.
    pub tensor: Tensor,
    /// For each crop, the index of its box in the frame's boxes.
    pub boxes: Vec<usize>,
    /// Boxes left out (under 2 px after clipping), with their index.
    pub skipped: Vec<(usize, SkipReason)>,
}

/// A frame's batch, the boxes that became its crops, and the boxes left out.
type Checked = (CropBatch, Vec<usize>, Vec<(usize, SkipReason)>);

/// Crop + resize + normalize one frame's boxes at a time, on the backend the settings ask for.
pub struct Preprocessor {
    config: PreprocessConfig,
    backend: Box<dyn Backend>,
    pool: BatchPool,
}

impl Preprocessor {
    /// A preprocessor with `config` (its `size` unset: 64x64).
    pub fn new(mut config: PreprocessConfig) -> Result<Self, Error> {
        config.size = Some(config.out_size());
        let backend = create_backend(&config)?;
        Ok(Preprocessor {
            config,
            backend,
            pool: BatchPool::new(),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &PreprocessConfig {
        &self.config
    }

    /// The frame's boxes, checked, as the batch the backends take (blocks built).
    fn batch(&self, frame: AppFrame) -> Result<Checked, Error> {
        let (w, h) = self.config.out_size();
        let (fw, fh) = (frame.layout.width, frame.layout.height);
        // Which boxes survive clipping, to say which crop is which.
        let mut kept = Vec::new();
        let mut skipped = Vec::new();
        for (i, b) in frame.boxes.iter().enumerate() {
            match b.detection(fw, fh) {
                Ok(Ok(_)) => kept.push(i),
                Ok(Err(reason)) => skipped.push((i, reason)),
                // `into_frame` below reports it with the frame's context.
                Err(_) => {}
            }
        }
        let frame = frame.into_frame("oneshot", 0, 0)?;
        let mut batch = self.pool.batch();
        batch.push_frame(frame, w, h, 3);
        batch.build_blocks(DEFAULT_TILE_PIXELS, DEFAULT_TILES_PER_BLOCK);
        Ok((batch, kept, skipped))
    }

    /// The tensor of `frame`'s boxes.
    pub fn run(&mut self, frame: AppFrame) -> Result<Preprocessed, Error> {
        let (mut batch, boxes, skipped) = self.batch(frame)?;
        self.backend.run(&mut batch)?;
        Ok(Preprocessed {
            tensor: std::mem::take(&mut batch.tensor),
            boxes,
            skipped,
        })
    }
}

/// Classify one frame's boxes at a time: preprocessing as the model needs it, then ONNX Runtime.
pub struct Classifier {
    pre: Preprocessor,
    classifier: OnnxClassifier,
}

impl Classifier {
    /// Load `model` (class names `labels`), with the shared classifier's preprocessing (ImageNet
    /// mean/std, RGB, NCHW, the model's input size).
    pub fn new(model: impl Into<PathBuf>, labels: &[&str]) -> Result<Self, Error> {
        let mut config = ClassifyConfig::new(model);
        config.labels = labels.iter().map(|s| s.to_string()).collect();
        Self::with(config, PreprocessConfig::default())
    }

    /// Load the model of `config`, preprocessing with `preprocess` (its size settled by the model).
    pub fn with(config: ClassifyConfig, mut preprocess: PreprocessConfig) -> Result<Self, Error> {
        let classifier = OnnxClassifier::new(config, preprocess.layout, preprocess.size)?;
        preprocess.size = Some(classifier.size());
        Ok(Classifier {
            pre: Preprocessor::new(preprocess)?,
            classifier,
        })
    }

    /// An object per box of `frame` (boxes under 2 px after clipping left out), classified.
    pub fn classify(&mut self, frame: AppFrame) -> Result<Vec<Object>, Error> {
        let (mut batch, _, _) = self.pre.batch(frame)?;
        self.pre.backend.run(&mut batch)?;
        self.classifier.classify(&mut batch)?;
        Ok(Object::all(&batch).collect())
    }
}
