//! A simulated model for load tests: answers come from the offline responders, so planners still
//! make progress, wrapped in a seeded latency distribution (lognormal, fitted to a p50 and a p99),
//! an error rate and a malformed-output rate. Latency uses tokio's clock, so tests run it under
//! paused time; the same seed gives the same sequence of latencies and faults.
//!
//! `calls=PATH` makes the simulator append one line per answered call to PATH — the process id,
//! the call kind, a digest of the request and the call's idempotency key (`-` without one) — so
//! a test can count model calls made inside server processes it kills (were a finished step run
//! again, its request would be counted twice; were a journaled call made again, its key).

use super::scripted::estimate_tokens;
use super::{ChatModel, ChatReply, ChatRequest, ModelError, Responder, Usage};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The simulator's settings: `sim:p50=200ms,p99=900ms,errors=0.01,malformed=0.0,seed=7`.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Median latency (default 200 ms).
    pub p50: Duration,
    /// 99th percentile latency (default 4.5 × p50).
    pub p99: Duration,
    /// Share of calls that fail, as rate limits, 503s and timeouts in turn (default 0).
    pub errors: f64,
    /// Share of calls whose answer is not valid JSON (default 0).
    pub malformed: f64,
    /// Random seed (default 1).
    pub seed: u64,
    /// Where to log answered calls (`calls=PATH`), if anywhere.
    pub calls: Option<std::path::PathBuf>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            p50: Duration::from_millis(200),
            p99: Duration::from_millis(900),
            errors: 0.0,
            malformed: 0.0,
            seed: 1,
            calls: None,
        }
    }
}

fn parse_duration(key: &str, v: &str) -> Result<Duration, ModelError> {
    planwright::duration::parse(v, planwright::duration::BareUnit::Millis).ok_or_else(|| {
        ModelError::Config(format!(
            "`{key}={v}`: expected a duration like 200ms or 1.5s"
        ))
    })
}

fn parse_rate(key: &str, v: &str) -> Result<f64, ModelError> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(ModelError::Config(format!(
            "`{key}={v}`: expected a rate between 0 and 1"
        ))),
    }
}

impl std::str::FromStr for SimConfig {
    type Err = ModelError;

    /// Parses `p50=…,p99=…,errors=…,malformed=…,seed=…` (with or without the `sim:` prefix); every
    /// key is optional.
    fn from_str(s: &str) -> Result<Self, ModelError> {
        let body = s
            .strip_prefix("sim:")
            .or_else(|| s.strip_prefix("sim"))
            .unwrap_or(s);
        let mut cfg = SimConfig::default();
        let mut p99_given = false;
        for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| ModelError::Config(format!("`{part}`: expected key=value")))?;
            match k {
                "p50" => cfg.p50 = parse_duration(k, v)?,
                "p99" => {
                    cfg.p99 = parse_duration(k, v)?;
                    p99_given = true;
                }
                "errors" => cfg.errors = parse_rate(k, v)?,
                "malformed" => cfg.malformed = parse_rate(k, v)?,
                "seed" => {
                    cfg.seed = v.parse().map_err(|_| {
                        ModelError::Config(format!("`seed={v}`: expected an unsigned integer"))
                    })?
                }
                "calls" if !v.is_empty() => cfg.calls = Some(v.into()),
                other => {
                    return Err(ModelError::Config(format!(
                        "unknown simulator setting `{other}` (known: p50, p99, errors, malformed, seed, calls)"
                    )))
                }
            }
        }
        if !p99_given {
            cfg.p99 = cfg.p50.mul_f64(4.5);
        }
        if cfg.p99 < cfg.p50 {
            return Err(ModelError::Config(format!(
                "p99 ({:?}) is below p50 ({:?})",
                cfg.p99, cfg.p50
            )));
        }
        Ok(cfg)
    }
}

/// The simulated provider.
pub struct SimulatedModel {
    cfg: SimConfig,
    responders: HashMap<String, Responder>,
    rng: Mutex<SmallRng>,
    calls: Option<Mutex<std::fs::File>>,
}

impl SimulatedModel {
    /// A simulator answering with `responders` (by call kind). Its call log (`calls=PATH`) is
    /// opened by [`SimulatedModel::logging_calls`].
    pub fn new(cfg: SimConfig, responders: HashMap<String, Responder>) -> Self {
        let rng = SmallRng::seed_from_u64(cfg.seed);
        Self {
            cfg,
            responders,
            rng: Mutex::new(rng),
            calls: None,
        }
    }

