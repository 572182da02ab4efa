//! `octopipe bench track`: the tracker on the VisDrone2019-MOT ground truth with the ids hidden
//! (the scores themselves are [`crate::eval::mot`]).
//!
//! ```text
//! octopipe bench track --data ../shared/data
//! ```
//!
//! Each ground-truth file's boxes (ids removed, score 1) go through a [`Tracker`](octopipe_stages::track::Tracker) frame by frame;
//! its ids are scored against the true ones. The same again with boxes dropped at random (10%)
//! and the rest jittered (each side and the position by up to 5% of the box's size), seeded, so
//! the numbers repeat.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use super::data::Rng;
use octopipe_stages::track::TrackConfig;

pub use crate::eval::mot::{
    run_tracker, score, IdBoxes, MotError, MotScore, MotSequence, MATCH_IOU, MOT_DIR,
};

/// How boxes are spoilt before tracking: `drop` of them removed at random, the rest moved and
/// resized by up to `jitter` of their size, with the generator seeded by `seed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// Share of boxes removed.
    pub drop: f64,
    /// Largest change of each of x, y (by the width, the height) and w, h, as a share.
    pub jitter: f64,
    /// Seed.
    pub seed: u64,
}

impl Noise {
    /// 10% dropped, 5% jitter, seed 1: the benchmark's and the tests' spoilt boxes.
    pub const BENCH: Noise = Noise {
        drop: 0.10,
        jitter: 0.05,
        seed: 1,
    };
}

/// The boxes a tracker is given for `seq`: its true boxes without ids, spoilt by `noise` when
/// given (a frame's boxes come in the file's order).
pub fn tracker_input(seq: &MotSequence, noise: Option<Noise>) -> Vec<Vec<[u32; 4]>> {
    let Some(noise) = noise else {
        return seq
            .frames
            .iter()
            .map(|f| f.iter().map(|(_, b)| *b).collect())
            .collect();
    };
    let mut rng = Rng::new(noise.seed);
    // Uniform in -1..=1.
    let mut unit = move || rng.below(2_000_001) as f64 / 1_000_000.0 - 1.0;
    seq.frames
        .iter()
        .map(|f| {
            f.iter()
                .filter_map(|(_, [x, y, w, h])| {
                    if (unit() + 1.0) / 2.0 < noise.drop {
                        return None;
                    }
                    let (x, y, w, h) = (*x as f64, *y as f64, *w as f64, *h as f64);
                    let j = noise.jitter;
                    let nx = (x + unit() * j * w).max(0.0);
                    let ny = (y + unit() * j * h).max(0.0);
                    let nw = (w * (1.0 + unit() * j)).max(1.0);
                    let nh = (h * (1.0 + unit() * j)).max(1.0);
                    Some([nx, ny, nw, nh].map(|v| v.round() as u32))
                })
                .collect()
        })
        .collect()
}

/// One sequence scored clean and spoilt.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceResult {
    /// The sequence's name.
    pub name: String,
    /// Frames.
    pub frames: usize,
    /// Its true boxes as given (ids hidden).
    pub clean: MotScore,
    /// With [`Noise::BENCH`].
    pub noisy: MotScore,
    /// Seconds the tracker took over the clean boxes.
    pub seconds: f64,
}

/// Track every ground-truth file under `data_dir` clean and with `noise`.
pub fn evaluate(
    data_dir: &Path,
    config: TrackConfig,
    noise: Noise,
) -> Result<Vec<SequenceResult>, MotError> {
    let mut out = Vec::new();
    for file in MotSequence::files(data_dir)? {
        let seq = MotSequence::load(&file)?;
        let start = Instant::now();
        let clean = run_tracker(&tracker_input(&seq, None), config)?;
        let seconds = start.elapsed().as_secs_f64();
        let noisy = run_tracker(&tracker_input(&seq, Some(noise)), config)?;
        out.push(SequenceResult {
            name: seq.name.clone(),
            frames: seq.frames.len(),
            clean: score(&seq.frames, &clean),
            noisy: score(&seq.frames, &noisy),
            seconds,
        });
    }
    Ok(out)
}

