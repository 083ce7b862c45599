//! The bundled corpus and sample goals: each goal ends the way `fixtures/research/goals.json`
//! says (happy path, repair, replan, gaps, an unsupportable goal, a vague one).

mod research_support;

use planwright_actors::research::notes::bundled;
use planwright_actors::research::OfflineResearchPolicy;
use research_support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

const GOALS: &str = include_str!("../../fixtures/research/goals.json");

#[test]
fn the_corpus_has_forty_notes_over_at_least_three_topics() {
    let notes = bundled().unwrap();
    assert!(notes.len() >= 40);
    let topics: BTreeSet<&str> = notes
        .iter()
        .filter_map(|n| n.tags.first())
        .map(String::as_str)
        .collect();
    assert!(topics.len() >= 3, "{topics:?}");
    assert!(notes
        .iter()
        .any(|n| n.text.contains("retrieval-augmented generation")
            && n.text.contains("customer support")));
}

#[tokio::test]
async fn every_sample_goal_ends_as_expected() {
    let goals: Vec<Value> = serde_json::from_str(GOALS).unwrap();
    let names: BTreeSet<&str> = goals.iter().map(|g| g["name"].as_str().unwrap()).collect();
    for needed in ["happy_path", "repair", "replan", "unsupportable"] {
        assert!(names.contains(needed), "{needed} sample missing");
    }
    for g in &goals {
        let name = g["name"].as_str().unwrap();
        let req = input(g["input"].as_str().unwrap(), g["constraints"].clone(), None);
        let s = run(Arc::new(OfflineResearchPolicy), req).await.state;
        let expect = &g["expect"];
        assert_eq!(
            s.status,
            expect["status"].as_str().unwrap(),
            "{name}: {:?}",
            s.blocked_reason
        );
        let repairs = s
            .execution_history
            .iter()
            .filter(|h| h.event == "plan_repaired")
            .count() as u64;
        assert_eq!(
            repairs,
            expect["repairs"].as_u64().unwrap(),
            "{name} repairs"
        );
        assert_eq!(
            u64::from(s.replan_count),
            expect["replans"].as_u64().unwrap(),
            "{name} replans"
        );
        if s.status == "ok" {
            assert!(
                !s.final_report.is_empty() && s.final_report.contains("## Sources"),
                "{name}"
            );
        } else {
            let reason = s.blocked_reason.clone().unwrap_or_default();
            assert!(reason.contains("To finish:"), "{name}: {reason}");
            let supported = s.plan.iter().any(|st| {
                st.tool == "search"
                    && st.status == planwright_actors::research::state::StepStatus::Complete
            });
            if supported {
                // A draft of what is supported, citing only notes the run used.
                assert!(s.final_report.contains("Draft — needs review"), "{name}");
                let used: Vec<String> = s
                    .step_results
                    .values()
                    .flat_map(|r| r.sources.clone())
                    .collect();
                for id in planwright_actors::research::citations::cited_ids(&s.final_report) {
                    assert!(
                        used.iter().any(|u| u == id),
                        "{name}: draft cites unused [{id}]"
                    );
                }
            } else {
                assert!(
                    s.final_report.is_empty(),
                    "{name}: no brief without any evidence"
                );
            }
        }
    }
}
