//! The `--live` search for the most streams held.

/// The most streams `holds` accepts, up to `max`: 1, 2, 4, ... until one fails or `max` is
/// reached, then bisection between the last held and the first failed. 0 when 1 fails.
/// Assumes that fewer streams hold when more do.
pub fn search_streams(max: usize, mut holds: impl FnMut(usize) -> bool) -> usize {
    let (mut good, mut bad) = (0, None);
    let mut n = 1;
    while n <= max {
        if holds(n) {
            good = n;
            if n == max {
                break;
            }
            n = (n * 2).min(max);
        } else {
            bad = Some(n);
            break;
        }
    }
    if let Some(mut bad) = bad {
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if holds(mid) {
                good = mid;
            } else {
                bad = mid;
            }
        }
    }
    good
}
