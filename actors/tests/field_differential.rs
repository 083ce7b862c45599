//! Both topologies — the staged graph and the single `plan` node — over generated scenarios
//! (random schemas, corpora, scripted model decisions, answers): identical decision logs and
//! identical outputs, and the output's invariants hold for each.

mod field_support;

use field_support::*;
use planwright_actors::field::schema::{Decomposition, Field, Kind, Schema, Source, ValueType};
use planwright_actors::field::Topology;
use planwright_actors::tools::bm25::Document;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

const WORDS: &[&str] = &[
    "widget", "harbor", "orchard", "lantern", "velvet", "quarry", "meadow", "copper", "falcon",
    "tundra", "saffron", "glacier", "bramble", "cobalt", "juniper", "marble",
];

fn raw(name: &str, source: Source, ty: ValueType, description: Option<String>) -> Field {
    Field {
        name: name.into(),
        kind: Kind::Raw,
        source,
        value_type: ty,
        core: false,
        unit: None,
        precision: None,
        description,
        requires_components: false,
        formula: None,
    }
}

fn derived(name: &str, formula: String) -> Field {
    Field {
        name: name.into(),
        kind: Kind::Derived,
        source: Source::Either,
        value_type: ValueType::Number,
        core: false,
        unit: None,
        precision: None,
        description: None,
        requires_components: false,
        formula: Some(formula),
    }
}

fn core(name: &str) -> Field {
    Field {
        core: true,
        ..raw(name, Source::User, ValueType::Text, None)
    }
}

/// A random scenario: raw fields of every source and type, sometimes a requires-components field
/// (with or without a static recipe), a chain of derived fields, a corpus that states some values
/// (and some distractors), answers for some fields (some unusable).
fn generate(seed: u64) -> Scenario {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fields = vec![core("region")];
    if rng.random_bool(0.7) {
        fields.push(core("currency"));
    }
    let mut corpus = Vec::new();
    let mut answers = BTreeMap::new();
    answers.insert("region".to_string(), "Nordland".to_string());
    answers.insert("currency".to_string(), "EUR".to_string());
    let n_raw = rng.random_range(2..=5);
    let mut raw_names = Vec::new();
    for i in 0..n_raw {
        let name = format!("f{i}");
        let w1 = WORDS[rng.random_range(0..WORDS.len())];
        let w2 = WORDS[(i * 3 + 1) % WORDS.len()];
        let description = format!("{w1} {w2} {name} count");
        let source = [Source::Web, Source::User, Source::Either][rng.random_range(0..3)];
        let ty = if rng.random_bool(0.25) {
            ValueType::Ratio
        } else {
            ValueType::Number
        };
        let value: f64 = if ty == ValueType::Ratio {
            rng.random_range(1..99) as f64
        } else {
            rng.random_range(2..5000) as f64
        };
        if source != Source::User && rng.random_bool(0.7) {
            let text = if ty == ValueType::Ratio {
                format!("The {w1} {w2} {name} count stands at {value}% this year.")
            } else {
                format!("The {w1} {w2} {name} count is {value} units.")
            };
            corpus.push(Document {
                id: format!("d{seed}-{i}"),
                title: format!("{w1} report"),
                text,
            });
        }
        if rng.random_bool(0.8) {
            let a = match rng.random_range(0..10) {
                0 => "lots".to_string(),
                1 => "150%".to_string(),
                _ if ty == ValueType::Ratio => format!("{}%", value),
                _ => format!("{value}"),
            };
            answers.insert(name.clone(), a);
        }
        fields.push(raw(&name, source, ty, Some(description)));
        raw_names.push(name);
    }
    let mut decompositions = Vec::new();
    if rng.random_bool(0.5) {
        let name = "g0".to_string();
        fields.push(Field {
            requires_components: true,
            ..raw(
                &name,
                Source::Web,
                ValueType::Number,
                Some("hard to find g0".into()),
            )
        });
        if rng.random_bool(0.5) {
            decompositions.push(Decomposition {
                field: name.clone(),
                components: vec!["g0_a".into(), "g0_b".into()],
                formula: "g0_a * g0_b".into(),
                descriptions: BTreeMap::from([("g0_a".into(), "g0 alpha part".into())]),
                types: BTreeMap::new(),
            });
            corpus.push(Document {
                id: format!("d{seed}-g"),
                title: "g0 alpha part".into(),
                text: format!("The g0 alpha part is {} units.", rng.random_range(2..90)),
            });
            answers.insert("g0".into(), "12".into());
        }
        raw_names.push(name);
    }
    corpus.push(Document {
        id: format!("d{seed}-x"),
        title: "Unrelated".into(),
        text: "Nothing here has 7 meanings for anyone.".into(),
    });
    let ops = ["*", "+", "/", "-"];
    let mut prev = raw_names[0].clone();
    let n_derived = rng.random_range(1..=3);
    let mut targets = Vec::new();
    for j in 0..n_derived {
        let other = &raw_names[rng.random_range(0..raw_names.len())];
        let op = ops[rng.random_range(0..ops.len())];
        let name = format!("t{j}");
        fields.push(derived(&name, format!("{prev} {op} {other}")));
        prev = name.clone();
        if j + 1 == n_derived || rng.random_bool(0.3) {
            targets.push(name);
        }
    }
    let schema = Schema {
        name: format!("generated-{seed}"),
        targets,
        fields,
        decompositions,
    };
    schema
        .validate()
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    Scenario {
        schema,
        corpus,
        answers,
    }
}

