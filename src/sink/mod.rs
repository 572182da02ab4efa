//! Sink stage: one JSON line per classified object.
//!
//! ```text
//! ... ! classify model=m.onnx ! jsonl location=objects.jsonl
//! ```
//!
//! Each line: `{"stream":0,"frame":12,"source":"9999999_00023_d_0000001.jpg","pts_ms":400.0,
//! "bbox":[x,y,w,h],"label":"car","class_id":2,"score":0.97,"category":4}` where `bbox` is the
//! clipped integer box, `category` the annotation's VisDrone category (when boxes come from
//! annotations) and `track` the MOT track id when there is one. `location=-` writes to stdout.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::batch::CropBatch;

/// Settings of the JSONL sink.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonlConfig {
    /// Output file, or `-` for stdout.
    pub location: PathBuf,
}

/// Errors of the sink stage.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct SinkError {
    /// The output file.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

/// One classified object: a JSONL line, or an item of [`crate::runner::Pipeline::results`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Object {
    /// Stream (branch) id.
    pub stream: u32,
    /// Frame number in its stream.
    pub frame: u64,
    /// Image file name, or the URI / element description.
    pub source: std::sync::Arc<str>,
    /// Presentation time in ms.
    pub pts_ms: Option<f64>,
    /// The clipped integer box `[x, y, w, h]`.
    pub bbox: [u32; 4],
    /// Top-1 class name.
    pub label: String,
    /// Top-1 class index.
    pub class_id: u32,
    /// Top-1 softmax score.
    pub score: f32,
    /// The box's VisDrone category (from annotations or the synthetic generator).
    pub category: u8,
    /// MOT track id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<u32>,
    /// Further classes when top-k > 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topk: Vec<(String, f32)>,
}

impl Object {
    /// Every classified crop of `batch`, with class names from `labels`.
    pub fn all<'a>(
        batch: &'a CropBatch,
        labels: &'a [String],
    ) -> impl Iterator<Item = Object> + 'a {
        batch
            .origins
            .iter()
            .zip(&batch.results)
            .map(move |(origin, result)| {
                let frame = &batch.frames[origin.frame as usize];
                let det = &frame.detections[origin.detection as usize];
                Object {
                    stream: frame.stream,
                    frame: frame.seq,
                    source: frame.source.clone(),
                    pts_ms: frame.pts.map(|p| p.as_secs_f64() * 1000.0),
                    bbox: det.bbox,
                    label: label(labels, result.class_id).to_string(),
                    class_id: result.class_id,
                    score: result.score,
                    category: det.category,
                    track: det.track,
                    topk: result
                        .topk
                        .iter()
                        .map(|(c, s)| (label(labels, *c).to_string(), *s))
                        .collect(),
                }
            })
    }
}

/// Runtime state of the JSONL sink.
pub struct JsonlSink {
    path: String,
    out: BufWriter<Box<dyn Write + Send>>,
    labels: Vec<String>,
    lines: u64,
}

impl JsonlSink {
    /// Create (truncate) the output; `labels` name the class ids.
    pub fn new(config: &JsonlConfig, labels: Vec<String>) -> Result<Self, SinkError> {
        let path = config.location.display().to_string();
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(File::create(&config.location).map_err(|e| SinkError {
                path: path.clone(),
                reason: format!("cannot create: {e}"),
            })?)
        };
        Ok(JsonlSink {
            path,
            out: BufWriter::new(out),
            labels,
            lines: 0,
        })
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Write one line per classified crop of `batch`, then flush.
    pub fn write(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        let path = &self.path;
        let err = |e: &dyn std::fmt::Display| SinkError {
            path: path.clone(),
            reason: format!("write failed: {e}"),
        };
        for object in Object::all(batch, &self.labels) {
            serde_json::to_writer(&mut self.out, &object).map_err(|e| err(&e))?;
            self.out.write_all(b"\n").map_err(|e| err(&e))?;
            self.lines += 1;
        }
        self.out.flush().map_err(|e| err(&e))
    }
}

fn label(labels: &[String], id: u32) -> &str {
    labels.get(id as usize).map_or("?", String::as_str)
}
