//! The field planner end to end on its graph: the three fixture scenarios with the offline
//! model, questions that pause and resume, unusable answers asked again within the caps, a model
//! that fails, and runs stopped after every model call and continued by a new engine on the same
//! SQLite file without any model request being made twice.

mod field_support;

use field_support::*;
use planwright::{Resume, RunOptions, RunStatus};
use planwright_actors::field::policy::{
    DecideRequest, DecomposeRequest, ExtractAnswer, ExtractRequest, FieldPolicy, PolicyError,
    PolicyReply, ReflectRequest, Reflection,
};
use planwright_actors::field::runner::{self, NoAnswers, Start};
use planwright_actors::field::schema::Decomposition;
use planwright_actors::field::state::{Action, FieldValue, Origin, PlannerDecision, Provenance};
use planwright_actors::field::{input, GraphOptions, Topology};
use serde_json::json;
use std::sync::Arc;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[tokio::test]
async fn the_dental_scenario_uses_the_static_recipe_and_asks_for_the_obtainable_share() {
    let sc = scenario("dental");
    let run = run_scenario(offline(), Topology::Staged, &sc, "dental").await;
    check_invariants(&run, &sc.corpus);
    assert_eq!(run.status(), "ok");
    let out = run.output_json();
    assert!(close(
        out["targets"]["tam"].as_f64().unwrap(),
        5_200_000.0 * 62.0 / 100_000.0 / 2.5 * 1440.0
    ));
    assert_eq!(out["fields"]["clinics"]["provenance"]["kind"], "composed");
    assert_eq!(
        out["fields"]["population"]["provenance"]["source_id"],
        "den-01"
    );
    assert_eq!(
        out["fields"]["obtainable_share"]["provenance"]["kind"],
        "user"
    );
    assert_eq!(out["fields"]["sam"]["provenance"]["kind"], "calculated");
    let rules: Vec<&String> = run
        .state
        .decisions
        .iter()
        .flat_map(|d| &d.rewritten_by)
        .collect();
    assert!(
        rules.iter().any(|r| *r == "on_demand_decomposition"),
        "{rules:?}"
    );
    assert!(
        rules.iter().any(|r| *r == "calculation_adjustment"),
        "{rules:?}"
    );
    assert_eq!(
        run.state.decisions[0].target.as_deref(),
        Some("region"),
        "bootstrap first"
    );
    for key in [
        "status",
        "targets",
        "fields",
        "decisions",
        "iterations",
        "thread_id",
    ] {
        assert!(out.get(key).is_some(), "{key}");
    }
    for d in out["decisions"].as_array().unwrap() {
        for key in ["iteration", "action", "target", "origin", "rewritten_by"] {
            assert!(d.get(key).is_some(), "{key} in {d}");
        }
    }
}

#[tokio::test]
async fn the_coffee_scenario_needs_a_decomposition_the_schema_does_not_give() {
    let sc = scenario("coffee");
    let run = run_scenario(offline(), Topology::Staged, &sc, "coffee").await;
    check_invariants(&run, &sc.corpus);
    assert_eq!(run.status(), "ok");
    assert_eq!(run.state.dynamic_decompositions.len(), 1);
    let d = &run.state.dynamic_decompositions[0];
    assert_eq!(d.field, "offices");
    assert_eq!(d.components.len(), 3, "{d:?}");
    let out = run.output_json();
    assert!(close(
        out["fields"]["offices"]["value"].as_f64().unwrap(),
        48_000.0 * 0.09 * 1.3
    ));
    assert!(close(
        out["targets"]["revenue"].as_f64().unwrap(),
        48_000.0 * 0.09 * 1.3 * 310.0 * 12.0 * 0.22
    ));
}

#[tokio::test]
async fn the_bikes_scenario_asks_for_the_price_the_corpus_lacks_after_searching() {
    let sc = scenario("bikes");
    let run = run_scenario(offline(), Topology::Staged, &sc, "bikes").await;
    check_invariants(&run, &sc.corpus);
    assert_eq!(run.status(), "ok");
    let out = run.output_json();
    assert_eq!(out["fields"]["lease_price"]["value"], json!(1800.0));
    assert_eq!(out["fields"]["lease_price"]["provenance"]["kind"], "user");
    let searches = run.state.attempts["lease_price"].searches;
    assert!(searches >= 1, "searched before asking");
    assert!(close(
        out["targets"]["market"].as_f64().unwrap(),
        1250.0 * 3.0 * 1800.0
    ));
}

