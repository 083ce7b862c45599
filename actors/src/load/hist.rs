//! Latency histograms: HDR histograms (the `hdrhistogram` crate) in microseconds, from 1 µs to
//! an hour at three significant digits, summarised as a [`Distribution`] in milliseconds.

use super::report::Distribution;
use hdrhistogram::Histogram;
use std::time::Duration;

/// An HDR histogram of durations.
#[derive(Clone, Debug)]
pub struct Hist(Histogram<u64>);

const MAX_US: u64 = 3_600_000_000;

impl Default for Hist {
    fn default() -> Self {
        // Bounds are constants that hdrhistogram accepts (low ≥ 1, high ≥ 2·low, sigfig ≤ 5).
        Hist(
            Histogram::new_with_bounds(1, MAX_US, 3).unwrap_or_else(|_| {
                Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant figures is valid"))
            }),
        )
    }
}

impl Hist {
    /// Records a duration (clamped to 1 µs – 1 h).
    pub fn record(&mut self, d: Duration) {
        self.record_us(d.as_micros().min(u128::from(MAX_US)) as u64);
    }

    /// Records microseconds (clamped to 1 µs – 1 h).
    pub fn record_us(&mut self, us: u64) {
        self.0.saturating_record(us.clamp(1, MAX_US));
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `q`-quantile (0–1), ms; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    /// Forgets every sample (keeps the allocation).
    pub fn reset(&mut self) {
        self.0.reset();
    }

    /// Adds another histogram's samples.
    pub fn add(&mut self, other: &Hist) {
        let _ = self.0.add(&other.0);
    }

    /// The recorded values and their counts, `[value µs, count]` per bucket that holds samples:
    /// what a worker sends its coordinator. [`Hist::from_counts`] rebuilds the same histogram
    /// (each value is its bucket's highest equivalent value, so it lands in the same bucket).
    pub fn counts(&self) -> Vec<[u64; 2]> {
        self.0
            .iter_recorded()
            .map(|v| [v.value_iterated_to(), v.count_at_value()])
            .collect()
    }

    /// The histogram of [`Hist::counts`].
    pub fn from_counts(counts: &[[u64; 2]]) -> Hist {
        let mut h = Hist::default();
        for [v, n] in counts {
            h.0.saturating_record_n(v.clamp(&1, &MAX_US).to_owned(), *n);
        }
        h
    }

    /// Percentiles, ms.
    pub fn distribution(&self) -> Distribution {
        if self.0.is_empty() {
            return Distribution::default();
        }
        Distribution {
            count: self.0.len() as usize,
            mean: self.0.mean() / 1000.0,
            p50: self.quantile_ms(0.5),
            p90: self.quantile_ms(0.9),
            p99: self.quantile_ms(0.99),
            max: self.0.max() as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_three_significant_digits() {
        let mut h = Hist::default();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let d = h.distribution();
        assert_eq!(d.count, 1000);
        assert!((d.p50 - 500.0).abs() <= 0.5, "{}", d.p50);
        assert!((d.p99 - 990.0).abs() <= 1.0, "{}", d.p99);
        assert!((d.max - 1000.0).abs() <= 1.0);
        assert!((d.mean - 500.5).abs() <= 0.5);
        h.record(Duration::from_secs(100_000));
        assert!(h.distribution().max <= 3_600_000.0 * 1.001);
        assert_eq!(Hist::default().distribution(), Distribution::default());
    }

    #[test]
    fn merged_counts_equal_one_histogram_of_every_sample() {
        // A seeded spread of latencies split over three "workers" in turn.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut one = Hist::default();
        let mut parts = [Hist::default(), Hist::default(), Hist::default()];
        for i in 0..30_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let us = 100 + x % 2_000_000;
            one.record_us(us);
            parts[i % 3].record_us(us);
        }
        let mut merged = Hist::default();
        for p in &parts {
            merged.add(&Hist::from_counts(&p.counts()));
        }
        assert_eq!(merged.distribution(), one.distribution());
        assert_eq!(merged.counts(), one.counts());
        // Averaging the parts' percentiles is not the same figure in general; the merge is.
        assert_ne!(parts[0].counts(), one.counts());
    }
}
