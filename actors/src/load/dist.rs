//! Durations as people write them (`400ms`, `2s`, `1.5m`), and the seeded lognormal that simulated
//! tools and simulated people draw their times from (fitted to a median and a 99th percentile,
//! the way `--model sim:` draws model latency).

use std::time::Duration;

/// Parses a duration: a number with `us`, `ms`, `s`, `m` or `h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    planwright::duration::parse(text, planwright::duration::BareUnit::Seconds)
        .filter(|d| d.as_secs_f64() <= 1e9)
        .ok_or_else(|| format!("`{text}`: expected a duration like 400ms, 2s, 1.5m or 1h"))
}

pub use crate::model::lognormal::Lognormal;

impl Lognormal {
    /// Parses `p50=…,p99=…` (p99 defaults to 4.5 × p50, as for the model simulator); other keys
    /// are returned for the caller.
    pub fn parse_with(text: &str) -> Result<(Lognormal, Vec<(String, String)>), String> {
        let mut p50 = None;
        let mut p99 = None;
        let mut rest = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected key=value"))?;
            match k.trim() {
                "p50" => p50 = Some(parse_duration(v)?),
                "p99" => p99 = Some(parse_duration(v)?),
                other => rest.push((other.to_string(), v.trim().to_string())),
            }
        }
        let p50 = p50.ok_or_else(|| format!("`{text}`: p50 is required"))?;
        let p99 = p99.unwrap_or(p50.mul_f64(4.5));
        if p99 < p50 {
            return Err(format!("`{text}`: p99 is below p50"));
        }
        Ok((Lognormal { p50, p99 }, rest))
    }
}

impl std::str::FromStr for Lognormal {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (d, rest) = Lognormal::parse_with(s)?;
        match rest.first() {
            Some((k, _)) => Err(format!("unknown setting `{k}` (known: p50, p99)")),
            None => Ok(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn durations_parse_with_units_and_reject_garbage() {
        assert_eq!(parse_duration("400ms"), Ok(Duration::from_millis(400)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        for bad in ["", "fast", "-1s", "2 parsecs", "NaNs", "1e300s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lognormal_draws_match_its_median_and_p99() {
        let d: Lognormal = "p50=400ms,p99=2s".parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut v: Vec<f64> = (0..20_000)
            .map(|_| d.sample(&mut rng).as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        let (p50, p99) = (v[10_000], v[19_800]);
        assert!((p50 - 0.4).abs() < 0.02, "p50 {p50}");
        assert!((p99 - 2.0).abs() < 0.25, "p99 {p99}");
        assert!("p99=1s".parse::<Lognormal>().is_err());
        assert!("p50=1s,p99=10ms".parse::<Lognormal>().is_err());
        assert!("p50=1s,colour=red".parse::<Lognormal>().is_err());
    }
}
