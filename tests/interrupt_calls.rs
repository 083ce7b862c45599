//! Several `interrupt` calls in one task, counted as LangGraph's `interrupt()` counts them: a node
//! that asks until the answer is valid pauses at its second call once the first is answered (it
//! does not get the first answer again), on every backend and after a restart; and stored pause
//! data that does not decode is an error naming the checkpoint, never a thread that forgot it was
//! paused.

mod support;

#[path = "support/backends.rs"]
mod backends;

use planwright::checkpoint::{Checkpointer, MemoryCheckpointer};
use planwright::graph::{StateGraph, END, START};
use planwright::{Engine, NodeContext, Resume, RunError, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::Arc;
use support::*;

/// `ask` asks for a number until it gets one, recording each answer; then `done` runs.
fn asking_graph() -> StateGraph<Walk> {
    StateGraph::new("asking")
        .add_sync_node("ask", |_: &Walk, ctx: &NodeContext| {
            let mut seen = Vec::new();
            let mut question = "how many?".to_string();
            loop {
                let answer = ctx.interrupt(json!({ "question": question }))?;
                seen.push(answer.to_string());
                if answer.is_number() {
                    return Ok(WalkUpdate::default().trace(seen));
                }
                question = format!("`{answer}` is not a number: how many?");
            }
        })
        .add_sync_node("done", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["done".into()]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "done")
        .add_edge("done", END)
}

async fn engine(cp: Option<Arc<dyn Checkpointer>>) -> Engine<Walk> {
    Engine::builder(asking_graph().compile().unwrap())
        .maybe_checkpointer(cp)
        .build()
        .await
}

async fn ask_twice_then_answer(cp: Option<Arc<dyn Checkpointer>>, restart: bool) {
    let t = ThreadId::new(format!("ask-{}", backends::unique()));
    let mut e = engine(cp.clone()).await;
    let out = e
        .run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts[0].index, 0);
    assert_eq!(out.interrupts[0].value["question"], "how many?");
    let first = out.interrupts[0].id.clone();
    let out = e
        .resume(
            t.clone(),
            Resume::Value(json!("lots")),
            RunOptions::default(),
        )
        .await
        .unwrap();
    // Paused again, at the second call, with the first answer kept.
    assert_eq!(out.status, RunStatus::Interrupted, "{:?}", out.state.trace);
    let int = &out.interrupts[0];
    assert_eq!(int.index, 1);
    // The second call's own id, in the digest form LangGraph reads as an id.
    assert!(
        planwright::ids::InterruptId::is_digest(&int.id.0) && int.id != first,
        "{}",
        int.id
    );
    assert_eq!(
        int.value["question"],
        "`\"lots\"` is not a number: how many?"
    );
    if restart {
        e.shutdown().await;
        e = engine(cp.clone()).await;
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(
            st.interrupts[0].index, 1,
            "a new engine sees the second pause"
        );
    }
    let out = e
        .resume(t.clone(), Resume::Value(json!(3)), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.trace, ["\"lots\"", "3", "done"]);
}

#[tokio::test]
async fn a_second_interrupt_pauses_after_the_first_is_answered_without_a_checkpointer() {
    ask_twice_then_answer(None, false).await;
}

#[tokio::test]
async fn a_second_interrupt_pauses_after_the_first_is_answered_in_memory() {
    ask_twice_then_answer(Some(Arc::new(MemoryCheckpointer::new())), false).await;
}

#[tokio::test]
async fn answers_survive_a_restart_on_every_backend() {
    backends::on_every_backend("ask", |cp, _| ask_twice_then_answer(Some(cp), true)).await;
}

#[tokio::test]
async fn corrupt_pause_data_is_an_error_naming_the_checkpoint() {
    let cp: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
    let e = engine(Some(cp.clone())).await;
    let t = ThreadId::new("corrupt-pause");
    e.run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    // A resume write whose payload is not JSON.
    let head = cp.head(&t).await.unwrap().unwrap();
    let writes = cp.get_writes(&t, head).await.unwrap();
    let mut bad = writes[0].clone();
    bad.kind = planwright::checkpoint::WriteKind::Resume;
    bad.payload = b"{not json".to_vec();
    cp.put_writes(&t, head, vec![bad]).await.unwrap();
    let err = e.get_state(&t).await.unwrap_err();
    assert!(
        matches!(&err, RunError::Checkpoint(_)) && err.to_string().contains("resume of task"),
        "{err}"
    );
}

/// `a → b → c`, with `b` pausing in the node, or the graph pausing before `b` or after `a`.
fn pausing_graph(how: &str) -> StateGraph<Walk> {
    let ask = how == "in_node";
    let g = StateGraph::new("pausing")
        .add_sync_node("a", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["a".into()]))
        })
        .add_sync_node("b", move |_: &Walk, ctx: &NodeContext| {
            if ask {
                ctx.interrupt(json!("go on?"))?;
            }
            Ok(WalkUpdate::default().trace(vec!["b".into()]))
        })
        .add_sync_node("c", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["c".into()]))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END);
    match how {
        "before" => g.interrupt_before(["b"]),
        "after" => g.interrupt_after(["a"]),
        _ => g,
    }
}

#[tokio::test]
async fn every_durability_mode_keeps_every_kind_of_pause_across_a_reload() {
    use planwright::Durability;
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        for how in ["in_node", "before", "after"] {
            let cp = backends::sqlite("pauses").await;
            let build = || async {
                Engine::builder(pausing_graph(how).compile().unwrap())
                    .checkpointer(cp.clone())
                    .durability(durability)
                    .build()
                    .await
            };
            let t = ThreadId::new("p");
            let e = build().await;
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted, "{durability:?} {how}");
            e.shutdown().await;
            // A new engine on the same file sees the pause and its interrupt.
            let e = build().await;
            let st = e.get_state(&t).await.unwrap().unwrap();
            assert_eq!(st.interrupts.len(), 1, "{durability:?} {how}: {st:?}");
            assert_eq!(st.next, ["b"], "{durability:?} {how}");
            let out = e
                .resume(
                    t.clone(),
                    Resume::Value(json!("yes")),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Finished, "{durability:?} {how}");
            assert_eq!(out.state.trace, ["a", "b", "c"], "{durability:?} {how}");
            e.shutdown().await;
        }
    }
}
