//! `load`: load-testing planners the way people load-test services. Conversations arrive as a
//! scenario says — a closed loop, a constant arrival rate, a ramp through stages, or a soak — over
//! a weighted mix of graphs and inputs; simulated people think before answering interrupts,
//! abandon conversations or come back after a long pause; simulated tools give search steps a web
//! search's latency. Latency counts from each conversation's due time (no coordinated omission),
//! in HDR histograms; every second is sampled (throughput, latency, errors, in-flight, mailbox
//! depths, memory and CPU, the server's too); thresholds gate a CI job; `load compare` sets two
//! runs side by side.
//!
//! The modules: [`scenario`] (arrivals), [`schedule`] (starting conversations, sampling,
//! stopping), [`driver`] (an engine's conversations; the library entry point for any graph),
//! `remote` (a `serve` instance's research and acquire conversations), [`agent`] (any Agent
//! Server API's, with [`template`] inputs and answers, streamed or waited for), [`people`], [`tools`], [`steps`] (makespan against critical path),
//! [`thresholds`], [`series`], [`report`], `html`, [`compare`], [`sweep`] (the highest rate
//! that holds), [`config`] (flags and files).

pub mod acquire;
pub mod agent;
pub mod cli;
pub mod compare;
pub mod config;
pub mod dist;
pub mod driver;
mod hist;
mod html;
pub mod people;
pub mod record;
pub mod remote;
pub mod replicas;
pub mod report;
pub mod scenario;
pub mod schedule;
pub mod series;
pub mod steps;
pub mod sweep;
pub mod template;
pub mod thresholds;
pub mod tools;
pub mod workers;

pub use compare::CompareArgs;
pub use config::LoadArgs;
pub use driver::{run as run_workload, EngineConversations, StepsSpec, Workload};
pub use report::LoadReport;
pub use scenario::{Scenario, Stage};
pub use schedule::{run as run_scenario, Conversations, Entry, Options as ScenarioOptions};

use crate::bench::loop_shape;
use crate::field;
use crate::kit;
use crate::model::{ModelError, ModelSpec, ModelStats};
use crate::research::{self, GraphOptions, ResearchInput, ResearchPolicy, ToolLatency};
use config::MixEntry;
use planwright::checkpoint::Checkpointer;
use planwright::runtime::Resume;
use planwright::Engine;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// `load`: a run (the flags), or `load compare`.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoadCommand {
    /// `compare`.
    #[command(subcommand)]
    pub command: Option<LoadSubcommand>,
    /// The run's flags.
    #[command(flatten)]
    pub args: LoadArgs,
}

/// `load`'s subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum LoadSubcommand {
    /// Compare two `--report` JSON files, per figure and per node.
    Compare(CompareArgs),
    /// Step the arrival rate until a threshold breaks, a conversation fails or arrivals drop;
    /// report the highest rate that held.
    Sweep(Box<sweep::SweepArgs>),
}

