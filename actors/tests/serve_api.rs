//! The HTTP API over a real socket: threads, runs that pause for approval and resume, state,
//! errors that name the problem, bearer auth, metrics.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-serve-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    start_on(&dir).await
}

/// A server storing its threads under `dir` (made here; a restart uses it again).
async fn start_on(dir: &std::path::Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
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

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = client().request(method, url).bearer_auth("secret");
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

const GOAL: &str = "Create a short research brief on whether our support team should adopt retrieval-augmented generation for customer support";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_pauses_for_approval_and_resumes() {
    let base = start().await;
    let (s, ok) = call(reqwest::Method::GET, &format!("{base}/ok"), None).await;
    assert_eq!((s, ok), (200, json!({"ok": true})));
    let (s, thread) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"metadata": {"user": "ann"}})),
    )
    .await;
    assert_eq!(s, 200, "{thread}");
    let id = thread["thread_id"].as_str().unwrap().to_string();
    assert_eq!(thread["status"], "idle");

    let run = json!({"assistant_id": "research", "input": {"input": GOAL, "constraints": {"max_steps": 4, "required_sections": ["cost", "risks"], "require_approval": true}}});
    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(run),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "interrupted");
    assert!(v["__interrupt__"][0]["value"]["plan"].is_array(), "{v}");
    let (_, t) = call(reqwest::Method::GET, &format!("{base}/threads/{id}"), None).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(t["metadata"]["user"], "ann");

    // A resume value that is not one of the three answers is refused; the thread stays paused.
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "maybe"}}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("approve"), "{e}");

    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["final_report"].as_str().unwrap().contains("[rag-"), "{v}");
    let (_, st) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/{id}/state"),
        None,
    )
    .await;
    assert_eq!(st["values"]["status"], "ok");
    assert_eq!(st["next"], json!([]));

    // Resuming a thread that is not paused is a clear 400.
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("not interrupted"),
        "{e}"
    );

    let (_, found) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/search"),
        Some(json!({"limit": 10})),
    )
    .await;
    assert!(found
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["thread_id"] == id.as_str()));
    let (_, metrics) = call(reqwest::Method::GET, &format!("{base}/metrics"), None).await;
    let m = metrics.as_str().unwrap();
    assert!(
        m.contains("planwright_runs_total{status=\"interrupted\"} 1"),
        "{m}"
    );
    let rss: f64 = m
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .expect("the process's memory")
        .parse()
        .unwrap();
    assert!(rss > 1e6, "{rss}");
    assert!(m.contains("process_cpu_seconds_total "), "{m}");
    assert!(
        m.contains("planwright_node_executions_total{graph=\"research\",node=\"create_plan\"}"),
        "{m}"
    );
    let (s, _) = call(
        reqwest::Method::DELETE,
        &format!("{base}/threads/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _) = call(reqwest::Method::GET, &format!("{base}/threads/{id}"), None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_that_name_the_problem() {
    let base = start().await;
    // (`/ok` is open to health probes: actors/tests/serve_ok.rs.)
    let (s, e) = client()
        .get(format!("{base}/assistants/research"))
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(s, 401);
    assert!(e.text().await.unwrap().contains("Bearer"));
    let (_, t) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(t["thread_id"], "t1");
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    for (body, status, needle) in [
        (
            json!({"assistant_id": "chess", "input": {}}),
            404,
            "unknown assistant `chess`",
        ),
        (
            json!({"assistant_id": "research", "input": {"goal": 3}}),
            400,
            "malformed research input",
        ),
        (
            json!({"assistant_id": "research", "input": {"input": "   "}}),
            400,
            "goal",
        ),
        (json!({"assistant_id": "research"}), 400, "needs `input`"),
        (
            json!({"assistant_id": "research", "input": {"input": GOAL}, "multitask_strategy": "sideways"}),
            400,
            "multitask_strategy",
        ),
    ] {
        let (s, e) = call(
            reqwest::Method::POST,
            &format!("{base}/threads/t1/runs/wait"),
            Some(body),
        )
        .await;
        assert_eq!(s, status, "{e}");
        assert!(
            e["detail"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains(needle),
            "{e}"
        );
    }
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/nope/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let big = "x".repeat(3 * 1024 * 1024);
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"metadata": {"blob": big}})),
    )
    .await;
    assert_eq!(s, 413, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("too large"), "{e}");
    let resp = client()
        .post(format!("{base}/threads"))
        .bearer_auth("secret")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().await.unwrap().contains("malformed JSON"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_runs_can_be_read_and_history_lists_checkpoints() {
    let base = start().await;
    call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "bg"})),
    )
    .await;
    let (s, run) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["thread_id"], "bg");
    let mut status = Value::Null;
    for _ in 0..200 {
        let (_, r) = call(
            reqwest::Method::GET,
            &format!("{base}/threads/bg/runs/{run_id}"),
            None,
        )
        .await;
        status = r["status"].clone();
        if status != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, "success");
    let (s, _) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/runs/{run_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, 204, "cancelling a finished run is a no-op");
    let (s, e) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/bg/runs/999999"),
        None,
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let (s, hist) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/history"),
        Some(json!({"limit": 3})),
    )
    .await;
    assert_eq!(s, 200, "{hist}");
    let hist = hist.as_array().unwrap();
    assert_eq!(hist.len(), 3);
    assert_eq!(hist[0]["values"]["status"], "ok");
    assert!(
        hist[0]["checkpoint"]["checkpoint_id"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > hist[1]["checkpoint"]["checkpoint_id"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
}

fn fixture(name: &str, part: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../fixtures/field/{name}.{part}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-6 * want.abs().max(1.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_thread_asks_each_question_as_an_interrupt_and_resumes_to_its_targets() {
    let base = start().await;
    let (s, thread) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "dental-1", "metadata": {"user": "ann"}})),
    )
    .await;
    assert_eq!(s, 200, "{thread}");
    let url = format!("{base}/threads/dental-1/runs/wait");
    let input = json!({
        "schema": fixture("dental", "schema"),
        "corpus": fixture("dental", "corpus"),
        "goal": "Size the dental practice software market",
    });
    let (s, mut v) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "acquire", "input": input})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    // The first question is the core field `region`, as an interrupt and as the pending question.
    assert_eq!(v["status"], "interrupted", "{v}");
    assert_eq!(v["__interrupt__"][0]["value"]["field"], "region", "{v}");
    assert_eq!(v["pending_question"]["field"], "region", "{v}");
    assert!(v["__interrupt__"][0]["value"]["question"]
        .as_str()
        .unwrap()
        .contains("region"));
    assert_eq!(v["thread_id"], "dental-1");
    let (_, t) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/dental-1"),
        None,
    )
    .await;
    assert_eq!(t["status"], "interrupted", "{t}");
    assert_eq!(t["metadata"]["assistant_id"], "acquire", "{t}");
    assert_eq!(t["metadata"]["user"], "ann", "{t}");
    assert_eq!(t["values"]["pending_question"]["field"], "region", "{t}");
    let (_, st) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/dental-1/state"),
        None,
    )
    .await;
    assert_eq!(st["next"], json!(["ask_user"]), "{st}");
    assert_eq!(st["interrupts"][0]["value"]["field"], "region", "{st}");

    // The thread belongs to `acquire` now: a research run on it is refused.
    let (s, e) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("belongs to assistant `acquire`"),
        "{e}"
    );
    // An answer must be text.
    let (s, e) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "acquire", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("must be text"),
        "{e}"
    );

    // Answer every question: an unusable answer first for the share, which is asked again.
    let mut asked = Vec::new();
    let mut unusable_given = false;
    while v["status"] == "interrupted" {
        assert!(asked.len() < 10, "too many questions: {asked:?}");
        let field = v["__interrupt__"][0]["value"]["field"]
            .as_str()
            .unwrap()
            .to_string();
        let answer = match field.as_str() {
            "region" => "Nordland",
            "currency" => "EUR",
            "obtainable_share" if !unusable_given => {
                unusable_given = true;
                "a lot"
            }
            "obtainable_share" => {
                assert!(
                    v["pending_question"]["question"]
                        .as_str()
                        .unwrap()
                        .contains("could not be used"),
                    "{v}"
                );
                "5%"
            }
            other => panic!("unexpected question about `{other}`: {v}"),
        };
        asked.push(field);
        let (s, next) = call(
            reqwest::Method::POST,
            &url,
            Some(json!({"assistant_id": "acquire", "command": {"resume": answer}})),
        )
        .await;
        assert_eq!(s, 200, "{next}");
        v = next;
    }
    assert_eq!(
        asked,
        ["region", "currency", "obtainable_share", "obtainable_share"]
    );
    // The same keys as `acquire --json`.
    assert_eq!(v["status"], "ok", "{v}");
    for key in [
        "targets",
        "fields",
        "decisions",
        "iterations",
        "reflections",
        "thread_id",
    ] {
        assert!(v.get(key).is_some(), "values lack `{key}`: {v}");
    }
    assert!(v.get("__interrupt__").is_none());
    // clinics = 5.2M × 62 / 100k / 2.5 = 1,289.6; tam = clinics × 1,440; sam = tam × 0.38; som = sam × 0.05.
    let tam = 5_200_000.0 * 62.0 / 100_000.0 / 2.5 * 1_440.0;
    assert!(close(&v["targets"]["tam"], tam), "{v}");
    assert!(close(&v["targets"]["sam"], tam * 0.38), "{v}");
    assert!(close(&v["targets"]["som"], tam * 0.38 * 0.05), "{v}");
    assert_eq!(v["fields"]["region"]["value"], "Nordland");
    assert_eq!(v["fields"]["region"]["provenance"]["kind"], "user");
    assert_eq!(v["fields"]["annual_price"]["provenance"]["kind"], "search");

    let (_, t) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/dental-1"),
        None,
    )
    .await;
    assert_eq!(t["status"], "idle", "{t}");
    assert_eq!(t["values"]["status"], "ok", "{t}");
    // A finished acquire thread keeps its result; nothing more to resume.
    let (s, e) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "acquire", "command": {"resume": "EUR"}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("not interrupted"),
        "{e}"
    );
    let (s, e) = call(
        reqwest::Method::POST,
        &url,
        Some(json!({"assistant_id": "acquire", "input": {"schema": fixture("dental", "schema")}})),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("new thread"), "{e}");

    let (s, hist) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/dental-1/history"),
        Some(json!({"limit": 2})),
    )
    .await;
    assert_eq!(s, 200, "{hist}");
    assert_eq!(hist[0]["values"]["status"], "ok", "{hist}");
    assert!(close(&hist[0]["values"]["targets"]["tam"], tam), "{hist}");
    let (_, metrics) = call(reqwest::Method::GET, &format!("{base}/metrics"), None).await;
    let m = metrics.as_str().unwrap();
    assert!(
        m.contains("planwright_node_executions_total{graph=\"acquire\",node=\"observe_user\"} 4"),
        "{m}"
    );
    assert!(
        m.contains("planwright_runs_total{status=\"interrupted\"} 4"),
        "{m}"
    );
    let (s, _) = call(
        reqwest::Method::DELETE,
        &format!("{base}/threads/dental-1"),
        None,
    )
    .await;
    assert_eq!(s, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_run_streams_over_the_bundled_corpus_and_research_threads_are_unaffected() {
    let base = start().await;
    for id in ["acq", "res"] {
        call(
            reqwest::Method::POST,
            &format!("{base}/threads"),
            Some(json!({"thread_id": id})),
        )
        .await;
    }
    // No corpus: the bundled one. The stream ends with the paused values.
    let text = client()
        .post(format!("{base}/threads/acq/runs/stream"))
        .bearer_auth("secret")
        .json(
            &json!({"assistant_id": "acquire", "input": {"schema": fixture("bikes", "schema")},
                      "stream_mode": ["values", "updates"]}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<(&str, Value)> = text
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name, serde_json::from_str(data).ok()?))
        })
        .collect();
    assert_eq!(events[0].0, "metadata", "{text}");
    assert!(
        events
            .iter()
            .any(|(n, d)| *n == "updates" && d.get("tick").is_some()),
        "{text}"
    );
    let (last, v) = events.last().unwrap();
    assert_eq!(*last, "values", "{text}");
    assert_eq!(v["status"], "interrupted", "{v}");
    assert_eq!(v["__interrupt__"][0]["value"]["field"], "region", "{v}");
    // A research thread next to it runs as before.
    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/res/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    let (_, found) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/search"),
        Some(json!({"limit": 10})),
    )
    .await;
    let by_id = |id: &str| {
        found
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["thread_id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id("acq")["status"], "interrupted");
    assert_eq!(
        by_id("acq")["values"]["pending_question"]["field"],
        "region"
    );
    assert_eq!(by_id("res")["status"], "idle");
    assert_eq!(by_id("res")["values"]["status"], "ok");
    assert_eq!(by_id("res")["metadata"]["assistant_id"], "research");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_acquire_inputs_get_400s_that_name_the_problem_and_bind_nothing() {
    let base = start().await;
    call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "a1"})),
    )
    .await;
    let mut unknown_field = fixture("dental", "schema");
    unknown_field["fields"][6]["formula"] = json!("clinics * price");
    let mut cycle = fixture("dental", "schema");
    cycle["fields"][6]["formula"] = json!("som * 2");
    let dup =
        json!([{"id": "d", "title": "t", "text": "x"}, {"id": "d", "title": "t", "text": "y"}]);
    for (input, needle) in [
        (
            json!({"schema": unknown_field}),
            "schema: formula of `tam` names unknown field `price`",
        ),
        (
            json!({"schema": cycle}),
            "derived fields form a cycle: sam -> tam -> som -> sam",
        ),
        (
            json!({"schema": {"name": "x", "targets": [], "fields": []}}),
            "the schema has no target",
        ),
        (json!({"schema": {"fields": 3}}), "malformed schema"),
        (
            json!({"goal": "x"}),
            "malformed acquire input: missing field `schema`",
        ),
        (
            json!({"schema": fixture("dental", "schema"), "corpus": dup}),
            "corpus: document id `d` appears twice",
        ),
        (
            json!({"schema": fixture("dental", "schema"), "corpus": "docs"}),
            "corpus: expected a json array",
        ),
    ] {
        let (s, e) = call(
            reqwest::Method::POST,
            &format!("{base}/threads/a1/runs/wait"),
            Some(json!({"assistant_id": "acquire", "input": input})),
        )
        .await;
        assert_eq!(s, 400, "{e}");
        assert!(
            e["detail"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains(&needle.to_lowercase()),
            "{e} lacks {needle}"
        );
    }
    // Resuming a thread that never ran is a clear 400.
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/a1/runs/wait"),
        Some(json!({"assistant_id": "acquire", "command": {"resume": "Nordland"}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("not interrupted"),
        "{e}"
    );
    // Nothing ran and nothing was bound: the thread can still run either assistant.
    let (_, t) = call(reqwest::Method::GET, &format!("{base}/threads/a1"), None).await;
    assert_eq!(t["status"], "idle", "{t}");
    assert_eq!(t["values"], Value::Null, "{t}");
    assert!(t["metadata"].get("assistant_id").is_none(), "{t}");
    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/a1/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!((s, &v["status"]), (200, &json!("ok")), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_remembers_which_assistant_a_thread_belongs_to() {
    let dir = std::env::temp_dir().join(format!(
        "planwright-serve-restart-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let first = start_on(&dir).await;
    call(
        reqwest::Method::POST,
        &format!("{first}/threads"),
        Some(json!({"thread_id": "c1"})),
    )
    .await;
    let input =
        json!({"schema": fixture("coffee", "schema"), "corpus": fixture("coffee", "corpus")});
    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{first}/threads/c1/runs/wait"),
        Some(json!({"assistant_id": "acquire", "input": input})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["pending_question"]["field"], "region", "{v}");

    // A second server over the same storage (as after a restart) reads and resumes it as acquire.
    let second = start_on(&dir).await;
    let (_, t) = call(reqwest::Method::GET, &format!("{second}/threads/c1"), None).await;
    assert_eq!(t["status"], "interrupted", "{t}");
    assert_eq!(t["values"]["pending_question"]["field"], "region", "{t}");
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{second}/threads/c1/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    let mut v = Value::Null;
    for answer in ["Metro East", "USD"] {
        let (s, next) = call(
            reqwest::Method::POST,
            &format!("{second}/threads/c1/runs/wait"),
            Some(json!({"assistant_id": "acquire", "command": {"resume": answer}})),
        )
        .await;
        assert_eq!(s, 200, "{next}");
        v = next;
    }
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["targets"]["revenue"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["fields"]["currency"]["value"], "USD", "{v}");
}
