//! The detect stage's section of the report (JSON: `sections.detect`): the fields of its line.

use std::fmt;
use std::time::Duration;

use super::Detector;
use octopipe_core::budget::{SectionKind, Series};

/// The detector's time per frame against the budget, split into its steps, and its box counts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DetectSection {
    /// Regions (tiles, and the whole frame with `whole-frame=true`) per frame.
    pub regions: usize,
    /// The preprocess backend of the regions (`cpu`, `cuda`).
    pub backend: String,
    /// The output decoder (`end2end`, `yolov8`, `yolov5`, `centernet`).
    pub decoder: String,
    /// What ran the model (`ort`: ONNX Runtime, `octopipe`: octopipe's own engine).
    #[serde(default = "ort")]
    pub engine: String,
    /// Frames detected on.
    pub frames: u64,
    /// Median time per frame, ms.
    pub p50_ms: f64,
    /// That median as a share of the frame budget, in percent.
    pub budget_percent: f64,
    /// Median preprocessing time per frame, ms.
    pub preprocess_p50_ms: f64,
    /// Median inference time per frame, ms.
    pub inference_p50_ms: f64,
    /// Median decoding and merging (NMS) time per frame, ms.
    pub decode_p50_ms: f64,
    /// Boxes kept, all frames.
    pub boxes_kept: u64,
    /// Boxes of classes left out (`classes=`).
    pub other_classes: u64,
    /// Output rows that were not finite (left out).
    pub non_finite_rows: u64,
    /// CenterNet peaks past the GPU's cap per image (left out).
    pub over_cap: u64,
    /// How frames shared the model's calls (`None` before any call).
    pub calls: Option<DetectCalls>,
    /// Frames left to the tracker's predictions (`interval`), and the interval.
    pub predicted_frames: u64,
    /// `detect interval`: one frame in this many is detected.
    pub interval: u64,
}

/// How the frames of every stream the stage serves shared the model's calls.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DetectCalls {
    /// Frames per collection (one collection is detected together).
    pub frames_per_collection: f64,
    /// Tiles per collection.
    pub tiles_per_collection: f64,
    /// Model calls.
    pub calls: u64,
    /// Tiles per model call.
    pub tiles_per_call: f64,
    /// Rows per model call, padding to the fixed batch size included.
    pub rows_per_call: f64,
    /// Tiles per second of time in model calls.
    pub tiles_per_s: f64,
    /// Of a model call's time, on average, ms in ONNX Runtime's run (fixed batch sizes: until
    /// the outputs are written); 0 where not measured apart (batch sizes run as they come).
    #[serde(default)]
    pub model_ms_per_call: f64,
    /// Of a model call's time, on average, ms finding the peaks on the GPU and bringing them
    /// back; 0 where the peaks are found on the host.
    #[serde(default)]
    pub peaks_ms_per_call: f64,
    /// Of the time in ONNX Runtime, on average, ms of the model's work on the GPU (from its
    /// input ready to its outputs written: CUDA events on the model's stream); the rest is the
    /// wait for the tiles' preprocessing and the host's. 0 where not measured.
    #[serde(default)]
    pub gpu_ms_per_call: f64,
}

/// The engine of a section written before it was named: ONNX Runtime's.
fn ort() -> String {
    "ort".into()
}

impl SectionKind for DetectSection {
    const KIND: &'static str = "detect";
}

impl fmt::Display for DetectSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "detect: {} region{} per frame ({} preprocessing, {}); per frame p50 {:.2} ms ({:.0}% of the frame budget): preprocess {:.2} ms, inference {:.2} ms, decode+merge {:.2} ms; {} boxes kept",
            self.regions,
            if self.regions == 1 { "" } else { "s" },
            self.backend,
            self.decoder,
            self.p50_ms,
            self.budget_percent,
            self.preprocess_p50_ms,
            self.inference_p50_ms,
            self.decode_p50_ms,
            self.boxes_kept,
        )?;
        if let Some(c) = &self.calls {
            write!(
                f,
                "; {:.1} frames and {:.1} tiles per collection, {} model calls of {:.1} tiles ({:.1} rows with padding), {:.0} tiles/s in inference",
                c.frames_per_collection,
                c.tiles_per_collection,
                c.calls,
                c.tiles_per_call,
                c.rows_per_call,
                c.tiles_per_s,
            )?;
            if c.model_ms_per_call > 0.0 {
                let runtime = match self.engine.as_str() {
                    "octopipe" => "octopipe's engine",
                    _ => "ONNX Runtime",
                };
                write!(
                    f,
                    " (a call: {:.2} ms in {runtime}, {:.2} ms finding peaks",
                    c.model_ms_per_call, c.peaks_ms_per_call
                )?;
                if c.gpu_ms_per_call > 0.0 {
                    write!(f, ", {:.2} ms the model on the GPU", c.gpu_ms_per_call)?;
                }
                write!(f, ")")?;
            }
        }
        if self.other_classes > 0 {
            write!(f, ", {} of other classes left out", self.other_classes)?;
        }
        if self.non_finite_rows > 0 {
            write!(
                f,
                ", {} output rows not finite (left out)",
                self.non_finite_rows
            )?;
        }
        if self.over_cap > 0 {
            write!(
                f,
                ", {} CenterNet peaks past the GPU's {} per image left out",
                self.over_cap,
                super::gpu::PEAK_CAP
            )?;
        }
        if self.predicted_frames > 0 {
            write!(
                f,
                "; {} frames left to the tracker (interval={})",
                self.predicted_frames, self.interval
            )?;
        }
        Ok(())
    }
}

impl Detector {
    /// The report's section: the stage's time per frame against the frame `budget`, its split,
    /// and box counts; `None` before any frame.
    pub(crate) fn report_section(&self, budget: Duration) -> Option<DetectSection> {
        let s = &self.split;
        if s.total.count() == 0 {
            return None;
        }
        let p50 = |v: &Series| v.stats().p50.as_secs_f64() * 1000.0;
        Some(DetectSection {
            regions: s.regions,
            backend: self.backend.name().to_string(),
            decoder: self.io.decoder.name().to_string(),
            engine: octopipe_core::stage::PropChoice::as_str(&self.config.engine).to_string(),
            frames: s.total.count(),
            p50_ms: p50(&s.total),
            budget_percent: p50(&s.total) / (budget.as_secs_f64() * 1000.0).max(1e-9) * 100.0,
            preprocess_p50_ms: p50(&s.preprocess),
            inference_p50_ms: p50(&s.infer),
            decode_p50_ms: p50(&s.decode),
            boxes_kept: s.kept,
            other_classes: s.other_classes,
            non_finite_rows: s.non_finite,
            over_cap: s.over_cap,
            calls: (s.collections > 0 && s.runs > 0).then(|| DetectCalls {
                frames_per_collection: s.frames as f64 / s.collections as f64,
                tiles_per_collection: s.tiles as f64 / s.collections as f64,
                calls: s.runs,
                tiles_per_call: s.tiles as f64 / s.runs as f64,
                rows_per_call: s.rows as f64 / s.runs as f64,
                tiles_per_s: s.tiles as f64 / s.infer_time.as_secs_f64().max(1e-9),
                model_ms_per_call: s.model_time.as_secs_f64() * 1e3 / s.runs as f64,
                peaks_ms_per_call: s.peaks_time.as_secs_f64() * 1e3 / s.runs as f64,
                gpu_ms_per_call: s.gpu_time.as_secs_f64() * 1e3 / s.runs as f64,
            }),
            predicted_frames: 0,
            interval: self.config.interval,
        })
    }
}
