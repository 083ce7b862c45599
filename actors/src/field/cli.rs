//! The `acquire` command (a contract: tools outside the project call it). Every input is checked
//! before anything runs (exit 2 naming the problem); questions are answered from `--answers`, or
//! else in the terminal (a line of stdin each); a question with no answer ends the run as `interrupted`
//! with the thread id to resume. Exit 0 for `ok` and `interrupted`, 1 for `aborted` or a run
//! error, 2 for bad input.

use super::graph::{GraphOptions, Topology};
use super::input::{bundled_corpus, initial_update, parse_answers, parse_corpus};
use super::policy::FieldPolicy;
use super::runner::{self, AcquireRun, AnswerSource, Start};
use super::schema::Schema;
use super::state::FieldState;
use crate::kit;
use planwright::Engine;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The default checkpoint file, under `.planwright/` in the working directory.
pub const DEFAULT_CHECKPOINT: &str = kit::ACQUIRE_CHECKPOINT;

/// Options of the `acquire` command.
#[derive(Clone, Debug, clap::Args)]
pub struct AcquireArgs {
    /// The schema (JSON). Required unless `--resume` continues a thread.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// The corpus: a JSON array of `{"id", "title", "text"}` (default: the bundled corpus).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// What is being sized (default: nothing said).
    #[arg(long, default_value = "", hide_default_value = true)]
    pub goal: String,
    /// A JSON object mapping field names to answers, used when that field is asked.
    #[arg(long)]
    pub answers: Option<PathBuf>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// The conversation or thread id (default: a new one).
    #[arg(long)]
    pub thread: Option<String>,
    /// Answer the paused question of `--thread`.
    #[arg(long)]
    pub resume: Option<String>,
    /// Where threads are kept, so a later command answers a paused run: a SQLite file under
    /// `.planwright/` in the working directory, created on first use; or `sqlite:PATH` (its
    /// directory must exist, or add `?create_dirs=true`), `postgres://…`, `memory:` (nothing kept
    /// after the command).
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    pub checkpoint: String,
    /// The model: `offline`, `sim:…` or `openai` (see `docs/models.md`).
    #[arg(long, default_value = "offline")]
    pub model: String,
    /// The topology: `staged` or `plan` (the stages in one `plan` node, one checkpoint per
    /// iteration).
    #[arg(long, default_value = "staged")]
    pub topology: String,
    /// An exchange rate, `FROM/TO=RATE` (`USD/EUR=0.92`; repeatable): a price in another
    /// currency than the schema's is converted only at a rate given here or stated by a document.
    #[arg(long = "rate", value_name = "FROM/TO=RATE")]
    pub rates: Vec<String>,
    /// A tool server a search also asks (repeat for several): `mcp+stdio:COMMAND` or
    /// `mcp+http://HOST:PORT/mcp`, `NAME=` before it to name it (see docs/tools.md).
    #[arg(long = "tools", value_name = "SPEC")]
    pub tools: Vec<String>,
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("acquire: {msg}");
    ExitCode::from(2)
}

fn read(path: &std::path::Path, what: &str) -> Result<String, String> {
    crate::kit::read_input(path, what).map_err(|e| e.to_string())
}

struct Prepared {
    start: Start,
    answers: Option<BTreeMap<String, String>>,
    policy: Arc<dyn FieldPolicy>,
    topology: Topology,
}

fn prepare(args: &AcquireArgs, conversation: &str) -> Result<Prepared, String> {
    let policy = kit::policy_for::<dyn FieldPolicy>(&args.model).map_err(|e| e.to_string())?;
    let topology = match args.topology.as_str() {
        "staged" => Topology::Staged,
        "plan" => Topology::Plan,
        other => return Err(format!("unknown topology `{other}` (staged or plan)")),
    };
    let schema = match &args.schema {
        Some(p) => Some(
            Schema::from_json(&read(p, "schema")?).map_err(|e| format!("{}: {e}", p.display()))?,
        ),
        None => None,
    };
    let answers = match &args.answers {
        Some(p) => Some(
            parse_answers(&read(p, "answers")?, schema.as_ref())
                .map_err(|e| format!("{}: {e}", p.display()))?,
        ),
        None => None,
    };

    let start = if let Some(text) = &args.resume {
        if args.thread.is_none() {
            return Err("--resume needs --thread ID (the paused thread)".into());
        }
        Start::Resume(text.clone())
    } else {
        let schema = schema.ok_or("--schema FILE is required")?;
        let mut corpus = match &args.corpus {
            Some(p) => {
                parse_corpus(&read(p, "corpus")?).map_err(|e| format!("{}: {e}", p.display()))?
            }
            None => bundled_corpus().map_err(|e| e.to_string())?,
        };
        let rates = args
            .rates
            .iter()
            .map(|r| super::input::parse_rate(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        corpus.extend(super::input::rates_document(&rates));
        Start::Input(Box::new(initial_update(
            conversation,
            &args.goal,
            schema,
            corpus,
        )))
    };
    Ok(Prepared {
        start,
        answers,
        policy,
        topology,
    })
}

fn conversation_id(args: &AcquireArgs) -> String {
    match &args.thread {
        Some(t) => runner::conversation_of(t).to_string(),
        None => {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default();
            format!("acquire-{ms}-{}", std::process::id())
        }
    }
}

/// Asks on stderr and reads the answer from stdin, one line per question; an empty line or the end
/// of input is no answer.
struct Terminal;

impl AnswerSource for Terminal {
    fn answer(&mut self, _field: &str, question: &str) -> Option<String> {
        eprint!("{question}\n> ");
        std::io::stderr().flush().ok();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_string()).filter(|l| !l.is_empty()),
        }
    }
}