/// Why a load run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A bad argument or scenario file.
    #[error("{0}")]
    Usage(String),
    /// The model could not be set up.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Storage could not be opened.
    #[error(transparent)]
    Checkpoint(#[from] planwright::checkpoint::CheckpointError),
    /// The graph did not compile.
    #[error(transparent)]
    Graph(#[from] planwright::GraphError),
    /// The report could not be written.
    #[error("cannot write the report: {0}")]
    Report(std::io::Error),
}

/// Runs `load` and returns its report (also written where `--report` says).
pub async fn run(args: &LoadArgs) -> Result<LoadReport, LoadError> {
    let report = measure(args, None).await?;
    write_report(args.report.as_deref(), &report)?;
    Ok(report)
}

/// Runs `load` and returns its report without writing it. The report path is checked first
/// ([`check_report_path`]), so a run never ends unable to write what it measured. `interrupt`
/// becoming true stops the run early (see `schedule::Options::interrupt`).
pub async fn measure(
    args: &LoadArgs,
    interrupt: Option<tokio::sync::watch::Receiver<bool>>,
) -> Result<LoadReport, LoadError> {
    check_report_path(args.report.as_deref())?;
    let mut r = config::resolve(args)?;
    r.options.interrupt = interrupt;
    let stats = Arc::new(ModelStats::default());
    let entries = build_mix(&r, &stats).await?;
    let mut report = schedule::run(r.options, entries).await?;
    report.model = stats.snapshot();
    Ok(report)
}

/// The mix's conversations as `r` says: an Agent Server API, a `serve` target, or engines in
/// this process.
async fn build_mix(r: &config::Resolved, stats: &Arc<ModelStats>) -> Result<Vec<Entry>, LoadError> {
    let mut entries = Vec::new();
    let tag = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000)
            .unwrap_or(0)
    );
    if let Some(a) = &r.agent {
        let template = template::Template::read(a.input.as_deref(), a.data.as_deref())
            .map_err(|e| LoadError::Usage(e.to_string()))?;
        let answers = match &a.answers {
            Some(p) => template::Answers::read(p, &template)
                .map_err(|e| LoadError::Usage(e.to_string()))?,
            None => template::Answers::default(),
        };
        let spec = agent::AgentSpec {
            assistant: a.assistant.clone(),
            template,
            answers,
            stream_modes: a.stream_modes.clone(),
            auth: agent::Auth {
                api_key: a.api_key.clone(),
                bearer: r.token.clone(),
            },
        };
        entries.push(Entry {
            weight: 1,
            conversations: agent::AgentConversations::new(&r.target, spec).await?,
        });
    } else if !r.target.is_empty() {
        for (k, e) in r.mix.iter().enumerate() {
            let conversation = match e.graph.as_str() {
                "research" => research_remote(load_goals(e.goals.as_deref())?),
                "acquire" => acquire_remote(acquire_scenarios(e)?),
                _ => {
                    return Err(LoadError::Usage(
                        "--target drives the `research` and `acquire` assistants only".into(),
                    ))
                }
            };
            entries.push(Entry {
                weight: e.weight,
                conversations: remote::RemoteConversations::new(
                    &r.target,
                    r.token.clone(),
                    conversation,
                    format!(
                        "{}-{k}",
                        r.thread_prefix
                            .clone()
                            .unwrap_or_else(|| format!("load-{tag}"))
                    ),
                )
                .await?,
            });
        }
    } else {
        let spec: ModelSpec = r.model.parse()?;
        let checkpointer = match &r.checkpoint {
            Some(url) => Some(planwright::checkpoint::connect(url).await?),
            None => None,
        };
        for (k, e) in r.mix.iter().enumerate() {
            let prefix = format!("load-{}-{tag}-{k}", e.graph);
            let tools: Option<Arc<dyn ToolLatency>> =
                r.tools.clone().map(|t| t as Arc<dyn ToolLatency>);
            entries.push(Entry {
                weight: e.weight,
                conversations: in_process(e, &spec, stats, checkpointer.clone(), tools, prefix)
                    .await?,
            });
        }
    }
    Ok(entries)
}

/// Refuses a `--report` path whose folder is missing or not writable, or that is a folder, before
/// anything runs: the check creates and removes a probe file beside it.
pub fn check_report_path(path: Option<&Path>) -> Result<(), LoadError> {
    let Some(path) = path else { return Ok(()) };
    let refuse = |why: String| {
        Err(LoadError::Usage(format!(
            "--report {}: {why}",
            path.display()
        )))
    };
    if path.is_dir() {
        return refuse("is a folder; give a file name such as report.json".into());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return refuse(format!(
            "the folder {} does not exist (create it first)",
            dir.display()
        ));
    }
    let probe = dir.join(format!(".planwright-report-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => refuse(format!("cannot write in {}: {e}", dir.display())),
    }
}

async fn in_process(
    e: &MixEntry,
    spec: &ModelSpec,
    stats: &Arc<ModelStats>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    tools: Option<Arc<dyn ToolLatency>>,
    prefix: String,
) -> Result<Arc<dyn Conversations>, LoadError> {
    let on_done: Arc<dyn Fn() + Send + Sync> = Arc::new(|| {});
    Ok(match e.graph.as_str() {
        "loop" => {
            let engine = Engine::builder(loop_shape::graph()?)
                .maybe_checkpointer(checkpointer)
                .build()
                .await;
            EngineConversations::new(
                engine,
                Workload {
                    graph: "loop".into(),
                    conversations: 0,
                    concurrency: 0,
                    thread_prefix: prefix,
                    input: Arc::new(|_| Default::default()),
                    answer: Arc::new(|_, _| None),
                    model_nodes: HashSet::new(),
                    on_done,
                    steps: None,
                },
            )
        }
        "research" => {
            let policy = kit::policy::<dyn ResearchPolicy>(spec, Some(stats.clone()))?;
            let options = GraphOptions {
                tool_latency: tools,
                ..GraphOptions::default()
            };
            let engine = Engine::builder(research::graph(policy, options)?)
                .maybe_checkpointer(checkpointer)
                .build()
                .await;
            let goals = load_goals(e.goals.as_deref())?;
            EngineConversations::new(engine, research_workload(goals, prefix, on_done)?)
        }
        "acquire" => {
            let policy = kit::policy::<dyn field::FieldPolicy>(spec, Some(stats.clone()))?;
            let graph = field::graph(policy, &field::GraphOptions::default())?;
            let engine = Engine::builder(graph)
                .maybe_checkpointer(checkpointer)
                .migration(field::runner::migration)
                .build()
                .await;
            let w = acquire::workload_of(acquire_scenarios(e)?, 0, 0, prefix, on_done);
            EngineConversations::new(engine, w)
        }
        other => {
            return Err(LoadError::Usage(format!(
                "unknown graph `{other}`: use research, acquire or loop"
            )))
        }
    })
}

/// Writes `value` as JSON to `path` and its page beside it (`.html`); nothing without a path.
fn write_with_page<T: serde::Serialize>(
    path: Option<&Path>,
    value: &T,
    page: impl FnOnce() -> String,
) -> Result<(), LoadError> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(value)
            .map_err(|e| LoadError::Report(std::io::Error::other(e)))?;
        std::fs::write(path, json).map_err(LoadError::Report)?;
        std::fs::write(path.with_extension("html"), page()).map_err(LoadError::Report)?;
    }
    Ok(())
}

