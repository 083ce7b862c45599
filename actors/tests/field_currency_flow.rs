//! Shared currency signs through whole `acquire` runs (offline model): `$`, `kr`, `R` read by the
//! note's words and the person's, recorded as `currency-by-context`; the pet-insurance
//! schema finishing in AUD, and in USD converting only at a rate the person gives (asked for with
//! the quote, never stored as 610 USD); a sign nothing settles asked about in one word; every
//! question about a figure carrying its quote in the payload; a question about a field nothing was
//! found for saying so.

mod field_support;

use field_support::*;
use planwright_actors::field::runner::{self, AnswerSource, Start};
use planwright_actors::field::schema::Schema;
use planwright_actors::field::{input, GraphOptions, Topology};
use planwright_actors::tools::bm25::Document;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};

const PREMIUM_NOTE: &str =
    "Australian pet owners paid on average $610 per year to insure a dog or cat.";

/// Answers per field, in order; records every question's payload fields as asked.
#[derive(Default)]
struct Script {
    answers: BTreeMap<String, VecDeque<String>>,
    asked: Vec<(String, String)>,
}

impl Script {
    fn new(answers: &[(&str, &str)]) -> Self {
        let mut s = Script::default();
        for (f, a) in answers {
            s.answers
                .entry(f.to_string())
                .or_default()
                .push_back(a.to_string());
        }
        s
    }
}

impl AnswerSource for Script {
    fn answer(&mut self, field: &str, question: &str) -> Option<String> {
        self.asked.push((field.to_string(), question.to_string()));
        let queue = self.answers.get_mut(field)?;
        // The last answer for a field keeps answering (like an answers file).
        if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        }
    }
}

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

fn pet_corpus(premium_note: &str) -> Vec<Document> {
    docs(&[
        ("pet-au-premium", "Pet insurance premiums", premium_note),
        (
            "pet-au-insured",
            "Insured pets",
            "About 1.9 million pets are insured in Australia, most of them dogs.",
        ),
    ])
}

async fn run(corpus: Vec<Document>, script: &mut Script, topology: Topology) -> runner::AcquireRun {
    let options = GraphOptions {
        topology,
        model_retry: fast_retry(),
        ..GraphOptions::default()
    };
    let e = engine(offline(), &options, None).await;
    let schema = Schema::from_json(&fixture("petinsurance", "schema")).unwrap();
    let update = input::initial_update("pets", "size pet insurance", schema, corpus);
    let out = runner::run(&e, topology, "pets", Start::Input(Box::new(update)), script)
        .await
        .unwrap();
    e.shutdown().await;
    out
}

fn premium(run: &runner::AcquireRun) -> Value {
    run.output_json()["fields"]["annual_premium"].clone()
}

fn kinds(v: &Value) -> Vec<String> {
    v["provenance"]["conversions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect()
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-9 * want.abs().max(1.0))
}

#[tokio::test]
async fn the_pet_insurance_schema_finishes_in_aud_reading_the_dollar_as_the_notes_own() {
    let mut outs = Vec::new();
    for topology in [Topology::Staged, Topology::Plan] {
        let sc = scenario("petinsurance");
        let mut script = Script::new(&[("region", "Australia"), ("currency", "AUD")]);
        let run = run(sc.corpus.clone(), &mut script, topology).await;
        check_invariants(&run, &sc.corpus);
        assert_eq!(run.status(), "ok", "{:#?}", run.state.reflections);
        let p = premium(&run);
        assert_eq!(p["value"], 610.0, "{p}");
        assert_eq!(kinds(&p), ["currency-by-context"]);
        let c = &p["provenance"]["conversions"][0];
        assert_eq!(
            (&c["sign"], &c["currency"], &c["words"], &c["basis"]),
            (
                &json!("$"),
                &json!("AUD"),
                &json!("Australian"),
                &json!("quote")
            ),
            "{p}"
        );
        assert_eq!(p["provenance"]["span"], "$610 per year");
        assert!(close(&run.output_json()["targets"]["tam"], 1.9e6 * 610.0));
        // Only the core questions were asked: the figure needed no one.
        let fields: Vec<&str> = script.asked.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["region", "currency"]);
        let text = planwright_actors::field::cli::render_text(&run);
        assert!(
            text.contains("$ read as AUD (the quote says \"Australian\")"),
            "{text}"
        );
        outs.push(comparable(&run));
    }
    assert_eq!(outs[0], outs[1], "both topologies read the same");
}

