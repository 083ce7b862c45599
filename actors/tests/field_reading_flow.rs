//! Readings through whole `acquire` runs (offline model, both topologies): a period converted, the
//! latest of two years, a range's midpoint, a European number, a price converted at a rate the
//! corpus gives, the asked region's figure next to another's; an ambiguous quote that becomes a
//! question naming its candidates (the payload carrying the quote), answered to resume the run;
//! and, with no question left to ask, a field left unknown with a reflection saying why.

mod field_support;

use field_support::*;
use planwright_actors::field::runner::{self, Start};
use planwright_actors::field::schema::Schema;
use planwright_actors::field::state::Caps;
use planwright_actors::field::{input, GraphOptions, Topology};
use planwright_actors::tools::bm25::Document;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const SCHEMA: &str = r#"{
  "name": "reading-flow", "targets": ["tam", "sam"],
  "fields": [
    {"name": "region", "kind": "raw", "source": "user", "type": "text", "core": true},
    {"name": "currency", "kind": "raw", "source": "user", "type": "text", "core": true},
    {"name": "clinics", "kind": "raw", "source": "web", "type": "number", "unit": "count",
     "description": "dental clinics in the region at the latest count"},
    {"name": "annual_price", "kind": "raw", "source": "web", "type": "number", "unit": "currency/year",
     "description": "yearly subscription price of practice software"},
    {"name": "serviceable_share", "kind": "raw", "source": "web", "type": "ratio",
     "description": "share of clinics that could use cloud practice software"},
    {"name": "tam", "kind": "derived", "formula": "clinics * annual_price"},
    {"name": "sam", "kind": "derived", "formula": "tam * serviceable_share"}
  ]
}"#;

fn docs(texts: &[(&str, &str, &str)]) -> Vec<Document> {
    texts
        .iter()
        .map(|(id, title, text)| Document {
            id: id.to_string(),
            title: title.to_string(),
            text: text.to_string(),
        })
        .collect()
}

async fn run(
    schema: &str,
    corpus: Vec<Document>,
    answers: &[(&str, &str)],
    caps: Option<Caps>,
    topology: Topology,
) -> runner::AcquireRun {
    let options = GraphOptions {
        topology,
        model_retry: fast_retry(),
        ..GraphOptions::default()
    };
    let e = engine(offline(), &options, None).await;
    let mut update = input::initial_update(
        "reading",
        "size it",
        Schema::from_json(schema).unwrap(),
        corpus,
    );
    if let Some(c) = caps {
        update = update.caps(c);
    }
    let mut answers: BTreeMap<String, String> = answers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let run = runner::run(
        &e,
        topology,
        "reading",
        Start::Input(Box::new(update)),
        &mut answers,
    )
    .await
    .unwrap();
    e.shutdown().await;
    run
}

fn field<'a>(out: &'a Value, name: &str) -> &'a Value {
    &out["fields"][name]
}

