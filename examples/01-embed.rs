//! Embedding octopipe: build a pipeline in code and read the classified objects from a channel.
//!
//! ```text
//! testsrc (videotestsrc, 640x360, 60 frames)
//!   ! boxes (synthetic, VisDrone-sized, 12 per frame)
//!   ! batch ! preprocess (CPU or CUDA) ! classify (MODEL)
//!   --> Receiver<Object>   (no JSONL file)
//! ```
//!
//! ```sh
//! . scripts/env.sh
//! python3 scripts/make_demo.py demo-data          # or any classifier with a [N,3,H,W] input
//! cargo run --release --example 01-embed -- demo-data/model.onnx
//! ```

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use octopipe::classify::ClassifyConfig;
use octopipe::detect::{BoxSource, DetectConfig};
use octopipe::frame::PixelFormat;
use octopipe::runner::{Pipeline, PipelineConfig};
use octopipe::source::{SourceConfig, SourceKind};

fn main() -> Result<()> {
    let model = std::env::args()
        .nth(1)
        .context("usage: 01-embed MODEL.onnx")?;
    let source = SourceConfig::new(SourceKind::Test {
        pattern: "ball".into(),
        width: 640,
        height: 360,
        num_buffers: 60,
        format: PixelFormat::I420,
    });
    let boxes = DetectConfig::new(BoxSource::Synthetic { count: 12, seed: 1 });
    let mut classify = ClassifyConfig::new(model);
    classify.labels = ["person", "two-wheeler", "car", "large-vehicle"]
        .map(String::from)
        .to_vec();
    let config = PipelineConfig::new(source, boxes, classify, None);

    let mut pipeline = Pipeline::build(config)?;
    let objects = pipeline.results(256);
    // The pipeline runs on its own threads; this thread reads results as they come.
    let run = std::thread::spawn(move || pipeline.run());
    let mut per_label: BTreeMap<String, usize> = BTreeMap::new();
    for object in objects {
        *per_label.entry(object.label).or_default() += 1;
    }
    let outcome = run
        .join()
        .map_err(|_| anyhow::anyhow!("pipeline thread panicked"))?;
    if let Some(e) = outcome.error {
        return Err(e.into());
    }
    println!("{}", outcome.report);
    println!("objects per label: {per_label:?}");
    Ok(())
}
