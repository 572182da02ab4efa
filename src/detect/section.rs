//! The detect stage's section of the report (JSON: `sections.detect`): the fields of its line.

use std::fmt;
use std::time::Duration;

use super::Detector;
use crate::budget::{SectionKind, Series};

/// The detector's time per frame against the budget, split into its steps, and its box counts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DetectSection {
    /// Regions (tiles, and the whole frame with `whole-frame=true`) per frame.
    pub regions: usize,
    /// The preprocess backend of the regions (`cpu`, `cuda`).
    pub backend: String,
    /// The output decoder (`end2end`, `yolov8`, `yolov5`).
    pub decoder: String,
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
        Ok(())
    }
}

impl Detector {
    /// The report's section: the stage's time per frame against the frame `budget`, its split,
    /// and box counts; `None` before any frame.
    pub fn report_section(&self, budget: Duration) -> Option<DetectSection> {
        let s = &self.split;
        if s.total.count() == 0 {
            return None;
        }
        let p50 = |v: &Series| v.stats().p50.as_secs_f64() * 1000.0;
        Some(DetectSection {
            regions: s.regions,
            backend: self.backend.name().to_string(),
            decoder: self.model.io.decoder.name().to_string(),
            frames: s.total.count(),
            p50_ms: p50(&s.total),
            budget_percent: p50(&s.total) / (budget.as_secs_f64() * 1000.0).max(1e-9) * 100.0,
            preprocess_p50_ms: p50(&s.preprocess),
            inference_p50_ms: p50(&s.infer),
            decode_p50_ms: p50(&s.decode),
            boxes_kept: s.kept,
            other_classes: s.other_classes,
            non_finite_rows: s.non_finite,
        })
    }
}
