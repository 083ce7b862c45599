//! Scenarios: how conversations arrive. A closed loop starts the next conversation when one ends
//! (at most C at once); the open kinds start conversations on a clock, independent of how fast
//! they finish — a constant rate, a ramp through stages, or a soak (a rate held for a long time).
//! [`Scenario::due_times`] gives every open arrival's due time up front, so the driver, the live
//! view and the tests agree on them exactly.

use super::dist::parse_duration;
use serde::Serialize;
use std::time::Duration;

/// One stage of a ramp: the rate moves linearly to `target` over `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stage {
    /// Conversations started per second at the stage's end.
    pub target: f64,
    /// How long the stage lasts.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// How conversations arrive.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scenario {
    /// `conversations` in all, the next started when one ends, at most `concurrency` at once.
    Closed {
        /// Conversations in all.
        conversations: usize,
        /// At most this many at once.
        concurrency: usize,
    },
    /// `rate` conversations started per second for `duration`.
    Constant {
        /// Per second.
        rate: f64,
        /// For how long (seconds in JSON).
        #[serde(serialize_with = "secs")]
        duration: Duration,
    },
    /// From `start_rate`, through each stage's target in turn (linear within a stage).
    Ramping {
        /// The rate at the start.
        start_rate: f64,
        /// The stages.
        stages: Vec<Stage>,
    },
    /// A constant rate held for a long time; the report judges memory over it.
    Soak {
        /// Per second.
        rate: f64,
        /// For how long (seconds in JSON).
        #[serde(serialize_with = "secs")]
        duration: Duration,
    },
}

impl Scenario {
    /// Checks the numbers (a rate is finite and not negative, something arrives).
    pub fn validate(&self) -> Result<(), String> {
        let rate_ok = |r: f64| (0.0..=100_000.0).contains(&r);
        match self {
            Scenario::Closed {
                conversations,
                concurrency,
            } => {
                if *conversations == 0 || *concurrency == 0 {
                    return Err("--conversations and --concurrency must be at least 1".into());
                }
            }
            Scenario::Constant { rate, duration } | Scenario::Soak { rate, duration } => {
                if !rate_ok(*rate) || *rate == 0.0 {
                    return Err(format!(
                        "--rate {rate}: expected conversations per second above 0"
                    ));
                }
                if duration.is_zero() {
                    return Err("--duration must be above 0".into());
                }
            }
            Scenario::Ramping { start_rate, stages } => {
                if stages.is_empty() {
                    return Err("a ramping scenario needs at least one stage".into());
                }
                if !rate_ok(*start_rate) || stages.iter().any(|s| !rate_ok(s.target)) {
                    return Err("ramp rates must be between 0 and 100000 per second".into());
                }
            }
        }
        if self.is_open() && self.due_times_len() == 0 {
            return Err("the scenario starts no conversation".into());
        }
        if self.due_times_len() > 10_000_000 {
            return Err("the scenario starts more than 10 million conversations".into());
        }
        Ok(())
    }

    /// The scenario's name in the report (`closed`, `constant`, `ramping`, `soak`).
    pub fn kind(&self) -> &'static str {
        match self {
            Scenario::Closed { .. } => "closed",
            Scenario::Constant { .. } => "constant",
            Scenario::Ramping { .. } => "ramping",
            Scenario::Soak { .. } => "soak",
        }
    }

    /// True for the arrival-rate kinds.
    pub fn is_open(&self) -> bool {
        !matches!(self, Scenario::Closed { .. })
    }

    /// How long arrivals go on (zero for a closed loop).
    pub fn duration(&self) -> Duration {
        match self {
            Scenario::Closed { .. } => Duration::ZERO,
            Scenario::Constant { duration, .. } | Scenario::Soak { duration, .. } => *duration,
            Scenario::Ramping { stages, .. } => stages.iter().map(|s| s.duration).sum(),
        }
    }

    /// The rate at time `t` (conversations per second; 0 for a closed loop).
    pub fn rate_at(&self, t: Duration) -> f64 {
        match self {
            Scenario::Closed { .. } => 0.0,
            Scenario::Constant { rate, duration } | Scenario::Soak { rate, duration } => {
                if t < *duration {
                    *rate
                } else {
                    0.0
                }
            }
            Scenario::Ramping { start_rate, stages } => {
                let (mut from, mut t0) = (*start_rate, 0.0);
                let t = t.as_secs_f64();
                for s in stages {
                    let d = s.duration.as_secs_f64();
                    if t < t0 + d {
                        return from + (s.target - from) * (t - t0) / d;
                    }
                    (from, t0) = (s.target, t0 + d);
                }
                0.0
            }
        }
    }

    fn due_times_len(&self) -> usize {
        match self {
            Scenario::Closed { conversations, .. } => *conversations,
            _ => self.due_times().len(),
        }
    }

    /// How many conversations the scenario starts.
    pub fn conversations(&self) -> usize {
        self.due_times_len()
    }

    /// When each conversation of an open scenario is due, from the start: arrival `k` is due when
    /// the integral of the rate reaches `k` (so a constant rate `r` gives `k / r`), for every
    /// `k` due before the scenario ends. Empty for a closed loop.
    pub fn due_times(&self) -> Vec<Duration> {
        let segments: Vec<(f64, f64, f64)> = match self {
            Scenario::Closed { .. } => return Vec::new(),
            Scenario::Constant { rate, duration } | Scenario::Soak { rate, duration } => {
                vec![(*rate, *rate, duration.as_secs_f64())]
            }
            Scenario::Ramping { start_rate, stages } => {
                let mut from = *start_rate;
                stages
                    .iter()
                    .map(|s| {
                        let seg = (from, s.target, s.duration.as_secs_f64());
                        from = s.target;
                        seg
                    })
                    .collect()
            }
        };
        let mut out = Vec::new();
        let (mut t0, mut n0) = (0.0f64, 0.0f64);
        let mut k = 0u64;
        for (a, b, d) in segments {
            if d <= 0.0 {
                continue;
            }
            // Arrivals in this segment: a·τ + (b−a)·τ²/(2d) = k − n0 for τ in [0, d).
            let c2 = (b - a) / (2.0 * d);
            let total = a * d + c2 * d * d;
            while (k as f64) < n0 + total - 1e-9 {
                let m = k as f64 - n0;
                let disc = (a * a + 4.0 * c2 * m).max(0.0);
                let denom = a + disc.sqrt();
                let tau = if denom > 0.0 { 2.0 * m / denom } else { 0.0 };
                if tau >= d {
                    break;
                }
                out.push(Duration::from_secs_f64(t0 + tau));
                k += 1;
                if out.len() > 10_000_000 {
                    return out;
                }
            }
            t0 += d;
            n0 += total;
        }
        out
    }
}

