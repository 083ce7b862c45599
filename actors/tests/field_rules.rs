//! Each stage's rules on a small state, without running the graph.

use planwright_actors::field::schema::Schema;
use planwright_actors::field::stages::{acquire, calc_gate, enforce, prepare, tick, user};
use planwright_actors::field::state::{
    Acquired, Action, Attempts, Calculation, FieldState, FieldValue, PlannerDecision, Provenance,
    Question, SearchRecord, Status,
};
use planwright_actors::field::view::{self, Task};
use planwright_actors::field::{routes, schema::ValueType};
use std::collections::BTreeMap;

const SCHEMA: &str = r#"{
  "name": "t", "targets": ["tam"],
  "fields": [
    {"name": "region", "kind": "raw", "source": "user", "type": "text", "core": true},
    {"name": "clinics", "kind": "raw", "source": "web", "requires_components": true,
     "description": "dental clinics"},
    {"name": "price", "kind": "raw", "source": "either", "unit": "currency/year",
     "description": "yearly price"},
    {"name": "share", "kind": "raw", "source": "user", "type": "ratio"},
    {"name": "web_only", "kind": "raw", "source": "web", "description": "web only number"},
    {"name": "base", "kind": "derived", "formula": "clinics * price"},
    {"name": "tam", "kind": "derived", "formula": "base * share + web_only"}
  ],
  "decompositions": [
    {"field": "clinics", "components": ["people", "per_person"], "formula": "people * per_person"}
  ]
}"#;

fn state() -> FieldState {
    let mut s = FieldState {
        schema: Schema::from_json(SCHEMA).unwrap(),
        max_iters: 10,
        iterations: 1,
        ..FieldState::default()
    };
    s.schema.fields = prepare::with_components(&s, &prepare::recipes_of(&s));
    s.recipes = prepare::recipes_of(&s);
    s
}

fn set(s: &mut FieldState, name: &str, v: f64) {
    s.values.insert(
        name.into(),
        Acquired {
            value: FieldValue::Number(v),
            provenance: Provenance::User {
                answer: v.to_string(),
            },
        },
    );
}

fn with_region(mut s: FieldState) -> FieldState {
    s.values.insert(
        "region".into(),
        Acquired {
            value: FieldValue::Text("Nordland".into()),
            provenance: Provenance::User {
                answer: "Nordland".into(),
            },
        },
    );
    s
}

fn ask(target: &str) -> PlannerDecision {
    PlannerDecision::new(Action::AskUser, Some(target), "model")
}

fn search(target: &str, q: &str) -> PlannerDecision {
    PlannerDecision::new(Action::Search, Some(target), "model").query(q)
}

#[test]
fn tick_stops_at_the_iteration_cap_and_on_abort() {
    let mut s = state();
    s.iterations = 11;
    let (d, aborts) = tick::terminal_cap(&s).unwrap();
    assert_eq!(d.action, Action::Finish);
    assert!(aborts);
    s.iterations = 3;
    assert!(tick::terminal_cap(&s).is_none());
    s.status = Status::Aborted;
    assert!(!tick::terminal_cap(&s).unwrap().1);
}

#[test]
fn bootstrap_asks_for_core_fields_first_and_aborts_when_unanswerable() {
    let s = state();
    let d = tick::bootstrap_question(&s).unwrap().unwrap();
    assert_eq!(
        (d.action, d.target.as_deref()),
        (Action::AskUser, Some("region"))
    );
    let mut capped = state();
    capped.attempts.insert(
        "region".into(),
        Attempts {
            asks: 2,
            ..Attempts::default()
        },
    );
    assert!(tick::bootstrap_question(&capped).unwrap().is_err());
    assert!(tick::bootstrap_question(&with_region(state())).is_none());
}