#[tokio::test]
async fn a_question_without_an_answer_pauses_and_the_answer_resumes_into_observe_user() {
    let sc = scenario("dental");
    let e = engine(offline(), &GraphOptions::default(), None).await;
    let update = input::initial_update("q", "", sc.schema.clone(), sc.corpus.clone());
    let run = runner::run(
        &e,
        Topology::Staged,
        "q",
        Start::Input(Box::new(update)),
        &mut NoAnswers,
    )
    .await
    .unwrap();
    assert_eq!(run.status(), "interrupted");
    let out = run.output_json();
    assert_eq!(out["pending_question"]["field"], "region");
    assert_eq!(out["thread_id"], "q:planner:v2");
    let mut answers = vec!["Nordland", "EUR", "120%", "5%"].into_iter();
    let mut last = run;
    while last.pending.is_some() {
        let a = answers.next().expect("more questions than answers");
        last = runner::run(
            &e,
            Topology::Staged,
            "q",
            Start::Resume(a.into()),
            &mut NoAnswers,
        )
        .await
        .unwrap();
        if a == "120%" {
            let q = last.pending.as_ref().unwrap();
            assert_eq!(q["field"], "obtainable_share");
            assert!(
                q["question"]
                    .as_str()
                    .unwrap()
                    .contains("could not be used"),
                "{q}"
            );
        }
    }
    assert_eq!(last.status(), "ok");
    assert_eq!(
        last.state.values["obtainable_share"].value,
        FieldValue::Number(0.05)
    );
    assert_eq!(last.state.attempts["obtainable_share"].asks, 2);
    let err = runner::run(
        &e,
        Topology::Staged,
        "q",
        Start::Resume("x".into()),
        &mut NoAnswers,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, runner::RunnerError::NotPaused(_)), "{err}");
    e.shutdown().await;
}

#[tokio::test]
async fn unusable_answers_are_asked_again_only_within_the_caps() {
    let mut sc = scenario("dental");
    sc.answers.insert("obtainable_share".into(), "lots".into());
    let run = run_scenario(offline(), Topology::Staged, &sc, "caps").await;
    assert_eq!(run.status(), "aborted");
    assert_eq!(
        run.state.attempts["obtainable_share"].asks, 2,
        "asked to the per-field cap"
    );
    assert!(run
        .state
        .reflections
        .iter()
        .any(|r| r.contains("not usable")));
    let last = run.state.decisions.last().unwrap();
    assert_eq!(last.action, Action::Finish);
    assert!(
        last.rewritten_by.contains(&"ask_cap".to_string()),
        "{last:?}"
    );
    check_invariants(&run, &sc.corpus);
}

struct FailingDecide;

