//! The detector in the pipeline benchmark (`--detector MODEL`): the streams join one `detect`
//! stage (tiles of all of them in one inference call), a `track` stage and the classifier, and
//! each run is compared with the detector model alone at the batch size its calls ran at.

use std::fmt::Write as _;

use super::compute::Compute;
use super::spec::{push_props, DetectBench, RunSpec};

/// The detect and track stages of `spec`: the shared ones (`name=det`, the streams' branches
/// end in `det.`), or with [`DetectBench::per_stream`] one stream's own (on one line).
pub(super) fn stages(spec: &RunSpec, d: &DetectBench) -> String {
    let (name, gap) = if d.per_stream {
        ("", " ")
    } else {
        (" name=det", "\n  ")
    };
    // A model cut to some classes names its own labels in `props`; else COCO's 80.
    let named = d
        .props
        .split_whitespace()
        .any(|p| p.starts_with("labels=") || p.starts_with("labels-file="));
    let labels = if named { "" } else { " labels=coco" };
    let mut text = format!(
        "  ! detect{name} model=${{detector}}{labels} scale=1 tiles={}x{} overlap=0.15 \
         score=0.3 ios=0.85 classes=person,bicycle,car,motorcycle,bus,truck \
         map=car:vehicle,bus:vehicle,truck:vehicle,bicycle:two-wheeler,motorcycle:two-wheeler \
         ep={} backend={} max-batch={}",
        d.tiles.0,
        d.tiles.1,
        spec.ep.name(),
        spec.backend.name(),
        d.max_batch,
    );
    if d.interval > 1 {
        let _ = write!(text, " interval={}", d.interval);
    }
    push_props(&mut text, &d.props);
    let _ = write!(text, "{gap}! track");
    text
}

/// What the detect stage's report line says of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DetectStats {
    /// Tiles per second in inference.
    pub tiles_per_s: f64,
    /// Tiles per model call.
    pub call_tiles: f64,
    /// Rows per model call, padding included (the fixed batch size the calls ran at).
    pub call_rows: f64,
    /// Of a call, ms in the model's run (ONNX Runtime's, or octopipe's engine's with
    /// `engine`; 0 when the line does not say).
    pub model_ms: f64,
    /// The model ran on octopipe's engine (`detect engine=octopipe`).
    pub engine: bool,
    /// Of a call, ms finding the peaks on the GPU (0 when the line does not say).
    pub peaks_ms: f64,
    /// Of ONNX Runtime's ms, the model's work on the GPU (0 when the line does not say).
    pub gpu_ms: f64,
}

impl DetectStats {
    /// The mean of `all` (`None` when empty).
    pub fn mean(all: &[DetectStats]) -> Option<DetectStats> {
        let n = all.len() as f64;
        let sum = |f: fn(&DetectStats) -> f64| all.iter().map(f).sum::<f64>() / n;
        (!all.is_empty()).then(|| DetectStats {
            tiles_per_s: sum(|s| s.tiles_per_s),
            call_tiles: sum(|s| s.call_tiles),
            call_rows: sum(|s| s.call_rows),
            model_ms: sum(|s| s.model_ms),
            peaks_ms: sum(|s| s.peaks_ms),
            gpu_ms: sum(|s| s.gpu_ms),
            engine: all.iter().any(|s| s.engine),
        })
    }
}

/// The numbers of the detect stage's report line ("... model calls of 60.0 tiles (64.0 rows
/// with padding), 3968 tiles/s in inference").
pub fn parse_line(line: &str) -> Option<DetectStats> {
    let before = |marker: &str| -> Option<f64> {
        let head = &line[..line.find(marker)?];
        head.rsplit([' ', '(']).next()?.parse().ok()
    };
    Some(DetectStats {
        tiles_per_s: before(" tiles/s in inference")?,
        call_tiles: before(" tiles (")?,
        call_rows: before(" rows with padding")?,
        model_ms: before(" ms in ONNX Runtime")
            .or_else(|| before(" ms in octopipe's engine"))
            .unwrap_or(0.0),
        engine: line.contains(" ms in octopipe's engine"),
        peaks_ms: before(" ms finding peaks").unwrap_or(0.0),
        gpu_ms: before(" ms the model on the GPU").unwrap_or(0.0),
    })
}