    /// Opens the call log the settings name (`calls=PATH`), if any; an error naming the path
    /// when it cannot be opened for appending.
    pub fn logging_calls(mut self) -> Result<Self, ModelError> {
        if let Some(path) = &self.cfg.calls {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| ModelError::Config(format!("calls={}: {e}", path.display())))?;
            self.calls = Some(Mutex::new(file));
        }
        Ok(self)
    }

    /// Logs an answered call (`calls=PATH`): one line, written whole.
    fn log_call(&self, req: &ChatRequest) {
        let Some(file) = &self.calls else { return };
        use std::hash::{Hash, Hasher};
        use std::io::Write;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        req.call.hash(&mut h);
        for m in &req.messages {
            m.content.hash(&mut h);
        }
        req.input.hash(&mut h);
        let line = format!(
            "{}\t{}\t{:016x}\t{}\n",
            std::process::id(),
            req.call,
            h.finish(),
            req.idempotency_key.as_deref().unwrap_or("-")
        );
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "the simulator could not log a call");
        }
    }

    /// One draw: (latency, fault) where fault is 0 none, 1 error, 2 malformed.
    fn draw(&self) -> (Duration, u8, u64) {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let latency = super::lognormal::Lognormal {
            p50: self.cfg.p50,
            p99: self.cfg.p99,
        }
        .sample(&mut rng)
        .min(Duration::from_secs(3600));
        let roll: f64 = rng.random();
        let fault = if roll < self.cfg.errors {
            1
        } else if roll < self.cfg.errors + self.cfg.malformed {
            2
        } else {
            0
        };
        (latency, fault, rng.random())
    }
}

#[async_trait::async_trait]
impl ChatModel for SimulatedModel {
    fn name(&self) -> &str {
        "sim"
    }

    fn takes_typed_input(&self) -> bool {
        true
    }

    /// The answer word by word ([`super::word_chunks`]), the call's drawn latency spread evenly
    /// over the chunks (chunk `i` of `n` at `latency·(i+1)/n`), so the whole answer takes what
    /// [`ChatModel::chat`] would; a drawn error comes after the whole latency, as there.
    async fn chat_streaming(
        &self,
        req: &ChatRequest,
        on_chunk: &super::OnChunk<'_>,
    ) -> Result<ChatReply, ModelError> {
        let (latency, fault, pick) = self.draw();
        let start = tokio::time::Instant::now();
        let reply = match self.answer(req, latency, fault, pick) {
            Ok(reply) => reply,
            Err(e) => {
                tokio::time::sleep(latency).await;
                return Err(e);
            }
        };
        let chunks = super::word_chunks(&reply.content);
        let n = chunks.len().max(1) as u32;
        for (i, chunk) in chunks.into_iter().enumerate() {
            tokio::time::sleep_until(start + latency * (i as u32 + 1) / n).await;
            on_chunk(chunk);
        }
        Ok(reply)
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatReply, ModelError> {
        let (latency, fault, pick) = self.draw();
        tokio::time::sleep(latency).await;
        self.answer(req, latency, fault, pick)
    }
}

impl SimulatedModel {
    /// The reply to `req` for one draw (latency, fault, pick), without the wait.
    fn answer(
        &self,
        req: &ChatRequest,
        latency: Duration,
        fault: u8,
        pick: u64,
    ) -> Result<ChatReply, ModelError> {
        match fault {
            1 => {
                return Err(match pick % 3 {
                    0 => ModelError::RateLimited {
                        retry_after: Some(Duration::from_millis(100)),
                    },
                    1 => ModelError::Server {
                        status: 503,
                        body: "simulated outage".into(),
                    },
                    _ => ModelError::Timeout(latency),
                })
            }
            2 => {
                return Ok(ChatReply {
                    content: "{\"simulated\": malformed".into(),
                    usage: Usage {
                        prompt_tokens: estimate_tokens(req),
                        completion_tokens: 6,
                    },
                })
            }
            _ => {}
        }
        let responder = self.responders.get(&req.call).ok_or_else(|| {
            ModelError::Config(format!(
                "the simulator has no offline responder for `{}`",
                req.call
            ))
        })?;
        let content = responder(req)?;
        self.log_call(req);
        Ok(ChatReply {
            usage: Usage {
                prompt_tokens: estimate_tokens(req),
                completion_tokens: (content.len() as u64).div_ceil(4),
            },
            content,
        })
    }
}
