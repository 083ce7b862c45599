//! `--tools sim:p50=400ms,p99=2s,seed=1`: gives the research planner's search steps the latency
//! of a web search (seeded lognormal draws on tokio's clock), so a load shows what running plan
//! steps in parallel buys. `compare` and `summarize` stay local and instant unless
//! `only=search+compare+summarize` names them.

use super::dist::Lognormal;
use crate::research::ToolLatency;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Mutex;
use std::time::Duration;

/// Simulated tool latency.
#[derive(Debug)]
pub struct ToolSim {
    /// The latency distribution.
    pub latency: Lognormal,
    /// The tools it applies to.
    pub only: Vec<String>,
    /// The seed.
    pub seed: u64,
    rng: Mutex<SmallRng>,
}

impl std::str::FromStr for ToolSim {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let body = s.trim().strip_prefix("sim:").ok_or_else(|| {
            format!("--tools `{s}`: expected sim:p50=400ms,p99=2s,seed=1 (or `none`)")
        })?;
        let (latency, rest) = Lognormal::parse_with(body).map_err(|e| format!("--tools: {e}"))?;
        let mut seed = 1;
        let mut only = vec!["search".to_string()];
        for (k, v) in rest {
            match k.as_str() {
                "seed" => {
                    seed = v
                        .parse()
                        .map_err(|_| format!("--tools: `seed={v}`: expected an integer"))?
                }
                "only" => only = v.split('+').map(|t| t.trim().to_string()).collect(),
                other => {
                    return Err(format!(
                        "--tools: unknown setting `{other}` (known: p50, p99, seed, only)"
                    ))
                }
            }
        }
        Ok(ToolSim {
            latency,
            only,
            seed,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
        })
    }
}

impl ToolLatency for ToolSim {
    fn delay(&self, tool: &str) -> Duration {
        if !self.only.iter().any(|t| t == tool) {
            return Duration::ZERO;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        self.latency.sample(&mut rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_steps_get_latency_and_local_tools_do_not() {
        let sim: ToolSim = "sim:p50=400ms,p99=2s,seed=1".parse().unwrap();
        assert_eq!(sim.delay("compare"), Duration::ZERO);
        let draws: Vec<Duration> = (0..200).map(|_| sim.delay("search")).collect();
        assert!(draws.iter().all(|d| !d.is_zero()));
        let again: ToolSim = "sim:p50=400ms,p99=2s,seed=1".parse().unwrap();
        assert_eq!(again.delay("search"), draws[0], "seeded");
        let all: ToolSim = "sim:p50=1s,only=search+summarize".parse().unwrap();
        assert!(!all.delay("summarize").is_zero());
        for bad in [
            "p50=1s",
            "sim:p99=1s",
            "sim:p50=1s,colour=red",
            "sim:p50=1s,seed=x",
        ] {
            assert!(bad.parse::<ToolSim>().is_err(), "{bad}");
        }
    }
}
