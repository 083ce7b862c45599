//! The simulator and the scripted model, on tokio's paused clock.

use planwright_actors::model::{
    ask, ChatMessage, ChatModel, ChatRequest, ModelError, ModelStats, Responder, ScriptedModel,
    SimConfig, SimulatedModel,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

fn request(call: &str) -> ChatRequest {
    ChatRequest {
        call: call.into(),
        messages: vec![ChatMessage::user("n?")],
        schema: std::sync::Arc::new(
            json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}),
        ),
        input: json!({"x": 20}).to_string(),
        typed: None,
        idempotency_key: None,
    }
}

fn responders() -> HashMap<String, Responder> {
    let double: Responder = Arc::new(|req: &ChatRequest| {
        let input = req.input_value().unwrap_or_default();
        Ok(json!({"n": input["x"].as_i64().unwrap_or(0) * 2}).to_string())
    });
    HashMap::from([("double".to_string(), double)])
}

#[derive(serde::Deserialize, Debug)]
struct N {
    n: i64,
}

async fn latencies(cfg: &str, calls: usize) -> (Vec<Duration>, Vec<Result<String, String>>) {
    let sim = SimulatedModel::new(cfg.parse::<SimConfig>().unwrap(), responders());
    let mut lat = Vec::new();
    let mut out = Vec::new();
    for _ in 0..calls {
        let t0 = tokio::time::Instant::now();
        let r = sim.chat(&request("double")).await;
        lat.push(t0.elapsed());
        out.push(r.map(|r| r.content).map_err(|e| e.kind().to_string()));
    }
    (lat, out)
}

