//! Time travel on the same thread: `Engine::branch` takes a thread back to a past checkpoint
//! (history keeps what came after and shows the branch), `replay` runs again from there, and a
//! branch to a paused checkpoint is paused again; a command's update and answer to a thread
//! paused inside a node — on every backend.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::{engine, on_every_backend};
use planwright::checkpoint::CheckpointSource;
use planwright::graph::{END, START};
use planwright::runtime::Resume;
use planwright::{
    CheckpointId, Engine, NodeContext, NodeError, RunError, RunOptions, RunStatus, ThreadId,
};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_from_a_past_checkpoint_branches_the_same_thread() {
    on_every_backend("travel", |cp, p| async move {
        let e = engine(counter_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/replay"));
        let first = e
            .run(
                t.clone(),
                WalkUpdate::default().target(3),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(first.state.trace, ["inc1", "inc2", "inc3", "done"]);
        let hist = e.history(&t, 100).await.unwrap();
        assert_eq!(hist.len(), 5, "input + 4 supersteps");
        let old_head = hist[0].id;
        // The checkpoint after `inc1` ran (count 1, `inc` pending).
        let after_inc1 = hist[3].id;
        assert_eq!(e.state_at(&t, after_inc1).await.unwrap().count, 1);

        let again = e
            .replay(t.clone(), after_inc1, RunOptions::default())
            .await
            .unwrap();
        assert_eq!(again.status, RunStatus::Finished);
        assert_eq!(
            again.state.trace,
            ["inc1", "inc2", "inc3", "done"],
            "the supersteps after the branch point ran again, once"
        );
        let hist = e.history(&t, 100).await.unwrap();
        assert_eq!(
            hist.len(),
            5 + 1 + 3,
            "old checkpoints kept, branch, 3 new supersteps"
        );
        let branch = hist
            .iter()
            .find(|h| h.metadata.source == CheckpointSource::Branch)
            .expect("history shows the branch");
        assert_eq!(branch.parent, Some(old_head), "the chain stays linear");
        assert_eq!(branch.metadata.extra["branched_from"], json!(after_inc1));
        assert_eq!(branch.metadata.step, 1, "the branch takes the past step");
        // What came before the branch is still there to read.
        assert_eq!(e.state_at(&t, old_head).await.unwrap().count, 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_past_then_continuing_takes_another_path() {
    on_every_backend("travel", |cp, p| async move {
        let e = engine(counter_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/edit-past"));
        e.run(
            t.clone(),
            WalkUpdate::default().target(3),
            RunOptions::default(),
        )
        .await
        .unwrap();
        let hist = e.history(&t, 100).await.unwrap();
        let after_inc1 = hist[3].id;
        e.branch(&t, after_inc1).await.unwrap();
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.values.count, 1);
        assert_eq!(st.next, ["inc"]);
        // Lower the target as if `inc` had written it: its router now goes to `done`.
        e.update_state(&t, WalkUpdate::default().target(1), "inc")
            .await
            .unwrap();
        let out = e
            .continue_run(t.clone(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, ["inc1", "done"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_to_a_paused_checkpoint_is_paused_again() {
    on_every_backend("travel", |cp, p| async move {
        let e = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        let t = ThreadId::new(format!("{p}/paused"));
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(2),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        let paused_at = e.get_state(&t).await.unwrap().unwrap().checkpoint.unwrap();
        let done = e
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished);
        e.branch(&t, paused_at).await.unwrap();
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["done"]);
        assert_eq!(
            st.interrupts.len(),
            1,
            "the pause comes back with the branch"
        );
        let again = e
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(again.state.trace, ["inc1", "inc2", "done"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branching_refuses_what_it_cannot_do() {
    on_every_backend("travel", |cp, p| async move {
        let e = engine(counter_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/refuse"));
        let err = e.branch(&t, CheckpointId(1)).await.unwrap_err();
        assert!(
            matches!(
                err,
                RunError::Refused(planwright::Refusal::UnknownThread(_))
            ),
            "{err}"
        );
        e.run(
            t.clone(),
            WalkUpdate::default().target(1),
            RunOptions::default(),
        )
        .await
        .unwrap();
        let head = e.get_state(&t).await.unwrap().unwrap().checkpoint.unwrap();
        assert_eq!(
            e.branch(&t, head).await.unwrap(),
            head,
            "branching to the head is a no-op"
        );
        assert_eq!(e.history(&t, 100).await.unwrap().len(), 3);
        let err = e.branch(&t, CheckpointId(99)).await.unwrap_err();
        assert!(err.to_string().contains("99"), "{err}");
    })
    .await;
    let ephemeral = Engine::new(counter_graph().compile().unwrap()).await;
    let err = ephemeral
        .branch(&ThreadId::new("x"), CheckpointId(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("checkpointer"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_writes_its_update_and_runs_its_goto_nodes_next() {
    on_every_backend("goto", |cp, p| async move {
        let e = engine(counter_graph(), &cp).await;
        let t = ThreadId::new(format!("{p}/goto"));
        let first = e
            .run(
                t.clone(),
                WalkUpdate::default().target(1),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(first.state.trace, ["inc1", "done"]);
        // A finished thread: the command raises the target and sends it back to `inc`.
        let goto = vec!["inc".to_string()];
        e.update_state_goto(&t, WalkUpdate::default().target(3), &goto)
            .await
            .unwrap();
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["inc"], "the goto node runs next");
        assert_eq!(st.values.target, 3, "the update is written");
        let out = e
            .continue_run(t.clone(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, ["inc1", "done", "inc2", "inc3", "done"]);
        // A node the graph does not have is refused, and the thread is left as it was.
        let bad = vec!["nope".to_string()];
        let err = e
            .update_state_goto(&t, WalkUpdate::default(), &bad)
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Refused(_)), "{err}");
        assert!(e.get_state(&t).await.unwrap().unwrap().next.is_empty());
    })
    .await;
}

/// `ask` asks for a size, reading `target` as it stands when it runs, and records what it saw
/// and was told. With `hang`, it never returns once answered (a process that dies mid-node).
fn ask_graph(runs: Arc<AtomicU32>, hang: bool) -> planwright::StateGraph<Walk> {
    planwright::StateGraph::new("ask")
        .add_node("ask", move |s: Arc<Walk>, ctx: NodeContext| {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let answer = ctx.interrupt(json!("size?"))?;
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok(WalkUpdate::default().trace(vec![format!("target {}: {answer}", s.target)]))
            }) as futures::future::BoxFuture<'static, Result<WalkUpdate, NodeError>>
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_updates_a_thread_paused_inside_a_node_and_answers_it() {
    on_every_backend("command_resume", |cp, p| async move {
        let runs = Arc::new(AtomicU32::new(0));
        let e = engine(ask_graph(runs.clone(), false), &cp).await;
        let t = ThreadId::new(format!("{p}/update_resume"));
        let start = WalkUpdate::default().target(1);
        let out = e
            .run(t.clone(), start, RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        let paused = e.get_state(&t).await.unwrap().unwrap();
        // The update lands beside the answer: the node runs again from its start, sees it, and
        // its question returns the answer.
        let h = e
            .start_resume_updated(
                t.clone(),
                WalkUpdate::default().target(7),
                Resume::Value(json!("large")),
                RunOptions::default(),
            )
            .await
            .unwrap();
        let done = h.wait().await.unwrap();
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(done.state.trace, ["target 7: \"large\""]);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        // No checkpoint of its own: the paused checkpoint's superstep holds it.
        let history = e.history(&t, 100).await.unwrap();
        assert_eq!(
            history
                .iter()
                .filter(|c| c.id > paused.checkpoint.unwrap())
                .count(),
            1,
            "one checkpoint after the pause: the superstep's"
        );
        // A fresh engine (a restart) reads the thread as it ended: the update is in its state
        // once, not applied again.
        let again = engine(ask_graph(runs.clone(), false), &cp).await;
        let st = again.get_state(&t).await.unwrap().unwrap();
        assert_eq!((st.values.target, st.next.len()), (7, 0));
        assert_eq!(st.values.trace, ["target 7: \"large\""]);
        // Refused with nothing written: a thread that is not paused, and a resume that does not
        // fit what is pending.
        let err = e
            .start_resume_updated(
                t.clone(),
                WalkUpdate::default().target(9),
                Resume::Value(json!(1)),
                RunOptions::default(),
            )
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, RunError::Refused(_)), "{err}");
        let t2 = ThreadId::new(format!("{p}/bad_resume"));
        e.run(t2.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        let bad = Resume::ById([("nope".to_string(), json!(1))].into());
        let err = e
            .start_resume_updated(
                t2.clone(),
                WalkUpdate::default().target(9),
                bad,
                RunOptions::default(),
            )
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("nope"), "{err}");
        assert_eq!(e.get_state(&t2).await.unwrap().unwrap().values.target, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_update_and_answer_survive_a_crash_before_the_node_finishes() {
    on_every_backend("command_crash", |cp, p| async move {
        let runs = Arc::new(AtomicU32::new(0));
        let t = ThreadId::new(format!("{p}/crash"));
        {
            // The first process pauses, takes the command, and dies inside the node.
            let e = engine(ask_graph(runs.clone(), true), &cp).await;
            let out = e
                .run(
                    t.clone(),
                    WalkUpdate::default().target(1),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted);
            let _running = e
                .start_resume_updated(
                    t.clone(),
                    WalkUpdate::default().target(7).items(vec![1]),
                    Resume::Value(json!("large")),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            while runs.load(Ordering::SeqCst) < 2 {
                tokio::task::yield_now().await;
            }
        }
        // The next process finds both: the update in the state (once), the answer waiting for
        // the node, which a continue runs.
        let e = engine(ask_graph(runs.clone(), false), &cp).await;
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!((st.values.target, &st.values.items), (7, &vec![1]));
        assert_eq!(st.next, ["ask"]);
        let done = e
            .continue_run(t.clone(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(done.state.trace, ["target 7: \"large\""]);
        assert_eq!(done.state.items, [1], "the appended update applied once");
        let reread = engine(ask_graph(runs.clone(), false), &cp).await;
        assert_eq!(
            reread.get_state(&t).await.unwrap().unwrap().values.items,
            [1]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_with_no_answer_runs_the_paused_node_again_and_it_asks_again() {
    on_every_backend("no_answer", |cp, p| async move {
        let runs = Arc::new(AtomicU32::new(0));
        let e = engine(ask_graph(runs.clone(), false), &cp).await;
        let t = ThreadId::new(format!("{p}/no_answer"));
        let first = e
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        let again = e
            .resume(t.clone(), Resume::NoAnswer, RunOptions::default())
            .await
            .unwrap();
        assert_eq!(again.status, RunStatus::Interrupted);
        assert_eq!(runs.load(Ordering::SeqCst), 2, "the node ran again");
        assert_eq!(
            again.interrupts, first.interrupts,
            "the same question, same id"
        );
        let id = first.interrupts[0].id.0.clone();
        let done = e
            .resume(
                t.clone(),
                Resume::ById([(id, json!("s"))].into()),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["target 0: \"s\""]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_update_with_the_answer_to_a_pause_before_a_node_goes_into_its_checkpoint() {
    on_every_backend("command_before", |cp, p| async move {
        let e = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        let t = ThreadId::new(format!("{p}/before"));
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(1),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        let done = e
            .start_resume_updated(
                t.clone(),
                WalkUpdate::default().items(vec![5]),
                Resume::Value(json!(null)),
                RunOptions::default(),
            )
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(
            (done.state.items.clone(), done.state.trace.clone()),
            (vec![5], vec!["inc1".to_string(), "done".to_string()])
        );
        // Read back from storage by a fresh engine: the update stored once, in the chain.
        let again = engine(counter_graph().interrupt_before(["done"]), &cp).await;
        let st = again.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.values.items, [5]);
        assert_eq!(st.values.trace, ["inc1", "done"]);
    })
    .await;
}