#[test]
fn prepare_builds_recipes_adds_components_and_composes_ready_fields() {
    let s = state();
    assert_eq!(s.recipes["clinics"].components, ["people", "per_person"]);
    assert!(s
        .schema
        .field("people")
        .is_some_and(|f| f.kind == planwright_actors::field::schema::Kind::Raw));
    let mut s = with_region(s);
    set(&mut s, "people", 1000.0);
    assert!(prepare::compose_ready_fields(&s).0.is_empty());
    set(&mut s, "per_person", 0.5);
    let (values, notes) = prepare::compose_ready_fields(&s);
    assert!(notes.is_empty());
    assert_eq!(values["clinics"].value, FieldValue::Number(500.0));
    assert!(matches!(
        values["clinics"].provenance,
        Provenance::Composed { .. }
    ));
}

#[test]
fn proactive_decomposition_targets_needed_fields_without_a_recipe_once_per_tick() {
    let mut s = state();
    s.schema.decompositions.clear();
    s.recipes.clear();
    assert_eq!(
        prepare::proactive_decomposition_target(&s).as_deref(),
        Some("clinics")
    );
    s.decomposed_at = s.iterations;
    assert_eq!(prepare::proactive_decomposition_target(&s), None);
}

#[test]
fn generated_decompositions_are_checked() {
    let s = state();
    let d = |formula: &str, comps: &[&str]| planwright_actors::field::schema::Decomposition {
        field: "clinics".into(),
        components: comps.iter().map(|c| c.to_string()).collect(),
        formula: formula.into(),
        descriptions: BTreeMap::new(),
        types: BTreeMap::new(),
    };
    assert!(prepare::validate_generated(&s, "clinics", &d("a * b", &["a", "b"])).is_ok());
    assert!(
        prepare::validate_generated(&s, "clinics", &d("a * zzz", &["a"]))
            .unwrap_err()
            .contains("zzz")
    );
    assert!(
        prepare::validate_generated(&s, "clinics", &d("a *", &["a"]))
            .unwrap_err()
            .contains("formula")
    );
    assert!(prepare::validate_generated(&s, "clinics", &d("tam", &["tam"])).is_err());
    assert!(prepare::validate_generated(&s, "clinics", &d("x", &[])).is_err());
    assert!(prepare::validate_generated(&s, "price", &d("a", &["a"])).is_err());
}

#[test]
fn calc_gate_finishes_on_current_success_and_aborts_at_the_cap() {
    let mut s = with_region(state());
    s.calculation = Calculation::Blocked {
        missing: vec!["price".into()],
    };
    s.calc_attempts = 3;
    assert!(calc_gate::calculation_cap(&s).is_some());
    s.calc_attempts = 1;
    assert!(calc_gate::calculation_cap(&s).is_none());
    for (f, v) in [
        ("clinics", 10.0),
        ("price", 2.0),
        ("share", 0.5),
        ("web_only", 1.0),
    ] {
        set(&mut s, f, v);
    }
    s.calculation = Calculation::Success {
        values: BTreeMap::new(),
        inputs_fingerprint: planwright_actors::field::state::inputs_fingerprint(&s),
    };
    assert!(calc_gate::calculation_done(&s).is_some());
    set(&mut s, "price", 3.0);
    assert!(
        calc_gate::calculation_done(&s).is_none(),
        "a changed input makes it stale"
    );
}

#[test]
fn acquire_reasks_follows_a_blocked_calculation_continues_decompositions_and_auto_finishes() {
    let mut s = with_region(state());
    s.reask = Some(Question {
        field: "share".into(),
        question: "again?".into(),
    });
    assert_eq!(
        acquire::reask(&s).unwrap().question.as_deref(),
        Some("again?")
    );
    s.reask = None;
    s.calculation = Calculation::Blocked {
        missing: vec!["clinics".into(), "price".into()],
    };
    assert_eq!(
        acquire::blocked_calculation_task(&s),
        Some(Task::Search("people".into()))
    );
    set(&mut s, "people", 5.0);
    let d = acquire::fast_path(&s).unwrap();
    assert_eq!(d.target.as_deref(), Some("per_person"));
    assert!(acquire::auto_finish(&s).is_none());
    for (f, v) in [
        ("per_person", 2.0),
        ("clinics", 10.0),
        ("price", 2.0),
        ("share", 0.5),
        ("web_only", 1.0),
    ] {
        set(&mut s, f, v);
    }
    assert_eq!(acquire::auto_finish(&s).unwrap().action, Action::Finish);
}

