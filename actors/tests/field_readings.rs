//! The labelled reading set (`fixtures/field/readings.json`): every sentence through the offline
//! extraction, scored. A wrong number is worse than a question, so precision is held high:
//! precision = right numbers / numbers taken; recall = right numbers / cases that have one; and
//! every case labelled "ask" must be asked, never guessed. A case's `read_as` names the currency
//! its shared sign (`$`, `kr`, …) must be recorded as read as (`currency-by-context`). The figures
//! per kind are printed, with how often the reader asks (with the quote) and how often it finds
//! nothing where there is a figure (the planner would then ask as if the source said nothing).

use planwright_actors::field::policy::{extract_offline, ExtractRequest};
use planwright_actors::field::reading::context::rates;
use planwright_actors::field::schema::Field;
use planwright_actors::tools::bm25::Document;
use serde_json::Value;
use std::collections::BTreeMap;

fn set() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/field/readings.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[derive(Default, Debug)]
struct Score {
    cases: u32,
    numbers_expected: u32,
    taken: u32,
    right: u32,
    asks_expected: u32,
    asked_right: u32,
    /// Questions asked with the quote (right or not).
    asked: u32,
    /// Cases with a figure (a number or a question expected) where nothing was found: the planner
    /// would ask for the field as if the source said nothing.
    blind: u32,
    wrong: Vec<String>,
    /// Right values whose reading does not record the currency the case's `read_as` names.
    unrecorded: Vec<String>,
}

/// The currency a reading says an ambiguous symbol was read as (`currency-by-context`).
fn read_as(conversions: &Value) -> Option<String> {
    conversions
        .as_array()?
        .iter()
        .find(|c| c["kind"] == "currency-by-context")
        .and_then(|c| c["currency"].as_str())
        .map(String::from)
}

#[test]
fn the_offline_reader_is_precise_on_the_labelled_set_and_asks_where_it_must() {
    let set = set();
    let fields = &set["fields"];
    let mut by_kind: BTreeMap<String, Score> = BTreeMap::new();
    let mut all = Score::default();
    // The cases whose shared currency sign the context settles (they name `read_as`).
    let mut settled = Score::default();
    for case in set["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        let field: Field = serde_json::from_value({
            let mut f = fields[case["field"].as_str().unwrap()].clone();
            f["kind"] = "raw".into();
            f
        })
        .unwrap_or_else(|e| panic!("{id}: {e}"));
        let doc = Document {
            id: id.into(),
            title: case["title"].as_str().unwrap_or("").into(),
            text: case["text"].as_str().unwrap().into(),
        };
        let fx: Vec<(String, String)> = case["rates"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| (format!("{id}-fx{i}"), t.as_str().unwrap().to_string()))
            .collect();
        let req = ExtractRequest {
            field: Some(field),
            hits: vec![doc],
            currency: case["currency"].as_str().map(String::from),
            region: case["region"].as_str().map(String::from),
            rates: rates(fx.iter().map(|(a, b)| (a.as_str(), b.as_str()))),
            ..ExtractRequest::default()
        };
        let got = extract_offline(&req);
        let kind = case["kind"].as_str().unwrap().to_string();
        let mut scores = vec![by_kind.entry(kind).or_default(), &mut all];
        if case["read_as"].is_string() {
            scores.push(&mut settled);
        }
        for s in scores {
            s.cases += 1;
            let expect = &case["expect"];
            if let Some(v) = &got.found {
                s.taken += 1;
                let conversions = serde_json::to_value(&v.conversions).unwrap();
                let currency_ok = case["read_as"]
                    .as_str()
                    .is_none_or(|c| read_as(&conversions).as_deref() == Some(c));
                match expect.as_f64() {
                    Some(e) if (v.value - e).abs() <= 1e-6 * e.abs().max(1.0) => {
                        s.right += 1;
                        if !currency_ok {
                            s.unrecorded.push(format!(
                                "{id}: {conversions} does not record the sign read as {}",
                                case["read_as"]
                            ));
                        }
                    }
                    _ => s.wrong.push(format!(
                        "{id}: took {} ({conversions}), expected {expect} {}",
                        v.value, case["read_as"]
                    )),
                }
            } else if expect == "ask" && got.ask.is_none() {
                s.wrong
                    .push(format!("{id}: expected a question, got nothing"));
            } else if expect.is_number() && got.ask.is_some() {
                s.wrong.push(format!(
                    "{id}: asked ({}), expected {expect}",
                    got.ask.as_ref().unwrap().why
                ));
            } else if expect.is_number() {
                s.wrong
                    .push(format!("{id}: found nothing, expected {expect}"));
            } else if expect.is_null() && got.ask.is_some() {
                s.wrong.push(format!("{id}: asked, expected nothing"));
            }
            s.asked += got.ask.is_some() as u32;
            s.blind += (got.found.is_none() && got.ask.is_none() && !expect.is_null()) as u32;
            if expect.is_number() {
                s.numbers_expected += 1;
            }
            if expect == "ask" {
                s.asks_expected += 1;
                s.asked_right += got.ask.is_some() as u32;
            }
        }
    }
    let precision = |s: &Score| s.right as f64 / s.taken.max(1) as f64;
    let recall = |s: &Score| s.right as f64 / s.numbers_expected.max(1) as f64;
    let rate = |n: u32, s: &Score| n as f64 / s.cases.max(1) as f64;
    eprintln!(
        "kind              cases  taken  precision  recall  asked (rate)  expected asks  found nothing  questions (rate)"
    );
    let row = |k: &str, s: &Score| {
        eprintln!(
            "{k:<17} {:>5}  {:>5}  {:>9.3}  {:>6.3}  {:>3} ({:.3})   {:>3}/{:<3}        {:>3}            {:>3} ({:.3})",
            s.cases,
            s.taken,
            precision(s),
            recall(s),
            s.asked,
            rate(s.asked, s),
            s.asked_right,
            s.asks_expected,
            s.blind,
            s.asked + s.blind,
            rate(s.asked + s.blind, s)
        )
    };
    for (k, s) in &by_kind {
        row(k, s);
    }
    row("all", &all);
    row("context settles", &settled);
    for w in all.wrong.iter().chain(&all.unrecorded) {
        eprintln!("  {w}");
    }
    assert!(all.cases >= 100, "the set has {} cases", all.cases);
    assert!(
        precision(&all) >= 0.98,
        "precision {:.3}: {:#?}",
        precision(&all),
        all.wrong
    );
    assert!(
        recall(&all) >= 0.9,
        "recall {:.3}: {:#?}",
        recall(&all),
        all.wrong
    );
    assert_eq!(all.asked_right, all.asks_expected, "{:#?}", all.wrong);
    assert_eq!(all.blind, 0, "a figure found nowhere: {:#?}", all.wrong);
    assert!(all.unrecorded.is_empty(), "{:#?}", all.unrecorded);
    // Where the context settles a shared currency sign, the reader never asks.
    assert_eq!(
        (settled.right, settled.asked),
        (settled.cases, 0),
        "{:#?}",
        all.wrong
    );
}

