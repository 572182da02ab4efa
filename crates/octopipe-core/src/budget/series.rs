//! Durations of a run: a series of samples with bounded memory ([`Series`]) and its
//! percentiles ([`Stats`]).

use std::time::Duration;

/// Durations kept exactly up to [`Series::EXACT`] samples, then in a log histogram (128 buckets
/// per octave: percentiles within 0.8%), so a run of any length holds bounded memory.
#[derive(Debug, Clone, Default)]
pub struct Series {
    exact: Vec<Duration>,
    /// Counts per bucket once the exact samples were folded in.
    hist: Vec<u64>,
    count: u64,
    max: Duration,
}

impl Series {
    /// Samples kept exactly.
    pub const EXACT: usize = 10_000;
    const SUB: u32 = 7;

    fn bucket(ns: u64) -> usize {
        let ns = ns.max(1);
        let octave = 63 - ns.leading_zeros();
        let mask = (1u64 << Self::SUB) - 1;
        let sub = if octave >= Self::SUB {
            (ns >> (octave - Self::SUB)) & mask
        } else {
            (ns << (Self::SUB - octave)) & mask
        };
        ((octave as usize) << Self::SUB) | sub as usize
    }

    /// The smallest duration of bucket `b`.
    fn floor(b: usize) -> Duration {
        let octave = (b >> Self::SUB) as u32;
        let mantissa = (1u64 << Self::SUB) | (b as u64 & ((1 << Self::SUB) - 1));
        let ns = if octave >= Self::SUB {
            mantissa << (octave - Self::SUB)
        } else {
            mantissa >> (Self::SUB - octave)
        };
        Duration::from_nanos(ns)
    }

    fn fold(&mut self, d: Duration) {
        let b = Self::bucket(d.as_nanos().min(u64::MAX as u128) as u64);
        if self.hist.len() <= b {
            self.hist.resize(b + 1, 0);
        }
        self.hist[b] += 1;
    }

    /// Add a sample.
    pub fn push(&mut self, d: Duration) {
        self.count += 1;
        self.max = self.max.max(d);
        if self.hist.is_empty() && self.exact.len() < Self::EXACT {
            self.exact.push(d);
            return;
        }
        for e in std::mem::take(&mut self.exact) {
            self.fold(e);
        }
        self.fold(d);
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &Series) {
        for d in &other.exact {
            self.push(*d);
        }
        if !other.hist.is_empty() {
            for e in std::mem::take(&mut self.exact) {
                self.fold(e);
            }
            if self.hist.len() < other.hist.len() {
                self.hist.resize(other.hist.len(), 0);
            }
            for (a, b) in self.hist.iter_mut().zip(&other.hist) {
                *a += b;
            }
            self.count += other.hist.iter().sum::<u64>();
            self.max = self.max.max(other.max);
        }
    }

    /// Samples added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Percentiles: exact while the samples are kept, else to the histogram's precision.
    pub fn stats(&self) -> Stats {
        if self.hist.is_empty() {
            return Stats::of(&mut self.exact.clone());
        }
        let rank = |p: f64| {
            let want = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
            let mut seen = 0;
            for (b, n) in self.hist.iter().enumerate() {
                seen += n;
                if seen >= want {
                    return Self::floor(b).min(self.max);
                }
            }
            self.max
        };
        Stats {
            count: self.count as usize,
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            max: self.max,
        }
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms(*d))
}

/// Percentiles of a set of durations (serialized in milliseconds: `p50_ms`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Samples.
    pub count: usize,
    /// Median.
    #[serde(rename = "p50_ms", serialize_with = "ser_ms")]
    pub p50: Duration,
    /// 95th percentile.
    #[serde(rename = "p95_ms", serialize_with = "ser_ms")]
    pub p95: Duration,
    /// 99th percentile.
    #[serde(rename = "p99_ms", serialize_with = "ser_ms")]
    pub p99: Duration,
    /// Largest.
    #[serde(rename = "max_ms", serialize_with = "ser_ms")]
    pub max: Duration,
}

impl Stats {
    /// Summarise `v` (sorted in place). Percentiles are nearest-rank.
    pub fn of(v: &mut [Duration]) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable();
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Stats {
            count: v.len(),
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            max: v[v.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Stats::of(&mut v);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p95, Duration::from_millis(95));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(Stats::of(&mut []).count, 0);
    }

    #[test]
    fn long_series_keep_bounded_memory_and_close_percentiles() {
        let mut s = Series::default();
        for i in 1..=100_000u64 {
            s.push(Duration::from_micros(i));
        }
        assert!(
            s.exact.is_empty() && s.hist.len() < 4096,
            "{}",
            s.hist.len()
        );
        let st = s.stats();
        assert_eq!(
            (st.count, st.max),
            (100_000, Duration::from_micros(100_000))
        );
        for (got, want) in [(st.p50, 50_000.0), (st.p95, 95_000.0), (st.p99, 99_000.0)] {
            let got = got.as_secs_f64() * 1e6;
            assert!((got - want).abs() / want < 0.01, "{got} vs {want}");
        }
        let mut short = Series::default();
        (1..=100).for_each(|i| short.push(Duration::from_millis(i)));
        let mut merged = Series::default();
        merged.merge(&short);
        merged.merge(&s);
        assert_eq!(merged.count(), 100_100);
        assert_eq!(
            short.stats().p50,
            Duration::from_millis(50),
            "exact while small"
        );
    }
}
