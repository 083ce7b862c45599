//! The `bench` command: synthetic graphs with trivial node bodies, measuring the runtime itself.
//!
//! Shapes mirror LangGraph's reference benchmark (`shared/anchors/langgraph`): `loop` (the
//! field-acquisition loop, 110 node executions per conversation) and `fanout` (plan-execute-replan
//! with parallel steps, 25). With `--conversations 1` it runs `--reps` conversations one after
//! another; with more, it starts them all at once and measures throughput and memory.

pub mod fanout_shape;
pub mod loop_shape;
pub mod measure;

use futures::future::join_all;
use planwright::checkpoint::Checkpointer;
use planwright::runtime::{Durability, Engine, RunError, RunOptions};
use planwright::{CompiledGraph, State, ThreadId};
use serde::Serialize;
use std::sync::Arc;
use tokio::time::Instant;

/// Which synthetic graph to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// The field-acquisition loop: 110 node executions per conversation.
    Loop,
    /// Plan-execute-replan with fan-out: 25 node executions per conversation.
    Fanout,
}

impl std::fmt::Display for Shape {
    /// The shape's name as `--shape` takes it (`loop`, `fanout`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shape::Loop => "loop",
            Shape::Fanout => "fanout",
        })
    }
}

/// Options of the `bench` command.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// The graph shape.
    #[arg(long, value_enum, default_value = "loop")]
    pub shape: Shape,
    /// Conversations started at once.
    #[arg(long, default_value_t = 1)]
    pub conversations: usize,
    /// Sequential repetitions (default: 200 with one conversation, else 1).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Checkpointer URL (`memory:`, `sqlite:PATH`, `postgres://…`); none by default.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// Durability with a checkpointer.
    #[arg(long, value_enum, default_value = "sync")]
    pub durability: DurabilityArg,
    /// Tokio worker threads (0: a single-threaded runtime). Default: one per core.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `--durability` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// Stored before the next superstep.
    Sync,
    /// Stored in the background.
    Async,
    /// Stored when the run ends.
    Exit,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Async => Durability::Async,
            DurabilityArg::Exit => Durability::Exit,
        }
    }
}

/// What a benchmark run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The shape.
    pub shape: Shape,
    /// Conversations at once.
    pub conversations: usize,
    /// Sequential repetitions.
    pub reps: usize,
    /// Node executions measured (warm-up excluded).
    pub node_executions: u64,
    /// Wall time of the measured part, in milliseconds.
    pub wall_ms: f64,
    /// Median over conversations of (conversation latency / its node executions), in µs.
    pub us_per_node: f64,
    /// 90th percentile of the same.
    pub us_per_node_p90: f64,
    /// Node executions per second of wall time.
    pub node_execs_per_sec: f64,
    /// Peak resident memory of the process, KiB.
    pub peak_rss_kb: u64,
    /// Resident memory before the measured part, KiB.
    pub baseline_rss_kb: u64,
    /// (peak − baseline) / conversations, KiB: the memory of one live conversation.
    pub kb_per_conversation: f64,
    /// Tokio worker threads (0: single-threaded runtime).
    pub workers: usize,
    /// Checkpointer URL, if any.
    pub checkpoint: Option<String>,
    /// Durability used with it.
    pub durability: Option<String>,
    /// Checkpoint records stored.
    pub checkpoint_records: u64,
    /// Bytes of those records.
    pub checkpoint_bytes: u64,
    /// Task-write batches stored.
    pub checkpoint_writes: u64,
}

/// Errors of the bench command.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The graph failed to compile (a bug).
    #[error("graph: {0}")]
    Graph(#[from] planwright::GraphError),
    /// A run failed.
    #[error("run failed: {0}")]
    Run(#[from] RunError),
    /// A run ended in the wrong state.
    #[error("verification failed: {0}")]
    Verify(String),
    /// The checkpointer could not be opened.
    #[error("checkpointer: {0}")]
    Checkpoint(String),
}

/// Worker threads when `--workers` is not given: one per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// Builds the tokio runtime `--workers` asks for.
pub fn runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    match workers.unwrap_or_else(default_workers) {
        0 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    }
}