/// What a chat model's reading must pass before the planner accepts it.
#[test]
fn a_reading_is_accepted_only_when_its_span_is_quoted_and_its_value_follows() {
    use planwright_actors::field::reading::{verify, Conversion, FieldReading};
    let quote = "The software costs 12 USD per seat per month, or 130 USD a year.";
    let per_year = Conversion::Period {
        from: "month".into(),
        to: "year".into(),
        factor: 12.0,
    };
    let reading = |value: f64, span: &str, conversions: Vec<Conversion>| FieldReading {
        value,
        span: span.into(),
        conversions,
    };
    assert!(verify(
        quote,
        &reading(144.0, "12 USD per seat per month", vec![per_year.clone()])
    )
    .is_ok());
    assert!(verify(quote, &reading(130.0, "130 USD a year", vec![])).is_ok());
    let e = verify(
        quote,
        &reading(12.0, "12 USD per seat per month", vec![per_year.clone()]),
    )
    .unwrap_err();
    assert!(e.contains("does not follow"), "{e}");
    let e = verify(quote, &reading(144.0, "12 EUR per month", vec![per_year])).unwrap_err();
    assert!(e.contains("not in the quote"), "{e}");
    let e = verify(quote, &reading(1560.0, "130 USD a year", vec![])).unwrap_err();
    assert!(e.contains("does not follow"), "{e}");
    let q = "Between 30% and 40% of clinics use it.";
    let range = |low, high| Conversion::Range { low, high };
    assert!(verify(
        q,
        &reading(
            0.35,
            "Between 30% and 40%",
            vec![range(30.0, 40.0), Conversion::Percent]
        )
    )
    .is_ok());
    assert!(
        verify(
            q,
            &reading(
                0.35,
                "Between 30% and 40%",
                vec![range(30.0, 50.0), Conversion::Percent]
            )
        )
        .is_err(),
        "ends the span does not give"
    );
    let q = "Die Region hat rund 1,2 Mio. Einwohner.";
    assert!(verify(q, &reading(1_200_000.0, "1,2 Mio", vec![])).is_ok());
}
