//! Durable threads on every backend (memory, SQLite file, PostgreSQL): history, interrupts and
//! resume across engine restarts, pauses before nodes, state updates, forks, pruning, migration,
//! durability modes, and storage growth.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::{engine, on_every_backend};
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::runtime::{Durability, Resume};
use planwright::{Engine, NodeContext, RunError, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_every_superstep_and_any_state_can_be_read() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(counter_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/hist"));
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(3),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.state.count, 3);
        let hist = e.history(&t, 100).await.unwrap();
        // The input checkpoint plus one per superstep (inc ×3, done).
        assert_eq!(hist.len(), 5, "{hist:?}");
        assert_eq!(hist[0].metadata.nodes, ["done"]);
        assert_eq!(hist[4].metadata.step, 0);
        let mid = hist[2].id;
        assert_eq!(e.state_at(&t, mid).await.unwrap().count, 2);
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.values.trace, ["inc1", "inc2", "inc3", "done"]);
        assert!(st.next.is_empty(), "finished thread has nothing pending");
        // A second engine on the same storage sees the same thread (a process restart).
        let e2 = engine(counter_graph(), &cp).await;
        assert_eq!(e2.get_state(&t).await.unwrap().unwrap().values.count, 3);
    })
    .await;
}

/// `split` sends `work` (counts executions) and `ask` (interrupts) in one superstep.
fn half_paused_graph(work_runs: Arc<AtomicU32>) -> StateGraph<Walk> {
    StateGraph::new("half-paused")
        .add_sync_node("split", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Walk| {
                Route::Send(vec![
                    Send::new("work", json!(1)),
                    Send::new("ask", json!("q")),
                ])
            },
            ["work", "ask"],
        )
        .add_sync_node("work", move |_: &Walk, _: &NodeContext| {
            work_runs.fetch_add(1, Ordering::SeqCst);
            Ok(WalkUpdate::default().trace(vec!["work".into()]))
        })
        .add_sync_node("ask", |_: &Walk, ctx: &NodeContext| {
            let answer = ctx.interrupt(json!({"question": "size?"}))?;
            Ok(WalkUpdate::default().trace(vec![format!("answer={answer}")]))
        })
        .add_sync_node("join", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.trace.len() as u64))
        })
        .add_edge(START, "split")
        .add_edge("work", "join")
        .add_edge("ask", "join")
        .add_edge("join", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_survives_a_restart_and_finished_siblings_are_not_rerun() {
    on_every_backend("durable", |cp, p| async move {
        let runs = Arc::new(AtomicU32::new(0));
        let t = ThreadId::new(format!("{p}/ask"));
        {
            let e = engine(half_paused_graph(runs.clone()), &cp).await;
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted);
            assert_eq!(out.interrupts[0].value, json!({"question": "size?"}));
            e.shutdown().await;
        }
        // A new engine (a new process) resumes from storage alone.
        let e = engine(half_paused_graph(runs.clone()), &cp).await;
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.interrupts.len(), 1);
        let err = e
            .resume(
                t.clone(),
                Resume::ById([("nope".to_string(), json!(1))].into()),
                RunOptions::default(),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
        let done = e
            .resume(t.clone(), Resume::Value(json!(42)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(
            done.state.trace,
            ["work", "answer=42"],
            "task order, resumed value"
        );
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "the finished sibling ran once"
        );
        let err = e
            .resume(t.clone(), Resume::Value(json!(1)), RunOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                RunError::Refused(planwright::Refusal::NotInterrupted(_))
            ),
            "{err}"
        );
    })
    .await;
}

