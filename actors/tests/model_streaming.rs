//! Token streaming from a node: a model's answer streamed chunk by chunk as `messages` events of a
//! streaming run, through real actors, on tokio's paused clock.

use planwright::graph::{StateGraph, END, START};
use planwright::{Engine, NodeContext, NodeError, RunEvent, RunOptions, ThreadId};
use planwright_actors::model::{
    word_chunks, ChatMessage, ChatModel, ChatRequest, CountedModel, ModelStats, Responder,
    ScriptedModel, SimConfig, SimulatedModel,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

planwright::state! {
    /// The answer a node wrote.
    pub struct Answer => AnswerUpdate {
        replace text: String,
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        call: "write".into(),
        messages: vec![ChatMessage::user("Write a line.")],
        schema: std::sync::Arc::new(json!({"type": "object"})),
        input: "{}".into(),
        typed: None,
        idempotency_key: None,
    }
}

/// One node asking `model` and streaming its answer.
fn graph(model: Arc<dyn ChatModel>) -> StateGraph<Answer> {
    StateGraph::new("writer")
        .add_node("write", move |_s: Arc<Answer>, ctx: NodeContext| {
            let model = model.clone();
            async move {
                let id = format!("msg-{}", ctx.task_id());
                let stream = |chunk: &str| ctx.stream_chunk(&id, chunk);
                let reply = model
                    .chat_streaming(&request(), &stream)
                    .await
                    .map_err(NodeError::retryable)?;
                Ok(AnswerUpdate::default().text(reply.content))
            }
        })
        .add_edge(START, "write")
        .add_edge("write", END)
}

fn simulator() -> Arc<dyn ChatModel> {
    let line: Responder = Arc::new(|_req: &ChatRequest| {
        Ok(json!({"line": "the quick brown fox jumps over the lazy dog"}).to_string())
    });
    let cfg: SimConfig = "sim:p50=50ms,seed=3".parse().unwrap();
    Arc::new(SimulatedModel::new(
        cfg,
        HashMap::from([("write".to_string(), line)]),
    ))
}

#[tokio::test(start_paused = true)]
async fn a_node_streams_a_models_answer_as_message_events() {
    let stats = Arc::new(ModelStats::default());
    let model: Arc<dyn ChatModel> = Arc::new(CountedModel::new(simulator(), stats.clone()));
    let e = Engine::new(graph(model).compile().unwrap()).await;
    let mut h = e
        .start(
            ThreadId::new("t"),
            AnswerUpdate::default(),
            RunOptions::streaming(),
        )
        .await
        .unwrap();
    let mut rx = h.events.take().unwrap();
    let out = h.wait().await.unwrap();
    let mut chunks = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let RunEvent::Message {
            node,
            message_id,
            chunk,
            ..
        } = ev
        {
            assert_eq!(node, "write");
            assert!(message_id.starts_with("msg-"), "{message_id}");
            chunks.push(chunk);
        }
    }
    assert!(chunks.len() > 5, "streamed word by word: {chunks:?}");
    assert_eq!(
        chunks.concat(),
        out.state.text,
        "the chunks make the whole answer"
    );
    assert!(out.state.text.contains("lazy dog"));
    let calls: u64 = stats.snapshot().iter().map(|s| s.calls).sum();
    assert_eq!(calls, 1, "a streamed call is counted once");
}

#[tokio::test]
async fn without_streaming_the_run_gets_no_events_and_the_answer_is_whole() {
    let model = Arc::new(ScriptedModel::new());
    model.push("write", Ok(r#"{"a": 1}"#.to_string()));
    let e = Engine::new(graph(model).compile().unwrap()).await;
    let mut h = e
        .start(
            ThreadId::new("t"),
            AnswerUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert!(h.events.take().is_none());
    assert_eq!(h.wait().await.unwrap().state.text, r#"{"a": 1}"#);
}

#[test]
fn word_chunks_concatenate_back_to_the_text() {
    for text in ["", "one", "  lead and  trail  ", "multi\nline\ttext é ü"] {
        let chunks = word_chunks(text);
        assert_eq!(chunks.concat(), text);
        assert!(chunks.iter().all(|c| !c.is_empty()));
    }
    assert_eq!(word_chunks("a b  c"), ["a", " b", "  c"]);
}
