//! The field-acquisition fixtures: every schema validates, every number a scenario needs is
//! readable from its corpus with a verbatim quote, and the gaps are where the scenarios say.

use planwright_actors::field::numbers::readings;
use planwright_actors::field::schema::{Schema, ValueType};
use serde_json::Value;
use std::path::Path;

fn load(name: &str, part: &str) -> String {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/field/{name}.{part}.json"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn doc_text(corpus: &Value, id: &str) -> String {
    corpus
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .and_then(|d| d["text"].as_str())
        .unwrap_or_else(|| panic!("no document `{id}`"))
        .to_string()
}

fn has(corpus: &Value, id: &str, ty: ValueType, value: f64) {
    let text = doc_text(corpus, id);
    let found = readings(&text, ty);
    let hit = found
        .iter()
        .find(|r| (r.value - value).abs() < 1e-9 * value.abs().max(1.0));
    let hit =
        hit.unwrap_or_else(|| panic!("{id}: {value} not readable in {text:?} (read {found:?})"));
    assert!(text.contains(&hit.quote));
}

#[test]
fn every_schema_validates_and_the_answers_are_strings() {
    for name in ["dental", "coffee", "bikes", "petinsurance"] {
        let schema =
            Schema::from_json(&load(name, "schema")).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!schema.targets.is_empty());
        let answers: serde_json::Map<String, Value> =
            serde_json::from_str(&load(name, "answers")).unwrap();
        assert!(answers.values().all(Value::is_string), "{name}");
        let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
        assert!(
            answers.keys().all(|k| names.contains(&k.as_str())),
            "{name}: answers name schema fields"
        );
        let corpus: Value = serde_json::from_str(&load(name, "corpus")).unwrap();
        for d in corpus.as_array().unwrap() {
            assert!(
                d["id"].is_string() && d["title"].is_string() && d["text"].is_string(),
                "{name}: {d}"
            );
        }
    }
}

#[test]
fn the_numbers_are_in_the_corpus_under_varied_phrasing() {
    let dental: Value = serde_json::from_str(&load("dental", "corpus")).unwrap();
    has(&dental, "den-01", ValueType::Number, 5_200_000.0);
    has(&dental, "den-02", ValueType::Number, 62.0);
    has(&dental, "den-03", ValueType::Number, 2.5);
    has(&dental, "den-04", ValueType::Number, 1_440.0);
    has(&dental, "den-05", ValueType::Ratio, 0.38);
    let coffee: Value = serde_json::from_str(&load("coffee", "corpus")).unwrap();
    has(&coffee, "cof-01", ValueType::Number, 48_000.0);
    has(&coffee, "cof-01", ValueType::Ratio, 0.09);
    has(&coffee, "cof-02", ValueType::Number, 1.3);
    has(&coffee, "cof-03", ValueType::Number, 310.0);
    has(&coffee, "cof-04", ValueType::Ratio, 0.22);
    let bikes: Value = serde_json::from_str(&load("bikes", "corpus")).unwrap();
    has(&bikes, "bik-01", ValueType::Number, 1_250.0);
    has(&bikes, "bik-02", ValueType::Number, 3.0);
}

#[test]
fn the_gaps_are_where_the_scenarios_say() {
    // coffee: `offices` needs components the schema does not list.
    let coffee = Schema::from_json(&load("coffee", "schema")).unwrap();
    let offices = coffee.fields.iter().find(|f| f.name == "offices").unwrap();
    assert!(offices.requires_components);
    assert!(coffee.decompositions.is_empty());
    // bikes: no lease price anywhere in the corpus, so it must be asked.
    let bikes: Value = serde_json::from_str(&load("bikes", "corpus")).unwrap();
    assert!(readings(&doc_text(&bikes, "bik-03"), ValueType::Number).is_empty());
    let answers: Value = serde_json::from_str(&load("bikes", "answers")).unwrap();
    assert_eq!(answers["lease_price"], "1,800");
}
