//! Nothing invented: every evidence entry and every citation names a note that exists; missing
//! evidence is a knowledge gap in the brief, not a made-up fact.

mod research_support;

use planwright_actors::research::citations::cited_ids;
use planwright_actors::research::policy::Report;
use planwright_actors::research::state::Criterion;
use planwright_actors::research::{output_json, OfflineResearchPolicy, ResearchState};
use research_support::*;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

fn assert_grounded(s: &ResearchState) {
    let ids: HashSet<&str> = s.source_notes.iter().map(|n| &*n.id).collect();
    let out = output_json(s, &s.status);
    let evidence: HashSet<&str> = out["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source_id"].as_str().unwrap())
        .collect();
    assert!(evidence.iter().all(|id| ids.contains(id)), "{evidence:?}");
    for r in s.step_results.values() {
        assert!(r.sources.iter().all(|id| ids.contains(id.as_str())));
        for f in &r.findings {
            let note = s.source_notes.iter().find(|n| *n.id == *f.note_id).unwrap();
            assert!(
                note.text.contains(&*f.sentence),
                "finding not quoted from {}: {}",
                f.note_id,
                f.sentence
            );
        }
    }
    for id in cited_ids(&s.final_report) {
        assert!(
            evidence.contains(id),
            "report cites {id}, not in the evidence"
        );
    }
}

#[tokio::test]
async fn every_citation_and_evidence_entry_names_an_existing_note() {
    for (goal, c) in [
        (
            "Should our customer support adopt retrieval-augmented generation",
            json!({"required_sections": ["cost", "risks"]}),
        ),
        (
            "Brief on hybrid remote work for a software company",
            json!({}),
        ),
        (
            "Evaluate heat pumps for heating our family home",
            json!({"required_sections": ["cost", "maintenance"]}),
        ),
    ] {
        let out = run(Arc::new(OfflineResearchPolicy), input(goal, c, None)).await;
        assert_grounded(&out.state);
    }
}

#[tokio::test]
async fn synthesis_lists_unresolved_gaps_instead_of_inventing_evidence() {
    // "recycling" is optional and no note covers it: the brief is written, the gap is reported.
    let mut rec = search(
        "rec",
        "solar battery recycling",
        &[],
        vec![Criterion::Covers(vec!["recycling".into()])],
    );
    rec.optional = true;
    let plan = vec![
        search(
            "cost",
            "solar battery cost",
            &[],
            vec![Criterion::MinSources(2)],
        ),
        rec,
    ];
    let out = run(
        ScriptedPolicy::new().plan(plan),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok");
    assert_eq!(
        s.step("rec").unwrap().status,
        planwright_actors::research::state::StepStatus::Skipped
    );
    assert_eq!(s.knowledge_gaps.len(), 1);
    assert!(s.knowledge_gaps[0].contains("recycling"));
    assert!(s.final_report.contains("## Unresolved questions"));
    assert!(
        s.final_report.contains("no note used mentions `recycling`"),
        "{}",
        s.final_report
    );
    assert!(
        !s.final_report.contains("## Recycling"),
        "no section without evidence"
    );
    assert_eq!(s.final_output["knowledge_gaps"], json!(s.knowledge_gaps));
    assert_grounded(s);
}

#[tokio::test]
async fn a_report_citing_an_unknown_note_loses_that_claim_and_gains_a_gap() {
    let policy = ScriptedPolicy::new();
    policy.reports.lock().unwrap().push_back(Ok(Report {
        text: "# Brief\n\nBatteries cost 700 EUR per kWh [b1]. Batteries never fail [made-up-7].\n"
            .into(),
    }));
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok");
    assert!(!s.final_report.contains("never fail"), "{}", s.final_report);
    assert!(s.final_report.contains("[b1]"));
    assert!(
        s.knowledge_gaps
            .iter()
            .any(|g| g.contains("made-up-7") && g.contains("never fail")),
        "{:?}",
        s.knowledge_gaps
    );
    assert_grounded(s);
}

#[tokio::test]
async fn an_optional_failure_lets_its_dependents_run_in_the_next_round() {
    let mut rec = search(
        "rec",
        "solar battery recycling",
        &[],
        vec![Criterion::Covers(vec!["recycling".into()])],
    );
    rec.optional = true;
    let plan = vec![
        search(
            "cost",
            "solar battery cost",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        rec,
        summarize("sum", &["cost", "rec"]),
    ];
    let out = run(
        ScriptedPolicy::new().plan(plan),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    let ev = events(s);
    assert_eq!(
        ev.iter().filter(|e| **e == "steps_selected").count(),
        2,
        "{ev:?}"
    );
    assert!(ev.contains(&"step_blocked"));
    assert!(s.step_results["sum"].met);
}