/// Runs a benchmark.
pub async fn run(
    args: &BenchArgs,
    checkpointer: Option<Arc<dyn Checkpointer>>,
) -> Result<BenchReport, BenchError> {
    match args.shape {
        Shape::Loop => {
            measure_shape(args, loop_shape::graph()?, checkpointer, loop_shape::verify).await
        }
        Shape::Fanout => {
            measure_shape(
                args,
                fanout_shape::graph()?,
                checkpointer,
                fanout_shape::verify,
            )
            .await
        }
    }
}

async fn measure_shape<S: State>(
    args: &BenchArgs,
    graph: CompiledGraph<S>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    verify: fn(&S) -> Result<(), String>,
) -> Result<BenchReport, BenchError> {
    let durable = checkpointer.is_some();
    let mut builder = Engine::builder(graph).durability(args.durability.into());
    if let Some(cp) = checkpointer {
        builder = builder.checkpointer(cp);
    }
    let engine = builder.build().await;
    let prefix = format!(
        "bench-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    );
    let one = |i: usize| {
        let engine = engine.clone();
        let thread = ThreadId::new(format!("{prefix}-{i}"));
        async move {
            let start = Instant::now();
            let out = engine
                .run(thread, S::Update::default(), RunOptions::default())
                .await?;
            let elapsed = start.elapsed();
            verify(&out.state).map_err(BenchError::Verify)?;
            Ok::<_, BenchError>((elapsed, out.node_executions))
        }
    };
    for i in 0..20 {
        one(usize::MAX - i).await?;
    }
    let reps = args
        .reps
        .unwrap_or(if args.conversations <= 1 { 200 } else { 1 });
    let conversations = args.conversations.max(1);
    let (records0, bytes0, writes0) = engine.checkpoint_counters();
    measure::reset_peak_rss();
    let baseline = measure::rss_kb().map(|r| r.0).unwrap_or(0);
    let mut per_node = Vec::with_capacity(reps * conversations);
    let mut nodes = 0;
    let start = Instant::now();
    for rep in 0..reps {
        let results = join_all((0..conversations).map(|c| one(rep * conversations + c))).await;
        for r in results {
            let (elapsed, n) = r?;
            nodes += n;
            per_node.push(elapsed.as_secs_f64() * 1e6 / n.max(1) as f64);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let peak = measure::rss_kb().map(|r| r.1).unwrap_or(0);
    let (records, bytes, writes) = engine.checkpoint_counters();
    let us_per_node = measure::percentile(&mut per_node, 50.0);
    let us_per_node_p90 = measure::percentile(&mut per_node, 90.0);
    Ok(BenchReport {
        shape: args.shape,
        conversations,
        reps,
        node_executions: nodes,
        wall_ms: wall * 1e3,
        us_per_node,
        us_per_node_p90,
        node_execs_per_sec: nodes as f64 / wall.max(1e-9),
        peak_rss_kb: peak,
        baseline_rss_kb: baseline,
        kb_per_conversation: peak.saturating_sub(baseline) as f64 / conversations as f64,
        workers: args.workers.unwrap_or_else(default_workers),
        checkpoint: args.checkpoint.clone(),
        durability: durable.then(|| format!("{:?}", args.durability).to_lowercase()),
        checkpoint_records: records - records0,
        checkpoint_bytes: bytes - bytes0,
        checkpoint_writes: writes - writes0,
    })
}

impl BenchReport {
    /// A readable summary.
    pub fn to_text(&self) -> String {
        format!(
            "shape {} ({} worker thread(s)): {} conversation(s) × {} rep(s), {} node executions in {:.1} ms\n  {:.2} µs per node execution (median; p90 {:.2})\n  {:.0} node executions/s\n  peak RSS {} KiB (baseline {} KiB, {:.1} KiB per live conversation)\n  checkpoints: {} records, {} bytes, {} task-write batches",
            self.shape, self.workers, self.conversations, self.reps, self.node_executions, self.wall_ms, self.us_per_node, self.us_per_node_p90,
            self.node_execs_per_sec, self.peak_rss_kb, self.baseline_rss_kb, self.kb_per_conversation, self.checkpoint_records, self.checkpoint_bytes, self.checkpoint_writes
        )
    }
}
