//! The tilestats settings' defaults, the level's raw threshold, the statistics and the keep.

use super::*;
use octopipe_core::frame::{PixelSums, TileStats};
use octopipe_core::stage::PropChoice;

#[test]
fn the_declared_defaults_are_the_constants() {
    let d = TileStatsConfig::default();
    assert_eq!((d.level, d.block_pixels), (0.5, DEFAULT_BLOCK_PIXELS));
    assert_eq!((d.downlink_mbps, d.offset, d.scale), (2.0, 0.0, None));
    assert_eq!(
        (d.score, d.band, d.top_k),
        (Property::Mean, BandName::Luma, None)
    );
    for s in Score::WORDS {
        let props = TileStatsProps {
            score: s.parse().unwrap(),
            ..TileStatsProps::default()
        };
        assert_eq!(
            Property::parse(s),
            Some(TileStatsConfig::from_props(props, None).score)
        );
    }
}

#[test]
fn the_level_maps_to_the_first_raw_sample_above_it() {
    // 0.5 * 65535 = 32767.5: 32768 is the first sample whose value is above 0.5.
    assert_eq!(above_from(0.5, 1.0 / 65535.0, 0.0, 65535), 32768);
    assert_eq!(above_from(-1.0, 1.0 / 255.0, 0.0, 255), 0);
    assert_eq!(
        above_from(1.0, 1.0 / 255.0, 0.0, 255),
        256,
        "none is above 1"
    );
    // Reflectance: 1e-4 per count, offset -0.1: above 0.2 means 3001 and up.
    assert_eq!(above_from(0.2, 1e-4, -0.1, 65535), 3001);
}

#[test]
fn statistics_come_from_the_exact_sums() {
    // Samples 1, 2, 3, 4: mean 2.5, population std sqrt(1.25).
    let sums = PixelSums {
        sum: 10,
        sum_sq: 30,
        above: 2,
        min: 1,
        max: 4,
    };
    let s = derive(sums, 4, 2.0, 1.0);
    assert_eq!((s.mean, s.min, s.max, s.above), (6.0, 3.0, 9.0, 0.5));
    assert!((s.std - 2.0 * 1.25f64.sqrt()).abs() < 1e-12);
    // A constant tile has no spread, exactly.
    let flat = PixelSums {
        sum: 65535 * 262_144,
        sum_sq: 65535 * 65535 * 262_144,
        above: 0,
        min: 65535,
        max: 65535,
    };
    assert_eq!(derive(flat, 262_144, 1.0, 0.0).std, 0.0);
}

#[test]
fn top_k_keeps_the_best_passing_tiles_and_ties_go_to_the_earlier() {
    let mut stats: Vec<TileStats> = [0.9, 0.2, 0.7, 0.7, 0.95]
        .iter()
        .map(|&m| derive(PixelSums::EMPTY, 1, 1.0, m))
        .collect();
    let sizes = vec![(1, 1); 5];
    let rule = Rule::parse("mean > 0.5").unwrap();
    select(&mut stats, &sizes, Some(&rule), Some(3), Property::Mean);
    let kept: Vec<bool> = stats.iter().map(|s| s.kept).collect();
    assert_eq!(kept, [true, false, true, false, true]);
    select(&mut stats, &sizes, None, None, Property::Mean);
    assert!(stats.iter().all(|s| s.kept));
}