#[tokio::test(start_paused = true)]
async fn latency_follows_the_configured_quantiles_and_answers_come_from_the_responder() {
    let (mut lat, out) = latencies("sim:p50=200ms,p99=900ms,seed=3", 2000).await;
    assert!(out.iter().all(|r| r.as_deref() == Ok("{\"n\":40}")));
    lat.sort();
    let p50 = lat[1000].as_millis();
    let p99 = lat[1980].as_millis();
    assert!((170..=230).contains(&p50), "p50 {p50} ms");
    assert!((700..=1150).contains(&p99), "p99 {p99} ms");
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_repeats_and_faults_come_at_the_configured_rates() {
    let cfg = "sim:p50=50ms,p99=200ms,errors=0.1,malformed=0.05,seed=11";
    let a = latencies(cfg, 1000).await;
    let b = latencies(cfg, 1000).await;
    assert_eq!(a, b, "seeded: identical runs");
    let errors = a.1.iter().filter(|r| r.is_err()).count();
    let malformed =
        a.1.iter()
            .filter(|r| matches!(r, Ok(c) if c.contains("malformed")))
            .count();
    assert!((60..=140).contains(&errors), "{errors} errors of 1000");
    assert!(
        (25..=80).contains(&malformed),
        "{malformed} malformed of 1000"
    );
    let kinds: std::collections::BTreeSet<&str> =
        a.1.iter()
            .filter_map(|r| r.as_ref().err())
            .map(String::as_str)
            .collect();
    assert_eq!(
        kinds,
        ["rate_limited", "server", "timeout"].into_iter().collect()
    );
}

#[tokio::test(start_paused = true)]
async fn ask_repairs_a_malformed_simulated_answer() {
    // malformed=1 would never recover; 0.5 with this seed gives a bad first answer and a good retry
    // at least once in 20 calls.
    let sim = SimulatedModel::new(
        "sim:p50=1ms,p99=2ms,malformed=0.5,seed=5".parse().unwrap(),
        responders(),
    );
    let mut repaired = 0;
    let mut failed = 0;
    for _ in 0..20 {
        match ask::<N>(&sim, request("double")).await {
            Ok((v, _)) => {
                assert_eq!(v.n, 40);
                repaired += 1;
            }
            Err(ModelError::Malformed { .. }) => failed += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(
        repaired > 10 && failed > 0,
        "repaired {repaired}, failed {failed}"
    );
}

#[tokio::test]
async fn a_missing_responder_is_a_configuration_error() {
    let sim = SimulatedModel::new("sim:p50=0ms,p99=0ms".parse().unwrap(), responders());
    let err = sim.chat(&request("triple")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("no offline responder for `triple`"),
        "{err}"
    );
}

#[tokio::test]
async fn scripted_answers_come_in_order_and_run_out_clearly() {
    let s = ScriptedModel::new();
    s.push_json("double", json!({"n": 1}))
        .push("double", Err(ModelError::Timeout(Duration::from_secs(1))))
        .push_json("double", json!({"n": 3}));
    let stats = ModelStats::default();
    let first = ask::<N>(&s, request("double")).await;
    stats.record("double", first.as_ref().map(|(_, u)| *u));
    assert_eq!(first.unwrap().0.n, 1);
    let second = ask::<N>(&s, request("double")).await;
    stats.record("double", second.as_ref().map(|(_, u)| *u));
    assert!(matches!(second, Err(ModelError::Timeout(_))));
    assert_eq!(ask::<N>(&s, request("double")).await.unwrap().0.n, 3);
    let err = ask::<N>(&s, request("double")).await.unwrap_err();
    assert!(
        err.to_string().contains("no answer left for `double`"),
        "{err}"
    );
    assert_eq!(s.requests().len(), 4);
    let snap = stats.snapshot();
    assert_eq!(snap[0].calls, 2);
    assert_eq!(snap[0].errors.get("timeout"), Some(&1));
    assert!(snap[0].prompt_tokens > 0);
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct X {
    x: i64,
}

/// The simulator's offline responder reads the request value a policy shares and parses `input`
/// only without one; a policy shares its value with the simulator and not with other models.
#[tokio::test(start_paused = true)]
async fn a_responder_reads_the_shared_request_value_and_parses_input_without_one() {
    use planwright_actors::model::policy::{ask_policy, responder};
    use planwright_actors::model::TypedInput;
    let fresh = || responder(|q: &X| Ok(json!({"n": q.x * 2})));
    // The value wins over the text (they never differ in use; here they do, to tell them apart:
    // a fresh responder each time, since one remembers its answers by `input`).
    let mut req = request("double");
    req.typed = Some(TypedInput::new(X { x: 4 }));
    assert_eq!(fresh()(&req).unwrap(), "{\"n\":8}");
    // A value of another type, or none: `input` is parsed.
    req.typed = Some(TypedInput::new("not an X".to_string()));
    assert_eq!(fresh()(&req).unwrap(), "{\"n\":40}");
    req.typed = None;
    assert_eq!(fresh()(&req).unwrap(), "{\"n\":40}");
    let double = fresh();
    // Through a policy call: the simulator gets the value, a scripted model only the text.
    let sim = SimulatedModel::new(
        "sim:p50=1ms,p99=2ms,errors=0,seed=1"
            .parse::<SimConfig>()
            .unwrap(),
        HashMap::from([("double".to_string(), double)]),
    );
    assert!(sim.takes_typed_input());
    let schema = Arc::new(json!({"type": "object", "required": ["n"]}));
    let reply = ask_policy::<X, N>(
        &sim,
        "sys",
        "double",
        "Double x.",
        &X { x: 21 },
        schema.clone(),
    )
    .await
    .unwrap();
    assert_eq!(reply.value.n, 42);
    assert!(!ScriptedModel::new().takes_typed_input());
    let plain = SeesTyped::default();
    ask_policy::<X, N>(&plain, "sys", "double", "Double x.", &X { x: 21 }, schema)
        .await
        .unwrap();
    assert_eq!(*plain.saw.lock().unwrap(), Some(false));
}

/// A responder answers a repeated request (the same `input`) from memory, computes a new one, and
/// does not remember a failed answer.
#[test]
fn a_responder_remembers_answers_by_request() {
    use planwright_actors::model::policy::{responder, REMEMBERED_BYTES};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let computed = Arc::new(AtomicUsize::new(0));
    let seen = computed.clone();
    let double = responder(move |q: &X| {
        seen.fetch_add(1, Ordering::Relaxed);
        if q.x < 0 {
            Err(format!("{} is negative", q.x))
        } else {
            Ok(json!({"n": q.x * 2}))
        }
    });
    let ask = |x: i64| {
        let mut req = request("double");
        req.input = json!({ "x": x }).to_string();
        double(&req).map_err(|e| e.to_string())
    };
    // Seen once: computed each time; seen twice: remembered from then on.
    assert_eq!(ask(20).unwrap(), "{\"n\":40}");
    assert_eq!(ask(20).unwrap(), "{\"n\":40}");
    assert_eq!(computed.load(Ordering::Relaxed), 2);
    assert_eq!(ask(20).unwrap(), "{\"n\":40}");
    assert_eq!(computed.load(Ordering::Relaxed), 2);
    assert_eq!(ask(21).unwrap(), "{\"n\":42}");
    assert_eq!(ask(21).unwrap(), "{\"n\":42}");
    assert_eq!(computed.load(Ordering::Relaxed), 4);
    assert!(ask(-1).unwrap_err().contains("-1 is negative"));
    assert!(ask(-1).unwrap_err().contains("-1 is negative"));
    assert!(ask(-1).unwrap_err().contains("-1 is negative"));
    assert_eq!(computed.load(Ordering::Relaxed), 7);
    // Bounded: past the limit it starts again, and answers stay right.
    // Every request and answer here takes at least 14 bytes (`{"x":0}` and `{"n":0}`).
    let many = REMEMBERED_BYTES / 14 + 10;
    for _ in 0..2 {
        for x in 0..many as i64 {
            assert_eq!(ask(x).unwrap(), format!("{{\"n\":{}}}", x * 2));
        }
    }
    let before = computed.load(Ordering::Relaxed);
    assert_eq!(ask(0).unwrap(), "{\"n\":0}");
    assert_eq!(
        computed.load(Ordering::Relaxed),
        before + 1,
        "forgotten past the bound"
    );
    assert_eq!(
        ask(many as i64 - 1).unwrap(),
        format!("{{\"n\":{}}}", (many - 1) * 2)
    );
    assert_eq!(
        computed.load(Ordering::Relaxed),
        before + 1,
        "the newest kept"
    );
}

/// A model that does not take typed input and notes whether a request carried it anyway.
#[derive(Default)]
struct SeesTyped {
    saw: std::sync::Mutex<Option<bool>>,
}

#[async_trait::async_trait]
impl ChatModel for SeesTyped {
    fn name(&self) -> &str {
        "sees-typed"
    }

    async fn chat(
        &self,
        req: &ChatRequest,
    ) -> Result<planwright_actors::model::ChatReply, ModelError> {
        *self.saw.lock().unwrap() = Some(req.typed.is_some());
        Ok(planwright_actors::model::ChatReply {
            content: json!({"n": 1}).to_string(),
            usage: Default::default(),
        })
    }
}