/// Writes the sweep as JSON to `path` and its page beside it (`.html`).
pub fn write_sweep(path: Option<&Path>, sweep: &sweep::SweepReport) -> Result<(), LoadError> {
    write_with_page(path, sweep, || html::sweep(sweep))
}

/// Writes the report as JSON to `path` and as HTML beside it (`.html`).
pub fn write_report(path: Option<&Path>, report: &LoadReport) -> Result<(), LoadError> {
    write_with_page(path, report, || html::report(report))
}

/// The HTML page of a report.
pub fn report_html(report: &LoadReport) -> String {
    html::report(report)
}

/// `load compare`: reads both reports, prints nothing, returns the comparison (and writes its
/// page when `--html` says).
pub fn compare_files(args: &CompareArgs) -> Result<compare::Comparison, LoadError> {
    let read = |p: &Path| -> Result<Value, LoadError> {
        let text = std::fs::read_to_string(p)
            .map_err(|e| LoadError::Usage(format!("{}: {e}", p.display())))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| LoadError::Usage(format!("{}: not a report: {e}", p.display())))?;
        if !v.is_object() || (v.get("conversation_latency_ms").is_none() && !compare::is_sweep(&v))
        {
            return Err(LoadError::Usage(format!(
                "{}: not a load report (no conversation_latency_ms)",
                p.display()
            )));
        }
        Ok(v)
    };
    if !(args.significance.is_finite() && args.significance >= 0.0) {
        return Err(LoadError::Usage(
            "--significance must be a percentage ≥ 0".into(),
        ));
    }
    let (baseline, current) = (read(&args.baseline)?, read(&args.current)?);
    let c = match (compare::is_sweep(&baseline), compare::is_sweep(&current)) {
        (true, true) => compare::compare_sweeps(&baseline, &current, args.significance),
        (false, false) => compare::compare(&baseline, &current, args.significance),
        _ => {
            return Err(LoadError::Usage(
                "one report is a sweep's and the other a run's; compare like with like".into(),
            ))
        }
    };
    if let Some(p) = &args.html {
        std::fs::write(p, html::comparison(&c)).map_err(LoadError::Report)?;
    }
    Ok(c)
}

fn acquire_scenarios(e: &MixEntry) -> Result<Vec<acquire::Scenario>, LoadError> {
    match (&e.schema, &e.corpus) {
        (Some(s), Some(c)) => Ok(vec![acquire::from_files(s, c, e.answers.as_deref())?]),
        _ => acquire::rotation(),
    }
}

