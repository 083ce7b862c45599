//! The `planwright` command line.

mod logging;

use clap::{Parser, Subcommand};
use planwright_actors::{bench, field, load, research, serve};
use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: under load every tokio worker, the checkpoint writer and
/// the blocking pool allocate at once, and with glibc's arenas a quarter of the process's CPU is
/// malloc/free plus futex waits on its arena locks (perf, 10,000 research conversations).
/// mimalloc's per-thread heaps take no lock on the fast path. The
/// `system-allocator` feature leaves it out, for heap profilers that watch `malloc` (valgrind's
/// DHAT, heaptrack).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Plan and run work as durable planner graphs: write cited research briefs, size markets by
/// search, questions and formulas, serve both over HTTP (the LangGraph Server API, with a studio
/// page), and load-test them.
#[derive(Parser)]
#[command(
    name = "planwright",
    version,
    after_help = "`planwright COMMAND --help` gives a command's options; README.md and docs/ are \
                  the manual."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written on stderr: `text` for people, `json` (one object per line) for
    /// log collectors. Which lines: `RUST_LOG`, or when it is unset `info` for `serve` and `warn`
    /// for the other commands.
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Measure the runtime on a synthetic graph shape.
    Bench(bench::BenchArgs),
    /// Plan, execute and write a research brief over source notes.
    Research(research::cli::ResearchArgs),
    /// Measure research briefs against a labelled set: recall, citations, gaps, tokens, time.
    ResearchEval(research::eval::cli::EvalArgs),
    /// Run many conversations of a planner at once and report what they cost.
    Load(Box<load::LoadCommand>),
    /// Serve the planners over HTTP (LangGraph Server API subset).
    Serve(serve::ServeArgs),
    /// Fill a market-sizing schema by search, questions and decomposition, then calculate it.
    Acquire(field::cli::AcquireArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A server's operator wants its runs and failures; a terminal user only what went wrong.
    let default_filter = match cli.command {
        Command::Serve(_) => logging::SERVE_DEFAULT,
        _ => logging::CLI_DEFAULT,
    };
    if let Err(e) = logging::init(cli.log_format, default_filter) {
        eprintln!("planwright: {e}");
        return ExitCode::from(2);
    }
    let workers = match &cli.command {
        Command::Bench(a) => a.workers,
        Command::Research(_)
        | Command::ResearchEval(_)
        | Command::Load(_)
        | Command::Serve(_)
        | Command::Acquire(_) => None,
    };
    let rt = match bench::runtime(workers) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        match cli.command {
            Command::Bench(args) => run_bench(args).await,
            Command::Research(args) => research::cli::run(args).await,
            Command::ResearchEval(args) => research::eval::cli::run(args).await,
            Command::Acquire(args) => field::cli::run(args).await,
            Command::Load(args) => run_load(*args).await,
            Command::Serve(args) => match serve::run(&args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(
                    e @ (serve::ServeError::Usage(_)
                    | serve::ServeError::Checkpoint(
                        planwright::checkpoint::CheckpointError::BadUrl { .. },
                    )),
                ) => {
                    eprintln!("serve: {e}");
                    ExitCode::from(2)
                }
                Err(e) => {
                    // With its causes: "cannot open x.sqlite" alone does not say why.
                    eprintln!("serve: {}", planwright::ErrorChain(&e));
                    ExitCode::from(1)
                }
            },
        }
    })
}

/// `load compare`'s exit codes: 0, 1 with `--fail-on-regression` when a figure got significantly
/// worse, 2 for unreadable reports. A run's are in `load::cli`.
async fn run_load(cmd: load::LoadCommand) -> ExitCode {
    let args = match cmd.command {
        Some(load::LoadSubcommand::Compare(c)) => {
            return match load::compare_files(&c) {
                Ok(cmp) => {
                    println!("{}", cmp.to_text());
                    if c.fail_on_regression && cmp.regressed() {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e @ load::LoadError::Report(_)) => {
                    eprintln!("load compare: {e}");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("load compare: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(load::LoadSubcommand::Sweep(s)) => return load::cli::sweep(&s).await,
        None => cmd.args,
    };
    load::cli::run(&args).await
}

async fn run_bench(args: bench::BenchArgs) -> ExitCode {
    let checkpointer = match &args.checkpoint {
        Some(url) => match planwright::checkpoint::connect(url).await {
            Ok(cp) => Some(cp),
            Err(e) => {
                eprintln!("bench: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let report = match bench::run(&args, checkpointer).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench failed: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("bench failed: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        println!("{}", report.to_text());
    }
    ExitCode::SUCCESS
}
