//! The `research-eval` subcommand: load a labelled set, run it with a model, print the scores.
//!
//! Exit codes: 0 when the run met the thresholds given (none by default); 1 when it did not, or a
//! run failed; 2 for a bad set file or an unknown model.

use super::{render, run_set, summarize, EvalSet, DEFAULT_K};
use crate::kit;
use crate::research::policy::ResearchPolicy;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of the `research-eval` command.
#[derive(Clone, Debug, clap::Args)]
pub struct EvalArgs {
    /// The labelled set (see `fixtures/research/eval/README.md`), e.g.
    /// `fixtures/research/eval/set.json`.
    #[arg(long)]
    pub set: PathBuf,
    /// The model, as for `research`: `offline`, `sim:…` or `openai`.
    #[arg(long, default_value = "offline")]
    pub model: String,
    /// Notes a search step may return that recall is measured against (the search tool's
    /// default is the default).
    #[arg(long, default_value_t = DEFAULT_K)]
    pub k: usize,
    /// Print one JSON object (every goal's scores and the summary).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when mean recall@k is below this.
    #[arg(long)]
    pub min_recall: Option<f64>,
    /// Exit 1 when more distractor citations than this are made.
    #[arg(long)]
    pub max_distractors: Option<usize>,
}

/// Runs the command.
pub async fn run(args: EvalArgs) -> ExitCode {
    let set = match EvalSet::load(&args.set) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("research-eval: {e}");
            return ExitCode::from(2);
        }
    };
    let policy = match kit::policy_for::<dyn ResearchPolicy>(&args.model) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("research-eval: {e}");
            return ExitCode::from(2);
        }
    };
    let results = match run_set(&set, policy, args.k).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("research-eval: {e}");
            return ExitCode::from(1);
        }
    };
    let summary = summarize(&results, args.k);
    if args.json {
        println!(
            "{}",
            json!({"model": args.model, "summary": summary, "goals": results})
        );
    } else {
        print!("{}", render(&results, &summary));
    }
    let mut failed = false;
    if let Some(min) = args.min_recall {
        if summary.recall_at_k < min {
            eprintln!(
                "research-eval: recall@{} {:.3} is below {min}",
                args.k, summary.recall_at_k
            );
            failed = true;
        }
    }
    if let Some(max) = args.max_distractors {
        if summary.distractors_cited > max {
            eprintln!(
                "research-eval: {} distractor citation(s), more than {max}",
                summary.distractors_cited
            );
            failed = true;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