#[test]
fn on_demand_decomposition_sends_a_requires_components_target_to_its_components() {
    let s = with_region(state());
    assert_eq!(
        enforce::on_demand_target(&s, &search("clinics", "q")).as_deref(),
        Some("clinics")
    );
    let d = enforce::redirect_to_components(&s, "clinics");
    assert_eq!(
        (d.action, d.target.as_deref()),
        (Action::Search, Some("people"))
    );
    assert!(enforce::on_demand_target(&s, &search("price", "q")).is_none());
}

#[test]
fn derived_targets_are_redirected_to_their_inputs_or_to_calculate() {
    let mut s = with_region(state());
    let d = enforce::derived_field_redirect(&s, &ask("tam")).unwrap();
    assert_eq!(
        d.target.as_deref(),
        Some("people"),
        "tam → base → clinics → people"
    );
    for (f, v) in [
        ("clinics", 10.0),
        ("price", 2.0),
        ("share", 0.5),
        ("web_only", 1.0),
    ] {
        set(&mut s, f, v);
    }
    assert_eq!(
        enforce::derived_field_redirect(&s, &search("base", "q"))
            .unwrap()
            .action,
        Action::Calculate
    );
    assert!(enforce::derived_field_redirect(&s, &search("price", "q")).is_none());
}

#[test]
fn asking_for_a_web_field_is_premature_while_searches_remain() {
    let mut s = with_region(state());
    let d = enforce::premature_ask_for_web_field(&s, &ask("web_only")).unwrap();
    assert_eq!(d.action, Action::Search);
    assert!(
        enforce::premature_ask_for_web_field(&s, &ask("price")).is_none(),
        "either, not web"
    );
    s.attempts.insert(
        "web_only".into(),
        Attempts {
            searches: 2,
            ..Attempts::default()
        },
    );
    assert!(enforce::premature_ask_for_web_field(&s, &ask("web_only")).is_none());
}

#[test]
fn repeated_or_capped_searches_fall_back() {
    let mut s = with_region(state());
    assert!(enforce::search_duplicate_or_cap(&s, &search("price", "yearly price")).is_none());
    s.search_history.push(SearchRecord {
        field: "price".into(),
        query: view::normalise_query("price yearly"),
    });
    let d = enforce::search_duplicate_or_cap(&s, &search("price", "Yearly PRICE")).unwrap();
    assert_eq!(d.action, Action::Search);
    assert_ne!(
        view::normalise_query(d.query.as_deref().unwrap()),
        "price yearly"
    );
    s.attempts.insert(
        "price".into(),
        Attempts {
            searches: 2,
            ..Attempts::default()
        },
    );
    let d = enforce::search_duplicate_or_cap(&s, &search("price", "other")).unwrap();
    assert_eq!(
        (d.action, d.target.as_deref()),
        (Action::AskUser, Some("price"))
    );
    let d = enforce::search_duplicate_or_cap(&s, &search("no_such", "x")).unwrap();
    assert_ne!(d.target.as_deref(), Some("no_such"));
}

#[test]
fn the_ask_cap_moves_on_or_finishes_and_aborts_when_nothing_can_progress() {
    let mut s = with_region(state());
    assert!(enforce::ask_cap(&s, &ask("share")).is_none());
    s.asks_total = 8;
    let (d, aborts) = enforce::ask_cap(&s, &ask("share")).unwrap();
    assert_eq!(
        d.action,
        Action::Search,
        "other fields can still be searched"
    );
    assert!(!aborts);
    for f in ["people", "per_person", "price", "web_only"] {
        s.attempts.insert(
            f.into(),
            Attempts {
                searches: 2,
                ..Attempts::default()
            },
        );
    }
    let (d, aborts) = enforce::ask_cap(&s, &ask("share")).unwrap();
    assert_eq!(d.action, Action::Finish);
    assert!(aborts);
}

