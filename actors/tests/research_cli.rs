//! The `research` command's contract: exit codes, JSON keys, durable threads, approval over two
//! invocations, and the checked-in Mermaid diagram.

use planwright_actors::research::{graph, GraphOptions, OfflineResearchPolicy};
use serde_json::Value;
use std::process::{Command, Output};
use std::sync::Arc;

const GOAL: &str = "Create a short research brief on whether our support team should adopt retrieval-augmented generation for customer support";

fn research(args: &[&str]) -> Output {
    // In a scratch directory: a run without `--checkpoint` keeps its thread under `.planwright/`
    // in the working directory.
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("research-cli");
    std::fs::create_dir_all(&scratch).unwrap();
    Command::new(env!("CARGO_BIN_EXE_planwright"))
        .current_dir(scratch)
        .arg("research")
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn json_output_has_the_contract_keys_and_exit_0() {
    let out = research(&[
        "--goal",
        GOAL,
        "--constraints",
        r#"{"max_steps": 4, "required_sections": ["cost", "risks"]}"#,
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    for key in [
        "status",
        "final_report",
        "plan",
        "step_results",
        "evidence",
        "knowledge_gaps",
        "execution_history",
        "replan_count",
        "plan_errors",
        "blocked_reason",
    ] {
        assert!(v.get(key).is_some(), "missing `{key}`");
    }
    assert_eq!(v["status"], "ok");
    for step in v["plan"].as_array().unwrap() {
        for key in [
            "id",
            "description",
            "depends_on",
            "tool",
            "acceptance_criteria",
            "status",
        ] {
            assert!(step.get(key).is_some(), "plan step without `{key}`: {step}");
        }
    }
    for (_, r) in v["step_results"].as_object().unwrap() {
        for key in ["output", "sources", "met"] {
            assert!(r.get(key).is_some(), "step result without `{key}`");
        }
    }
    let executed: Vec<&Value> = v["execution_history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["event"] == "step_executed")
        .collect();
    assert_eq!(executed.len(), 4);
    assert!(executed
        .iter()
        .all(|h| h["step_id"].is_string() && h["started_ms"].is_u64() && h["ended_ms"].is_u64()));
    assert!(v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["source_id"].is_string() && e["summary"].is_string()));
}

#[test]
fn bad_input_exits_2_with_a_message_and_no_run() {
    let dir = std::env::temp_dir().join(format!("pw-research-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_notes = dir.join("bad.json");
    std::fs::write(&bad_notes, "[{\"id\": 1}]").unwrap();
    let bad = bad_notes.to_str().unwrap();
    let missing = dir.join("missing.json");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--goal", "  "], "goal is blank"),
        (
            vec!["--goal", GOAL, "--constraints", "{\"max_step\": 3}"],
            "max_step",
        ),
        (
            vec!["--goal", GOAL, "--constraints", "not json"],
            "malformed constraints",
        ),
        (vec!["--goal", GOAL, "--notes", bad], "malformed notes"),
        (
            vec!["--goal", GOAL, "--notes", missing.to_str().unwrap()],
            "cannot read notes file",
        ),
        (vec!["--goal", GOAL, "--model", "gpt-9"], "unknown model"),
        (
            vec!["--goal", GOAL, "--checkpoint", "bogus:x"],
            "bad checkpoint URL",
        ),
        (
            vec!["--thread", "t", "--resume", "{\"action\": \"ok\"}"],
            "approve",
        ),
    ];
    for (args, msg) in cases {
        let out = research(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed a result");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn approval_pauses_across_invocations_and_a_finished_thread_prints_its_stored_result() {
    let dir = std::env::temp_dir().join(format!("pw-research-approve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("threads.sqlite").display());
    let paused = research(&[
        "--goal",
        GOAL,
        "--constraints",
        r#"{"require_approval": true}"#,
        "--checkpoint",
        &url,
        "--thread",
        "a1",
        "--json",
    ]);
    assert_eq!(paused.status.code(), Some(0));
    let v = json_of(&paused);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(v["thread_id"], "a1");
    assert!(!v["plan"].as_array().unwrap().is_empty());
    // A bad answer: exit 2, thread still paused.
    let bad = research(&[
        "--checkpoint",
        &url,
        "--thread",
        "a1",
        "--resume",
        r#"{"action": "perhaps"}"#,
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let again = research(&[
        "--goal",
        GOAL,
        "--checkpoint",
        &url,
        "--thread",
        "a1",
        "--json",
    ]);
    assert_eq!(json_of(&again)["status"], "interrupted");
    let done = research(&[
        "--checkpoint",
        &url,
        "--thread",
        "a1",
        "--resume",
        r#"{"action": "approve"}"#,
        "--json",
    ]);
    assert_eq!(done.status.code(), Some(0));
    let done = json_of(&done);
    assert_eq!(done["status"], "ok");
    let stored = json_of(&research(&[
        "--goal",
        GOAL,
        "--checkpoint",
        &url,
        "--thread",
        "a1",
        "--json",
    ]));
    assert_eq!(stored["final_report"], done["final_report"]);
    assert_eq!(
        stored["execution_history"], done["execution_history"],
        "printed, not run again"
    );
    // The thread alone, without its goal, shows it too.
    let reopened = research(&["--checkpoint", &url, "--thread", "a1", "--json"]);
    assert_eq!(reopened.status.code(), Some(0));
    assert_eq!(json_of(&reopened)["final_report"], done["final_report"]);
    // A thread that has no run needs a goal: exit 2, naming the thread.
    let unknown = research(&["--checkpoint", &url, "--thread", "nobody"]);
    assert_eq!(unknown.status.code(), Some(2));
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.contains("`nobody` has no run"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_checked_in_diagram_matches_the_graph() {
    let g = graph(Arc::new(OfflineResearchPolicy), GraphOptions::default()).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/research-planner.mmd");
    if std::env::var_os("UPDATE_DIAGRAMS").is_some() {
        std::fs::write(path, g.mermaid()).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        stored,
        g.mermaid(),
        "docs/research-planner.mmd is stale: rerun with UPDATE_DIAGRAMS=1"
    );
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/research-planner.md"
    ))
    .unwrap();
    let body = stored.splitn(3, "---\n").nth(2).unwrap();
    assert!(
        doc.contains(&format!("```mermaid\n{body}```")),
        "the diagram in docs/research-planner.md is stale: copy docs/research-planner.mmd into it"
    );
    for node in [
        "prepare_input",
        "create_plan",
        "validate_plan",
        "repair_plan",
        "review_plan",
        "select_next_step",
        "execute_step",
        "assess_progress",
        "replan",
        "synthesize_report",
        "mark_needs_review",
    ] {
        assert!(
            stored.contains(&format!("{node}[{node}]")),
            "{node} missing"
        );
    }
}

#[test]
fn an_endless_input_file_is_refused_with_exit_2_not_read_into_memory() {
    let out = research(&[
        "--goal",
        "x",
        "--notes",
        "/dev/zero",
        "--checkpoint",
        "memory:",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/dev/zero is larger than"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "acquire",
            "--schema",
            "/dev/zero",
            "--checkpoint",
            "memory:",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("schema /dev/zero is larger than"), "{err}");
}