fn kinds(v: &Value) -> Vec<String> {
    v["provenance"]["conversions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect()
}

const ANSWERS: [(&str, &str); 2] = [("region", "Nordland"), ("currency", "EUR")];

#[tokio::test]
async fn periods_years_ranges_separators_rates_and_regions_are_read_as_the_fields_mean_them() {
    let corpus = docs(&[
        (
            "c-1",
            "Dental clinics in Nordland",
            "In 2015 the region had 1,100 dental clinics; by 2023 there were 1,290.",
        ),
        (
            "c-2",
            "Neighbours",
            "In Sørland there are 800 dental clinics, far fewer than up north.",
        ),
        (
            "p-1",
            "Practice software pricing",
            "Practice software costs 10 USD per seat per month.",
        ),
        (
            "fx",
            "Exchange rates",
            "Over the year, 1 USD = 0.90 EUR on average.",
        ),
        (
            "s-1",
            "Cloud practice software",
            "Zwischen 30 und 40 Prozent der Praxen (clinics) could use cloud practice software.",
        ),
    ]);
    let mut outs = Vec::new();
    for topology in [Topology::Staged, Topology::Plan] {
        let run = run(SCHEMA, corpus.clone(), &ANSWERS, None, topology).await;
        check_invariants(&run, &corpus);
        assert_eq!(run.status(), "ok", "{:#?}", run.state.reflections);
        let out = run.output_json();
        let clinics = field(&out, "clinics");
        assert_eq!(clinics["value"], 1290.0, "the latest count: {clinics}");
        assert_eq!(kinds(clinics), ["year"]);
        assert!(clinics["provenance"]["conversions"][0]["why"]
            .as_str()
            .unwrap()
            .contains("latest"));
        let price = field(&out, "annual_price");
        assert!(
            (price["value"].as_f64().unwrap() - 10.0 * 12.0 * 0.9).abs() < 1e-9,
            "{price}"
        );
        assert_eq!(kinds(price), ["period", "currency"]);
        assert_eq!(price["provenance"]["span"], "10 USD per seat per month");
        assert_eq!(price["provenance"]["conversions"][1]["source"], "fx");
        let share = field(&out, "serviceable_share");
        assert!(
            (share["value"].as_f64().unwrap() - 0.35).abs() < 1e-9,
            "{share}"
        );
        assert_eq!(kinds(share), ["range", "percent"]);
        // The text output says what was done.
        let text = planwright_actors::field::cli::render_text(&run);
        assert!(text.contains("× 12 (per month → per year)"), "{text}");
        assert!(text.contains("midpoint of 30–40"), "{text}");
        outs.push(comparable(&run));
    }
    assert_eq!(outs[0], outs[1], "both topologies read the same");
}

#[tokio::test]
async fn an_ambiguous_quote_becomes_a_question_naming_its_candidates_and_the_answer_resumes() {
    let schema = SCHEMA.replace(" at the latest count", "");
    let corpus = docs(&[
        (
            "c-1",
            "Dental clinics",
            "There were 1,100 dental clinics in 2015 and 1,290 dental clinics in 2023.",
        ),
        (
            "p-1",
            "Practice software pricing",
            "Practice software costs 1,440 EUR per year.",
        ),
        (
            "s-1",
            "Cloud practice software",
            "About 38% of clinics could use cloud practice software.",
        ),
    ]);
    // First without an answer for `clinics`: the run pauses on the question.
    let paused = run(&schema, corpus.clone(), &ANSWERS, None, Topology::Staged).await;
    let q = paused.pending.clone().expect("paused on a question");
    assert_eq!(q["field"], "clinics", "{q}");
    let question = q["question"].as_str().unwrap();
    for part in [
        "1,100",
        "1,290",
        "c-1",
        "There were 1,100 dental clinics in 2015",
    ] {
        assert!(question.contains(part), "{part} in {question}");
    }
    assert!(paused
        .state
        .reflections
        .iter()
        .any(|r| r.starts_with("asking:") && r.contains("2015 and 2023")));
    // The payload carries what was found: the source, the quote, the candidates.
    assert_eq!(q["found"]["source_id"], "c-1", "{q}");
    assert_eq!(
        q["found"]["quote"],
        "There were 1,100 dental clinics in 2015 and 1,290 dental clinics in 2023.",
        "{q}"
    );
    assert_eq!(q["found"]["candidates"].as_array().unwrap().len(), 2, "{q}");
    // With the answer, the run goes on and takes the chosen figure from the source, the answer
    // recorded as the person's confirmation.
    let mut answers = ANSWERS.to_vec();
    answers.push(("clinics", "1,290"));
    let done = run(&schema, corpus.clone(), &answers, None, Topology::Staged).await;
    assert_eq!(done.status(), "ok");
    let out = done.output_json();
    let clinics = field(&out, "clinics");
    assert_eq!(clinics["value"], 1290.0);
    assert_eq!(clinics["provenance"]["kind"], "search", "{clinics}");
    assert_eq!(clinics["provenance"]["source_id"], "c-1");
    assert_eq!(clinics["provenance"]["confirmed"]["answer"], "1,290");
    // A figure the quote does not offer is the person's own.
    let mut answers = ANSWERS.to_vec();
    answers.push(("clinics", "1,300"));
    let done = run(&schema, corpus.clone(), &answers, None, Topology::Staged).await;
    assert_eq!(
        field(&done.output_json(), "clinics")["provenance"]["kind"],
        "user"
    );
}

#[tokio::test]
async fn with_no_question_left_an_ambiguous_field_stays_unknown_and_says_why() {
    let schema = r#"{
      "name": "no-one-to-ask", "targets": ["double"],
      "fields": [
        {"name": "clinics", "kind": "raw", "source": "web", "type": "number", "unit": "count",
         "description": "dental clinics in the region"},
        {"name": "double", "kind": "derived", "formula": "clinics * 2"}
      ]
    }"#;
    let corpus = docs(&[(
        "c-1",
        "Dental clinics",
        "There were 1,100 dental clinics in 2015 and 1,290 dental clinics in 2023.",
    )]);
    let caps = Caps {
        asks_per_field: 0,
        asks_total: 0,
        ..Caps::default()
    };
    let run = run(schema, corpus, &[], Some(caps), Topology::Staged).await;
    let out = run.output_json();
    assert_eq!(field(&out, "clinics")["value"], Value::Null, "not guessed");
    assert!(
        run.state
            .reflections
            .iter()
            .any(|r| r.starts_with("left unknown, nobody to ask") && r.contains("1,290")),
        "{:#?}",
        run.state.reflections
    );
    assert_eq!(out["status"], json!("aborted"));
}

#[tokio::test]
async fn a_number_written_the_european_way_is_read_by_its_documents_convention() {
    let corpus = docs(&[
        (
            "c-de",
            "Zahnarztpraxen (dental clinics)",
            "Im Jahr 2023 gab es in der Region 1.290 dental clinics und die Zahl steigt.",
        ),
        (
            "p-1",
            "Practice software pricing",
            "Practice software costs 1.440,00 EUR per year.",
        ),
        (
            "s-1",
            "Cloud practice software",
            "Etwa 12,5 % der clinics could use cloud practice software.",
        ),
    ]);
    let run = run(SCHEMA, corpus.clone(), &ANSWERS, None, Topology::Staged).await;
    assert_eq!(run.status(), "ok", "{:#?}", run.state.reflections);
    let out = run.output_json();
    assert_eq!(field(&out, "clinics")["value"], 1290.0, "not 1.29");
    assert_eq!(field(&out, "annual_price")["value"], 1440.0);
    assert_eq!(field(&out, "serviceable_share")["value"], 0.125);
}
