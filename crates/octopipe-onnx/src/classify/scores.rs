//! Turning a crop's logits into scores: softmax, and the best k classes.

/// In-place softmax.
pub fn softmax(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// The best `k` (at least 1) of a score row, best first, as `(class, score)`.
pub(crate) fn top_k(scores: &mut [f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..scores.len() as u32).collect();
    idx.sort_by(|a, b| scores[*b as usize].total_cmp(&scores[*a as usize]));
    idx.truncate(k.max(1));
    idx.into_iter().map(|i| (i, scores[i as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_and_top_k() {
        let mut v = [1.0, 3.0, 2.0, -1.0];
        softmax(&mut v);
        assert!((v.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let c = top_k(&mut v, 3);
        assert_eq!(c[0].0, 1);
        assert!((c[0].1 - 0.6572).abs() < 1e-3, "{}", c[0].1);
        assert_eq!(c.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2, 0]);
    }
}
