//! The `research` subcommand: parse and check every input before any model call (exit 2 on a bad
//! one), run the planner on a thread, print the plan, progress and brief, or one JSON object.
//!
//! Exit codes: 0 for `ok`, `needs_review` and `interrupted`; 1 for `failed` or a run error; 2 for
//! bad input (blank goal, unreadable or malformed notes, malformed constraints, a bad resume
//! value or one for a thread that is unknown or not paused, an unknown model or checkpoint URL).

use super::graph::GraphOptions;
use super::input::{initial_update, ResearchInput};
use super::nodes::review::parse_review;
use super::notes::parse_notes;
use super::policy::ResearchPolicy;
use super::runner::{self, Start};
use super::{output_json, render, ResearchState};
use crate::kit;
use planwright::{Engine, ThreadId};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;

/// Options of the `research` command.
#[derive(Clone, Debug, clap::Args)]
pub struct ResearchArgs {
    /// The research goal.
    #[arg(long)]
    pub goal: Option<String>,
    /// A JSON array of notes `{"id", "title", "text", "tags"?}` (default: the bundled corpus).
    #[arg(long)]
    pub notes: Option<std::path::PathBuf>,
    /// A JSON object of constraints, e.g. `{"max_steps": 4, "required_sections": ["cost"]}`.
    #[arg(long)]
    pub constraints: Option<String>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where threads are kept, so a later command answers or continues a paused run: a SQLite
    /// file under `.planwright/` in the working directory, created on first use; or `sqlite:PATH`
    /// (its directory must exist, or add `?create_dirs=true`), `postgres://…`, `memory:` (nothing
    /// kept after the command).
    #[arg(long, default_value = kit::RESEARCH_CHECKPOINT)]
    pub checkpoint: String,
    /// Thread id (default: a new one).
    #[arg(long)]
    pub thread: Option<String>,
    /// Answer a paused thread: `{"action": "approve"}`, `{"action": "deny", "reason": ...}` or
    /// `{"action": "edit", "plan": [...]}`.
    #[arg(long)]
    pub resume: Option<String>,
    /// The model: `offline`, `sim:p50=200ms,p99=900ms,errors=0.01,malformed=0,seed=1`
    /// (the simulator around the offline answers) or `openai` (an OpenAI-compatible server:
    /// `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `PLANWRIGHT_MODEL`).
    #[arg(long, default_value = "offline")]
    pub model: String,
    /// A tool server whose tools `mcp` steps call (repeat for several):
    /// `mcp+stdio:"npx -y @modelcontextprotocol/server-filesystem ./docs"` or
    /// `mcp+http://HOST:PORT/mcp`; `NAME=` before it names the server in citations.
    #[arg(long = "tools", value_name = "SPEC")]
    pub tools: Vec<String>,
    /// Seconds a tool call may take per attempt.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub tool_timeout: f64,
    /// Attempts per tool call (timeouts and transport errors are retried with backoff).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub tool_attempts: u32,
}

/// The tool servers of `--tools`, connected; `Ok(None)` without any. A malformed spec or
/// setting is `Err((2, …))`, a server that fails to start or to speak MCP `Err((1, …))`.
async fn connect_tools(
    args: &ResearchArgs,
) -> Result<Option<Arc<crate::tools::mcp::McpTools>>, (u8, String)> {
    use crate::tools::mcp::{CallPolicy, McpTools, ServerSpec};
    if args.tools.is_empty() {
        return Ok(None);
    }
    let specs = args
        .tools
        .iter()
        .map(|t| t.parse::<ServerSpec>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (2, e.to_string()))?;
    if !(args.tool_timeout.is_finite() && args.tool_timeout > 0.0) || args.tool_attempts == 0 {
        return Err((
            2,
            "--tool-timeout must be a positive number of seconds and --tool-attempts at least 1"
                .into(),
        ));
    }
    let policy = CallPolicy {
        timeout: std::time::Duration::from_secs_f64(args.tool_timeout),
        attempts: args.tool_attempts,
        ..CallPolicy::default()
    };
    McpTools::connect(&specs, policy)
        .await
        .map(|t| Some(Arc::new(t)))
        .map_err(|e| (1, e.to_string()))
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("research: {msg}");
    ExitCode::from(2)
}

struct Prepared {
    start: Start,
    policy: Arc<dyn ResearchPolicy>,
}

