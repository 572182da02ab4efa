//! Which of a frame's tiles are kept: the keep rule, then top-k.

use super::rule::{Property, Rule};
use octopipe_core::frame::TileStats;

/// Which of a frame's tiles are kept: those `keep` passes (all without a rule), and of them at
/// most `top_k`, the highest `score` first (ties: the earlier tile). `tiles[i]` is tile i's
/// rectangle `(w, h)`; sets `kept` on each stats.
pub fn select(
    stats: &mut [TileStats],
    sizes: &[(u32, u32)],
    keep: Option<&Rule>,
    top_k: Option<usize>,
    score: Property,
) {
    for (s, &(w, h)) in stats.iter_mut().zip(sizes) {
        s.kept = keep.is_none_or(|r| r.keeps(s, w, h));
    }
    let Some(k) = top_k else { return };
    let mut passing: Vec<usize> = (0..stats.len()).filter(|&i| stats[i].kept).collect();
    if passing.len() <= k {
        return;
    }
    let value = |i: usize| score.of(&stats[i], sizes[i].0, sizes[i].1);
    passing.sort_by(|&a, &b| value(b).total_cmp(&value(a)).then(a.cmp(&b)));
    for &i in &passing[k..] {
        stats[i].kept = false;
    }
}