#[async_trait::async_trait]
impl FieldPolicy for FailingDecide {
    fn name(&self) -> &str {
        "failing"
    }
    async fn decide(&self, _: &DecideRequest) -> Result<PolicyReply<PlannerDecision>, PolicyError> {
        Err(PolicyError::Failed("the model answered with prose".into()))
    }
    async fn decompose(
        &self,
        r: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError> {
        planwright_actors::field::OfflineFieldPolicy
            .decompose(r)
            .await
    }
    async fn extract(&self, r: &ExtractRequest) -> Result<PolicyReply<ExtractAnswer>, PolicyError> {
        planwright_actors::field::OfflineFieldPolicy
            .extract(r)
            .await
    }
    async fn reflect(&self, _: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError> {
        Err(PolicyError::Transient("down".into()))
    }
}

#[tokio::test]
async fn a_model_that_fails_to_decide_ends_the_run_with_llm_failed() {
    let sc = scenario("bikes");
    let run = run_scenario(Arc::new(FailingDecide), Topology::Staged, &sc, "fail").await;
    assert_eq!(run.status(), "aborted");
    assert!(run.state.llm_failed);
    let last = run.state.decisions.last().unwrap();
    assert_eq!((last.action, last.origin), (Action::Finish, Origin::Llm));
    assert!(last.reasoning.contains("prose"), "{}", last.reasoning);
    assert!(
        last.rewritten_by.is_empty(),
        "no calculation adjustment after a model failure"
    );
}

#[tokio::test]
async fn a_run_stopped_after_every_model_call_and_continued_elsewhere_never_repeats_one() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("field-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("field.db").display());
    let sc = scenario("coffee");
    let options = GraphOptions {
        pause_after: vec![
            "prepare",
            "acquire",
            "decide",
            "enforce_policy",
            "observe",
            "reflect",
        ],
        ..GraphOptions::default()
    };
    let counting = Counting::new(offline());
    let thread = thread("crash");
    let update = input::initial_update("crash", "", sc.schema.clone(), sc.corpus.clone());
    let mut restarts = 0;
    let e = engine(
        counting.clone(),
        &options,
        Some(planwright::checkpoint::connect(&url).await.unwrap()),
    )
    .await;
    let mut out = e
        .run(thread.clone(), update, RunOptions::default())
        .await
        .unwrap();
    e.shutdown().await;
    while out.status == RunStatus::Interrupted {
        // A new engine on the same file: what a restarted process sees.
        let e = engine(
            counting.clone(),
            &options,
            Some(planwright::checkpoint::connect(&url).await.unwrap()),
        )
        .await;
        let i = out.interrupts[0].clone();
        let value = if i.node == "ask_user" {
            json!(sc.answers[i.value["field"].as_str().unwrap()])
        } else {
            json!(null)
        };
        out = e
            .resume(thread.clone(), Resume::Value(value), RunOptions::default())
            .await
            .unwrap();
        e.shutdown().await;
        restarts += 1;
    }
    assert_eq!(out.status, RunStatus::Finished);
    assert!(
        restarts > 15,
        "stopped after each model-calling node ({restarts})"
    );
    assert!(
        counting.repeated().is_empty(),
        "repeated {} requests",
        counting.repeated().len()
    );
    let straight = run_scenario(offline(), Topology::Staged, &sc, "crash").await;
    assert_eq!(out.state.decisions, straight.state.decisions);
    assert_eq!(out.state.values, straight.state.values);
}

#[tokio::test]
async fn search_provenance_quotes_the_document_it_names() {
    for name in ["dental", "coffee", "bikes", "petinsurance"] {
        let sc = scenario(name);
        let run = run_scenario(offline(), Topology::Staged, &sc, name).await;
        for (field, a) in &run.state.values {
            if let Provenance::Search {
                source_id, quote, ..
            } = &a.provenance
            {
                let doc = sc.corpus.iter().find(|d| d.id == *source_id).unwrap();
                assert!(doc.text.contains(quote.as_str()), "{name}/{field}");
            }
        }
    }
}

#[tokio::test]
async fn a_chat_model_drives_the_planner_and_its_token_usage_is_in_the_events() {
    let policy = planwright_actors::kit::policy_for::<dyn planwright_actors::field::FieldPolicy>(
        "sim:p50=1ms,p99=2ms,seed=5",
    )
    .unwrap();
    assert!(policy.name().starts_with("chat:"));
    let sc = scenario("coffee");
    let e = engine(policy, &GraphOptions::default(), None).await;
    let update = input::initial_update("chat", "", sc.schema.clone(), sc.corpus.clone());
    let mut handle = e
        .start(thread("chat"), update, RunOptions::streaming())
        .await
        .unwrap();
    let mut rx = handle.events.take().unwrap();
    let mut out = handle.wait().await.unwrap();
    let mut usage_calls = Vec::new();
    let (mut decision_events, mut steps) = (0, 0);
    loop {
        while let Ok(ev) = rx.try_recv() {
            if let planwright::RunEvent::Custom { payload, .. } = ev {
                decision_events += usize::from(payload.get("decision").is_some());
                steps += usize::from(payload.get("planning_step").is_some());
                if let Some(u) = payload.get("model_usage") {
                    assert!(u["prompt_tokens"].as_u64().unwrap() > 0);
                    usage_calls.push(u["call"].as_str().unwrap().to_string());
                }
            }
        }
        if out.status != RunStatus::Interrupted {
            break;
        }
        let field = out.interrupts[0].value["field"]
            .as_str()
            .unwrap()
            .to_string();
        let mut h = e
            .start_resume(
                thread("chat"),
                Resume::Value(json!(sc.answers[&field])),
                RunOptions::streaming(),
            )
            .await
            .unwrap();
        rx = h.events.take().unwrap();
        out = h.wait().await.unwrap();
    }
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(
        out.state.status,
        planwright_actors::field::state::Status::Ok
    );
    assert_eq!(
        decision_events,
        out.state.decisions.len(),
        "one event per logged decision"
    );
    assert_eq!(
        steps as u32, out.state.iterations,
        "one planning_step event per tick"
    );
    for call in ["decide", "prepare.decompose", "extract"] {
        assert!(
            usage_calls.iter().any(|c| c == call),
            "no usage for {call}: {usage_calls:?}"
        );
    }
    e.shutdown().await;
}

#[tokio::test]
async fn answers_may_name_the_components_of_a_static_decomposition() {
    let mut sc = scenario("dental");
    sc.corpus.clear();
    sc.answers = input::parse_answers(
        r#"{"region": "Nordland", "currency": "EUR", "population": "5.2 million",
            "dentists_per_100k": "62", "dentists_per_clinic": "2.5", "annual_price": "1,440",
            "serviceable_share": "38%", "obtainable_share": "5%"}"#,
        Some(&sc.schema),
    )
    .unwrap();
    let run = run_scenario(offline(), Topology::Staged, &sc, "components").await;
    assert_eq!(run.status(), "ok", "{:?}", run.pending);
    assert_eq!(
        run.state.values["population"].value,
        FieldValue::Number(5_200_000.0)
    );
    assert!(matches!(
        run.state.values["clinics"].provenance,
        Provenance::Composed { .. }
    ));
    check_invariants(&run, &sc.corpus);
}
