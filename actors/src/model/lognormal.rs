//! The seeded lognormal latency every simulator draws from (the model simulator, and `load`'s
//! simulated tools and people), fitted to a median and a 99th percentile.

use rand::rngs::SmallRng;
use rand::Rng;
use std::time::Duration;

/// A lognormal distribution of durations fitted to its median and 99th percentile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lognormal {
    /// Median.
    pub p50: Duration,
    /// 99th percentile (at least the median).
    pub p99: Duration,
}

impl Lognormal {
    /// A draw: `ln L ~ N(mu, sigma)` with `exp(mu) = p50` and `exp(mu + 2.326 sigma) = p99`
    /// (two uniform draws from `rng`, Box–Muller), at most a day.
    pub fn sample(&self, rng: &mut SmallRng) -> Duration {
        let p50 = self.p50.as_secs_f64();
        if p50 <= 0.0 {
            return Duration::ZERO;
        }
        let sigma = (self.p99.as_secs_f64() / p50).ln().max(0.0) / 2.326_348;
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        Duration::from_secs_f64((p50 * (sigma * z).exp()).min(86_400.0))
    }
}