#[tokio::test]
async fn in_usd_the_premium_waits_for_a_rate_asked_with_the_quote_and_is_never_610_usd() {
    let corpus = pet_corpus(PREMIUM_NOTE);
    let mut script = Script::new(&[("region", "Australia"), ("currency", "USD")]);
    let paused = run(corpus.clone(), &mut script, Topology::Staged).await;
    assert_eq!(paused.status(), "interrupted");
    assert_eq!(premium(&paused)["value"], Value::Null, "610 is not stored");
    let q = paused.pending.clone().unwrap();
    assert_eq!(q["field"], "annual_premium", "{q}");
    assert_eq!(q["found"]["source_id"], "pet-au-premium", "{q}");
    assert_eq!(q["found"]["quote"], PREMIUM_NOTE, "{q}");
    assert_eq!(q["found"]["candidates"][0]["value"], 610.0, "{q}");
    assert_eq!(q["found"]["candidates"][0]["span"], "$610 per year", "{q}");
    assert_eq!(
        q["found"]["open"],
        json!({"kind": "rate", "from": "AUD", "to": "USD"}),
        "{q}"
    );
    let question = q["question"].as_str().unwrap();
    for part in [
        PREMIUM_NOTE,
        "$610 per year in AUD",
        "\"Australian\"",
        "How many USD is 1 AUD?",
        // The field's unit in the person's currency, as the output writes it.
        "(annual_premium, in USD/year)",
    ] {
        assert!(question.contains(part), "{part:?} in {question}");
    }
    assert!(!question.contains("currency/year"), "{question}");
    // The text output shows the question with its quote.
    let text = planwright_actors::field::cli::render_text(&paused);
    assert!(text.contains(PREMIUM_NOTE), "{text}");

    // Answered in one word, the rate converts the source's figure.
    let mut script = Script::new(&[
        ("region", "Australia"),
        ("currency", "USD"),
        ("annual_premium", "0.65"),
    ]);
    let done = run(corpus.clone(), &mut script, Topology::Staged).await;
    check_invariants(&done, &corpus);
    assert_eq!(done.status(), "ok", "{:#?}", done.state.reflections);
    let p = premium(&done);
    assert!(close(&p["value"], 396.5), "{p}");
    assert_eq!(p["provenance"]["kind"], "search");
    assert_eq!(kinds(&p), ["currency-by-context", "currency"]);
    assert_eq!(p["provenance"]["conversions"][1]["source"], "user");
    assert_eq!(p["provenance"]["confirmed"]["answer"], "0.65");

    // A rate given up front converts without a question.
    let mut with_rate = corpus.clone();
    with_rate.extend(input::rates_document(&[("AUD".into(), "USD".into(), 0.65)]));
    let mut script = Script::new(&[("region", "Australia"), ("currency", "USD")]);
    let done = run(with_rate, &mut script, Topology::Staged).await;
    assert_eq!(done.status(), "ok", "{:#?}", done.state.reflections);
    let p = premium(&done);
    assert!(close(&p["value"], 396.5), "{p}");
    assert_eq!(p["provenance"]["conversions"][1]["source"], "user-rates");
    assert!(p["provenance"]["confirmed"].is_null());
    assert_eq!(script.asked.len(), 2, "{:?}", script.asked);
}

