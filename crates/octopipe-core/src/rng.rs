//! SplitMix64: the small seeded generator behind every "random but the same for a seed" thing in
//! the library (synthetic boxes, the random tile grid, the synthetic satellite scene). Integer
//! arithmetic only, so a seed gives the same numbers on every machine.

/// SplitMix64 (Steele, Lea and Flood; the seeding generator of `java.util.SplittableRandom`).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo <= hi`): `lo + next_u64() % (hi - lo + 1)`.
    pub fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_u64() % (u64::from(hi - lo) + 1)) as u32
    }

    /// Uniform in `0..n` (0 when `n` is 0): an index into `n` things.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(f64::MIN_POSITIVE);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn between_stays_in_its_bounds_and_reaches_both() {
        let mut r = Rng::new(3);
        let v: Vec<u32> = (0..1000).map(|_| r.between(128, 131)).collect();
        assert!(v.iter().all(|x| (128..=131).contains(x)));
        assert!(v.contains(&128) && v.contains(&131));
        assert_eq!(Rng::new(9).between(5, 5), 5);
        let v: Vec<usize> = (0..1000).map(|_| r.below(3)).collect();
        assert!(v.iter().all(|&x| x < 3) && v.contains(&0) && v.contains(&2));
        assert_eq!(r.below(0), 0);
    }
}
