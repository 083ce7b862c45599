//! The `planwright` command line.

use clap::{Parser, Subcommand};
use planwright_actors::bench;
use std::process::ExitCode;

/// Planwright: LangGraph-style planner graphs on actors.
#[derive(Parser)]
#[command(name = "planwright", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure the runtime on a synthetic graph shape.
    Bench(bench::BenchArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => run_bench(args).await,
    }
}

async fn run_bench(args: bench::BenchArgs) -> ExitCode {
    let report = match bench::run(&args, None).await {
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