#[test]
fn the_calculation_adjustment_calculates_before_finishing_and_skips_redundant_runs() {
    let mut s = with_region(state());
    let finish = PlannerDecision::finish("done?");
    assert!(
        enforce::calculation_adjustment(&s, &finish).is_none(),
        "inputs missing"
    );
    for (f, v) in [
        ("clinics", 10.0),
        ("price", 2.0),
        ("share", 0.5),
        ("web_only", 1.0),
    ] {
        set(&mut s, f, v);
    }
    assert_eq!(
        enforce::calculation_adjustment(&s, &finish).unwrap().action,
        Action::Calculate
    );
    s.calculation = Calculation::Success {
        values: BTreeMap::new(),
        inputs_fingerprint: planwright_actors::field::state::inputs_fingerprint(&s),
    };
    let calc = PlannerDecision::new(Action::Calculate, None, "again");
    assert_eq!(
        enforce::calculation_adjustment(&s, &calc).unwrap().action,
        Action::Finish
    );
}

#[test]
fn answers_are_validated_by_type() {
    use user::{parse_answer, AnswerError};
    assert_eq!(
        parse_answer("1,800", ValueType::Number),
        Ok(FieldValue::Number(1800.0))
    );
    assert_eq!(
        parse_answer("2.5 million", ValueType::Number),
        Ok(FieldValue::Number(2.5e6))
    );
    assert_eq!(
        parse_answer("5%", ValueType::Ratio),
        Ok(FieldValue::Number(0.05))
    );
    assert_eq!(
        parse_answer("0.3", ValueType::Ratio),
        Ok(FieldValue::Number(0.3))
    );
    assert_eq!(
        parse_answer("150%", ValueType::Ratio),
        Err(AnswerError::RatioOutOfRange(1.5))
    );
    assert!(matches!(
        parse_answer("lots", ValueType::Number),
        Err(AnswerError::NotANumber(_))
    ));
    assert!(matches!(
        parse_answer("3 or 4", ValueType::Number),
        Err(AnswerError::Ambiguous(_))
    ));
    assert_eq!(parse_answer("  ", ValueType::Text), Err(AnswerError::Empty));
    assert_eq!(
        parse_answer(" Nordland ", ValueType::Text),
        Ok(FieldValue::Text("Nordland".into()))
    );
}

#[test]
fn routers_only_read_the_decision() {
    let mut s = state();
    assert_eq!(routes::after_tick(&s), "prepare");
    s.decision = Some(ask("region"));
    assert_eq!(routes::after_tick(&s), "ask_user");
    assert_eq!(routes::after_acquire(&s), "enforce_policy");
    assert_eq!(routes::after_policy(&s), "ask_user");
    s.llm_failed = true;
    assert_eq!(routes::after_decide(&s), "finish");
    s.decision = None;
    assert_eq!(routes::after_acquire(&s), "decide");
    assert_eq!(routes::after_search(&s), "loop");
}

#[test]
fn combining_updates_keeps_every_field() {
    // `FieldUpdate::then` lists the fields by hand: a full update survives being combined.
    let full: planwright_actors::field::FieldUpdate =
        serde_json::from_value(serde_json::to_value(with_region(state())).unwrap()).unwrap();
    let all = serde_json::to_value(&full).unwrap();
    let combined = planwright_actors::field::FieldUpdate::default().then(full);
    assert_eq!(serde_json::to_value(&combined).unwrap(), all);
}

