//! Per-run options through real actors: a typed runtime context read by nodes (never
//! checkpointed), `interrupt_before` / `interrupt_after` and a step limit set per run, and the
//! engine's store reached from nodes across threads.

mod support;

use planwright::checkpoint::{Checkpointer, MemoryCheckpointer};
use planwright::graph::{StateGraph, END, START};
use planwright::store::{MemoryStore, PutOptions, Store};
use planwright::{
    Engine, NodeContext, NodeError, Resume, RunError, RunOptions, RunStatus, ThreadId,
};
use serde_json::json;
use std::sync::Arc;
use support::*;

/// What a tenant's run carries.
struct Tenant {
    id: &'static str,
}

/// `greet` writes the tenant id it sees; `ask` pauses for approval, then `greet` runs.
fn tenant_graph() -> StateGraph<Walk> {
    StateGraph::new("tenant")
        .add_sync_node("ask", |_: &Walk, ctx: &NodeContext| {
            ctx.interrupt(json!("approve?"))?;
            Ok(WalkUpdate::default().trace(vec!["asked".into()]))
        })
        .add_sync_node("greet", |_: &Walk, ctx: &NodeContext| {
            let t = ctx.require_context::<Tenant>()?;
            Ok(WalkUpdate::default().trace(vec![format!("hello {}", t.id)]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "greet")
        .add_edge("greet", END)
}

async fn durable(graph: StateGraph<Walk>) -> Engine<Walk> {
    Engine::builder(graph.compile().unwrap())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .await
}

#[tokio::test]
async fn nodes_read_the_runs_context_and_a_resume_brings_its_own() {
    let e = durable(tenant_graph()).await;
    let t = ThreadId::new("t");
    let out = e
        .run(
            t.clone(),
            WalkUpdate::default(),
            RunOptions::default().context(Tenant { id: "acme" }),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    // The context is not checkpointed: the resuming run's is the one nodes see.
    let out = e
        .resume(
            t.clone(),
            Resume::Value(json!("yes")),
            RunOptions::default().context(Tenant { id: "globex" }),
        )
        .await
        .unwrap();
    assert_eq!(out.state.trace, ["asked", "hello globex"]);
    let cps = e.history(&t, 100).await.unwrap();
    let stored = format!("{cps:?}");
    assert!(
        !stored.contains("acme") && !stored.contains("globex"),
        "{stored}"
    );
}

#[tokio::test]
async fn a_node_that_needs_a_context_the_run_lacks_fails_naming_the_type() {
    let g = StateGraph::new("needs")
        .add_sync_node("greet", |_: &Walk, ctx: &NodeContext| {
            let t = ctx.require_context::<Tenant>()?;
            Ok(WalkUpdate::default().trace(vec![t.id.to_string()]))
        })
        .add_edge(START, "greet")
        .add_edge("greet", END);
    let e = Engine::new(g.compile().unwrap()).await;
    let err = e
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default().context(42u32),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Tenant") && err.contains("RunOptions::context"),
        "{err}"
    );
}

#[tokio::test]
async fn interrupt_before_and_after_can_be_set_for_one_run() {
    let e = durable(counter_graph()).await;
    let t = ThreadId::new("before");
    let out = e
        .run(
            t.clone(),
            WalkUpdate::default().target(3),
            RunOptions::default().interrupt_before(["done"]),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts[0].node, "done");
    assert_eq!(
        out.state.trace,
        ["inc1", "inc2", "inc3"],
        "paused before `done` ran"
    );
    let out = e
        .resume(t.clone(), Resume::Value(json!(null)), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.trace.last().map(String::as_str), Some("done"));

    let t = ThreadId::new("after");
    let out = e
        .run(
            t.clone(),
            WalkUpdate::default().target(3),
            RunOptions::default().interrupt_after(["inc"]),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.state.trace, ["inc1"], "paused after the first `inc`");
    // The next run on the thread has no per-run pause: it runs to the end.
    let out = e
        .resume(t.clone(), Resume::Value(json!(null)), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.trace, ["inc1", "inc2", "inc3", "done"]);

    // The same engine without per-run options does not pause.
    let out = e
        .run(
            ThreadId::new("none"),
            WalkUpdate::default().target(3),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
}

#[tokio::test]
async fn a_per_run_step_limit_replaces_the_graphs() {
    let e = Engine::new(counter_graph().compile().unwrap()).await;
    let err = e
        .run(
            ThreadId::new("t"),
            WalkUpdate::default().target(10),
            RunOptions::default().step_limit(4),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::StepLimit { limit: 4, .. }), "{err}");
    let out = e
        .run(
            ThreadId::new("u"),
            WalkUpdate::default().target(10),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.state.count, 10,
        "the graph's limit (1000) applies to other runs"
    );
}

#[tokio::test]
async fn bad_per_run_options_are_refused_before_anything_runs() {
    let e = durable(counter_graph()).await;
    let t = ThreadId::new("t");
    for (opts, words) in [
        (
            RunOptions::default().interrupt_before(["nope"]),
            "no node `nope`",
        ),
        (
            RunOptions::default().interrupt_after(["inc", "nada"]),
            "no node `nada`",
        ),
        (
            RunOptions::default().step_limit(0),
            "step_limit must be at least 1",
        ),
    ] {
        let err = e
            .run(t.clone(), WalkUpdate::default(), opts)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(words), "{err}");
    }
    assert!(
        e.get_state(&t).await.unwrap().is_none(),
        "nothing was written"
    );
    assert!(!e.is_running(&t));
}

#[tokio::test]
async fn nodes_share_memory_across_threads_through_the_store() {
    let g = StateGraph::new("memory")
        .add_node("remember", |s: Arc<Walk>, ctx: NodeContext| async move {
            let store = ctx.store()?;
            let user = ctx.require_context::<Tenant>()?.id;
            let ns = vec!["users".to_string(), user.to_string()];
            let seen = match store
                .get(&ns, "visits")
                .await
                .map_err(NodeError::retryable)?
            {
                Some(item) => item.value["n"].as_u64().unwrap_or(0),
                None => 0,
            };
            let value = json!({"n": seen + 1})
                .as_object()
                .cloned()
                .unwrap_or_default();
            store
                .put(&ns, "visits", value, PutOptions::default())
                .await
                .map_err(NodeError::retryable)?;
            Ok(WalkUpdate::default().count(s.count + seen + 1))
        })
        .add_edge(START, "remember")
        .add_edge("remember", END);
    let store = Arc::new(MemoryStore::new());
    let e = Engine::builder(g.compile().unwrap())
        .store(store.clone())
        .build()
        .await;
    for (thread, user, want) in [("t1", "ann", 1), ("t2", "ann", 2), ("t3", "bo", 1)] {
        let out = e
            .run(
                ThreadId::new(thread),
                WalkUpdate::default(),
                RunOptions::default().context(Tenant { id: user }),
            )
            .await
            .unwrap();
        assert_eq!(out.state.count, want, "{thread}");
    }
    let ann = store
        .get(&["users".into(), "ann".into()], "visits")
        .await
        .unwrap();
    assert_eq!(ann.unwrap().value["n"], 2);

    let without = Engine::new(
        StateGraph::new("x")
            .add_sync_node("n", |_: &Walk, ctx: &NodeContext| {
                ctx.store()?;
                Ok(WalkUpdate::default())
            })
            .add_edge(START, "n")
            .add_edge("n", END)
            .compile()
            .unwrap(),
    )
    .await;
    let err = without
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("EngineBuilder::store"), "{err}");
}

#[tokio::test]
async fn interrupt_before_a_first_node_pauses_before_anything_runs_then_resumes() {
    let durable_engine = durable(counter_graph()).await;
    let ephemeral = Engine::new(counter_graph().compile().unwrap()).await;
    let graph_level = durable(counter_graph().interrupt_before(["inc"])).await;
    for (name, e, opts) in [
        (
            "durable",
            &durable_engine,
            RunOptions::default().interrupt_before(["inc"]),
        ),
        (
            "ephemeral",
            &ephemeral,
            RunOptions::default().interrupt_before(["inc"]),
        ),
        ("graph-level", &graph_level, RunOptions::default()),
    ] {
        let t = ThreadId::new(name);
        let out = e
            .run(t.clone(), WalkUpdate::default().target(2), opts)
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted, "{name}");
        assert!(out.state.trace.is_empty(), "{name}: {:?}", out.state.trace);
        assert_eq!(out.interrupts[0].node, "inc", "{name}");
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.interrupts.len(), 1, "{name}: the pause is stored");
        let out = e
            .resume(t.clone(), Resume::Value(json!(null)), RunOptions::default())
            .await
            .unwrap();
        if name == "graph-level" {
            // The graph pauses before every `inc`: resume until done.
            let mut out = out;
            while out.status == RunStatus::Interrupted {
                out = e
                    .resume(t.clone(), Resume::Value(json!(null)), RunOptions::default())
                    .await
                    .unwrap();
            }
            assert_eq!(out.state.trace, ["inc1", "inc2", "done"], "{name}");
        } else {
            assert_eq!(out.status, RunStatus::Finished, "{name}");
            assert_eq!(out.state.trace, ["inc1", "inc2", "done"], "{name}");
        }
    }
}

