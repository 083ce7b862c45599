//! What a `load` run is: the command-line flags, a scenario file (TOML or JSON, the same names as
//! the flags, relative paths from the file's folder), and both resolved into a scenario, a mix,
//! people, thresholds and the rest. A flag given on the command line wins over the file.

use super::dist::{parse_duration, Lognormal};
use super::people::People;
use super::scenario::{parse_stages, Scenario, Stage};
use super::schedule::Options;
use super::thresholds::Threshold;
use super::tools::ToolSim;
use super::LoadError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `load` arguments (every scenario setting may also come from `--scenario FILE`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LoadArgs {
    /// Coordinate worker processes (`--workers`): split the scenario's arrival rate (or a closed
    /// loop's conversations) across them, merge their histograms, write the one report.
    #[arg(long, requires = "workers")]
    pub coordinator: bool,
    /// With `--coordinator`: worker URLs (`http://host:port,…`), or a number of local worker
    /// processes to start.
    #[arg(long)]
    pub workers: Option<String>,
    /// Run as a worker listening on this address (`127.0.0.1:7400`; port 0 picks one, printed on
    /// stdout): takes its share of a scenario from a coordinator.
    #[arg(long, conflicts_with = "coordinator")]
    pub worker: Option<String>,
    /// With `--coordinator`: a worker that sends no sample for this many seconds counts as dead
    /// (default 5).
    #[arg(long)]
    pub worker_timeout: Option<u64>,
    /// A scenario file (TOML, or JSON when it ends in `.json`) with any of the settings below.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// The scenario kind: `closed` (default), `constant`, `ramping` or `soak` (inferred from
    /// `--rate` / `--stages` when not given).
    #[arg(long)]
    pub kind: Option<String>,
    /// The graph: `research` (default), `acquire` (field acquisition) or `loop`.
    #[arg(long)]
    pub graph: Option<String>,
    /// A weighted mix of graphs, `research=70,acquire=30` (instead of `--graph`).
    #[arg(long)]
    pub mix: Option<String>,
    /// Closed loop: conversations to run (default 100). Constant rate without `--duration`: this
    /// many at `--rate`.
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Closed loop: at most this many at once (default 50).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Constant and soak: conversations started per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Constant and soak: for how long (`30s`, `10m`, `1h`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Ramping: the rate at the start (default 0).
    #[arg(long)]
    pub start_rate: Option<f64>,
    /// Ramping: stages `RATE:DURATION,…` (`10:30s,50:1m,0:30s`), linear within each.
    #[arg(long)]
    pub stages: Option<String>,
    /// Open scenarios: at most this many conversations at once (default 1000); an arrival beyond
    /// waits and counts as late.
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// Open scenarios: an arrival that finds `--max-in-flight` conversations running is dropped
    /// (counted as `dropped`, like k6's `dropped_iterations`) instead of starting late.
    #[arg(long)]
    pub drop_when_full: bool,
    /// Open scenarios: how long conversations may run on after the last arrival (default 30s).
    #[arg(long)]
    pub grace: Option<String>,
    /// Research goals: a JSON array (like `fixtures/research/goals.json`, or of strings), or one
    /// goal per line.
    #[arg(long)]
    pub goals: Option<PathBuf>,
    /// Acquire: a schema file (with `--corpus`) instead of the bundled scenarios.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Acquire: the corpus for `--schema`.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Acquire: answers for `--schema` (others answered plausibly by type). With `--assistant`:
    /// the interrupt answer rules, `{"rules": [{"when"|"node": …, "resume": …}], "default": …}`.
    #[arg(long)]
    pub answers: Option<PathBuf>,
    /// Think time before answering an interrupt: `p50=2s,p99=10s` (default: at once).
    #[arg(long)]
    pub think: Option<String>,
    /// Share of conversations abandoned (cancelled) mid-run, 0–1.
    #[arg(long)]
    pub abandon: Option<f64>,
    /// When abandoning people leave, from the start: `p50=1s,p99=5s` (the default).
    #[arg(long)]
    pub abandon_after: Option<String>,
    /// Share of conversations whose first interrupt is answered only after `--pause-for`, 0–1.
    #[arg(long)]
    pub pause: Option<f64>,
    /// The long pause (default 60s).
    #[arg(long)]
    pub pause_for: Option<String>,
    /// Seed of the simulated people (default 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The model (`offline`, `sim:p50=…,p99=…,errors=…,malformed=…,seed=…`, `openai`); default
    /// `sim:p50=50ms,p99=200ms`.
    #[arg(long)]
    pub model: Option<String>,
    /// Simulated tool latency for research search steps: `sim:p50=400ms,p99=2s,seed=1`.
    #[arg(long)]
    pub tools: Option<String>,
    /// Checkpointer URL (`memory:`, `sqlite:PATH`, `postgres://…`); none by default.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// Drive a `serve` instance at this URL instead of running in-process (`research`,
    /// `acquire`). Repeat it for the replicas of one service: conversations go round robin and
    /// fail over to the next replica when theirs is gone (docs/load.md).
    #[arg(long)]
    pub target: Vec<String>,
    /// Bearer token for `--target` (`Authorization: Bearer …`).
    #[arg(long, visible_alias = "bearer")]
    pub token: Option<String>,
    /// With `--target`: drive any Agent Server API (`langgraph dev`, LangGraph Platform, `serve`)
    /// with this assistant (an assistant id or a graph name) instead of `--graph`: threads get
    /// UUIDs, the input comes from `--input` and `--data`, interrupts are answered by `--answers`
    /// rules (docs/load.md).
    #[arg(long)]
    pub assistant: Option<String>,
    /// With `--assistant`: the run input, a JSON template whose `{{column}}` placeholders are
    /// filled from `--data` (default `{}`).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// With `--assistant`: rows for the template's placeholders, CSV (with a header) or JSON
    /// lines; conversation `i` takes row `i mod rows`.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// With `--assistant`: stream each run (`runs/stream`) in these modes, e.g.
    /// `values,messages-tuple,updates`, and measure time to first event and token, inter-token
    /// latency and time between events; `wait` (the default) waits for each run.
    #[arg(long)]
    pub stream_mode: Option<String>,
    /// With `--assistant`: an API key sent as `x-api-key` (LangGraph Platform).
    #[arg(long)]
    pub api_key: Option<String>,
    /// With `--target`: conversation `i` runs on thread `{prefix}-{i}` (default
    /// `load-{pid}-{time}`), created with `if_exists: do_nothing` so a creation that fails over
    /// never makes a second thread; search them with `POST /threads/search {"prefix": …}`.
    #[arg(long)]
    pub thread_prefix: Option<String>,
    /// The server's process id, to sample its memory and CPU from `/proc` (with `--target`).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// A pass/fail threshold, repeatable: `conversation_p99<5s`, `failed<0.1%`,
    /// `node:execute_step:queue_p99<200ms` (exit 1 when one is crossed).
    #[arg(long = "threshold")]
    pub thresholds: Vec<String>,
    /// Stop as soon as a threshold is crossed.
    #[arg(long)]
    pub abort_on_fail: bool,
    /// Flag a memory slope above this (KiB per minute, or `2MiB/min`; default 1MiB/min).
    #[arg(long)]
    pub memory_slope_limit: Option<String>,
    /// Leave the samples before this out of the memory slope (default: the first fifth of the
    /// run), e.g. until caches and bounded registries have filled.
    #[arg(long)]
    pub slope_warmup: Option<String>,
    /// Write the report as JSON to FILE and as HTML to FILE with `.html`.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Stream one sample per second as JSON lines to FILE.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No live view.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Dur {
    Secs(f64),
    Text(String),
}

impl Dur {
    fn text(self) -> String {
        match self {
            Dur::Secs(s) => format!("{s}s"),
            Dur::Text(t) => t,
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stages {
    Text(String),
    List(Vec<StageSpec>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StageSpec {
    target: f64,
    duration: Dur,
}

/// One entry of a mix in a scenario file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MixEntry {
    /// `research`, `acquire` or `loop`.
    pub graph: String,
    /// Its weight (default 1).
    #[serde(default = "one")]
    pub weight: u32,
    /// Research goals file.
    pub goals: Option<PathBuf>,
    /// Acquire schema file.
    pub schema: Option<PathBuf>,
    /// Acquire corpus file.
    pub corpus: Option<PathBuf>,
    /// Acquire answers file.
    pub answers: Option<PathBuf>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MixSpec {
    Text(String),
    List(Vec<MixEntry>),
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    kind: Option<String>,
    graph: Option<String>,
    mix: Option<MixSpec>,
    conversations: Option<usize>,
    concurrency: Option<usize>,
    rate: Option<f64>,
    duration: Option<Dur>,
    start_rate: Option<f64>,
    stages: Option<Stages>,
    max_in_flight: Option<usize>,
    drop_when_full: Option<bool>,
    grace: Option<Dur>,
    goals: Option<PathBuf>,
    schema: Option<PathBuf>,
    corpus: Option<PathBuf>,
    answers: Option<PathBuf>,
    think: Option<String>,
    abandon: Option<f64>,
    abandon_after: Option<String>,
    pause: Option<f64>,
    pause_for: Option<Dur>,
    seed: Option<u64>,
    model: Option<String>,
    tools: Option<String>,
    checkpoint: Option<String>,
    target: Option<Targets>,
    token: Option<String>,
    assistant: Option<String>,
    input: Option<PathBuf>,
    data: Option<PathBuf>,
    stream_mode: Option<String>,
    api_key: Option<String>,
    thresholds: Option<Vec<String>>,
    abort_on_fail: Option<bool>,
    memory_slope_limit: Option<Dur>,
    slope_warmup: Option<Dur>,
}

/// `target` in a scenario file: one URL or a list of replicas.
#[derive(Deserialize)]
#[serde(untagged)]
enum Targets {
    One(String),
    Many(Vec<String>),
}

/// A run, resolved.
pub struct Resolved {
    /// Scenario, people, thresholds and the rest.
    pub options: Options,
    /// The mix.
    pub mix: Vec<MixEntry>,
    /// The model spec.
    pub model: String,
    /// Simulated tools.
    pub tools: Option<Arc<ToolSim>>,
    /// Checkpointer URL.
    pub checkpoint: Option<String>,
    /// `--target` URLs (empty: run in-process).
    pub target: Vec<String>,
    /// Its token.
    pub token: Option<String>,
    /// `--thread-prefix`.
    pub thread_prefix: Option<String>,
    /// `--assistant` and what goes with it: any Agent Server API.
    pub agent: Option<AgentArgs>,
}

/// An Agent Server API target's settings, resolved (paths from the scenario file's folder).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentArgs {
    /// The assistant id or graph name.
    pub assistant: String,
    /// The input template.
    pub input: Option<PathBuf>,
    /// The template's data rows.
    pub data: Option<PathBuf>,
    /// The answer rules.
    pub answers: Option<PathBuf>,
    /// Stream modes (`None`: wait for each run).
    pub stream_modes: Option<Vec<String>>,
    /// `x-api-key`.
    pub api_key: Option<String>,
}

/// Parses `--stream-mode`: a comma-separated list of modes, or `wait` (`None`).
pub fn parse_stream_modes(text: &str) -> Result<Option<Vec<String>>, LoadError> {
    let modes: Vec<String> = text
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    match modes.as_slice() {
        [] => Err(usage("--stream-mode: name at least one mode, or `wait`")),
        [w] if w == "wait" => Ok(None),
        _ if modes.iter().any(|m| m == "wait") => Err(usage(
            "--stream-mode: `wait` does not stream; give it alone or list stream modes",
        )),
        _ if modes.iter().any(|m| {
            !m.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/'))
        }) =>
        {
            Err(usage(format!(
                "--stream-mode `{text}`: not a list of modes"
            )))
        }
        _ => Ok(Some(modes)),
    }
}

fn usage(e: impl std::fmt::Display) -> LoadError {
    LoadError::Usage(e.to_string())
}

fn read_file(path: &Path) -> Result<FileSpec, LoadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--scenario {}: {e}", path.display())))?;
    let json = path.extension().is_some_and(|e| e == "json");
    let spec: FileSpec = if json {
        serde_json::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?
    } else {
        toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?
    };
    Ok(spec)
}

fn dur(flag: &str, text: &str) -> Result<Duration, LoadError> {
    parse_duration(text).map_err(|e| usage(format!("{flag}: {e}")))
}

/// Parses `research=70,acquire=30` (a bare name weighs 1).
pub fn parse_mix(text: &str) -> Result<Vec<MixEntry>, LoadError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (graph, weight) = match part.split_once('=') {
                Some((g, w)) => (
                    g.trim(),
                    w.trim().trim_end_matches('%').parse::<u32>().map_err(|_| {
                        usage(format!("--mix `{part}`: the weight is not a whole number"))
                    })?,
                ),
                None => (part, 1),
            };
            Ok(MixEntry {
                graph: graph.to_string(),
                weight,
                ..MixEntry::default()
            })
        })
        .collect()
}

/// Resolves flags over the scenario file.
pub fn resolve(a: &LoadArgs) -> Result<Resolved, LoadError> {
    let (f, dir) = match &a.scenario {
        Some(p) => (
            read_file(p)?,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
        ),
        None => (FileSpec::default(), PathBuf::new()),
    };
    let rel = |p: Option<PathBuf>| p.map(|p| if p.is_absolute() { p } else { dir.join(p) });
    let rate = a.rate.or(f.rate);
    let stages = match (&a.stages, f.stages) {
        (Some(t), _) => Some(parse_stages(t).map_err(usage)?),
        (None, Some(Stages::Text(t))) => Some(parse_stages(&t).map_err(usage)?),
        (None, Some(Stages::List(l))) => Some(
            l.into_iter()
                .map(|s| {
                    Ok(Stage {
                        target: s.target,
                        duration: dur("stages", &s.duration.text())?,
                    })
                })
                .collect::<Result<Vec<_>, LoadError>>()?,
        ),
        (None, None) => None,
    };
    let kind = a.kind.clone().or(f.kind).unwrap_or_else(|| {
        if stages.is_some() {
            "ramping".into()
        } else if rate.is_some() {
            "constant".into()
        } else {
            "closed".into()
        }
    });
    let conversations = a.conversations.or(f.conversations);
    let duration = match a.duration.clone().or(f.duration.map(Dur::text)) {
        Some(t) => Some(dur("--duration", &t)?),
        None => None,
    };
    let need_rate = || rate.ok_or_else(|| usage(format!("a {kind} scenario needs --rate")));
    let open_duration = |r: f64| -> Result<Duration, LoadError> {
        match (duration, conversations) {
            (Some(d), _) => Ok(d),
            (None, Some(n)) if r > 0.0 && r.is_finite() => {
                Ok(Duration::from_secs_f64(n as f64 / r))
            }
            _ => Err(usage(format!(
                "a {kind} scenario needs --duration (or --conversations)"
            ))),
        }
    };
    let scenario = match kind.as_str() {
        "closed" => Scenario::Closed {
            conversations: conversations.unwrap_or(100),
            concurrency: a.concurrency.or(f.concurrency).unwrap_or(50),
        },
        "constant" => {
            let rate = need_rate()?;
            Scenario::Constant {
                rate,
                duration: open_duration(rate)?,
            }
        }
        "soak" => {
            let rate = need_rate()?;
            Scenario::Soak {
                rate,
                duration: open_duration(rate)?,
            }
        }
        "ramping" => Scenario::Ramping {
            start_rate: a.start_rate.or(f.start_rate).unwrap_or(0.0),
            stages: stages.ok_or_else(|| usage("a ramping scenario needs --stages"))?,
        },
        other => {
            return Err(usage(format!(
                "unknown scenario kind `{other}`: use closed, constant, ramping or soak"
            )))
        }
    };
    scenario.validate().map_err(usage)?;

    let assistant = a.assistant.clone().or(f.assistant);
    let agent_only = [
        ("--input", a.input.is_some() || f.input.is_some()),
        ("--data", a.data.is_some() || f.data.is_some()),
        (
            "--stream-mode",
            a.stream_mode.is_some() || f.stream_mode.is_some(),
        ),
    ];
    if assistant.is_none() {
        if let Some((flag, _)) = agent_only.iter().find(|(_, given)| *given) {
            return Err(usage(format!("{flag} goes with --assistant")));
        }
    } else if a.mix.is_some() || a.graph.is_some() || f.mix.is_some() || f.graph.is_some() {
        return Err(usage(
            "--assistant names what runs on the target; leave out --graph and --mix",
        ));
    }
    let agent = match &assistant {
        Some(name) if name.trim().is_empty() => return Err(usage("--assistant: empty")),
        Some(name) => Some(AgentArgs {
            assistant: name.trim().to_string(),
            input: a.input.clone().or(rel(f.input.clone())),
            data: a.data.clone().or(rel(f.data.clone())),
            answers: a.answers.clone().or(rel(f.answers.clone())),
            stream_modes: match a.stream_mode.clone().or(f.stream_mode.clone()) {
                Some(t) => parse_stream_modes(&t)?,
                None => None,
            },
            api_key: a.api_key.clone().or(f.api_key.clone()),
        }),
        None => None,
    };
    let mut mix = match (&a.mix, &a.graph, f.mix, &f.graph) {
        (Some(m), _, _, _) => parse_mix(m)?,
        (None, Some(g), _, _) => parse_mix(g)?,
        (None, None, Some(MixSpec::Text(t)), _) => parse_mix(&t)?,
        (None, None, Some(MixSpec::List(l)), _) => l
            .into_iter()
            .map(|e| MixEntry {
                goals: rel(e.goals.clone()),
                schema: rel(e.schema.clone()),
                corpus: rel(e.corpus.clone()),
                answers: rel(e.answers.clone()),
                ..e
            })
            .collect(),
        (None, None, None, Some(g)) => parse_mix(g)?,
        (None, None, None, None) => parse_mix("research")?,
    };
    let goals = a.goals.clone().or(rel(f.goals));
    let schema = a.schema.clone().or(rel(f.schema));
    let corpus = a.corpus.clone().or(rel(f.corpus));
    let answers = a.answers.clone().or(rel(f.answers));
    for e in &mut mix {
        match e.graph.as_str() {
            "research" => e.goals = e.goals.take().or(goals.clone()),
            "acquire" => {
                e.schema = e.schema.take().or(schema.clone());
                e.corpus = e.corpus.take().or(corpus.clone());
                e.answers = e.answers.take().or(answers.clone());
            }
            "loop" => {}
            other => {
                return Err(usage(format!(
                    "unknown graph `{other}`: use research, acquire or loop"
                )))
            }
        }
        if e.schema.is_some() != e.corpus.is_some() {
            return Err(usage("--schema and --corpus go together"));
        }
    }
    if mix.iter().all(|e| e.weight == 0) {
        return Err(usage("the mix is empty (every weight is 0)"));
    }

    let lognormal = |flag: &str, v: Option<String>| -> Result<Option<Lognormal>, LoadError> {
        v.map(|t| {
            t.parse::<Lognormal>()
                .map_err(|e| usage(format!("{flag}: {e}")))
        })
        .transpose()
    };
    let people = People {
        think: lognormal("--think", a.think.clone().or(f.think))?,
        abandon: a.abandon.or(f.abandon).unwrap_or(0.0),
        abandon_after: lognormal(
            "--abandon-after",
            a.abandon_after.clone().or(f.abandon_after),
        )?,
        pause: a.pause.or(f.pause).unwrap_or(0.0),
        pause_for: match a.pause_for.clone().or(f.pause_for.map(Dur::text)) {
            Some(t) => dur("--pause-for", &t)?,
            None => super::people::PAUSE_FOR,
        },
        seed: a.seed.or(f.seed).unwrap_or(1),
    };
    people.validate().map_err(usage)?;
    let thresholds = f
        .thresholds
        .unwrap_or_default()
        .iter()
        .chain(&a.thresholds)
        .map(|t| t.parse::<Threshold>().map_err(usage))
        .collect::<Result<Vec<_>, _>>()?;
    let memory_slope_limit = match a
        .memory_slope_limit
        .clone()
        .or(f.memory_slope_limit.map(|d| match d {
            Dur::Secs(n) => n.to_string(),
            Dur::Text(t) => t,
        })) {
        Some(t) => {
            format!("memory_slope<{t}")
                .parse::<Threshold>()
                .map_err(|_| {
                    usage(format!(
                        "--memory-slope-limit `{t}`: expected KiB per minute, or 2MiB/min"
                    ))
                })?
                .bound
        }
        None => 1024.0,
    };
    let tools = match a.tools.clone().or(f.tools) {
        Some(t) if t == "none" => None,
        Some(t) => Some(Arc::new(t.parse::<ToolSim>().map_err(usage)?)),
        None => None,
    };
    let target = if a.target.is_empty() {
        match f.target {
            Some(Targets::One(t)) => vec![t],
            Some(Targets::Many(ts)) => ts,
            None => Vec::new(),
        }
    } else {
        a.target.clone()
    };
    if agent.is_some() && target.is_empty() {
        return Err(usage("--assistant drives a server: give --target URL"));
    }
    if !target.is_empty() && tools.is_some() {
        return Err(usage(
            "--tools simulates tool latency in this process; with --target the server runs the tools",
        ));
    }
    let grace = match a.grace.clone().or(f.grace.map(Dur::text)) {
        Some(t) => dur("--grace", &t)?,
        None => Duration::from_secs(30),
    };
    let slope_warmup = match a.slope_warmup.clone().or(f.slope_warmup.map(Dur::text)) {
        Some(t) => Some(dur("--slope-warmup", &t)?),
        None => None,
    };
    let max_in_flight = a.max_in_flight.or(f.max_in_flight).unwrap_or(1000);
    if max_in_flight == 0 {
        return Err(usage("--max-in-flight must be at least 1"));
    }
    Ok(Resolved {
        options: Options {
            scenario,
            max_in_flight,
            grace,
            people,
            thresholds,
            abort_on_fail: a.abort_on_fail || f.abort_on_fail.unwrap_or(false),
            memory_slope_limit,
            slope_warmup,
            out: a.out.clone(),
            live: !a.quiet,
            server_pid: a.server_pid,
            interrupt: None,
            recorder: None,
            drop_when_full: a.drop_when_full || f.drop_when_full.unwrap_or(false),
        },
        mix,
        model: a
            .model
            .clone()
            .or(f.model)
            .unwrap_or_else(|| "sim:p50=50ms,p99=200ms".into()),
        tools,
        checkpoint: a.checkpoint.clone().or(f.checkpoint),
        target,
        token: a.token.clone().or(f.token),
        agent,
        thread_prefix: match &a.thread_prefix {
            // The server's thread ids: A-Z a-z 0-9 . _ : - (room left for `-{entry}-{i}`).
            Some(p)
                if p.is_empty()
                    || p.len() > 100
                    || !p.chars().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
                    }) =>
            {
                return Err(usage(format!(
                    "--thread-prefix `{p}`: use 1 to 100 characters of A-Z a-z 0-9 . _ : -"
                )))
            }
            p => p.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("planwright-load-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn flags_infer_the_kind() {
        let r = resolve(&LoadArgs {
            rate: Some(5.0),
            duration: Some("10s".into()),
            ..LoadArgs::default()
        })
        .unwrap();
        assert_eq!(
            r.options.scenario,
            Scenario::Constant {
                rate: 5.0,
                duration: Duration::from_secs(10)
            }
        );
        let r = resolve(&LoadArgs::default()).unwrap();
        assert_eq!(
            r.options.scenario,
            Scenario::Closed {
                conversations: 100,
                concurrency: 50
            }
        );
        assert_eq!(r.mix[0].graph, "research");
        let r = resolve(&LoadArgs {
            stages: Some("10:1m,0:30s".into()),
            mix: Some("research=70,acquire=30".into()),
            ..LoadArgs::default()
        })
        .unwrap();
        assert_eq!(r.options.scenario.kind(), "ramping");
        assert_eq!(
            r.mix.iter().map(|e| e.weight).collect::<Vec<_>>(),
            vec![70, 30]
        );
    }

    #[test]
    fn a_toml_file_and_flags_over_it() {
        let p = write(
            "soak.toml",
            r#"
kind = "soak"
rate = 2
duration = "10m"
think = "p50=1s,p99=4s"
abandon = 0.05
thresholds = ["conversation_p99<5s"]
tools = "sim:p50=400ms,p99=2s,seed=1"

[[mix]]
graph = "research"
weight = 70
goals = "goals.json"

[[mix]]
graph = "acquire"
weight = 30
"#,
        );
        let r = resolve(&LoadArgs {
            scenario: Some(p.clone()),
            rate: Some(3.0),
            thresholds: vec!["failed<0.1%".into()],
            ..LoadArgs::default()
        })
        .unwrap();
        assert_eq!(
            r.options.scenario,
            Scenario::Soak {
                rate: 3.0,
                duration: Duration::from_secs(600)
            }
        );
        assert_eq!(r.options.thresholds.len(), 2);
        assert_eq!(r.mix[0].goals, Some(p.parent().unwrap().join("goals.json")));
        assert_eq!(r.options.people.abandon, 0.05);
        assert!(r.tools.is_some());
    }

    #[test]
    fn an_agent_server_target_from_flags_and_a_file() {
        let p = write(
            "agent.toml",
            "assistant = \"chat\"\ninput = \"in.json\"\ndata = \"rows.csv\"\nanswers = \"a.json\"\nstream_mode = \"values, messages-tuple\"\ntarget = \"http://lg:2024\"\n",
        );
        let r = resolve(&LoadArgs {
            scenario: Some(p.clone()),
            api_key: Some("k".into()),
            ..LoadArgs::default()
        })
        .unwrap();
        let dir = p.parent().unwrap();
        let a = r.agent.unwrap();
        assert_eq!(a.assistant, "chat");
        assert_eq!(a.input, Some(dir.join("in.json")));
        assert_eq!(a.data, Some(dir.join("rows.csv")));
        assert_eq!(a.answers, Some(dir.join("a.json")));
        assert_eq!(
            a.stream_modes,
            Some(vec!["values".to_string(), "messages-tuple".to_string()])
        );
        assert_eq!(a.api_key.as_deref(), Some("k"));
        let r = resolve(&LoadArgs {
            scenario: Some(p),
            stream_mode: Some("wait".into()),
            ..LoadArgs::default()
        })
        .unwrap();
        assert_eq!(r.agent.unwrap().stream_modes, None, "the flag wins: wait");
    }

    #[test]
    fn a_json_file_with_stages() {
        let p = write(
            "ramp.json",
            r#"{"start_rate": 1, "stages": [{"target": 10, "duration": "30s"}, {"target": 0, "duration": 10}], "graph": "loop"}"#,
        );
        let r = resolve(&LoadArgs {
            scenario: Some(p),
            ..LoadArgs::default()
        })
        .unwrap();
        let Scenario::Ramping { start_rate, stages } = r.options.scenario else {
            panic!("ramping")
        };
        assert_eq!(start_rate, 1.0);
        assert_eq!(stages[1].duration, Duration::from_secs(10));
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = write("bad.toml", "rate = \"fast\"\n");
        let unknown = write("unknown.toml", "colour = \"red\"\n");
        for (a, needle) in [
            (
                LoadArgs {
                    kind: Some("spiky".into()),
                    ..LoadArgs::default()
                },
                "unknown scenario kind",
            ),
            (
                LoadArgs {
                    kind: Some("constant".into()),
                    ..LoadArgs::default()
                },
                "needs --rate",
            ),
            (
                LoadArgs {
                    rate: Some(1.0),
                    ..LoadArgs::default()
                },
                "needs --duration",
            ),
            (
                LoadArgs {
                    kind: Some("ramping".into()),
                    ..LoadArgs::default()
                },
                "needs --stages",
            ),
            (
                LoadArgs {
                    mix: Some("research=lots".into()),
                    ..LoadArgs::default()
                },
                "whole number",
            ),
            (
                LoadArgs {
                    graph: Some("chess".into()),
                    ..LoadArgs::default()
                },
                "unknown graph `chess`",
            ),
            (
                LoadArgs {
                    think: Some("soon".into()),
                    ..LoadArgs::default()
                },
                "--think",
            ),
            (
                LoadArgs {
                    abandon: Some(2.0),
                    ..LoadArgs::default()
                },
                "--abandon",
            ),
            (
                LoadArgs {
                    thresholds: vec!["speed>1".into()],
                    ..LoadArgs::default()
                },
                "unknown metric",
            ),
            (
                LoadArgs {
                    tools: Some("fast".into()),
                    ..LoadArgs::default()
                },
                "--tools",
            ),
            (
                LoadArgs {
                    schema: Some("s.json".into()),
                    graph: Some("acquire".into()),
                    ..LoadArgs::default()
                },
                "--corpus",
            ),
            (
                LoadArgs {
                    scenario: Some(bad),
                    ..LoadArgs::default()
                },
                "bad.toml",
            ),
            (
                LoadArgs {
                    scenario: Some(unknown),
                    ..LoadArgs::default()
                },
                "colour",
            ),
            (
                LoadArgs {
                    scenario: Some("/nonexistent.toml".into()),
                    ..LoadArgs::default()
                },
                "nonexistent",
            ),
            (
                LoadArgs {
                    tools: Some("sim:p50=1s".into()),
                    target: vec!["http://x".into()],
                    ..LoadArgs::default()
                },
                "the server runs the tools",
            ),
            (
                LoadArgs {
                    target: vec!["http://x".into()],
                    thread_prefix: Some("runs/today".into()),
                    ..LoadArgs::default()
                },
                "--thread-prefix `runs/today`",
            ),
            (
                LoadArgs {
                    stream_mode: Some("values".into()),
                    ..LoadArgs::default()
                },
                "--stream-mode goes with --assistant",
            ),
            (
                LoadArgs {
                    assistant: Some("chat".into()),
                    ..LoadArgs::default()
                },
                "give --target",
            ),
            (
                LoadArgs {
                    assistant: Some("chat".into()),
                    graph: Some("research".into()),
                    target: vec!["http://x".into()],
                    ..LoadArgs::default()
                },
                "leave out --graph",
            ),
            (
                LoadArgs {
                    assistant: Some("chat".into()),
                    target: vec!["http://x".into()],
                    stream_mode: Some("values,wait".into()),
                    ..LoadArgs::default()
                },
                "`wait` does not stream",
            ),
            (
                LoadArgs {
                    memory_slope_limit: Some("lots".into()),
                    ..LoadArgs::default()
                },
                "--memory-slope-limit",
            ),
        ] {
            let err = resolve(&a).err().expect(needle).to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}
