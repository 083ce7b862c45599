//! The research planner measured on the project's labelled set (`fixtures/research/eval/`):
//! thresholds on the offline planner, the same run through a simulated chat model, and the
//! `research-eval` command's contract.

use planwright_actors::kit;
use planwright_actors::research::eval::{run_set, summarize, EvalSet, DEFAULT_K};
use planwright_actors::research::ResearchPolicy;
use std::path::PathBuf;
use std::process::Command;

fn set_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/research/eval/set.json")
}

#[test]
fn the_shipped_set_has_enough_goals_and_corpora() {
    let set = EvalSet::load(&set_path()).unwrap();
    assert!(set.goals.len() >= 12, "{} goals", set.goals.len());
    assert!(set.corpora.len() >= 3, "{} corpora", set.corpora.len());
    let gaps = set
        .goals
        .iter()
        .filter(|g| !g.expect.gaps.is_empty())
        .count();
    assert!(gaps >= 3, "goals with an expected gap: {gaps}");
}

#[tokio::test]
async fn the_offline_planner_finds_the_labelled_notes_and_cites_no_distractor() {
    let set = EvalSet::load(&set_path()).unwrap();
    let policy = kit::policy_for::<dyn ResearchPolicy>("offline").unwrap();
    let results = run_set(&set, policy, DEFAULT_K).await.unwrap();
    let s = summarize(&results, DEFAULT_K);
    assert!(s.recall_at_k >= 0.85, "recall@{} {:.3}", s.k, s.recall_at_k);
    assert_eq!(s.distractors_cited, 0, "{results:#?}");
    assert!(s.citation_precision >= 0.9, "{:.3}", s.citation_precision);
    assert_eq!((s.gap_precision, s.gap_recall), (1.0, 1.0));
    // A goal with a gap ends for review, with a draft of what is supported.
    for r in results.iter().filter(|r| !r.score.gaps.expected.is_empty()) {
        assert_eq!(r.status, "needs_review", "{}", r.id);
        assert!(
            r.score.citations.total > 0,
            "{}: the draft cites its evidence",
            r.id
        );
    }
}

#[tokio::test]
async fn a_chat_model_goes_through_the_same_search_and_its_tokens_are_counted() {
    let set = EvalSet::load(&set_path()).unwrap();
    let one = EvalSet {
        goals: set.goals[..2].to_vec(),
        corpora: set.corpora.clone(),
    };
    let policy = kit::policy_for::<dyn ResearchPolicy>("sim:p50=0ms,p99=0ms,seed=3").unwrap();
    let results = run_set(&one, policy, DEFAULT_K).await.unwrap();
    for r in &results {
        assert!(r.model_calls >= 2, "{}: {} calls", r.id, r.model_calls);
        assert!(r.tokens > 0, "{}", r.id);
        let recall: Vec<f64> = r.score.aspects.iter().filter_map(|a| a.recall).collect();
        assert!(recall.iter().all(|x| *x >= 0.66), "{}: {recall:?}", r.id);
    }
}

fn planwright() -> Command {
    Command::new(env!("CARGO_BIN_EXE_planwright"))
}

#[test]
fn the_command_prints_json_and_applies_its_thresholds() {
    let out = planwright()
        .args(["research-eval", "--json", "--set"])
        .arg(set_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["summary"]["recall_at_k"].as_f64().unwrap() >= 0.85);
    assert!(v["goals"].as_array().unwrap().len() >= 12);
    // An unreachable threshold fails the command, naming the figure.
    let out = planwright()
        .args(["research-eval", "--min-recall", "1.01", "--set"])
        .arg(set_path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("recall@3"));
}

#[test]
fn a_bad_set_is_refused_with_its_problem_named() {
    let dir = std::env::temp_dir().join(format!("planwright-eval-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("corpora")).unwrap();
    std::fs::write(
        dir.join("corpora/c.json"),
        r#"[{"id":"a","title":"A","text":"Costs 3 EUR."}]"#,
    )
    .unwrap();
    let cases = [
        (r#"{"goals": []}"#, "no goal"),
        (
            r#"{"goals": [{"id":"g","corpus":"c","input":"x","expect":{"aspects":{"cost":["zz"]}}}]}"#,
            "note `zz` is not in `c`",
        ),
        (
            r#"{"goals": [{"id":"g","corpus":"missing","input":"x","expect":{"aspects":{}}}]}"#,
            "cannot read",
        ),
        (
            r#"{"goals": [{"id":"g","corpus":"c","input":"x","constraints":{"required_sections":["risk"]},"expect":{"aspects":{}}}]}"#,
            "section `risk` has no `aspects` entry",
        ),
        (r#"{"goal": []}"#, "malformed evaluation set"),
    ];
    for (i, (json, problem)) in cases.iter().enumerate() {
        let path = dir.join(format!("set{i}.json"));
        std::fs::write(&path, json).unwrap();
        let out = planwright()
            .args(["research-eval", "--set"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "case {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(problem), "case {i}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_readme_shows_the_brief_the_planner_writes() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let start = readme
        .find("```text\n# Research brief")
        .expect("README brief block")
        + 8;
    let shown = &readme[start..start + readme[start..].find("```").unwrap()];
    let out = planwright()
        .args([
            "research",
            "--goal",
            "Should our support team adopt retrieval-augmented generation for customer support?",
            "--constraints",
            r#"{"max_steps": 4, "required_sections": ["cost", "risks"]}"#,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // The README shows the brief up to its sources (the plan and progress before it, and the
    // source list after it, are left out there).
    let from = text.find("# Research brief").unwrap();
    let to = text.find("## Sources").unwrap();
    assert_eq!(
        shown.trim(),
        text[from..to].trim(),
        "README.md's brief is stale"
    );
}

#[test]
fn a_comparison_without_figures_says_so_and_invents_no_gap() {
    let out = planwright()
        .args([
            "research",
            "--json",
            "--goal",
            "Should our support team adopt retrieval-augmented generation for customer support?",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = v["final_report"].as_str().unwrap();
    let comparison = &report[report.find("## Comparison").unwrap()..];
    let comparison = &comparison[..comparison[3..]
        .find("\n## ")
        .map_or(comparison.len(), |i| i + 3)];
    // Every dimension heading has a line under it, even when no source gives a figure.
    for block in comparison.split("\n\n").filter(|b| b.starts_with("**")) {
        assert!(block.lines().count() >= 2, "an empty dimension: {block:?}");
    }
    let gaps = v["knowledge_gaps"].as_array().unwrap();
    assert!(
        gaps.iter()
            .all(|g| !g.as_str().unwrap_or_default().contains("No figure")),
        "the brief's own note about silent sources is not an unsupported claim: {gaps:?}"
    );
}