#[tokio::test]
async fn a_dollar_nothing_settles_is_asked_about_in_one_word_and_the_answer_is_in_the_provenance() {
    let note = "Pet owners paid on average $610 per year to insure a dog or cat.";
    let corpus = pet_corpus(note);
    // The person's region says AUD, their currency USD: the note says neither.
    let mut script = Script::new(&[("region", "Australia"), ("currency", "USD")]);
    let paused = run(corpus.clone(), &mut script, Topology::Staged).await;
    let q = paused.pending.clone().unwrap();
    assert_eq!(q["field"], "annual_premium", "{q}");
    assert_eq!(
        q["found"]["open"],
        json!({"kind": "currency", "sign": "$", "options": ["AUD", "USD"]}),
        "{q}"
    );
    let question = q["question"].as_str().unwrap();
    assert!(
        question.contains(&format!(
            "says \"{note}\": $610 per year — is that AUD, USD, or something else?"
        )),
        "{question}"
    );
    assert!(premium(&paused)["value"].is_null());

    // `USD`: the figure is taken as written, with the answer recorded.
    let mut script = Script::new(&[
        ("region", "Australia"),
        ("currency", "USD"),
        ("annual_premium", "USD"),
    ]);
    let done = run(corpus.clone(), &mut script, Topology::Staged).await;
    assert_eq!(done.status(), "ok", "{:#?}", done.state.reflections);
    let p = premium(&done);
    assert_eq!(p["value"], 610.0);
    assert_eq!(kinds(&p), ["currency-by-answer"]);
    assert_eq!(p["provenance"]["conversions"][0]["currency"], "USD");
    assert_eq!(p["provenance"]["confirmed"]["answer"], "USD");
    assert!(p["provenance"]["confirmed"]["question"]
        .as_str()
        .unwrap()
        .contains(note));

    // `yes` (AUD, the first offered) then the rate: converted, both answers kept.
    let mut script = Script::new(&[
        ("region", "Australia"),
        ("currency", "USD"),
        ("annual_premium", "yes"),
        ("annual_premium", "0.65"),
    ]);
    let done = run(corpus.clone(), &mut script, Topology::Staged).await;
    assert_eq!(done.status(), "ok", "{:#?}", done.state.reflections);
    let p = premium(&done);
    assert!(close(&p["value"], 396.5), "{p}");
    assert_eq!(kinds(&p), ["currency-by-answer", "currency"]);
    assert_eq!(p["provenance"]["conversions"][0]["answer"], "yes");
    let asked: Vec<&str> = script
        .asked
        .iter()
        .filter(|(f, _)| f == "annual_premium")
        .map(|(_, q)| q.as_str())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].contains("How many USD is 1 AUD?"), "{}", asked[1]);
    assert!(asked[1].contains(note), "{}", asked[1]);
}

/// One note per case: the premium as a source about a place writes it, and what a reader takes.
const CASES: &[(&str, &str, &str, f64, &str)] = &[
    // (currency, region, note, value, read as)
    (
        "NZD",
        "New Zealand",
        "In New Zealand, a pet insurance policy for a dog costs about $45 a month.",
        540.0,
        "NZD",
    ),
    (
        "SGD",
        "Singapore",
        "Singapore households spend $1,200 a year on pet insurance, the survey found.",
        1200.0,
        "SGD",
    ),
    (
        "USD",
        "United States",
        "In the United States, the average pet insurance premium was $676 per year.",
        676.0,
        "USD",
    ),
    (
        "SEK",
        "Sweden",
        "Swedish dog owners pay on average 3,400 kr per year for pet insurance.",
        3400.0,
        "SEK",
    ),
    (
        "NOK",
        "Norge",
        "I Norge koster hundeforsikring rundt 350 kr per måned.",
        4200.0,
        "NOK",
    ),
    (
        "DKK",
        "Denmark",
        "In Denmark, pet insurance for a cat costs around 1,900 kr per year.",
        1900.0,
        "DKK",
    ),
    (
        "ZAR",
        "South Africa",
        "South African pet owners pay around R450 a month for pet insurance.",
        5400.0,
        "ZAR",
    ),
    (
        "NZD",
        "New Zealand",
        "All prices in this survey are in New Zealand dollars. Insuring a cat costs $38 a month on average, the pet insurance survey found.",
        456.0,
        "NZD",
    ),
];