/// Research goals: the bundled sample goals, or a file — a JSON array of `{"input",
/// "constraints"}` objects or of strings, or one goal per line (`#` starts a comment).
pub fn load_goals(path: Option<&Path>) -> Result<Vec<Value>, LoadError> {
    let (text, name) = match path {
        Some(p) => (
            std::fs::read_to_string(p)
                .map_err(|e| LoadError::Usage(format!("--goals {}: {e}", p.display())))?,
            p.display().to_string(),
        ),
        None => (
            include_str!("../../../fixtures/research/goals.json").to_string(),
            "bundled goals".to_string(),
        ),
    };
    let goals: Vec<Value> = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|g| match g {
                Value::String(s) => Ok(json!({"input": s})),
                Value::Object(_) if g["input"].is_string() => Ok(g),
                other => Err(LoadError::Usage(format!(
                    "{name}: a goal must be a string or an object with `input`, not {other}"
                ))),
            })
            .collect::<Result<_, _>>()?,
        Ok(_) => {
            return Err(LoadError::Usage(format!(
                "{name}: expected a JSON array of goals"
            )))
        }
        Err(_) if text.trim_start().starts_with(['[', '{']) => {
            return Err(LoadError::Usage(format!("{name}: malformed JSON")))
        }
        Err(_) => text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| json!({"input": l}))
            .collect(),
    };
    if goals.is_empty() {
        return Err(LoadError::Usage(format!("{name}: no goal")));
    }
    Ok(goals)
}

fn with_approval(g: &Value, approval: bool) -> Value {
    let mut c = if g["constraints"].is_object() {
        g["constraints"].clone()
    } else {
        json!({})
    };
    c["require_approval"] = json!(approval);
    c
}

/// Research conversations over HTTP: the goals in turn, every fifth asking for approval, answered
/// `approve`.
fn research_remote(goals: Vec<Value>) -> remote::Conversation {
    remote::Conversation {
        assistant: "research",
        input: Arc::new(move |i| {
            let g = &goals[i % goals.len()];
            json!({"input": g["input"], "constraints": with_approval(g, i % 5 == 0)})
        }),
        answer: Arc::new(|_, _| json!({"action": "approve"})),
        max_resumes: 10,
    }
}

/// Acquire conversations over HTTP: the scenarios in turn, every question answered from the
/// scenario (or plausibly).
fn acquire_remote(scenarios: Vec<acquire::Scenario>) -> remote::Conversation {
    let scenarios = Arc::new(scenarios);
    let inputs: Vec<Value> = scenarios.iter().map(|s| s.run_input()).collect();
    remote::Conversation {
        assistant: "acquire",
        input: Arc::new(move |i| inputs[i % inputs.len()].clone()),
        answer: Arc::new(move |i, payload| {
            json!(scenarios[i % scenarios.len()].answer_payload(payload))
        }),
        // Bounded by the planner's ask caps (8 questions in all); a margin for re-asks.
        max_resumes: 20,
    }
}

/// Research conversations: the goals in turn; every fifth asks for plan approval, answered
/// `approve` under load. Plan steps are analysed (makespan against critical path).
pub fn research_workload(
    goals: Vec<Value>,
    thread_prefix: String,
    on_done: Arc<dyn Fn() + Send + Sync>,
) -> Result<Workload<research::ResearchState>, LoadError> {
    let notes =
        research::bundled_notes().map_err(|e| LoadError::Usage(format!("bundled notes: {e}")))?;
    let mut plain = Vec::new();
    let mut approving = Vec::new();
    for g in &goals {
        for approval in [false, true] {
            let input = ResearchInput {
                input: g["input"].as_str().unwrap_or_default().to_string(),
                constraints: with_approval(g, approval),
                source_notes: Some(notes.clone()),
            };
            if let Ok(update) = research::initial_update(input) {
                if approval {
                    approving.push(update);
                } else {
                    plain.push(update);
                }
            }
        }
    }
    if plain.is_empty() || approving.is_empty() {
        return Err(LoadError::Usage("no usable research goal".into()));
    }
    let pick = move |i: usize| {
        // Every fifth conversation asks for approval.
        let same = if i % 5 == 0 { &approving } else { &plain };
        same[i % same.len()].clone()
    };
    Ok(Workload {
        graph: "research".into(),
        conversations: 0,
        concurrency: 0,
        thread_prefix,
        input: Arc::new(pick),
        answer: Arc::new(|_, _| Some(Resume::Value(json!({"action": "approve"})))),
        model_nodes: ["create_plan", "repair_plan", "replan", "synthesize_report"]
            .into_iter()
            .map(String::from)
            .collect(),
        on_done,
        steps: Some(StepsSpec {
            select_node: "select_next_step".into(),
            step_node: "execute_step".into(),
            step_id: Arc::new(|p: &Value| p["step_started"].as_str().map(String::from)),
            deps: Arc::new(|s: &research::ResearchState| {
                s.plan
                    .iter()
                    .map(|p| (p.id.clone(), p.depends_on.clone()))
                    .collect::<BTreeMap<_, _>>()
            }),
        }),
    })
}
