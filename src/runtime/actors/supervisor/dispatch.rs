//! Dispatch: the supervisor handing its superstep's ready tasks to the node actors, each with
//! what its node is given — the state (or, in a DAG, the view of it its dependencies leave), its
//! context (attempt, answers, memos, the run's context), where a command leaves its `goto` and a
//! subgraph its child thread — and the reply that brings its result back.

use super::Run;
use crate::events::RunEvent;
use crate::node::{Memos, NodeContext};
use crate::runtime::actors::node_actor::{RunTask, TaskReply};
use crate::runtime::error::RunError;
use crate::runtime::machine::superstep;
use crate::runtime::subgraph;
use crate::state::State;
use std::sync::Arc;

impl<S: State> Run<S> {
    /// Sets up bookkeeping for `saved.tasks`, reusing saved writes.
    pub(super) fn reset_step(&mut self) {
        let n = self.saved.tasks.len();
        // Cleared and resized rather than made anew: their buffers serve every superstep.
        self.step.reset(n);
        self.memo_stores.clear();
        self.memo_stores.resize(n, None);
        if self.sh.graph.has_command_nodes() {
            self.goto_slots.clear();
            self.goto_slots.resize(n, None);
        }
        if self.saved.memos.len() < n {
            self.saved.memos.resize(n, Default::default());
        }
        if self.saved.answers.len() != n {
            self.saved.answers.resize(n, Vec::new());
        }
        self.saved.restore_into(&mut self.step);
    }

    /// Dispatches every task the superstep machine says is ready.
    pub(super) async fn pump(&mut self) -> Result<(), RunError> {
        if self.cancel.is_cancelled() {
            return Ok(());
        }
        let mut ready = std::mem::take(&mut self.ready);
        self.step.ready_into(&self.saved.tasks, &mut ready);
        let r = async {
            for &i in &ready {
                self.dispatch(i).await?;
            }
            Ok(())
        }
        .await;
        self.ready = ready;
        r
    }

    async fn dispatch(&mut self, i: usize) -> Result<(), RunError> {
        let spec = &self.saved.tasks[i];
        let state = if spec.after.is_empty() {
            self.saved.state.clone()
        } else {
            Arc::new(superstep::dag_view(
                &*self.saved.state,
                &self.saved.tasks,
                self.step.updates(),
                i,
            )?)
        };
        let attempt = self.step.dispatch(i);
        let graph_node = self.sh.graph.node(spec.node_id);
        let memos = Arc::new(Memos {
            saved: self.saved.memos.get(i).cloned().unwrap_or_default(),
            fresh: Default::default(),
            head: self.saved.head,
            repeat_effects: graph_node.options.repeat_effects,
            effect_calls: Default::default(),
        });
        self.memo_stores[i] = Some(memos.clone());
        let special = (graph_node.command.is_some() || graph_node.subgraph.is_some()).then(|| {
            let child_thread = graph_node.subgraph.is_some().then(|| {
                subgraph::child_thread(&self.thread, &spec.node, self.saved.head, spec.id.index)
            });
            let special = Arc::new(crate::node::SpecialTask {
                goto: Default::default(),
                child_thread,
            });
            if graph_node.command.is_some() {
                self.goto_slots[i] = Some(special.clone());
            }
            special
        });
        let ctx = NodeContext {
            task: spec.id,
            node: spec.node.clone(),
            attempt,
            input: spec.input.clone(),
            answers: crate::node::Answers::new(self.saved.answers[i].clone()),
            events: self.events.clone(),
            cancel: self.cancel.clone(),
            span: self.span.clone(),
            memos,
            effects: Some(self.effects.clone()),
            context: self.per_run.context.clone(),
            store: self.sh.store.clone(),
            special,
        };
        let me = self
            .me
            .clone()
            .ok_or_else(|| RunError::Internal("supervisor has no self reference".into()))?;
        let reply = TaskReply::<S> {
            tx: Some(Box::new(move |done| {
                let _ = me.tell(done).try_send();
            })),
            index: i as u32,
            attempt,
        };
        self.events.emit(|| RunEvent::NodeStarted {
            node: spec.node_name(),
            task: spec.id,
            attempt,
        });
        let node = spec.node_id.index();
        self.sh.stats[node].enqueued();
        let msg = RunTask {
            state,
            ctx,
            enqueued: tokio::time::Instant::now(),
            reply,
        };
        if self.sh.nodes[node].tell(msg).send().await.is_err() {
            self.sh.stats[node].dequeued();
            self.step.undispatch(i);
            return Err(RunError::Internal(format!(
                "node actor `{}` is not running",
                self.saved.tasks[i].node
            )));
        }
        Ok(())
    }
}