#[test]
fn the_checked_in_diagrams_match_the_graphs() {
    use planwright_actors::field::{graph, GraphOptions, OfflineFieldPolicy, Topology};
    for (topology, file) in [
        (Topology::Staged, "field-planner.mmd"),
        (Topology::Plan, "field-planner-plan-node.mmd"),
    ] {
        let options = GraphOptions {
            topology,
            ..GraphOptions::default()
        };
        let g = graph(std::sync::Arc::new(OfflineFieldPolicy), &options).unwrap();
        let path = format!("{}/../docs/{file}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("UPDATE_DIAGRAMS").is_some() {
            std::fs::write(&path, g.mermaid()).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            stored,
            g.mermaid(),
            "docs/{file} is stale: rerun with UPDATE_DIAGRAMS=1"
        );
    }
    let staged = std::fs::read_to_string(format!(
        "{}/../docs/field-planner.mmd",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let doc = std::fs::read_to_string(format!(
        "{}/../docs/field-planner.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let body = staged.splitn(3, "---\n").nth(2).unwrap();
    assert!(
        doc.contains(&format!("```mermaid\n{body}```")),
        "the diagram in docs/field-planner.md is stale: copy docs/field-planner.mmd into it"
    );
    for node in [
        "tick",
        "prepare",
        "calc_gate",
        "acquire",
        "decide",
        "enforce_policy",
        "search",
        "observe",
        "ask_user",
        "observe_user",
        "calculate",
        "reflect",
        "finish",
    ] {
        assert!(
            staged.contains(&format!("{node}[{node}]")),
            "{node} missing"
        );
    }
}

proptest::proptest! {
    #[test]
    fn answers_of_any_text_never_panic_and_ratios_stay_in_range(text in "\\PC{0,40}") {
        for ty in [ValueType::Number, ValueType::Ratio, ValueType::Text] {
            if let Ok(FieldValue::Number(v)) = user::parse_answer(&text, ty) {
                proptest::prop_assert!(v.is_finite() && v >= 0.0);
                if ty == ValueType::Ratio {
                    proptest::prop_assert!((0.0..=1.0).contains(&v));
                }
            }
        }
    }

    #[test]
    fn offline_extraction_of_any_text_quotes_it_verbatim(text in "[a-z0-9 ,.%]{0,120}", ratio in proptest::bool::ANY) {
        use planwright_actors::field::policy::ExtractRequest;
        let s = state();
        let mut field = s.schema.field("price").cloned().unwrap();
        field.unit = None;
        if ratio {
            field.value_type = ValueType::Ratio;
        }
        let doc = planwright_actors::tools::bm25::Document { id: "d".into(), title: "yearly price".into(), text: text.clone() };
        let req = ExtractRequest { field: Some(field), hits: vec![doc], ..ExtractRequest::default() };
        if let Some(e) = planwright_actors::field::policy::extract_offline(&req).found {
            proptest::prop_assert!(text.contains(&e.quote));
            proptest::prop_assert!(e.value.is_finite());
            if ratio {
                proptest::prop_assert!((0.0..=1.0).contains(&e.value));
            }
        }
    }
}

#[test]
fn a_blocked_calculation_prefers_a_search_and_decomposes_only_as_a_fallback() {
    let mut s = with_region(state());
    s.schema.decompositions.clear();
    s.recipes.clear();
    s.calculation = Calculation::Blocked {
        missing: vec!["clinics".into(), "price".into()],
    };
    assert_eq!(
        acquire::blocked_calculation_task(&s),
        Some(Task::Search("price".into()))
    );
    s.attempts.insert(
        "price".into(),
        Attempts {
            searches: 2,
            asks: 2,
            ..Attempts::default()
        },
    );
    assert_eq!(
        acquire::blocked_calculation_task(&s),
        Some(Task::Decompose("clinics".into()))
    );
    s.decomposed_at = s.iterations;
    assert_eq!(
        acquire::blocked_calculation_task(&s),
        None,
        "one fresh generation per tick"
    );
}

#[test]
fn the_calculation_cap_names_why_and_a_premature_calculate_acquires_instead() {
    let mut s = with_region(state());
    s.calculation = Calculation::Error {
        reason: "`tam` = base / 0: division by zero".into(),
    };
    s.calc_attempts = 3;
    assert!(calc_gate::calculation_cap(&s)
        .unwrap()
        .reasoning
        .contains("division by zero"));
    let calc = PlannerDecision::new(Action::Calculate, None, "model");
    let d = enforce::calculation_adjustment(&s, &calc).unwrap();
    assert_eq!(
        (d.action, d.target.as_deref()),
        (Action::Search, Some("people"))
    );
}

#[test]
fn a_failing_formula_no_target_needs_does_not_fail_the_calculation() {
    use planwright_actors::field::stages::actions::calculate_values;
    let mut s = with_region(state());
    s.schema
        .fields
        .push(planwright_actors::field::schema::Field {
            name: "junk".into(),
            kind: planwright_actors::field::schema::Kind::Derived,
            source: Default::default(),
            value_type: ValueType::Number,
            core: false,
            unit: None,
            precision: None,
            description: None,
            requires_components: false,
            formula: Some("price / 0".into()),
        });
    for (f, v) in [
        ("clinics", 10.0),
        ("price", 2.0),
        ("share", 0.5),
        ("web_only", 1.0),
    ] {
        set(&mut s, f, v);
    }
    assert!(matches!(calculate_values(&s), Calculation::Success { .. }));
    s.schema.targets.push("junk".into());
    match calculate_values(&s) {
        Calculation::Error { reason } => assert!(reason.contains("junk"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn generated_components_must_be_new_and_distinct() {
    let s = state();
    let d = |comps: &[&str]| planwright_actors::field::schema::Decomposition {
        field: "clinics".into(),
        components: comps.iter().map(|c| c.to_string()).collect(),
        formula: comps.join(" * "),
        descriptions: BTreeMap::new(),
        types: BTreeMap::new(),
    };
    assert!(prepare::validate_generated(&s, "clinics", &d(&["region"]))
        .unwrap_err()
        .contains("not a new field"));
    assert!(prepare::validate_generated(&s, "clinics", &d(&["a", "a"]))
        .unwrap_err()
        .contains("twice"));
}

#[test]
fn a_core_field_asked_again_says_why() {
    let mut s = state();
    s.reask = Some(Question {
        field: "region".into(),
        question: "Which region? (the answer \"\" could not be used: the answer is empty)".into(),
    });
    let d = tick::bootstrap_question(&s).unwrap().unwrap();
    assert!(d.question.unwrap().contains("could not be used"));
}

#[test]
fn an_extraction_must_come_from_a_hit_and_be_stated_by_its_quote() {
    use planwright_actors::field::policy::Extraction;
    use planwright_actors::field::stages::actions::check_extraction;
    use planwright_actors::field::state::Observation;
    let s = state();
    let doc = planwright_actors::tools::bm25::Document {
        id: "d1".into(),
        title: "Prices".into(),
        text: "Software costs 1,440 EUR per year. Support is extra.".into(),
    };
    let obs = Observation {
        field: "price".into(),
        query: "price".into(),
        hits: vec![doc],
    };
    let e = |value: f64, quote: &str, id: &str| Extraction {
        value,
        quote: quote.into(),
        source_id: id.into(),
        span: None,
        conversions: vec![],
    };
    assert!(check_extraction(
        &s,
        &obs,
        &e(1440.0, "Software costs 1,440 EUR per year.", "d1")
    )
    .is_ok());
    assert!(check_extraction(
        &s,
        &obs,
        &e(1500.0, "Software costs 1,440 EUR per year.", "d1")
    )
    .unwrap_err()
    .contains("does not state"));
    assert!(check_extraction(
        &s,
        &obs,
        &e(1440.0, "Software costs 1,440 EUR a year.", "d1")
    )
    .unwrap_err()
    .contains("not in document"));
    assert!(check_extraction(
        &s,
        &obs,
        &e(1440.0, "Software costs 1,440 EUR per year.", "d9")
    )
    .unwrap_err()
    .contains("not among the hits"));
    // A reading (as a chat model gives it): the span quoted, the value following from it.
    let monthly = |value: f64, span: &str| Extraction {
        value,
        quote: "Software costs 1,440 EUR per year.".into(),
        source_id: "d1".into(),
        span: Some(span.into()),
        conversions: vec![planwright_actors::field::reading::Conversion::Period {
            from: "year".into(),
            to: "month".into(),
            factor: 1.0 / 12.0,
        }],
    };
    assert!(check_extraction(&s, &obs, &monthly(120.0, "1,440 EUR per year")).is_ok());
    assert!(
        check_extraction(&s, &obs, &monthly(1440.0, "1,440 EUR per year"))
            .unwrap_err()
            .contains("does not follow")
    );
    assert!(
        check_extraction(&s, &obs, &monthly(120.0, "1,440 EUR monthly"))
            .unwrap_err()
            .contains("not in the quote")
    );
    let mut no_span = monthly(120.0, "");
    no_span.span = None;
    assert!(check_extraction(&s, &obs, &no_span)
        .unwrap_err()
        .contains("without the span"));
}