/// `octopipe bench track`: the table of [`evaluate`] with the default tracker settings.
pub fn track_table(data_dir: &Path) -> Result<String, MotError> {
    let config = TrackConfig::default();
    let noise = Noise::BENCH;
    let results = evaluate(data_dir, config, noise)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tracker: track high={} low={} iou={} max-age={} min-hits={} on {} ({} files)",
        config.high,
        config.low,
        config.iou,
        config.max_age,
        config.min_hits,
        data_dir.join(MOT_DIR).display(),
        results.len()
    );
    let _ = writeln!(
        s,
        "spoilt: {:.0}% of boxes dropped, the rest jittered by up to {:.0}% of their size (seed {})\n",
        noise.drop * 100.0,
        noise.jitter * 100.0,
        noise.seed
    );
    let _ = writeln!(
        s,
        "| sequence | frames | true tracks | clean IDF1 | clean ID sw. | clean tracks | clean MOTA | spoilt IDF1 | spoilt ID sw. | spoilt tracks | spoilt MOTA | ms/frame |"
    );
    let _ = writeln!(
        s,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in &results {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} | {} | {} | {:.3} | {:.3} | {} | {} | {:.3} | {:.3} |",
            r.name,
            r.frames,
            r.clean.true_tracks,
            r.clean.idf1,
            r.clean.id_switches,
            r.clean.predicted_tracks,
            r.clean.mota,
            r.noisy.idf1,
            r.noisy.id_switches,
            r.noisy.predicted_tracks,
            r.noisy.mota,
            r.seconds * 1000.0 / r.frames.max(1) as f64
        );
    }
    let n = results.len().max(1) as f64;
    let mean = |f: &dyn Fn(&SequenceResult) -> f64| results.iter().map(f).sum::<f64>() / n;
    let sum = |f: &dyn Fn(&SequenceResult) -> u64| results.iter().map(f).sum::<u64>();
    let frames: usize = results.iter().map(|r| r.frames).sum();
    let seconds: f64 = results.iter().map(|r| r.seconds).sum();
    let _ = writeln!(
        s,
        "| **mean** (sums for counts) | {} | {} | {:.3} | {} | {} | {:.3} | {:.3} | {} | {} | {:.3} | {:.3} |",
        frames,
        results.iter().map(|r| r.clean.true_tracks).sum::<usize>(),
        mean(&|r| r.clean.idf1),
        sum(&|r| r.clean.id_switches),
        results.iter().map(|r| r.clean.predicted_tracks).sum::<usize>(),
        mean(&|r| r.clean.mota),
        mean(&|r| r.noisy.idf1),
        sum(&|r| r.noisy.id_switches),
        results.iter().map(|r| r.noisy.predicted_tracks).sum::<usize>(),
        mean(&|r| r.noisy.mota),
        seconds * 1000.0 / frames.max(1) as f64
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_seeded_and_drops_about_its_share() {
        let seq = MotSequence {
            name: "t".into(),
            frames: (0..100)
                .map(|k| (0..20).map(|i| (i, [10 * i, k, 40, 20])).collect())
                .collect(),
        };
        let a = tracker_input(&seq, Some(Noise::BENCH));
        assert_eq!(a, tracker_input(&seq, Some(Noise::BENCH)));
        let kept: usize = a.iter().map(Vec::len).sum();
        assert!((1700..1900).contains(&kept), "{kept} of 2000 kept");
        // Jitter stays within 5% of the size.
        for (f, g) in seq.frames.iter().zip(&a) {
            for b in g {
                let near = f.iter().any(|(_, t)| {
                    (b[0] as f64 - t[0] as f64).abs() <= 2.5
                        && (b[2] as f64 - 40.0).abs() <= 2.5
                        && (b[3] as f64 - 20.0).abs() <= 1.5
                });
                assert!(near, "{b:?}");
            }
        }
        assert_eq!(tracker_input(&seq, None)[3].len(), 20);
    }
}
