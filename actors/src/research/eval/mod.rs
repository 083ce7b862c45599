//! `research-eval`: runs a labelled set of goals through the planner and measures the briefs —
//! recall@k per aspect, citation precision, gap precision and recall, tokens and time per brief —
//! for the offline policy or any model, so models and prompts can be compared on the same set.
//!
//! The set format is in `fixtures/research/eval/README.md`; the shipped set is
//! `fixtures/research/eval/set.json`. Scoring is pure ([`mod@score`]); this module only runs goals.

pub mod cli;
pub mod score;
pub mod set;

pub use score::{score, GoalScore, DEFAULT_K};
pub use set::{EvalGoal, EvalSet, EvalSetError};

use super::graph::GraphOptions;
use super::input::{initial_update, InputError, ResearchInput};
use super::policy::ResearchPolicy;
use super::state::ResearchState;
use planwright::{Engine, RunEvent, RunOptions, ThreadId};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// One goal's run and scores.
#[derive(Clone, Debug, Serialize)]
pub struct GoalResult {
    /// The goal's id.
    pub id: String,
    /// How the run ended (`ok`, `needs_review`, `failed`).
    pub status: String,
    /// The scores.
    pub score: GoalScore,
    /// Model tokens (prompt + completion) over the run's calls; 0 for the offline policy.
    pub tokens: u64,
    /// Model calls made.
    pub model_calls: u64,
    /// Wall time of the run, in milliseconds.
    pub millis: f64,
}

/// The set's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Goals run.
    pub goals: usize,
    /// Mean recall@k over the labelled (non-gap) aspects of every goal.
    pub recall_at_k: f64,
    /// The `k` used.
    pub k: usize,
    /// Supported citations over all citations.
    pub citation_precision: f64,
    /// Distractor citations, over all goals.
    pub distractors_cited: usize,
    /// Reported gaps that were expected, over reported gaps (1 when none reported).
    pub gap_precision: f64,
    /// Expected gaps that were reported, over expected gaps (1 when none expected).
    pub gap_recall: f64,
    /// Mean model tokens per brief.
    pub tokens_per_brief: f64,
    /// Median wall time per brief, ms.
    pub median_millis: f64,
    /// Runs that ended `ok`.
    pub ok: usize,
}