/// `new_thread`: a fresh thread runs and is stored as usual without being looked up first; a
/// thread that exists after all is refused at its first checkpoint, with nothing written, where
/// the same input without the option would have gone on from the stored state (so the lookup
/// was indeed skipped). With `async` durability the option is not honoured: the thread loads.
#[tokio::test]
async fn a_new_thread_is_not_looked_up_and_an_existing_one_is_refused_unharmed() {
    let cp = Arc::new(MemoryCheckpointer::new());
    let e = Engine::builder(counter_graph().compile().unwrap())
        .checkpointer(cp.clone())
        .build()
        .await;
    let fresh = ThreadId::new("fresh");
    let run_as_new = |target: u64| {
        e.run(
            fresh.clone(),
            WalkUpdate::default().target(target),
            RunOptions::default().new_thread(),
        )
    };
    let out = run_as_new(3).await.unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.count, 3);
    let head = cp.head(&fresh).await.unwrap();
    assert!(head.is_some(), "stored as usual");

    let err = run_as_new(5).await.unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Checkpoint(planwright::checkpoint::CheckpointError::Conflict { .. })
        ),
        "{err:?}"
    );
    assert_eq!(cp.head(&fresh).await.unwrap(), head, "nothing written");
    assert_eq!(e.get_state(&fresh).await.unwrap().unwrap().values.count, 3);

    // Without the option (and with `async` durability, where it is not honoured) the same input
    // goes on from the stored state.
    for opts in [
        RunOptions::default(),
        RunOptions::default()
            .new_thread()
            .durability(planwright::Durability::Async),
    ] {
        let target = e.get_state(&fresh).await.unwrap().unwrap().values.count + 2;
        let out = e
            .run(fresh.clone(), WalkUpdate::default().target(target), opts)
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Finished);
        assert_eq!(out.state.count, target);
    }
}