/// `split` sends three `work` tasks (their inputs go into the trace); `join` counts the trace.
fn fan_out_graph() -> StateGraph<Walk> {
    StateGraph::new("fan-out")
        .add_sync_node("split", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Walk| Route::Send((1..=3).map(|i| Send::new("work", json!(i))).collect()),
            ["work"],
        )
        .add_sync_node("work", |_: &Walk, ctx: &NodeContext| {
            let i = ctx.input().cloned().unwrap_or_default();
            Ok(WalkUpdate::default().trace(vec![format!("work{i}")]))
        })
        .add_sync_node("join", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.trace.len() as u64))
        })
        .add_edge(START, "split")
        .add_edge("work", "join")
        .add_edge("join", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_that_completes_a_superstep_saves_no_write_of_its_own() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(fan_out_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/fan-out"));
        let out = e
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, ["work1", "work2", "work3"], "task order");
        assert_eq!(out.state.count, 3);
        // The three `work` tasks ran from the checkpoint `split` wrote: the two that finished
        // first saved their updates there; the third completed the superstep, and the next
        // checkpoint holds all three.
        let hist = e.history(&t, 100).await.unwrap();
        let split = hist.iter().find(|c| c.metadata.nodes == ["split"]).unwrap();
        let works = hist.iter().find(|c| c.parent == Some(split.id)).unwrap();
        assert_eq!(works.metadata.nodes, ["work", "work", "work"]);
        let writes = cp.get_writes(&t, split.id).await.unwrap();
        let updates = writes
            .iter()
            .filter(|w| w.kind == planwright::checkpoint::WriteKind::Update)
            .count();
        assert_eq!(updates, 2, "{writes:?}");
        // Read back from storage alone, every checkpoint is what the run went through.
        let e2 = engine(fan_out_graph(), &cp).await;
        assert_eq!(e2.state_at(&t, works.id).await.unwrap().trace.len(), 3);
        assert_eq!(e2.get_state(&t).await.unwrap().unwrap().values.count, 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_before_a_node_pauses_for_approval() {
    on_every_backend("durable", |cp, p| async move {
        let graph = counter_graph().interrupt_before(["done"]);
        let e = engine(graph, &cp).await;
        let t = ThreadId::new(format!("{p}/approve"));
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(2),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        assert_eq!(
            out.state.trace,
            ["inc1", "inc2"],
            "paused before `done` ran"
        );
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["done"]);
        let done = e
            .resume(t, Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["inc1", "inc2", "done"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_state_fork_prune_and_delete() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        let t = ThreadId::new(format!("{p}/edit"));
        e.run(
            t.clone(),
            WalkUpdate::default().target(3),
            RunOptions::default(),
        )
        .await
        .unwrap();
        let hist = e.history(&t, 100).await.unwrap();
        // Fork from the checkpoint after inc1: the fork continues on its own.
        let after_inc1 = hist
            .iter()
            .find(|h| h.metadata.nodes == ["inc"] && h.metadata.step == 1)
            .unwrap()
            .id;
        let f = ThreadId::new(format!("{p}/edit-fork"));
        e.fork(&t, after_inc1, &f).await.unwrap();
        assert_eq!(e.get_state(&f).await.unwrap().unwrap().values.count, 1);
        assert_eq!(
            e.get_state(&t).await.unwrap().unwrap().values.count,
            3,
            "source untouched"
        );
        // Write as if `inc` had: its router now sends the thread on from count 10.
        e.update_state(
            &f,
            WalkUpdate::default().count(10).trace(vec!["edited".into()]),
            "inc",
        )
        .await
        .unwrap();
        // `done` pauses before it runs, after an edit as after a superstep.
        let st = e.get_state(&f).await.unwrap().unwrap();
        assert_eq!(st.next, ["done"]);
        assert_eq!(st.interrupts.len(), 1);
        let err = e
            .continue_run(f.clone(), RunOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("resume"), "{err}");
        let out = e
            .resume(f.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, ["inc1", "edited", "done"]);
        let err = e
            .update_state(&f, WalkUpdate::default(), "ghost")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("ghost"), "{err}");
        // Prune keeps the newest 2 checkpoints and the state.
        let before = e.get_state(&t).await.unwrap().unwrap().values;
        e.prune(&t, 2).await.unwrap();
        assert_eq!(e.history(&t, 100).await.unwrap().len(), 2);
        assert_eq!(e.get_state(&t).await.unwrap().unwrap().values, before);
        let done = e
            .resume(t.clone(), Resume::Value(json!(1)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.count, 3);
        e.delete_thread(&t).await.unwrap();
        assert!(e.get_state(&t).await.unwrap().is_none());
        assert!(
            e.get_state(&f).await.unwrap().is_some(),
            "the fork is its own thread"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_topology_calls_the_migration_hook() {
    on_every_backend("durable", |cp, p| async move {
        let t = ThreadId::new(format!("{p}/migrate"));
        let e = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        e.run(
            t.clone(),
            WalkUpdate::default().target(2),
            RunOptions::default(),
        )
        .await
        .unwrap();
        // A new topology: an extra node. Without a hook, a clear error.
        let v2 = || {
            counter_graph()
                .add_sync_node("audit", |_: &Walk, _: &NodeContext| {
                    Ok(WalkUpdate::default())
                })
                .add_edge(START, "audit")
                .add_edge("audit", END)
        };
        let plain = engine(v2(), &cp).await;
        let err = plain
            .continue_run(t.clone(), RunOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::FingerprintMismatch { .. }), "{err}");
        let hooked = Engine::builder(v2().compile().unwrap())
            .checkpointer(cp.clone())
            .migration(|old: Walk, from: &str| {
                assert!(!from.is_empty());
                Ok(Walk {
                    trace: vec![format!("migrated from count {}", old.count)],
                    ..old
                })
            })
            .build()
            .await;
        let st = hooked.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.values.count, 2, "collected values kept");
        assert_eq!(st.values.trace, ["migrated from count 2"]);
        // A run on the migrated thread is stored on top of the migrated state, not the old one.
        let out = hooked
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        let stored = hooked.get_state(&t).await.unwrap().unwrap();
        assert_eq!(stored.values.trace, out.state.trace, "reloaded = ran");
        assert_eq!(
            stored.values.trace.first().map(String::as_str),
            Some("migrated from count 2")
        );
    })
    .await;
}

planwright::state! {
    /// `Walk` as an older build knew it: no `items`, `target`.
    pub struct OldWalk => OldWalkUpdate {
        replace count: u64,
        append trace: Vec<String>,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_fields_with_defaults_load_old_checkpoints() {
    on_every_backend("durable", |cp, p| async move {
        let t = ThreadId::new(format!("{p}/old"));
        let old = StateGraph::<OldWalk>::new("counter")
            .add_sync_node("inc", |s: &OldWalk, _: &NodeContext| {
                Ok(OldWalkUpdate::default().count(s.count + 1))
            })
            .add_sync_node("done", |_: &OldWalk, _: &NodeContext| {
                Ok(OldWalkUpdate::default())
            })
            .add_edge(START, "inc")
            .add_conditional_edges(
                "inc",
                |_: &OldWalk| Route::to("finish"),
                [("again", "inc"), ("finish", "done")],
            )
            .add_edge("done", END)
            .interrupt_before(["done"]);
        let e = Engine::builder(old.compile().unwrap())
            .checkpointer(cp.clone())
            .build()
            .await;
        e.run(
            t.clone(),
            OldWalkUpdate::default().trace(vec!["old".into()]),
            RunOptions::default(),
        )
        .await
        .unwrap();
        // Same topology, richer state: loads with defaults for the new fields.
        let e = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.values.count, 1);
        assert_eq!(st.values.trace, ["old"]);
        assert!(st.values.items.is_empty());
        let done = e
            .resume(t, Resume::Value(json!(null)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["old", "done"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durability_modes_store_what_they_promise() {
    on_every_backend("durable", |cp, p| async move {
        for (mode, name) in [
            (Durability::Sync, "sync"),
            (Durability::Async, "async"),
            (Durability::Exit, "exit"),
        ] {
            let e = Engine::builder(counter_graph().compile().unwrap())
                .checkpointer(cp.clone())
                .durability(mode)
                .build()
                .await;
            let t = ThreadId::new(format!("{p}/dur-{name}"));
            e.run(
                t.clone(),
                WalkUpdate::default().target(4),
                RunOptions::default(),
            )
            .await
            .unwrap();
            // When the run reports its end, its checkpoints are stored, in every mode.
            let fresh = engine(counter_graph(), &cp).await;
            assert_eq!(
                fresh.get_state(&t).await.unwrap().unwrap().values.count,
                4,
                "{name}"
            );
            let n = fresh.history(&t, 100).await.unwrap().len();
            match mode {
                Durability::Exit => assert!(n < 6, "exit stores the end, not every step: {n}"),
                _ => assert_eq!(n, 6, "{name}: input + 5 supersteps"),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_per_thread_in_one_process() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(
            StateGraph::<Walk>::new("slow")
                .add_node("slow", sleeper("slow", 50))
                .add_edge(START, "slow")
                .add_edge("slow", END),
            &cp,
        )
        .await;
        let t = ThreadId::new(format!("{p}/busy"));
        let h = e
            .start(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        let err = e
            .start(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(err, RunError::Refused(planwright::Refusal::ThreadBusy(_))),
            "{err}"
        );
        let queued = e.start(
            t.clone(),
            WalkUpdate::default(),
            RunOptions::default().enqueue(),
        );
        let (a, b) = tokio::join!(h.wait(), async { queued.await.unwrap().wait().await });
        assert_eq!(a.unwrap().state.trace, ["slow"]);
        assert_eq!(b.unwrap().state.trace, ["slow", "slow"]);
        let ids: Vec<u64> = e
            .history(&t, 100)
            .await
            .unwrap()
            .iter()
            .map(|h| h.id.0)
            .collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(ids.len(), sorted.len(), "one linear chain");
    })
    .await;
}

/// `ask` calls an expensive "model" (memoised), then asks the user about its answer.
fn memo_graph(model_calls: Arc<AtomicU32>) -> StateGraph<Walk> {
    StateGraph::new("memo")
        .add_node("ask", move |_s: Arc<Walk>, ctx: NodeContext| {
            let calls = model_calls.clone();
            async move {
                let draft: String = ctx
                    .memo("draft", || async {
                        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok(format!("draft #{n}"))
                    })
                    .await?;
                let verdict = ctx.interrupt(json!({ "approve": draft }))?;
                Ok(WalkUpdate::default().trace(vec![format!("{draft}: {verdict}")]))
            }
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memoised_work_before_an_interrupt_is_not_redone_on_resume() {
    on_every_backend("durable", |cp, p| async move {
        let calls = Arc::new(AtomicU32::new(0));
        let t = ThreadId::new(format!("{p}/memo"));
        {
            let e = engine(memo_graph(calls.clone()), &cp).await;
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.interrupts[0].value, json!({"approve": "draft #1"}));
        }
        // Another engine (another process) resumes: the draft comes from storage.
        let e = engine(memo_graph(calls.clone()), &cp).await;
        let done = e
            .resume(t, Resume::Value(json!("yes")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["draft #1: \"yes\""]);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the model ran once");
    })
    .await;
}

#[tokio::test]
async fn memoised_work_survives_interrupts_and_retries_without_storage() {
    let calls = Arc::new(AtomicU32::new(0));
    let e = Engine::new(memo_graph(calls.clone()).compile().unwrap()).await;
    let t = ThreadId::new("memo-ephemeral");
    e.run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    let done = e
        .resume(t, Resume::Value(json!("ok")), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(done.state.trace, ["draft #1: \"ok\""]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // A retry of the same task reuses what the failed attempt memoised.
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let attempts = Arc::new(AtomicU32::new(0));
    let a = attempts.clone();
    let graph = StateGraph::<Walk>::new("memo-retry")
        .add_node("work", move |_s: Arc<Walk>, ctx: NodeContext| {
            let (c, a) = (c.clone(), a.clone());
            async move {
                let v: u32 = ctx
                    .memo("expensive", || async {
                        Ok(c.fetch_add(1, Ordering::SeqCst) + 10)
                    })
                    .await?;
                if a.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(planwright::NodeError::retryable("parse failed"));
                }
                Ok(WalkUpdate::default().count(u64::from(v)))
            }
        })
        .node_options(
            "work",
            planwright::NodeOptions::default().retry(planwright::RetryPolicy::exponential(
                2,
                std::time::Duration::from_millis(1),
            )),
        )
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()
        .unwrap();
    let out = Engine::new(graph)
        .await
        .run(
            ThreadId::new("retry"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.count, 10);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry reused the memo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_after_a_node_pauses_once_it_ran() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(counter_graph().interrupt_after(["inc"]), &cp).await;
        let t = ThreadId::namespaced(&format!("{p}/after"), "planner:v2");
        assert_eq!(t.namespace(), Some("planner:v2"));
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(2),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        assert_eq!(out.state.trace, ["inc1"], "paused after inc ran once");
        let out = e
            .resume(t.clone(), Resume::Value(json!(null)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, ["inc1", "inc2"]);
        let out = e
            .resume(t, Resume::Value(json!(null)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Finished);
        assert_eq!(out.state.trace, ["inc1", "inc2", "done"]);
    })
    .await;
}

/// Two parallel `ask` tasks pause; a resume map must name both.
fn two_questions() -> StateGraph<Walk> {
    StateGraph::new("two-questions")
        .add_sync_node("split", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Walk| {
                Route::Send(vec![
                    Send::new("ask", json!("a")),
                    Send::new("ask", json!("b")),
                ])
            },
            ["ask"],
        )
        .add_sync_node("ask", |_: &Walk, ctx: &NodeContext| {
            let v = ctx.interrupt(json!({"q": ctx.input().cloned()}))?;
            Ok(WalkUpdate::default().trace(vec![v.to_string()]))
        })
        .add_edge(START, "split")
        .add_edge("ask", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_missing_a_value_changes_nothing() {
    on_every_backend("durable", |cp, p| async move {
        let e = engine(two_questions(), &cp).await;
        let t = ThreadId::new(format!("{p}/two"));
        let out = e
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        let ids: Vec<String> = out.interrupts.iter().map(|i| i.id.0.clone()).collect();
        assert_eq!(ids.len(), 2);
        let head = e.history(&t, 1).await.unwrap()[0].id;
        let partial = [(ids[0].clone(), json!(1))].into();
        let err = e
            .resume(t.clone(), Resume::ById(partial), RunOptions::default())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("no value for interrupt `{}`", ids[1])),
            "{err}"
        );
        // Nothing changed: same head, both still pending.
        assert_eq!(e.history(&t, 1).await.unwrap()[0].id, head);
        assert_eq!(e.get_state(&t).await.unwrap().unwrap().interrupts.len(), 2);
        let all = [(ids[0].clone(), json!(1)), (ids[1].clone(), json!(2))].into();
        let done = e
            .resume(t, Resume::ById(all), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["1", "2"]);
    })
    .await;
}