fn prepare(args: &ResearchArgs) -> Result<Prepared, String> {
    let policy = kit::policy_for::<dyn ResearchPolicy>(&args.model).map_err(|e| e.to_string())?;
    let start = if let Some(raw) = &args.resume {
        if args.thread.is_none() {
            return Err("--resume needs --thread ID (the paused thread)".into());
        }
        let value: Value =
            serde_json::from_str(raw).map_err(|e| format!("--resume is not JSON: {e}"))?;
        parse_review(&value).map_err(|e| e.to_string())?;
        Start::Resume(value)
    } else if args.goal.is_none()
        && args.thread.is_some()
        && args.constraints.is_none()
        && args.notes.is_none()
    {
        // `--thread T` alone: show the thread's brief, its pending question, or continue it.
        Start::Input(None)
    } else {
        let goal = args.goal.clone().unwrap_or_default();
        let constraints = match &args.constraints {
            Some(raw) => serde_json::from_str(raw)
                .map_err(|e| format!("malformed constraints: not JSON: {e}"))?,
            None => Value::Null,
        };
        let source_notes = match &args.notes {
            Some(path) => {
                let text = crate::kit::read_input(path, "notes file").map_err(|e| e.to_string())?;
                Some(parse_notes(&text).map_err(|e| format!("{}: {e}", path.display()))?)
            }
            None => None,
        };
        let update = initial_update(ResearchInput {
            input: goal,
            constraints,
            source_notes,
        })
        .map_err(|e| e.to_string())?;
        Start::Input(Some(Box::new(update)))
    };
    Ok(Prepared { start, policy })
}

fn exit_for(status: &str) -> ExitCode {
    if status == super::state::status::FAILED {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs the command.
pub async fn run(args: ResearchArgs) -> ExitCode {
    let prepared = match prepare(&args) {
        Ok(p) => p,
        Err(e) => return bad_input(e),
    };
    let mcp = match connect_tools(&args).await {
        Ok(m) => m,
        Err((code, e)) => {
            eprintln!("research: {e}");
            return ExitCode::from(code);
        }
    };
    let options = GraphOptions {
        mcp,
        ..GraphOptions::default()
    };
    let graph = match super::graph(prepared.policy, options) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("research: cannot build the graph: {e}");
            return ExitCode::from(1);
        }
    };
    // Answering or showing a thread needs one that exists: that creates no storage.
    let access = match prepared.start {
        Start::Resume(_) | Start::Input(None) => kit::Access::Existing,
        Start::Input(Some(_)) => kit::Access::Create,
    };
    let checkpointer =
        match kit::open_checkpointer(&args.checkpoint, kit::RESEARCH_CHECKPOINT, access).await {
            Ok(cp) => cp,
            Err(e) => {
                eprintln!("research: {e}");
                return e.exit_code();
            }
        };
    let durable = planwright::checkpoint::backend(&args.checkpoint)
        != Ok(planwright::checkpoint::Backend::Memory);
    let engine: Engine<ResearchState> = Engine::builder(graph)
        .checkpointer(checkpointer)
        .build()
        .await;
    // A new thread's id is unique per process: two commands started in the same millisecond on
    // the same storage get a thread each.
    let thread = ThreadId::new(args.thread.clone().unwrap_or_else(|| {
        format!(
            "research-{}-{}",
            super::clock::Clock::now_ms(&super::clock::SystemClock),
            std::process::id()
        )
    }));
    let quiet = args.json;
    // A spinner on stderr while nodes run, only when stderr is a terminal (super::progress).
    let mut spinner = super::progress::Spinner::on_stderr(!quiet);
    let outcome = runner::run(&engine, thread, prepared.start, |ev| {
        spinner.event(ev);
        if !quiet {
            if let Some(line) = render::progress(ev) {
                spinner.println(&line);
            }
        }
    })
    .await;
    spinner.finish();
    engine.shutdown().await;
    let run = match outcome {
        Ok(r) => r,
        Err(e) if e.is_bad_input() => return bad_input(e),
        Err(e) => {
            eprintln!("research: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        let mut out = output_json(&run.state, &run.status);
        out["thread_id"] = json!(run.thread.to_string());
        if run.status == "interrupted" {
            out["interrupt"] = run.interrupt.clone().unwrap_or(Value::Null);
        }
        println!("{out}");
    } else if run.status == "interrupted" {
        let payload = run.interrupt.unwrap_or(Value::Null);
        if let Some(err) = payload.get("error").and_then(Value::as_str) {
            eprintln!("research: {err}");
        }
        let mut flags: Vec<(&str, &str)> = [
            kit::unless_default("--checkpoint", &args.checkpoint, kit::RESEARCH_CHECKPOINT),
            kit::unless_default("--model", &args.model, "offline"),
        ]
        .into_iter()
        .flatten()
        .collect();
        // The resumed run calls the same tool servers.
        flags.extend(args.tools.iter().map(|t| ("--tools", t.as_str())));
        let approve = kit::resume_command(
            "research",
            &flags,
            run.thread.as_str(),
            r#"{"action": "approve"}"#,
        );
        println!(
            "Paused for approval on thread {}.\nPlan:\n{}Approve with:\n  {approve}\n(or answer {{\"action\": \"deny\", \"reason\": \"…\"}} or {{\"action\": \"edit\", \"plan\": […]}} the same way)",
            run.thread,
            render::plan_table(&run.state.plan),
        );
        if !durable {
            eprintln!(
                "research: --checkpoint {} keeps nothing after this command, so this paused thread is lost; leave --checkpoint out to keep threads under .planwright/",
                args.checkpoint
            );
        }
    } else {
        print!("{}", render::result(&run.state, &run.status));
    }
    exit_for(&run.status)
}
