//! `load`: many conversations of a planner at once, measured — throughput, per-node and
//! per-conversation latency percentiles, mailbox wait against work, model calls and errors,
//! checkpoint writes, peak memory — with a JSON and HTML report.
//!
//! [`driver::run`] is the library entry point for any graph (see `examples/load_my_graph.rs`);
//! this module wires it to the bundled graphs and the command line.

pub mod acquire;
pub mod driver;
mod remote;
pub mod report;

pub use driver::{run as run_workload, Workload};
pub use report::LoadReport;

use crate::bench::loop_shape;
use crate::field;
use crate::kit;
use crate::model::{ModelError, ModelSpec, ModelStats};
use crate::research::policy::ResearchPolicy;
use crate::research::{self, GraphOptions, ResearchInput};
use planwright::runtime::Resume;
use planwright::Engine;
use serde_json::json;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

/// `load` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// The graph: `research`, `acquire` (the field-acquisition planner) or `loop`.
    #[arg(long, default_value = "research")]
    pub graph: String,
    /// Conversations to run.
    #[arg(long, default_value_t = 100)]
    pub conversations: usize,
    /// At most this many at once.
    #[arg(long, default_value_t = 50)]
    pub concurrency: usize,
    /// The model (`offline`, `sim:p50=…,p99=…,errors=…,malformed=…,seed=…`, `openai`).
    #[arg(long, default_value = "sim:p50=50ms,p99=200ms")]
    pub model: String,
    /// Checkpointer URL (`memory:`, `sqlite:PATH`, `postgres://…`); none by default.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// Drive a `serve` instance at this URL instead of running in-process (`research` or
    /// `acquire`).
    #[arg(long)]
    pub target: Option<String>,
    /// Bearer token for `--target`.
    #[arg(long)]
    pub token: Option<String>,
    /// Write the report as JSON to FILE and as HTML to FILE with `.html`.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Why a load run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A bad argument.
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

fn progress(n: usize, quiet: bool) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40}] {pos}/{len} conversations ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Runs `load` and returns its report (also written where `--report` says).
pub async fn run(args: &LoadArgs) -> Result<LoadReport, LoadError> {
    if args.conversations == 0 || args.concurrency == 0 {
        return Err(LoadError::Usage(
            "--conversations and --concurrency must be at least 1".into(),
        ));
    }
    if let Some(target) = &args.target {
        let bar = progress(args.conversations, args.quiet);
        let on_done: Arc<dyn Fn() + Send + Sync> = {
            let bar = bar.clone();
            Arc::new(move || bar.inc(1))
        };
        let conversation = match args.graph.as_str() {
            "research" => research_remote()?,
            "acquire" => acquire_remote()?,
            _ => {
                return Err(LoadError::Usage(
                    "--target drives the `research` and `acquire` assistants only".into(),
                ))
            }
        };
        let report = remote::run(
            target,
            args.token.clone(),
            args.conversations,
            args.concurrency,
            conversation,
            on_done,
        )
        .await?;
        bar.finish_and_clear();
        write_report(args, &report)?;
        return Ok(report);
    }
    let spec: ModelSpec = args.model.parse()?;
    let checkpointer = match &args.checkpoint {
        Some(url) => Some(planwright::checkpoint::connect(url).await?),
        None => None,
    };
    let bar = progress(args.conversations, args.quiet);
    let on_done: Arc<dyn Fn() + Send + Sync> = {
        let bar = bar.clone();
        Arc::new(move || bar.inc(1))
    };
    let prefix = format!("load-{}-{}", args.graph, std::process::id());
    let stats = Arc::new(ModelStats::default());
    let mut report = match args.graph.as_str() {
        "loop" => {
            let engine = Engine::builder(loop_shape::graph()?)
                .maybe_checkpointer(checkpointer)
                .build()
                .await;
            driver::run(
                &engine,
                Workload {
                    graph: "loop".into(),
                    conversations: args.conversations,
                    concurrency: args.concurrency,
                    thread_prefix: prefix,
                    input: Arc::new(|_| Default::default()),
                    answer: Arc::new(|_, _| None),
                    model_nodes: HashSet::new(),
                    on_done,
                },
            )
            .await
        }
        "research" => {
            let policy = kit::policy::<dyn ResearchPolicy>(&spec, Some(stats.clone()))?;
            let engine = Engine::builder(research::graph(policy, GraphOptions::default())?)
                .maybe_checkpointer(checkpointer)
                .build()
                .await;
            driver::run(&engine, research_workload(args, prefix, on_done)?).await
        }
        "acquire" => {
            let policy = kit::policy::<dyn field::FieldPolicy>(&spec, Some(stats.clone()))?;
            let graph = field::graph(policy, &field::GraphOptions::default())?;
            let engine = Engine::builder(graph)
                .maybe_checkpointer(checkpointer)
                .migration(field::runner::migration)
                .build()
                .await;
            let w = acquire::workload(args.conversations, args.concurrency, prefix, on_done)?;
            driver::run(&engine, w).await
        }
        other => {
            return Err(LoadError::Usage(format!(
                "unknown graph `{other}`: use research, acquire or loop"
            )))
        }
    };
    bar.finish_and_clear();
    report.model = stats.snapshot();
    write_report(args, &report)?;
    Ok(report)
}