/// Parses ramp stages: `RATE:DURATION` separated by commas (`10:30s,50:1m,0:30s`; a rate may
/// end in `/s`).
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (rate, dur) = part
                .split_once(':')
                .ok_or_else(|| format!("stage `{part}`: expected RATE:DURATION like 50:1m"))?;
            let rate = rate.trim().trim_end_matches("/s");
            let target: f64 = rate
                .parse()
                .map_err(|_| format!("stage `{part}`: `{rate}` is not a rate"))?;
            Ok(Stage {
                target,
                duration: parse_duration(dur)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: &[Duration]) -> Vec<u128> {
        v.iter().map(|d| d.as_millis()).collect()
    }

    #[test]
    fn a_constant_rate_is_evenly_spaced() {
        let s = Scenario::Constant {
            rate: 4.0,
            duration: Duration::from_secs(2),
        };
        assert_eq!(
            ms(&s.due_times()),
            vec![0, 250, 500, 750, 1000, 1250, 1500, 1750]
        );
        assert!(s.validate().is_ok());
    }

    #[test]
    fn a_ramp_integrates_its_rate() {
        // 0 → 10/s over 2 s: n(t) = 2.5 t², so arrival k is due at sqrt(k / 2.5); then 10/s for 1 s.
        let s = Scenario::Ramping {
            start_rate: 0.0,
            stages: parse_stages("10:2s,10/s:1s").unwrap(),
        };
        let due = s.due_times();
        assert_eq!(due.len(), 20);
        for (k, d) in due.iter().take(10).enumerate() {
            let want = (k as f64 / 2.5).sqrt();
            assert!((d.as_secs_f64() - want).abs() < 1e-9, "{k}: {d:?}");
        }
        assert_eq!(
            ms(&due[10..]),
            (0..10).map(|i| 2000 + i * 100).collect::<Vec<_>>()
        );
        assert_eq!(s.rate_at(Duration::from_secs(1)), 5.0);
        assert_eq!(s.duration(), Duration::from_secs(3));
    }

    #[test]
    fn stages_and_rates_are_checked() {
        assert!(parse_stages("10").is_err());
        assert!(parse_stages("fast:1s").is_err());
        assert!(parse_stages("1:forever").is_err());
        let none = Scenario::Ramping {
            start_rate: 0.0,
            stages: vec![],
        };
        assert!(none.validate().unwrap_err().contains("at least one stage"));
        let zero = Scenario::Constant {
            rate: 0.0,
            duration: Duration::from_secs(1),
        };
        assert!(zero.validate().is_err());
        let nan = Scenario::Soak {
            rate: f64::NAN,
            duration: Duration::from_secs(1),
        };
        assert!(nan.validate().is_err());
    }

    proptest! {
        #[test]
        fn ramps_start_as_many_as_their_integral(
            start in 0.0f64..50.0,
            stages in proptest::collection::vec((0.0f64..50.0, 1u64..5), 1..4),
        ) {
            let stages: Vec<Stage> = stages
                .into_iter()
                .map(|(t, s)| Stage { target: t, duration: Duration::from_secs(s) })
                .collect();
            let mut from = start;
            let mut integral = 0.0;
            for s in &stages {
                integral += (from + s.target) / 2.0 * s.duration.as_secs_f64();
                from = s.target;
            }
            let sc = Scenario::Ramping { start_rate: start, stages };
            let due = sc.due_times();
            prop_assert!((due.len() as f64 - integral.ceil()).abs() <= 1.0, "{} vs {}", due.len(), integral);
            prop_assert!(due.windows(2).all(|w| w[0] <= w[1]));
            prop_assert!(due.iter().all(|d| *d < sc.duration()));
        }
    }
}
