//! Embedding octopipe: build a pipeline from its description in code and read the classified
//! objects from a channel.
//!
//! ```text
//! testsrc (videotestsrc, 640x360, 60 frames)
//!   ! boxes (synthetic, VisDrone-sized, 12 per frame)
//!   ! batch ! preprocess (CPU or CUDA) ! classify (MODEL)
//!   ! appsink --> Receiver<Object>   (no file written)
//! ```
//!
//! ```sh
//! . scripts/env.sh
//! python3 scripts/make_demo.py demo-data          # or any classifier with a [N,3,H,W] input
//! cargo run --release --example 01-embed -- demo-data/model.onnx
//! ```

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use octopipe::Pipeline;

fn main() -> Result<()> {
    let model = std::env::args()
        .nth(1)
        .context("usage: 01-embed MODEL.onnx")?;
    let vars = HashMap::from([("model".to_string(), model)]);
    let mut pipeline = Pipeline::from_description(
        "testsrc pattern=ball width=640 height=360 num-buffers=60 \
         ! boxes format=synthetic count=12 seed=1 \
         ! classify model=${model} labels=person,two-wheeler,car,large-vehicle \
         ! appsink",
        &vars,
    )?;
    let objects = pipeline.results(256);
    // The pipeline runs on its own threads; this thread reads results as they come.
    let run = std::thread::spawn(move || pipeline.run());
    let mut per_label: BTreeMap<String, usize> = BTreeMap::new();
    for object in objects {
        let label = object.label.as_deref().unwrap_or("-").to_string();
        *per_label.entry(label).or_default() += 1;
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
