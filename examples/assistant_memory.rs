//! A small assistant that remembers its users across conversations: the graph API features an
//! embedder builds with — a typed runtime context (who is asking, which model to use), the store
//! (memory shared across threads), a node cache, a command node that decides where to go, a
//! subgraph (billing questions go to a graph of their own), and token streaming.
//!
//! Run: `cargo run -p planwright-actors --example assistant_memory [STORE_URL]`
//! (`STORE_URL` defaults to `memory:`; try `sqlite:/tmp/assistant.sqlite` and run it twice).

use planwright::cache::CachePolicy;
use planwright::graph::{StateGraph, END, START};
use planwright::store::{PutOptions, SearchQuery, Store};
use planwright::Command;
use planwright::{Engine, NodeContext, NodeError, RunEvent, RunOptions, ThreadId};
use planwright_actors::model::{
    ChatMessage, ChatModel, ChatRequest, Responder, SimConfig, SimulatedModel,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

planwright::state! {
    /// One conversation turn.
    pub struct Turn => TurnUpdate {
        replace question: String,
        replace topic: String,
        replace visits: u64,
        replace answer: String,
    }
}

/// What every run carries and no checkpoint keeps: who asks, and the model client to use.
struct Caller {
    user: String,
    model: Arc<dyn ChatModel>,
}

planwright::state! {
    /// The billing subgraph's own state.
    pub struct Quote => QuoteUpdate {
        replace plan: String,
        replace monthly_eur: u64,
        replace text: String,
    }
}

/// Billing questions: `find_plan` → `price`. A graph of its own, run as one node of the
/// assistant (its checkpoints live under the conversation's thread).
fn billing() -> StateGraph<Quote> {
    StateGraph::new("billing")
        .add_sync_node("find_plan", |q: &Quote, _: &NodeContext| {
            let monthly = match q.plan.as_str() {
                "pro" => 49,
                "team" => 199,
                _ => 0,
            };
            Ok(QuoteUpdate::default().monthly_eur(monthly))
        })
        .add_sync_node("price", |q: &Quote, _: &NodeContext| {
            Ok(QuoteUpdate::default().text(format!(
                "The {} plan costs {} EUR a month.",
                q.plan, q.monthly_eur
            )))
        })
        .add_edge(START, "find_plan")
        .add_edge("find_plan", "price")
        .add_edge("price", END)
}

/// `classify` (cached: the same question is classified once for everybody), `remember` (the
/// user's visits and topics, in the store), `route` (a command node: billing questions go to the
/// `billing` subgraph, the rest to `answer`), `answer` (streams the model's answer).
fn graph() -> Result<StateGraph<Turn>, planwright::GraphError> {
    Ok(graph_with(billing().compile()?))
}

fn graph_with(billing: planwright::CompiledGraph<Quote>) -> StateGraph<Turn> {
    StateGraph::new("assistant")
        .add_sync_node("classify", |s: &Turn, _: &NodeContext| {
            let topic = if s.question.contains("price") {
                "billing"
            } else {
                "product"
            };
            Ok(TurnUpdate::default().topic(topic.into()))
        })
        .cache_policy(
            "classify",
            CachePolicy::keyed(|s: &Turn, _| s.question.clone()).ttl(Duration::from_secs(3600)),
        )
        .add_node("remember", |s: Arc<Turn>, ctx: NodeContext| async move {
            let user = &ctx.require_context::<Caller>()?.user;
            let store = ctx.store()?;
            let ns = vec!["users".to_string(), user.clone()];
            let visits = match store
                .get(&ns, "profile")
                .await
                .map_err(NodeError::retryable)?
            {
                Some(item) => item.value["visits"].as_u64().unwrap_or(0) + 1,
                None => 1,
            };
            let profile = json!({"visits": visits, "last_topic": s.topic});
            store
                .put(
                    &ns,
                    "profile",
                    profile.as_object().cloned().unwrap_or_default(),
                    PutOptions::default(),
                )
                .await
                .map_err(NodeError::retryable)?;
            Ok(TurnUpdate::default().visits(visits))
        })
        .add_node("answer", |s: Arc<Turn>, ctx: NodeContext| async move {
            let caller = ctx.require_context::<Caller>()?;
            let req = ChatRequest {
                call: "answer".into(),
                messages: vec![ChatMessage::user(s.question.clone())],
                schema: std::sync::Arc::new(json!({"type": "object"})),
                input: json!({"topic": s.topic, "visits": s.visits}).to_string(),
                typed: None,
                idempotency_key: None,
            };
            let id = format!("answer-{}", ctx.task_id());
            let stream = |chunk: &str| ctx.stream_chunk(&id, chunk);
            let reply = caller
                .model
                .chat_streaming(&req, &stream)
                .await
                .map_err(NodeError::retryable)?;
            Ok(TurnUpdate::default().answer(reply.content))
        })
        .add_sync_command_node(
            "route",
            ["billing", "answer"],
            |s: &Turn, _: &NodeContext| {
                let next = if s.topic == "billing" {
                    "billing"
                } else {
                    "answer"
                };
                Ok(Command::goto(TurnUpdate::default(), next))
            },
        )
        .add_subgraph(
            "billing",
            billing,
            |t: &Turn| {
                let plan = if t.question.contains("team") {
                    "team"
                } else {
                    "pro"
                };
                QuoteUpdate::default().plan(plan.into())
            },
            |q: &Quote| TurnUpdate::default().answer(q.text.clone()),
        )
        .add_edge(START, "classify")
        .add_edge("classify", "remember")
        .add_edge("remember", "route")
        .add_edge("billing", END)
        .add_edge("answer", END)
}

fn model() -> Arc<dyn ChatModel> {
    let answer: Responder = Arc::new(|req: &ChatRequest| {
        let input = req.input_value().unwrap_or_default();
        let visits = input["visits"].as_u64().unwrap_or(0);
        let greeting = if visits > 1 {
            "Welcome back!"
        } else {
            "Hello!"
        };
        Ok(
            json!({"text": format!("{greeting} Here is what I know about {}.", input["topic"])})
                .to_string(),
        )
    });
    let cfg: SimConfig = "sim:p50=20ms,seed=7"
        .parse()
        .expect("a valid simulator spec");
    Arc::new(SimulatedModel::new(
        cfg,
        HashMap::from([("answer".to_string(), answer)]),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".into());
    let store: Arc<dyn Store> = planwright::store::connect(&url).await?;
    let engine = Engine::builder(graph()?.compile()?)
        .store(store.clone())
        .build()
        .await;
    let model = model();
    let turns = [
        ("ann", "What is the price of the pro plan?"),
        ("bo", "What is the price of the pro plan?"),
        ("ann", "How do exports work?"),
    ];
    for (i, (user, question)) in turns.into_iter().enumerate() {
        let caller = Caller {
            user: user.into(),
            model: model.clone(),
        };
        let opts = RunOptions::streaming().context(caller);
        let input = TurnUpdate::default().question(question.into());
        let mut handle = engine
            .start(ThreadId::new(format!("conversation-{i}")), input, opts)
            .await?;
        let mut events = handle.events.take().ok_or("a streaming run has events")?;
        print!("{user}> {question}\nassistant> ");
        while let Some(ev) = events.recv().await {
            if let RunEvent::Message { chunk, .. } = ev {
                print!("{chunk}");
            }
        }
        let out = handle.wait().await?;
        if out.state.topic == "billing" {
            print!("{}", out.state.answer);
        }
        println!(
            "\n  (visit {} of {user}, topic {})",
            out.state.visits, out.state.topic
        );
    }
    let users = store.search(&SearchQuery::under(["users"])).await?;
    for item in users {
        println!(
            "store {:?}/{} = {}",
            item.namespace,
            item.key,
            serde_json::Value::Object(item.value)
        );
    }
    let classify = engine
        .node_stats()
        .into_iter()
        .find(|s| s.node == "classify");
    if let Some(s) = classify {
        println!(
            "classify cache: {} hits, {} misses",
            s.cache_hits, s.cache_misses
        );
    }
    engine.shutdown().await;
    Ok(())
}
