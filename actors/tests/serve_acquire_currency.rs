//! The `acquire` assistant over HTTP (a real socket, a SQLite file) on the pet-insurance
//! schema: in AUD it finishes from the corpus, reading the note's `$` as Australian dollars; in
//! USD it pauses on a question whose interrupt payload carries what was found (the source, the
//! quote, the value as read, the rate that is missing), the same payload the thread's state and
//! `pending_question` show, and a one-word answer finishes it; a rate given in the input converts
//! without a question; a question about a field nothing was found for says so.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

const NOTE: &str = "Australian pet owners paid on average $610 per year to insure a dog or cat.";

async fn start(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "serve-acquire-currency-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("secret".into()),
        model: "offline".into(),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .bearer_auth("secret");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn fixture(part: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../fixtures/field/petinsurance.{part}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-9 * want.abs().max(1.0))
}

/// Starts an acquire run on a new thread `id` and answers the core questions (region, currency);
/// returns the first result that is not a core question.
async fn through_the_core_questions(base: &str, id: &str, input: Value, currency: &str) -> Value {
    let (s, t) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": id})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let url = format!("{base}/threads/{id}/runs/wait");
    let (s, mut v) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "acquire", "input": input})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    for _ in 0..3 {
        let field = v["__interrupt__"][0]["value"]["field"].clone();
        let answer = match field.as_str() {
            Some("region") => "Australia",
            Some("currency") => currency,
            _ => break,
        };
        // The core questions are not about anything found.
        assert!(v["__interrupt__"][0]["value"]["found"].is_null(), "{v}");
        let (s, next) = call(
            reqwest::Method::POST,
            &url,
            Some(json!({"assistant_id": "acquire", "command": {"resume": answer}})),
        )
        .await;
        assert_eq!(s, 200, "{next}");
        v = next;
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_aud_the_pet_insurance_schema_finishes_from_the_corpus() {
    let base = start("aud").await;
    let input = json!({"schema": fixture("schema"), "corpus": fixture("corpus")});
    let v = through_the_core_questions(&base, "pets-aud", input, "AUD").await;
    assert_eq!(v["status"], "ok", "{v}");
    let p = &v["fields"]["annual_premium"];
    assert_eq!(p["value"], 610.0, "{p}");
    let c = &p["provenance"]["conversions"][0];
    assert_eq!(c["kind"], "currency-by-context", "{p}");
    assert_eq!(
        (&c["currency"], &c["words"]),
        (&json!("AUD"), &json!("Australian"))
    );
    assert!(close(&v["targets"]["tam"], 1.9e6 * 610.0), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_usd_the_question_payload_carries_the_quote_and_one_word_finishes_it() {
    let base = start("usd").await;
    let input = json!({"schema": fixture("schema"), "corpus": fixture("corpus")});
    let v = through_the_core_questions(&base, "pets-usd", input, "USD").await;
    assert_eq!(v["status"], "interrupted", "{v}");
    assert!(
        v["fields"]["annual_premium"]["value"].is_null(),
        "610 is never stored as USD: {v}"
    );
    let q = &v["__interrupt__"][0]["value"];
    assert_eq!(q["field"], "annual_premium", "{q}");
    assert_eq!(q["found"]["source_id"], "pet-au-premium", "{q}");
    assert_eq!(q["found"]["quote"], NOTE, "{q}");
    assert_eq!(q["found"]["candidates"][0]["value"], 610.0, "{q}");
    assert_eq!(q["found"]["candidates"][0]["span"], "$610 per year", "{q}");
    assert_eq!(
        q["found"]["open"],
        json!({"kind": "rate", "from": "AUD", "to": "USD"})
    );
    let question = q["question"].as_str().unwrap();
    assert!(question.contains(NOTE), "{question}");
    assert!(question.contains("How many USD is 1 AUD?"), "{question}");
    // The thread's values and its state show the same question (what the studio reads).
    assert_eq!(&v["pending_question"], q, "{v}");
    let (_, st) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/pets-usd/state"),
        None,
    )
    .await;
    assert_eq!(st["interrupts"][0]["value"]["found"]["quote"], NOTE, "{st}");

    let (s, done) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/pets-usd/runs/wait"),
        Some(json!({"assistant_id": "acquire", "command": {"resume": "0.65"}})),
    )
    .await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["status"], "ok", "{done}");
    let p = &done["fields"]["annual_premium"];
    assert!(close(&p["value"], 396.5), "{p}");
    assert_eq!(p["provenance"]["kind"], "search");
    assert_eq!(p["provenance"]["conversions"][1]["rate"], 0.65);
    assert_eq!(p["provenance"]["confirmed"]["answer"], "0.65");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_in_the_input_converts_without_a_question() {
    let base = start("rate").await;
    let input = json!({"schema": fixture("schema"), "corpus": fixture("corpus"),
                       "rates": {"AUD/USD": 0.65}});
    let v = through_the_core_questions(&base, "pets-rate", input, "USD").await;
    assert_eq!(v["status"], "ok", "{v}");
    let p = &v["fields"]["annual_premium"];
    assert!(close(&p["value"], 396.5), "{p}");
    assert_eq!(p["provenance"]["conversions"][1]["source"], "user-rates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_a_field_nothing_was_found_for_says_so() {
    let base = start("nothing").await;
    let corpus = json!([{"id": "pet-au-insured", "title": "Insured pets",
                         "text": "About 1.9 million pets are insured in Australia, most of them dogs."}]);
    let input = json!({"schema": fixture("schema"), "corpus": corpus});
    let v = through_the_core_questions(&base, "pets-nothing", input, "AUD").await;
    let q = &v["__interrupt__"][0]["value"];
    assert_eq!(q["field"], "annual_premium", "{v}");
    assert!(q["found"].is_null(), "{q}");
    assert_eq!(q["searches"], 2, "{q}");
    assert!(
        q["question"]
            .as_str()
            .unwrap()
            .starts_with("Nothing was found for `annual_premium` in the sources"),
        "{q}"
    );
}
