//! A log-linear latency histogram in the spirit of HdrHistogram.
//!
//! Values are nanoseconds. Below 128 every value has its own bucket; above, each
//! power of two is split into 64 linear sub-buckets, so a recorded value is known to
//! within 1/64 (< 1.6 %) and the whole `u64` range fits in 3,776 counters (30 KiB).
//! Quantiles report the highest value of their bucket (as HdrHistogram's
//! "highest equivalent value" does), capped at the largest value recorded, so they
//! never understate a latency.

/// Linear buckets below the first split (and sub-buckets per power of two, times 2).
const LINEAR: u64 = 128;
/// Sub-buckets per power of two above `LINEAR`.
const SUB: u64 = 64;
/// Number of counters: 128 linear, then 64 per power of two from 2^7 to 2^63.
const BUCKETS: usize = (LINEAR + SUB * 57) as usize;

/// A latency histogram.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

fn index_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    // floor(log2 v) >= 7; keep the top 7 bits, whose value is in [64, 128).
    let shift = 63 - u64::from(v.leading_zeros()) - 6;
    (shift * SUB + (v >> shift)) as usize
}

/// The highest value that lands in bucket `i`.
fn highest_of(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let shift = i / SUB - 1;
    let m = i % SUB + SUB;
    // For the last bucket (m + 1) << shift overflows: saturate.
    ((m + 1) << shift).wrapping_sub(1).max(m << shift)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value (nanoseconds).
    pub fn record(&mut self, v: u64) {
        self.counts[index_of(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    /// Mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at quantile `q` in `[0, 1]`: the smallest bucket bound such that at
    /// least `q` of the values are at or below it (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest_of(i).min(self.max).max(self.min);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bounded() {
        let mut prev = 0;
        for v in (0..1_000_000u64).chain([u64::MAX / 2, u64::MAX]) {
            let i = index_of(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            assert!(i >= prev || v > 1_000_000, "index decreases at {v}");
            prev = i;
            assert!(highest_of(i) >= v, "bucket {i} top below {v}");
            let err = (highest_of(i) - v) as f64 / v.max(1) as f64;
            assert!(err <= 1.0 / 64.0, "error {err} at {v}");
        }
        assert_eq!(index_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 / 50_000_000.0 - 1.0).abs() < 0.02, "p50 {p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.02, "p99 {p99}");
        assert_eq!(h.quantile(1.0), 100_000_000);
        assert_eq!(h.min(), 1000);
        let mut other = Histogram::new();
        other.record(5);
        h.merge(&other);
        assert_eq!(h.count(), 100_001);
        assert_eq!(h.min(), 5);
        assert_eq!(Histogram::new().quantile(0.99), 0);
    }
}
