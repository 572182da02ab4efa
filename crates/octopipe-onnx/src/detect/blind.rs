//! A detector that sees nothing says why: until the first box is kept, the model's runs keep
//! every candidate down to [`WATCH_FLOOR`] and the stage notes the highest score among them
//! (the candidates under `score` are then left out as always). After [`BLIND_FRAMES`] frames
//! (counted call by call: a call holding several frames may take the count past it), or at the
//! end of a shorter run, with no box at all, one warning names that score and the input
//! settings to check: a model fed 0..1 where it was trained on 0..255 (`scale`), without its
//! mean/std, or with its channels swapped scores nothing near its threshold, and the run would
//! otherwise end with "0 boxes kept" and exit 0.

use super::raw::RawBox;
use super::{DetectConfig, Detector};

/// Frames with no box kept after which the stage warns (once).
pub const BLIND_FRAMES: u64 = 10;

/// The least score a candidate needs to count as the highest seen, while no box was kept (end-
/// to-end outputs pad their rows with score 0).
const WATCH_FLOOR: f32 = 1e-4;

/// The watch over the first frames: how many went through, the highest candidate score, and
/// the least score the runs keep meanwhile.
#[derive(Debug)]
pub(super) struct Blind {
    frames: u64,
    best: Option<f32>,
    floor: f32,
}

impl Blind {
    /// The watch of a stage keeping boxes from `score`; `gpu_peaks` where CenterNet's peaks are
    /// found on the GPU, whose fixed slots a lower threshold could fill with peaks under
    /// `score`: there the runs keep `score` and only the candidates over it are seen.
    pub(super) fn new(score: f32, gpu_peaks: bool) -> Self {
        Blind {
            frames: 0,
            best: None,
            floor: if gpu_peaks {
                score
            } else {
                score.min(WATCH_FLOOR)
            },
        }
    }
}

impl Detector {
    /// The least score the model's runs keep: while no box was kept, every candidate down to
    /// the watch's floor (their best score is noted, then they are left out).
    pub(super) fn run_score(&self) -> f32 {
        match &self.blind {
            Some(blind) => blind.floor,
            None => self.config.score,
        }
    }

    /// For a call of `frames` frames whose runs kept candidates down to `ran_with`: while
    /// watching, note the best score among the regions' candidates `found`; leave out those
    /// under `score` (a call started while watching may complete after the watch ended, with
    /// calls overlapped); and end the watch at the first box kept (or warn once
    /// [`BLIND_FRAMES`] frames had none).
    pub(super) fn watch_found(&mut self, found: &mut [Vec<RawBox>], frames: usize, ran_with: f32) {
        let score = self.config.score;
        if let Some(blind) = &mut self.blind {
            for b in found.iter().flatten() {
                blind.best = Some(blind.best.map_or(b.score, |s| s.max(b.score)));
            }
        }
        if ran_with < score {
            found
                .iter_mut()
                .for_each(|r| r.retain(|b| b.score >= score));
        }
        let Some(blind) = &mut self.blind else {
            return;
        };
        let any = found.iter().any(|r| !r.is_empty());
        blind.frames += frames as u64;
        if any {
            self.blind = None;
        } else if blind.frames >= BLIND_FRAMES {
            self.tell_blind();
        }
    }

    /// Warn, once, that the frames so far gave no box (at the end of a run shorter than
    /// [`BLIND_FRAMES`] frames too).
    pub(super) fn tell_blind(&mut self) {
        let Some(blind) = self.blind.take() else {
            return;
        };
        if blind.frames == 0 {
            return;
        }
        tracing::warn!(
            "{}",
            blind_message(
                &self.config,
                (blind.frames, blind.best, blind.floor),
                self.scale_source
            )
        );
    }
}

/// The warning for `frames` frames with no box, the best candidate scoring `best` (of those at
/// or over `floor`); `from_model` when `scale` came from the model's metadata.
pub(super) fn blind_message(
    config: &DetectConfig,
    (frames, best, floor): (u64, Option<f32>, f32),
    from_model: bool,
) -> String {
    let seen = match best {
        Some(s) => format!("the highest score the model gave was {s:.3}"),
        None => format!("the model gave no candidate scoring even {floor}"),
    };
    let scale = if (config.scale - 1.0 / 255.0).abs() < 1e-9 {
        "1/255".to_string()
    } else {
        format!("{}", config.scale)
    };
    let scale_why = match (from_model, config.scale == 1.0) {
        (true, _) => " (from the model's metadata)",
        (false, true) => " (the model is fed raw 0..255)",
        (false, false) => " (the model is fed 0..1; scale=1 feeds raw 0..255)",
    };
    let list = |v: &[f32; 3]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "detect: model {}: no box in the first {frames} frame{}: {seen} (a box needs score={}); is the input what the model was trained on? check scale={scale}{scale_why}, mean={} and std={}, and channels={} (bgr for a model trained on OpenCV's images)",
        config.model.display(),
        if frames == 1 { "" } else { "s" },
        config.score,
        list(&config.mean),
        list(&config.std),
        octopipe_core::stage::PropChoice::as_str(&config.channels),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_best_score_and_the_settings() {
        let config = DetectConfig::new("m.onnx");
        let m = blind_message(&config, (10, Some(0.0421), WATCH_FLOOR), false);
        assert_eq!(
            m,
            "detect: model m.onnx: no box in the first 10 frames: the highest score the model gave was 0.042 (a box needs score=0.3); is the input what the model was trained on? check scale=1/255 (the model is fed 0..1; scale=1 feeds raw 0..255), mean=0,0,0 and std=1,1,1, and channels=rgb (bgr for a model trained on OpenCV's images)"
        );
        let m = blind_message(&config, (1, None, 0.3), true);
        assert!(
            m.contains("no box in the first 1 frame: the model gave no candidate scoring even 0.3"),
            "{m}"
        );
        assert!(m.contains("scale=1/255 (from the model's metadata)"), "{m}");
    }
}