fn write_report(args: &LoadArgs, report: &LoadReport) -> Result<(), LoadError> {
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(report)
            .map_err(|e| LoadError::Report(std::io::Error::other(e)))?;
        std::fs::write(path, json).map_err(LoadError::Report)?;
        std::fs::write(path.with_extension("html"), report.to_html()).map_err(LoadError::Report)?;
    }
    Ok(())
}

/// Research conversations over HTTP: the sample goals in turn, every fifth asking for approval,
/// answered `approve`.
fn research_remote() -> Result<remote::Conversation, LoadError> {
    let goals = sample_goals()?;
    Ok(remote::Conversation {
        assistant: "research",
        input: Arc::new(move |i| {
            let g = &goals[i % goals.len()];
            let mut c = if g["constraints"].is_object() {
                g["constraints"].clone()
            } else {
                json!({})
            };
            c["require_approval"] = json!(i % 5 == 0);
            json!({"input": g["input"], "constraints": c})
        }),
        answer: Arc::new(|_, _| json!({"action": "approve"})),
        max_resumes: 10,
    })
}

/// Acquire conversations over HTTP: the scenarios in turn ([`acquire::rotation`]), every
/// question answered from the scenario (or plausibly).
fn acquire_remote() -> Result<remote::Conversation, LoadError> {
    let scenarios = Arc::new(acquire::rotation()?);
    let inputs: Vec<serde_json::Value> = scenarios.iter().map(|s| s.run_input()).collect();
    Ok(remote::Conversation {
        assistant: "acquire",
        input: Arc::new(move |i| inputs[i % inputs.len()].clone()),
        answer: Arc::new(move |i, payload| {
            json!(scenarios[i % scenarios.len()].answer_payload(payload))
        }),
        // Bounded by the planner's ask caps (8 questions in all); a margin for re-asks.
        max_resumes: 20,
    })
}

fn sample_goals() -> Result<Vec<serde_json::Value>, LoadError> {
    serde_json::from_str(include_str!("../../../fixtures/research/goals.json"))
        .map_err(|e| LoadError::Usage(format!("bundled goals: {e}")))
}

/// Research conversations: the bundled sample goals in turn; every fifth asks for plan approval,
/// answered `approve` under load.
fn research_workload(
    args: &LoadArgs,
    thread_prefix: String,
    on_done: Arc<dyn Fn() + Send + Sync>,
) -> Result<Workload<research::ResearchState>, LoadError> {
    let goals = sample_goals()?;
    let notes =
        research::notes::bundled().map_err(|e| LoadError::Usage(format!("bundled notes: {e}")))?;
    let mut inputs = Vec::new();
    for (i, g) in goals.iter().enumerate() {
        for approval in [false, true] {
            let mut constraints = g["constraints"].clone();
            if !constraints.is_object() {
                constraints = json!({});
            }
            constraints["require_approval"] = json!(approval);
            let input = ResearchInput {
                input: g["input"].as_str().unwrap_or_default().to_string(),
                constraints,
                source_notes: Some(notes.clone()),
            };
            if let Ok(update) = research::initial_update(input) {
                inputs.push((i, approval, update));
            }
        }
    }
    if inputs.is_empty() {
        return Err(LoadError::Usage("no usable sample goal".into()));
    }
    let inputs = Arc::new(inputs);
    let pick = {
        let inputs = inputs.clone();
        move |i: usize| {
            // Every fifth conversation asks for approval.
            let want_approval = i % 5 == 0;
            let same: Vec<&(usize, bool, research::ResearchUpdate)> = inputs
                .iter()
                .filter(|(_, a, _)| *a == want_approval)
                .collect();
            same[i % same.len()].2.clone()
        }
    };
    Ok(Workload {
        graph: "research".into(),
        conversations: args.conversations,
        concurrency: args.concurrency,
        thread_prefix,
        input: Arc::new(pick),
        answer: Arc::new(|_, _| Some(Resume::Value(json!({"action": "approve"})))),
        model_nodes: ["create_plan", "repair_plan", "replan", "synthesize_report"]
            .into_iter()
            .map(String::from)
            .collect(),
        on_done,
    })
}