/// The run as the `acquire` command prints it: status, targets, each field with where it came from
/// (and what was done to a number read from a quote).
pub fn render_text(run: &AcquireRun) -> String {
    let out = run.output_json();
    let mut s = String::new();
    s.push_str(&format!("status: {}\n", run.status()));
    s.push_str("targets:\n");
    // In the schema's order, each with its unit (the run's currency for money).
    for t in out["target_list"].as_array().into_iter().flatten() {
        let unit = t["unit"]
            .as_str()
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        s.push_str(&format!(
            "  {} = {}{unit}\n",
            t["field"].as_str().unwrap_or("?"),
            super::people::value(&t["value"])
        ));
    }
    s.push_str("fields:\n");
    for (k, v) in out["fields"].as_object().into_iter().flatten() {
        let p = &v["provenance"];
        let from = match p["kind"].as_str() {
            Some("search") => {
                let how: Vec<String> = p["conversions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| {
                        serde_json::from_value::<crate::field::reading::Conversion>(c.clone()).ok()
                    })
                    .filter(|c| !matches!(c, crate::field::reading::Conversion::Scale { .. }))
                    .map(|c| c.describe())
                    .collect();
                format!(
                    "search {} \"{}\"{}",
                    p["source_id"].as_str().unwrap_or(""),
                    p["quote"].as_str().unwrap_or(""),
                    if how.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", how.join(", "))
                    }
                )
            }
            Some("user") => "user".to_string(),
            Some(kind) => format!("{kind} {}", p["formula"].as_str().unwrap_or("")),
            None => "missing".to_string(),
        };
        s.push_str(&format!(
            "  {k} = {} ({from})\n",
            super::people::value(&v["value"])
        ));
    }
    s.push_str(&format!(
        "{} decisions in {} iterations\n",
        run.state.decisions.len(),
        run.state.iterations
    ));
    if let Some(p) = &run.pending {
        s.push_str(&format!(
            "Paused on thread {}: {}\n",
            run.thread,
            p["question"].as_str().unwrap_or("")
        ));
    }
    s
}

/// The command line that answers `run`'s question, `ANSWER` standing for the answer: every flag
/// of `args` the answer needs to reach the same thread the same way.
fn resume_hint(args: &AcquireArgs, run: &AcquireRun) -> String {
    let flags: Vec<(&str, &str)> = [
        kit::unless_default("--checkpoint", &args.checkpoint, DEFAULT_CHECKPOINT),
        kit::unless_default("--model", &args.model, "offline"),
        kit::unless_default("--topology", &args.topology, "staged"),
    ]
    .into_iter()
    .flatten()
    .chain(args.tools.iter().map(|t| ("--tools", t.as_str())))
    .collect();
    let line = kit::resume_command("acquire", &flags, run.thread.as_str(), "ANSWER");
    format!("Answer with (ANSWER replaced by yours):\n  {line}\n")
}

/// Runs the command.
pub async fn run(args: AcquireArgs) -> ExitCode {
    let conversation = conversation_id(&args);
    let prepared = match prepare(&args, &conversation) {
        Ok(p) => p,
        Err(e) => return bad_input(e),
    };
    let mcp = match crate::tools::mcp::connect_flags(&args.tools, Default::default()).await {
        Ok(m) => m,
        Err(e) => {
            eprintln!("acquire: {e}");
            return ExitCode::from(if e.is_bad_input() { 2 } else { 1 });
        }
    };
    let options = GraphOptions {
        topology: prepared.topology,
        mcp,
        ..GraphOptions::default()
    };
    let graph = match super::graph(prepared.policy, &options) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("acquire: cannot build the graph: {e}");
            return ExitCode::from(1);
        }
    };
    // Answering a question needs a thread that exists: that creates no storage.
    let access = match prepared.start {
        Start::Resume(_) => kit::Access::Existing,
        Start::Input(_) => kit::Access::Create,
    };
    let checkpointer =
        match kit::open_checkpointer(&args.checkpoint, DEFAULT_CHECKPOINT, access).await {
            Ok(cp) => cp,
            Err(e) => {
                eprintln!("acquire: {e}");
                return e.exit_code();
            }
        };
    let engine: Engine<FieldState> = Engine::builder(graph)
        .migration(runner::migration)
        .checkpointer(checkpointer)
        .build()
        .await;
    let mut terminal = Terminal;
    let mut map = prepared.answers.clone().unwrap_or_default();
    // Without an answers file, questions go to the terminal (or whatever feeds stdin: one answer
    // per line); an empty line or the end of input leaves the run paused.
    let answers: &mut dyn AnswerSource = if prepared.answers.is_some() {
        &mut map
    } else {
        &mut terminal
    };
    let outcome = runner::run(
        &engine,
        prepared.topology,
        &conversation,
        prepared.start,
        answers,
    )
    .await;
    engine.shutdown().await;
    let run = match outcome {
        Ok(r) => r,
        Err(e) if e.is_bad_input() => return bad_input(e),
        Err(e) => {
            eprintln!("acquire: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", run.output_json());
    } else {
        print!("{}", render_text(&run));
        if run.pending.is_some() {
            print!("{}", resume_hint(&args, &run));
        }
    }
    if run.status() == "aborted" {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
