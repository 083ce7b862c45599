//! The acquire assistant over a real socket answers numbers as `acquire --json` does: rounded to
//! the field's precision (money to cents), the exact values in `exact`, and the targets in the
//! schema's order with their unit in `target_list` (the dental fixture, its questions answered
//! from its answers file).

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-acquire-rounding-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
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

async fn post(url: &str, body: Value) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn fixture(part: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../fixtures/field/dental.{part}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_rounded_targets_in_schema_order_with_exact_values() {
    let base = start().await;
    let answers = fixture("answers");
    let (s, t) = post(&format!("{base}/threads"), json!({"thread_id": "dental-1"})).await;
    assert_eq!(s, 200, "{t}");
    let url = format!("{base}/threads/dental-1/runs/wait");
    let input = json!({"schema": fixture("schema"), "corpus": fixture("corpus")});
    let (s, mut text) = post(&url, json!({"assistant_id": "acquire", "input": input})).await;
    assert_eq!(s, 200, "{text}");
    for _ in 0..10 {
        let v: Value = serde_json::from_str(&text).unwrap();
        let Some(field) = v["__interrupt__"][0]["value"]["field"].as_str() else {
            break;
        };
        let answer = answers[field].clone();
        assert!(answer.is_string(), "no answer for {field}: {v}");
        let (s, next) = post(
            &url,
            json!({"assistant_id": "acquire", "command": {"resume": answer}}),
        )
        .await;
        assert_eq!(s, 200, "{next}");
        text = next;
    }
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["targets"]["sam"], 705669.12, "{v}");
    assert_eq!(v["targets"]["tam"], 1857024.0);
    assert_eq!(v["targets"]["som"], 35283.46);
    // The exact values, as the server wrote them.
    assert!(text.contains("705669.1199999999") && text.contains("1857023.9999999998"));
    let mut shown = v.clone();
    shown.as_object_mut().unwrap().remove("exact");
    assert!(!shown.to_string().contains("99999"), "{shown}");
    let order: Vec<(&str, &str)> = v["target_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["field"].as_str().unwrap(), t["unit"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            ("tam", "EUR/year"),
            ("sam", "EUR/year"),
            ("som", "EUR/year")
        ]
    );
}