async fn both(seed: u64, sc: &Scenario, model_seed: u64) {
    let staged = run_scenario(
        Arc::new(ScriptedPolicy::new(model_seed)),
        Topology::Staged,
        sc,
        &format!("c{seed}"),
    )
    .await;
    let plan = run_scenario(
        Arc::new(ScriptedPolicy::new(model_seed)),
        Topology::Plan,
        sc,
        &format!("c{seed}"),
    )
    .await;
    assert_eq!(
        staged.state.decisions, plan.state.decisions,
        "seed {seed}: decision logs differ"
    );
    assert_eq!(
        comparable(&staged),
        comparable(&plan),
        "seed {seed}: outputs differ"
    );
    check_invariants(&staged, &sc.corpus);
    check_invariants(&plan, &sc.corpus);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_topologies_agree_on_sixty_generated_scenarios() {
    let mut statuses = BTreeMap::new();
    let mut rules = BTreeMap::new();
    for seed in 0..60u64 {
        let sc = generate(seed);
        both(seed, &sc, seed * 31 + 7).await;
        let run = run_scenario(
            Arc::new(ScriptedPolicy::new(seed * 31 + 7)),
            Topology::Staged,
            &sc,
            "again",
        )
        .await;
        *statuses.entry(run.status()).or_insert(0) += 1;
        for d in &run.state.decisions {
            for r in &d.rewritten_by {
                *rules.entry(r.clone()).or_insert(0) += 1;
            }
        }
    }
    // The generated scenarios reach every ending and make every rule fire, so agreement is not
    // agreement on trivial runs.
    for status in ["ok", "aborted", "interrupted"] {
        assert!(
            statuses.get(status).copied().unwrap_or(0) > 0,
            "no `{status}` run: {statuses:?}"
        );
    }
    for rule in [
        "on_demand_decomposition",
        "derived_field_redirect",
        "premature_ask_for_web_field",
        "search_duplicate_or_cap",
        "ask_cap",
        "calculation_adjustment",
    ] {
        assert!(
            rules.contains_key(rule),
            "rule `{rule}` never fired: {rules:?}"
        );
    }
}

#[tokio::test]
async fn both_topologies_agree_on_the_fixtures_with_the_offline_model() {
    for name in ["dental", "coffee", "bikes", "petinsurance"] {
        let sc = scenario(name);
        let staged = run_scenario(offline(), Topology::Staged, &sc, name).await;
        let plan = run_scenario(offline(), Topology::Plan, &sc, name).await;
        assert_eq!(staged.state.decisions, plan.state.decisions, "{name}");
        assert_eq!(comparable(&staged), comparable(&plan), "{name}");
        assert_eq!(staged.status(), "ok", "{name}");
    }
}
