//! `--model offline | sim:… | openai`: which model a command uses.

use super::{
    ChatModel, ModelError, OpenAiConfig, OpenAiModel, Responder, SimConfig, SimulatedModel,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The model a run uses.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSpec {
    /// The planner's deterministic offline policy: no model at all.
    Offline,
    /// The simulator around the offline answers.
    Sim(SimConfig),
    /// An OpenAI-compatible server, configured from the environment.
    OpenAi,
}

impl std::str::FromStr for ModelSpec {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s.trim() {
            "offline" => Ok(Self::Offline),
            "openai" => Ok(Self::OpenAi),
            sim if sim == "sim" || sim.starts_with("sim:") => Ok(Self::Sim(sim.parse()?)),
            other => Err(ModelError::Config(format!(
                "unknown model `{other}`: use `offline`, `sim:p50=200ms,p99=900ms,errors=0.01,malformed=0,seed=1` or `openai`"
            ))),
        }
    }
}

impl ModelSpec {
    /// The chat model to drive, or `None` for the offline policy. `responders` answer for the
    /// simulator.
    pub fn build(
        &self,
        responders: HashMap<String, Responder>,
    ) -> Result<Option<Arc<dyn ChatModel>>, ModelError> {
        Ok(match self {
            Self::Offline => None,
            Self::Sim(cfg) => Some(Arc::new(
                SimulatedModel::new(cfg.clone(), responders).logging_calls()?,
            )),
            Self::OpenAi => Some(Arc::new(OpenAiModel::new(OpenAiConfig::from_env()?)?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn specs_parse_with_defaults_and_clear_errors() {
        assert_eq!("offline".parse::<ModelSpec>().unwrap(), ModelSpec::Offline);
        assert_eq!("openai".parse::<ModelSpec>().unwrap(), ModelSpec::OpenAi);
        let ModelSpec::Sim(cfg) = "sim:p50=50ms,errors=0.01,seed=9"
            .parse::<ModelSpec>()
            .unwrap()
        else {
            panic!("a sim spec")
        };
        assert_eq!(cfg.p50, Duration::from_millis(50));
        assert_eq!(
            cfg.p99,
            Duration::from_millis(225),
            "p99 defaults to 4.5 x p50"
        );
        assert_eq!(cfg.errors, 0.01);
        assert_eq!(cfg.seed, 9);
        assert_eq!(
            "sim".parse::<ModelSpec>().unwrap(),
            ModelSpec::Sim(SimConfig::default())
        );
        for (bad, names) in [
            ("gpt", "unknown model `gpt`"),
            ("sim:p50=fast", "p50=fast"),
            ("sim:errors=2", "errors=2"),
            ("sim:colour=red", "unknown simulator setting `colour`"),
            ("sim:p50=1s,p99=10ms", "below p50"),
        ] {
            let err = bad.parse::<ModelSpec>().unwrap_err().to_string();
            assert!(err.contains(names), "{bad}: {err}");
        }
    }
}