#[tokio::test]
async fn dollars_kronor_and_rand_are_read_by_their_notes_through_whole_runs() {
    for (currency, region, note, value, read_as) in CASES {
        let corpus = docs(&[
            ("premium", "Pet insurance", note),
            (
                "insured",
                "Insured pets",
                "About 1.9 million pets are insured, most of them dogs.",
            ),
        ]);
        let mut script = Script::new(&[("region", region), ("currency", currency)]);
        let done = run(corpus.clone(), &mut script, Topology::Staged).await;
        assert_eq!(done.status(), "ok", "{note}: {:#?}", done.state.reflections);
        let p = premium(&done);
        assert!(close(&p["value"], *value), "{note}: {p}");
        let by_context = p["provenance"]["conversions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "currency-by-context")
            .unwrap_or_else(|| panic!("{note}: {p}"));
        assert_eq!(by_context["currency"], *read_as, "{note}");
        assert!(
            note.contains(by_context["words"].as_str().unwrap()),
            "the words that settled it are the note's: {by_context}"
        );
    }
    // `R$` is Brazil's own sign: read as written, nothing to settle.
    let corpus = docs(&[
        (
            "premium",
            "Pet insurance",
            "Brazilian owners pay R$ 90 per month for pet insurance plans.",
        ),
        (
            "insured",
            "Insured pets",
            "About 1.9 million pets are insured, most of them dogs.",
        ),
    ]);
    let mut script = Script::new(&[("region", "Brazil"), ("currency", "BRL")]);
    let done = run(corpus, &mut script, Topology::Staged).await;
    assert_eq!(done.status(), "ok", "{:#?}", done.state.reflections);
    let p = premium(&done);
    assert_eq!(p["value"], 1080.0, "{p}");
    assert_eq!(kinds(&p), ["period"]);
}

#[tokio::test]
async fn every_question_about_a_found_figure_carries_its_quote_and_one_about_nothing_says_so() {
    // Two years and no `latest`: the question lists both, the payload carries the quote, and the
    // chosen one is taken from the source with the answer as its confirmation.
    let corpus = docs(&[
        (
            "premium",
            "Pet insurance premiums",
            "Australian pet owners paid on average $580 per year in 2021 and $610 per year in 2023.",
        ),
        (
            "insured",
            "Insured pets",
            "About 1.9 million pets are insured, most of them dogs.",
        ),
    ]);
    let mut script = Script::new(&[("region", "Australia"), ("currency", "AUD")]);
    let paused = run(corpus.clone(), &mut script, Topology::Staged).await;
    let q = paused.pending.clone().unwrap();
    assert_eq!(q["field"], "annual_premium", "{q}");
    assert_eq!(q["found"]["source_id"], "premium");
    assert!(q["found"]["open"].is_null(), "{q}");
    assert_eq!(q["found"]["candidates"].as_array().unwrap().len(), 2, "{q}");
    assert!(q["question"]
        .as_str()
        .unwrap()
        .contains(q["found"]["quote"].as_str().unwrap()));
    let mut script = Script::new(&[
        ("region", "Australia"),
        ("currency", "AUD"),
        ("annual_premium", "610"),
    ]);
    let done = run(corpus, &mut script, Topology::Staged).await;
    let p = premium(&done);
    assert_eq!(p["value"], 610.0);
    assert_eq!(p["provenance"]["kind"], "search", "{p}");
    assert_eq!(p["provenance"]["confirmed"]["answer"], "610");

    // Nothing in the corpus for the premium: the question says so, and `found` is null.
    let corpus = docs(&[(
        "insured",
        "Insured pets",
        "About 1.9 million pets are insured, most of them dogs.",
    )]);
    let mut script = Script::new(&[("region", "Australia"), ("currency", "AUD")]);
    let paused = run(corpus, &mut script, Topology::Staged).await;
    let q = paused.pending.clone().unwrap();
    assert_eq!(q["field"], "annual_premium", "{q}");
    assert!(q["found"].is_null(), "{q}");
    assert_eq!(q["searches"], 2, "{q}");
    assert!(
        q["question"]
            .as_str()
            .unwrap()
            .starts_with("Nothing was found for `annual_premium` in the sources (2 searches)."),
        "{q}"
    );
    // The core questions are not about anything searched: they say nothing of the kind.
    let (_, first) = &script.asked[0];
    assert!(!first.starts_with("Nothing was found"), "{first}");
}
