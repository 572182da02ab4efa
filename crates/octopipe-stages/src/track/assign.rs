//! Box overlap and optimal assignment: what the tracker matches tracks to boxes with, and what the
//! tracking benchmark matches trajectories with (`bench::mot`).

/// Intersection over union of two `[x, y, w, h]` boxes (0 when either is empty).
pub fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let ix = (a[0] + a[2]).min(b[0] + b[2]) - a[0].max(b[0]);
    let iy = (a[1] + a[3]).min(b[1] + b[3]) - a[1].max(b[1]);
    if ix <= 0.0 || iy <= 0.0 {
        return 0.0;
    }
    let inter = ix * iy;
    let union = a[2] * a[3] + b[2] * b[3] - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// [`iou`] of two integer boxes.
pub fn iou_u32(a: [u32; 4], b: [u32; 4]) -> f64 {
    iou(a.map(f64::from), b.map(f64::from))
}

/// The pairs `(row, col)` of a maximum-weight matching of a `rows` x `cols` matrix of weights
/// (row-major in `weight`): each row and each column in at most one pair, the sum of the pairs'
/// weights as large as it can be. Only pairs of positive weight are ever matched (a weight of 0
/// or less means "may not be matched"); the result is sorted by row.
///
/// The matrix is split into its connected blocks of positive weights (a tracker's matrix is
/// mostly single pairs) and each block is solved exactly with the Hungarian algorithm
/// (shortest augmenting paths with potentials, O(n²m) for an n x m block). A `weight` shorter
/// than `rows * cols` reads as zeros beyond its end.
pub fn max_weight_matching(rows: usize, cols: usize, weight: &[f64]) -> Vec<(usize, usize)> {
    let w = |r: usize, c: usize| weight.get(r * cols + c).copied().unwrap_or(0.0);
    // Connected blocks of positive weights: union-find over rows (0..rows) and columns
    // (rows..rows+cols).
    let mut parent: Vec<usize> = (0..rows + cols).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for r in 0..rows {
        for c in 0..cols {
            if w(r, c) > 0.0 {
                let (a, b) = (root(&mut parent, r), root(&mut parent, rows + c));
                if a != b {
                    parent[a] = b;
                }
            }
        }
    }
    let mut blocks: std::collections::BTreeMap<usize, (Vec<usize>, Vec<usize>)> =
        Default::default();
    for r in 0..rows {
        let k = root(&mut parent, r);
        blocks.entry(k).or_default().0.push(r);
    }
    for c in 0..cols {
        let k = root(&mut parent, rows + c);
        blocks.entry(k).or_default().1.push(c);
    }
    let mut pairs = Vec::new();
    for (block_rows, block_cols) in blocks.values() {
        match (block_rows.as_slice(), block_cols.as_slice()) {
            ([], _) | (_, []) => {}
            ([r], [c]) => pairs.push((*r, *c)),
            _ => {
                // Minimum cost of -weight; the smaller side indexes the rows of the solver.
                let transpose = block_rows.len() > block_cols.len();
                let (n, m) = match transpose {
                    false => (block_rows.len(), block_cols.len()),
                    true => (block_cols.len(), block_rows.len()),
                };
                let cost = |i: usize, j: usize| match transpose {
                    false => -w(block_rows[i], block_cols[j]).max(0.0),
                    true => -w(block_rows[j], block_cols[i]).max(0.0),
                };
                for (i, j) in hungarian(n, m, cost) {
                    let (r, c) = match transpose {
                        false => (block_rows[i], block_cols[j]),
                        true => (block_rows[j], block_cols[i]),
                    };
                    if w(r, c) > 0.0 {
                        pairs.push((r, c));
                    }
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// Minimum-cost assignment of every one of `n` rows to a distinct one of `m >= n` columns:
/// `(row, col)` pairs. Shortest augmenting paths with row and column potentials.
fn hungarian(n: usize, m: usize, cost: impl Fn(usize, usize) -> f64) -> Vec<(usize, usize)> {
    debug_assert!(n <= m);
    // 1-based, column 0 a sentinel: `p[j]` is the row assigned to column j (0: none).
    let mut u = vec![0.0; n + 1];
    let mut v = vec![0.0; m + 1];
    let mut p = vec![0usize; m + 1];
    let mut way = vec![0usize; m + 1];
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0;
        let mut minv = vec![f64::INFINITY; m + 1];
        let mut used = vec![false; m + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0;
            for j in 1..=m {
                if used[j] {
                    continue;
                }
                let cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
                if cur < minv[j] {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if minv[j] < delta {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for j in 0..=m {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        // Flip the augmenting path.
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    (1..=m)
        .filter(|&j| p[j] != 0)
        .map(|j| (p[j] - 1, j - 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_known_boxes() {
        assert_eq!(iou([0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 10.0]), 1.0);
        assert_eq!(iou([0.0, 0.0, 10.0, 10.0], [10.0, 0.0, 10.0, 10.0]), 0.0);
        // Half overlap: 50 / 150.
        let v = iou([0.0, 0.0, 10.0, 10.0], [5.0, 0.0, 10.0, 10.0]);
        assert!((v - 1.0 / 3.0).abs() < 1e-12, "{v}");
        assert_eq!(iou_u32([0, 0, 0, 5], [0, 0, 4, 5]), 0.0);
    }

    /// Every matching of a small matrix, to check the solver against.
    fn brute_force(rows: usize, cols: usize, w: &[f64]) -> f64 {
        fn go(r: usize, rows: usize, cols: usize, w: &[f64], used: &mut Vec<bool>) -> f64 {
            if r == rows {
                return 0.0;
            }
            let mut best = go(r + 1, rows, cols, w, used);
            for c in 0..cols {
                if !used[c] && w[r * cols + c] > 0.0 {
                    used[c] = true;
                    best = best.max(w[r * cols + c] + go(r + 1, rows, cols, w, used));
                    used[c] = false;
                }
            }
            best
        }
        go(0, rows, cols, w, &mut vec![false; cols])
    }

    #[test]
    fn matching_is_optimal_where_greedy_is_not() {
        // Greedy takes (0, 0) = 0.9 and is left with (1, 1) = 0.1; the optimum pairs across.
        let w = [0.9, 0.8, 0.7, 0.1];
        assert_eq!(max_weight_matching(2, 2, &w), vec![(0, 1), (1, 0)]);
        // Forbidden pairs (<= 0) are never matched, even when nothing else is left.
        let w = [0.5, 0.0, 0.0, -1.0];
        assert_eq!(max_weight_matching(2, 2, &w), vec![(0, 0)]);
        assert!(max_weight_matching(0, 3, &[]).is_empty());
        assert!(max_weight_matching(3, 0, &[]).is_empty());
    }

    #[test]
    fn matching_equals_brute_force_on_random_matrices() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..300 {
            let rows = 1 + (next() % 6) as usize;
            let cols = 1 + (next() % 6) as usize;
            // About half the pairs forbidden, so blocks of several sizes form.
            let w: Vec<f64> = (0..rows * cols)
                .map(|_| match next() % 2 {
                    0 => 0.0,
                    _ => (next() % 1000) as f64 / 1000.0,
                })
                .collect();
            let pairs = max_weight_matching(rows, cols, &w);
            let total: f64 = pairs.iter().map(|&(r, c)| w[r * cols + c]).sum();
            assert!(
                (total - brute_force(rows, cols, &w)).abs() < 1e-9,
                "{rows}x{cols} {w:?}: {pairs:?}"
            );
            let mut rs: Vec<usize> = pairs.iter().map(|p| p.0).collect();
            let mut cs: Vec<usize> = pairs.iter().map(|p| p.1).collect();
            rs.dedup();
            cs.sort_unstable();
            cs.dedup();
            assert_eq!((rs.len(), cs.len()), (pairs.len(), pairs.len()));
        }
    }
}
