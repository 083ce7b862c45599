//! A lock-free latency histogram for the per-node statistics: 160 buckets on a quarter-power-of-two
//! scale of microseconds (each bucket ≤ 25 % wide, up to 2^41 µs ≈ 25 days), one relaxed `fetch_add` per sample, so a node
//! actor can record every execution without slowing down and a reader (`/metrics`, the studio)
//! can ask for percentiles at any time.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets: bucket `b` holds samples in `[lower(b), lower(b + 1))` microseconds.
const BUCKETS: usize = 160;

/// A latency histogram in microseconds.
#[derive(Debug)]
pub struct LatencyHistogram {
    counts: [AtomicU64; BUCKETS],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The lower bound of a bucket, in microseconds: 0, 1, 2, 3, then four buckets per power of two.
fn lower(bucket: usize) -> u64 {
    if bucket < 4 {
        return bucket as u64;
    }
    let octave = (bucket / 4) as u32; // 1.. : [2^(octave+1), 2^(octave+2))
    let base = 1u64 << (octave + 1);
    base + (base / 4) * (bucket % 4) as u64
}

/// The bucket a sample falls in.
fn bucket_of(us: u64) -> usize {
    if us < 4 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // us in [2^octave, 2^(octave+1))
    let quarter = ((us >> (octave - 2)) & 3) as usize;
    ((octave - 1) * 4 + quarter).min(BUCKETS - 1)
}

impl LatencyHistogram {
    /// Records one sample.
    pub fn record(&self, us: u64) {
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// The `q`-quantile (0.0–1.0) in microseconds, as the upper bound of the bucket it falls in
    /// (so it never understates); 0 with no samples.
    pub fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return if b + 1 < BUCKETS {
                    lower(b + 1).saturating_sub(1).max(lower(b))
                } else {
                    lower(b)
                };
            }
        }
        lower(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_ordered_and_contiguous() {
        for b in 0..BUCKETS - 1 {
            assert!(lower(b) < lower(b + 1), "bucket {b}");
            assert_eq!(bucket_of(lower(b)), b, "lower bound of {b}");
            assert_eq!(bucket_of(lower(b + 1) - 1), b, "upper bound of {b}");
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let h = LatencyHistogram::default();
        for us in 1..=1000 {
            h.record(us);
        }
        let p50 = h.quantile(0.5);
        let p99 = h.quantile(0.99);
        assert!((500..=600).contains(&p50), "p50 {p50}");
        assert!((990..=1200).contains(&p99), "p99 {p99}");
        assert_eq!(LatencyHistogram::default().quantile(0.5), 0);
    }

    proptest! {
        #[test]
        fn a_quantile_never_understates_and_stays_within_a_bucket(us in 0u64..(1u64 << 40)) {
            let h = LatencyHistogram::default();
            h.record(us);
            let q = h.quantile(0.5);
            prop_assert!(q >= us);
            prop_assert!(us < 4 || (q as f64) <= us as f64 * 1.26 + 1.0, "{us} → {q}");
        }
    }
}