/// Why the evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The set is malformed.
    #[error(transparent)]
    Set(#[from] EvalSetError),
    /// A goal's input was refused by the planner.
    #[error("goal `{goal}`: {source}")]
    Input {
        /// The goal.
        goal: String,
        /// Why.
        source: InputError,
    },
    /// The graph could not be built.
    #[error("cannot build the graph: {0}")]
    Graph(#[from] planwright::GraphError),
    /// A run stopped with a runtime error.
    #[error("goal `{goal}`: the run failed: {reason}")]
    Run {
        /// The goal.
        goal: String,
        /// Why.
        reason: String,
    },
}

/// Runs every goal of `set` with `policy`, scoring recall at `k`.
pub async fn run_set(
    set: &EvalSet,
    policy: Arc<dyn ResearchPolicy>,
    k: usize,
) -> Result<Vec<GoalResult>, EvalError> {
    let graph = super::graph(policy, GraphOptions::default())?;
    let engine: Engine<ResearchState> = Engine::builder(graph).build().await;
    let mut results = Vec::new();
    for goal in &set.goals {
        let result = run_goal(&engine, set, goal, k).await;
        match result {
            Ok(r) => results.push(r),
            Err(e) => {
                engine.shutdown().await;
                return Err(e);
            }
        }
    }
    engine.shutdown().await;
    Ok(results)
}

async fn run_goal(
    engine: &Engine<ResearchState>,
    set: &EvalSet,
    goal: &EvalGoal,
    k: usize,
) -> Result<GoalResult, EvalError> {
    let notes = set.corpora.get(&goal.corpus).map(|n| n.as_ref().clone());
    let update = initial_update(ResearchInput {
        input: goal.input.clone(),
        constraints: goal.constraints.clone(),
        source_notes: notes,
    })
    .map_err(|source| EvalError::Input {
        goal: goal.id.clone(),
        source,
    })?;
    let run_failed = |e: &dyn std::fmt::Display| EvalError::Run {
        goal: goal.id.clone(),
        reason: e.to_string(),
    };
    let started = Instant::now();
    let thread = ThreadId::new(format!("eval-{}", goal.id));
    let handle = engine
        .start(thread, update, RunOptions::streaming())
        .await
        .map_err(|e| run_failed(&e))?;
    let (mut tokens, mut calls) = (0u64, 0u64);
    let out = crate::kit::drive(handle, &mut |ev: &RunEvent| {
        if let RunEvent::Custom { payload, .. } = ev {
            if let Some(u) = payload.get("model_usage") {
                let n = |f: &str| u.get(f).and_then(|v| v.as_u64()).unwrap_or(0);
                tokens += n("prompt_tokens") + n("completion_tokens");
                calls += 1;
            }
        }
    })
    .await
    .map_err(|e| run_failed(&e))?;
    let millis = started.elapsed().as_secs_f64() * 1e3;
    Ok(GoalResult {
        id: goal.id.clone(),
        status: out.state.status.clone(),
        score: score(&out.state, &goal.expect, k),
        tokens,
        model_calls: calls,
        millis,
    })
}

/// The set's figures from its goals' results.
pub fn summarize(results: &[GoalResult], k: usize) -> Summary {
    let recalls: Vec<f64> = results
        .iter()
        .flat_map(|r| r.score.aspects.iter().filter_map(|a| a.recall))
        .collect();
    let (mut total, mut supported, mut distractors) = (0usize, 0usize, 0usize);
    let (mut reported, mut expected, mut tp) = (0usize, 0usize, 0usize);
    for r in results {
        total += r.score.citations.total;
        supported += r.score.citations.supported;
        distractors += r.score.citations.distractors.len();
        reported += r.score.gaps.reported.len();
        expected += r.score.gaps.expected.len();
        tp += r.score.gaps.true_positives;
    }
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    let mut millis: Vec<f64> = results.iter().map(|r| r.millis).collect();
    millis.sort_by(f64::total_cmp);
    Summary {
        goals: results.len(),
        recall_at_k: if recalls.is_empty() {
            1.0
        } else {
            recalls.iter().sum::<f64>() / recalls.len() as f64
        },
        k,
        citation_precision: ratio(supported, total),
        distractors_cited: distractors,
        gap_precision: ratio(tp, reported),
        gap_recall: ratio(tp, expected),
        tokens_per_brief: if results.is_empty() {
            0.0
        } else {
            results.iter().map(|r| r.tokens as f64).sum::<f64>() / results.len() as f64
        },
        median_millis: millis.get(millis.len() / 2).copied().unwrap_or(0.0),
        ok: results.iter().filter(|r| r.status == "ok").count(),
    }
}

/// A readable table: one line per goal, then the set's figures.
pub fn render(results: &[GoalResult], summary: &Summary) -> String {
    let mut out = format!(
        "{:<24} {:<13} {:>9} {:>10} {:>5} {:>7} {:>8}\n",
        "goal", "status", "recall@k", "citations", "gaps", "tokens", "ms"
    );
    for r in results {
        let recalls: Vec<f64> = r.score.aspects.iter().filter_map(|a| a.recall).collect();
        let recall = if recalls.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", recalls.iter().sum::<f64>() / recalls.len() as f64)
        };
        let c = &r.score.citations;
        out.push_str(&format!(
            "{:<24} {:<13} {:>9} {:>10} {:>5} {:>7} {:>8.1}\n",
            r.id,
            r.status,
            recall,
            format!("{}/{}", c.supported, c.total),
            format!(
                "{}/{}",
                r.score.gaps.true_positives,
                r.score.gaps.expected.len()
            ),
            r.tokens,
            r.millis
        ));
        for a in r
            .score
            .aspects
            .iter()
            .filter(|a| a.recall.is_some_and(|x| x < 1.0))
        {
            out.push_str(&format!(
                "    {}: found {} of {} labelled ({})\n",
                a.aspect,
                a.hits,
                a.relevant,
                a.found.join(", ")
            ));
        }
        for (section, id) in &c.unsupported {
            out.push_str(&format!("    cites [{id}] under {section}\n"));
        }
    }
    out.push_str(&format!(
        "\n{} goals, {} ok: recall@{} {:.3}, citation precision {:.3}, distractors cited {}, \
         gap precision {:.3}, gap recall {:.3}, {:.0} tokens and {:.1} ms per brief (median)\n",
        summary.goals,
        summary.ok,
        summary.k,
        summary.recall_at_k,
        summary.citation_precision,
        summary.distractors_cited,
        summary.gap_precision,
        summary.gap_recall,
        summary.tokens_per_brief,
        summary.median_millis
    ));
    out
}