/// The detector's column text: its throughput in the run against the model alone at the batch
/// its calls ran at (with `detectors` > 1, one per GPU: each one's mean).
pub(super) fn note(stats: &DetectStats, detectors: usize, alone: Option<f64>) -> String {
    let who = match detectors {
        0 | 1 => "detector".to_string(),
        n => format!("{n} detectors, each"),
    };
    let mut n = format!(
        "{who} {:.0} tiles/s in calls of {:.1} tiles ({:.0} rows)",
        stats.tiles_per_s, stats.call_tiles, stats.call_rows
    );
    if stats.model_ms > 0.0 {
        let _ = write!(
            n,
            " (a call {:.2} ms in {} + {:.2} ms peaks, of {:.2}",
            stats.model_ms,
            match stats.engine {
                true => "octopipe's engine",
                false => "ONNX Runtime",
            },
            stats.peaks_ms,
            1e3 * stats.call_tiles / stats.tiles_per_s.max(1e-9)
        );
        if stats.gpu_ms > 0.0 {
            let _ = write!(n, "; the model {:.2} ms on the GPU", stats.gpu_ms);
        }
        n.push(')');
    }
    if let Some(a) = alone {
        let _ = write!(
            n,
            "; model alone {a:.0} tiles/s at {:.0} rows: {:.0}% of it",
            stats.call_rows,
            100.0 * stats.tiles_per_s / a.max(1e-9)
        );
    }
    n
}

/// Where the model alone runs for the comparison: the run's execution provider.
pub(super) fn ep(spec: &RunSpec) -> octopipe_onnx::onnx::Ep {
    match spec.ep {
        Compute::Cpu => octopipe_onnx::onnx::Ep::Cpu,
        Compute::Cuda => octopipe_onnx::onnx::Ep::Cuda(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_line_gives_the_calls() {
        let line = "detect: 8 regions per frame (cuda preprocessing, centernet); per frame p50 1.00 ms (3% of the frame budget): preprocess 0.10 ms, inference 0.80 ms, decode+merge 0.10 ms; 100 boxes kept; 7.5 frames and 60.0 tiles per collection, 10 model calls of 60.0 tiles (64.0 rows with padding), 3968 tiles/s in inference, 5 of other classes left out";
        let s = parse_line(line).unwrap();
        assert_eq!(
            (s.tiles_per_s, s.call_tiles, s.call_rows),
            (3968.0, 60.0, 64.0)
        );
        assert_eq!((s.model_ms, s.peaks_ms), (0.0, 0.0));
        let timed = line.replace(
            "in inference,",
            "in inference (a call: 11.20 ms in ONNX Runtime, 0.45 ms finding peaks),",
        );
        let s = parse_line(&timed).unwrap();
        assert_eq!(
            (s.tiles_per_s, s.model_ms, s.peaks_ms, s.gpu_ms),
            (3968.0, 11.2, 0.45, 0.0)
        );
        assert!(note(&s, 1, Some(5000.0))
            .contains("(a call 11.20 ms in ONNX Runtime + 0.45 ms peaks, of 15.12)"));
        let gpu = line.replace(
            "in inference,",
            "in inference (a call: 11.20 ms in ONNX Runtime, 0.45 ms finding peaks, 9.80 ms the model on the GPU),",
        );
        let s = parse_line(&gpu).unwrap();
        assert_eq!((s.model_ms, s.peaks_ms, s.gpu_ms), (11.2, 0.45, 9.8));
        assert!(note(&s, 1, None).contains("of 15.12; the model 9.80 ms on the GPU)"));
        assert!(!s.engine);
        // `engine=octopipe`: the stage names octopipe's engine, the note too.
        let own = gpu.replace("in ONNX Runtime", "in octopipe's engine");
        let s = parse_line(&own).unwrap();
        assert_eq!(
            (s.model_ms, s.peaks_ms, s.gpu_ms, s.engine),
            (11.2, 0.45, 9.8, true)
        );
        assert!(note(&s, 1, None).contains("(a call 11.20 ms in octopipe's engine + 0.45 ms peaks"));
        assert_eq!(parse_line("detect: nothing"), None);
    }
}
