//! The supervisor actor: one per running conversation.
//!
//! It owns the conversation's state, dispatches each superstep's tasks to the node actors, collects
//! their results, and carries out what the step machine (`runtime::machine`) decides: `Step`
//! says which task runs and how a superstep ends, `superstep` merges and picks what runs next,
//! `boundary` decides a pause, the step limit, a drain and a retry's backoff. Its own work is
//! the I/O: dispatching, storing (through `storage`) and emitting events.
//!
//! Deadlock freedom: the supervisor waits on exactly one thing, space in a node actor's bounded
//! mailbox. Node actors never wait on supervisors (results go into the supervisor's unbounded
//! mailbox, which holds at most one message per task it dispatched plus control messages), and a
//! node actor drains its mailbox independently of every supervisor. So no cycle of waits exists.

use super::node_actor::{RunTask, TaskDone, TaskReply};
use super::shared::{RunControl, Shared};
use crate::checkpoint::CheckpointSource;
use crate::events::{EventSink, Interrupt, RunEvent, RunStatus};
use crate::ids::{CheckpointId, InterruptId, RunId, ThreadId};
use crate::node::{Memos, NodeContext, NodeError};
use crate::runtime::error::RunError;
use crate::runtime::machine::boundary::{self, AtBoundary, OnFailure, StepEnd};
use crate::runtime::machine::per_run::PerRun;
use crate::runtime::machine::step::{Effect, End, Outcome, Step};
use crate::runtime::machine::superstep;
use crate::runtime::run::RunOutcome;
use crate::runtime::storage::{self, persist, Durability, RunStorage, SavedThread, SavedWrite};
use crate::runtime::subgraph;
use crate::state::State;
use kameo::actor::{Actor, ActorRef};
use kameo::message::{Context, Message};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Starts the current superstep.
pub(crate) struct Kick;
/// Re-dispatches task `0` after its backoff.
pub(crate) struct Retry(pub u32);
/// Cancels the run.
struct Cancel;
/// Stops the run at the next superstep boundary (engine shutdown).
struct Drain;

pub(crate) struct SupervisorArgs<S: State> {
    pub shared: Arc<Shared<S>>,
    pub thread: ThreadId,
    pub run_id: RunId,
    pub saved: SavedThread<S>,
    pub persisted_head: Option<CheckpointId>,
    pub durability: Durability,
    pub per_run: PerRun,
    pub events: EventSink,
    pub cancel: CancellationToken,
    pub outcome: oneshot::Sender<Result<RunOutcome<S>, RunError>>,
}

/// The supervisor actor. Its fields live in one heap block so that the actor's task, which every
/// live conversation has, stays small (a live conversation is ~15 KiB in all).
pub(crate) struct Supervisor<S: State>(Box<Run<S>>);

impl<S: State> std::ops::Deref for Supervisor<S> {
    type Target = Run<S>;
    fn deref(&self) -> &Run<S> {
        &self.0
    }
}

impl<S: State> std::ops::DerefMut for Supervisor<S> {
    fn deref_mut(&mut self) -> &mut Run<S> {
        &mut self.0
    }
}

/// A run's bookkeeping, owned by its supervisor.
pub(crate) struct Run<S: State> {
    sh: Arc<Shared<S>>,
    thread: ThreadId,
    run_id: RunId,
    saved: SavedThread<S>,
    /// Where the run's writes go, under its durability.
    store: RunStorage,
    per_run: PerRun,
    /// The current superstep's rules and bookkeeping (pure; this actor performs its effects).
    step: Step<Box<S::Update>>,
    /// Scratch for the tasks ready to start (reused: this runs after every result).
    ready: Vec<usize>,
    /// The memo store handed to each task's context, to collect what the task memoised.
    memo_stores: Vec<Option<Arc<Memos>>>,
    /// Per task, the JSON of its update as its write was saved (parallel supersteps of durable
    /// runs), joined into the superstep's delta instead of serialising the updates again.
    update_json: Vec<Option<Vec<u8>>>,
    /// Per task of a command node, where its running attempt leaves its `goto`.
    goto_slots: Vec<Option<Arc<crate::node::SpecialTask>>>,
    events: EventSink,
    cancel: CancellationToken,
    outcome: Option<oneshot::Sender<Result<RunOutcome<S>, RunError>>>,
    recent: VecDeque<Arc<str>>,
    steps_run: u64,
    node_executions: u64,
    rng: SmallRng,
    draining: bool,
    pauses: Vec<Interrupt>,
    me: Option<ActorRef<Supervisor<S>>>,
    span: tracing::Span,
}

impl<S: State> Actor for Supervisor<S> {
    type Args = Box<SupervisorArgs<S>>;
    type Error = kameo::error::Infallible;

    fn name() -> &'static str {
        "Supervisor"
    }

    async fn on_start(a: Self::Args, me: ActorRef<Self>) -> Result<Self, Self::Error> {
        let a = *a;
        let span = tracing::info_span!("run", graph = %a.shared.graph.name(), thread = %a.thread, run_id = a.run_id.0);
        let mut s = Self(Box::new(Run {
            sh: a.shared,
            thread: a.thread,
            run_id: a.run_id,
            saved: a.saved,
            store: RunStorage::new(a.durability, a.persisted_head),
            per_run: a.per_run,
            step: Step::new(0),
            ready: Vec::new(),
            update_json: Vec::new(),
            memo_stores: Vec::new(),
            goto_slots: Vec::new(),
            events: a.events,
            cancel: a.cancel,
            outcome: Some(a.outcome),
            recent: VecDeque::with_capacity(8),
            steps_run: 0,
            node_executions: 0,
            rng: SmallRng::seed_from_u64(a.run_id.0),
            draining: false,
            pauses: Vec::new(),
            me: Some(me),
            span,
        }));
        s.reset_step();
        Ok(s)
    }
}

impl<S: State> Run<S> {
    /// Sets up bookkeeping for `saved.tasks`, reusing saved writes.
    fn reset_step(&mut self) {
        let n = self.saved.tasks.len();
        // Cleared and resized rather than made anew: their buffers serve every superstep.
        self.step.reset(n);
        self.memo_stores.clear();
        self.memo_stores.resize(n, None);
        self.update_json.clear();
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
        for (i, w) in std::mem::take(&mut self.saved.writes)
            .into_iter()
            .enumerate()
            .take(n)
        {
            match w {
                Some(SavedWrite::Done(u)) => self.step.restore_done(i, u),
                // Paused and not yet answered at the call it paused on.
                Some(SavedWrite::Interrupted(int))
                    if self.saved.answers[i].len() <= int.index as usize =>
                {
                    self.step.restore_interrupted(i, int)
                }
                _ => {}
            }
        }
    }

    /// Whether each superstep is stored.
    fn durable(&self) -> bool {
        self.store.stores_each_step(&self.sh.storage)
    }

    /// Dispatches every task the superstep machine says is ready.
    async fn pump(&mut self) -> Result<(), RunError> {
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
        let memos = Arc::new(Memos {
            saved: self.saved.memos.get(i).cloned().unwrap_or_default(),
            fresh: Default::default(),
        });
        self.memo_stores[i] = Some(memos.clone());
        let graph_node = self.sh.graph.node(spec.node_id);
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

    async fn on_done(&mut self, done: TaskDone<S>) -> Result<(), RunError> {
        let i = done.index as usize;
        if !self.step.is_current(i, done.attempt) {
            return Ok(()); // a late result from a cancelled or superseded attempt
        }
        self.node_executions += 1;
        self.sh
            .total_node_executions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec = self.saved.tasks[i].clone();
        let fresh_memos = self.memo_stores[i]
            .take()
            .map(|m| m.take_fresh())
            .unwrap_or_default();
        if let Some(kept) = self.saved.memos.get_mut(i) {
            kept.extend(fresh_memos.iter().cloned());
        }
        self.events.emit(|| RunEvent::NodeFinished {
            node: spec.node_name(),
            task: spec.id,
            attempt: done.attempt,
            duration_us: done.ran.as_micros() as u64,
            queued_us: done.queued.as_micros() as u64,
            error: done.result.as_ref().err().map(|e| e.to_string()),
        });
        // The I/O each result needs, then the machine's verdict.
        let (outcome, failure) = match done.result {
            Ok(update) => {
                let goto = self
                    .goto_slots
                    .get_mut(i)
                    .and_then(Option::take)
                    .and_then(|s| s.goto.lock().unwrap_or_else(|p| p.into_inner()).take());
                if self.saved.tasks.len() > 1 && self.durable() {
                    let json = persist::update_json(&update)?;
                    // The task that completes the superstep saves no write: the checkpoint
                    // written next holds its update (and where its command said to go), as it
                    // does for a superstep of one task.
                    if !self.step.completes_with(i) {
                        let mut writes = vec![persist::update_write_json(&spec, &json)];
                        if let Some(g) = &goto {
                            writes.push(persist::goto_write(&spec, g)?);
                        }
                        let dict = self.sh.graph.body_dictionary();
                        let (sh, head) = (&self.sh, self.saved.head);
                        self.store
                            .save_updates(
                                &sh.storage,
                                || sh.others_running(),
                                &self.thread,
                                head,
                                writes,
                                dict,
                            )
                            .await?;
                    }
                    if self.update_json.len() < self.saved.tasks.len() {
                        self.update_json.resize(self.saved.tasks.len(), None);
                    }
                    self.update_json[i] = Some(json);
                }
                if let Some(g) = goto {
                    if self.saved.gotos.len() <= i {
                        self.saved.gotos.resize(self.saved.tasks.len(), None);
                    }
                    self.saved.gotos[i] = Some(g);
                }
                (Outcome::Updated(update), None)
            }
            Err(NodeError::Interrupt(value)) => {
                // The call it paused on is the first one without an answer.
                let index = self.saved.answers.get(i).map_or(0, Vec::len) as u32;
                let int = Interrupt {
                    id: InterruptId::for_call(spec.id, &spec.node, index),
                    node: spec.node_name(),
                    value,
                    index,
                };
                if self.durable() {
                    // What the task memoised before it paused is saved with the pause, so a
                    // resume (in this process or another) does not redo it.
                    let mut writes = persist::memo_writes(&spec, &fresh_memos)?;
                    writes.push(persist::interrupt_write(&spec, &int)?);
                    let (sh, head) = (&self.sh, self.saved.head);
                    self.store
                        .save_writes(
                            &sh.storage,
                            || sh.others_running(),
                            &self.thread,
                            head,
                            writes,
                        )
                        .await?;
                }
                (Outcome::Interrupted(int), None)
            }
            Err(NodeError::Cancelled) => return Err(RunError::Cancelled),
            Err(e) => {
                let policy = &self.sh.graph.node(spec.node_id).options.retry;
                let then = boundary::on_failure(policy, &e, done.attempt, self.rng.random::<f64>());
                let retry = then.retries();
                (Outcome::Failed { retry }, Some((e, then)))
            }
        };
        match self.step.complete(i, done.attempt, outcome) {
            Effect::Retry => {
                let wait = match failure {
                    Some((_, OnFailure::Retry { after })) => after,
                    _ => Duration::ZERO,
                };
                let me = self.me.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    if let Some(me) = me {
                        let _ = me.tell(Retry(i as u32)).try_send();
                    }
                });
            }
            Effect::Fail => {
                let message = failure.map(|(e, _)| e.to_string()).unwrap_or_default();
                self.events.emit(|| RunEvent::Error {
                    node: Some(spec.node_name()),
                    message: message.clone(),
                });
                return Err(RunError::NodeFailed {
                    node: spec.node_name(),
                    attempts: done.attempt,
                    message,
                });
            }
            Effect::Continue | Effect::Ignore => {}
        }
        self.advance().await
    }

    /// Dispatches what became ready; ends the superstep when nothing runs or waits.
    async fn advance(&mut self) -> Result<(), RunError> {
        loop {
            self.pump().await?;
            match self.step.end() {
                End::Running => return Ok(()),
                // Everything that could run has run; the rest waits on an interrupt.
                End::Paused(interrupts) => return self.pause(interrupts).await,
                End::Complete(updates) => {
                    if !self.end_step(updates).await? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Merges the finished superstep and sets up the next. Returns true if a next superstep began
    /// (so the caller pumps again), false if the run ended.
    async fn end_step(&mut self, updates: Vec<Box<S::Update>>) -> Result<bool, RunError> {
        let tasks = std::mem::take(&mut self.saved.tasks);
        if updates.len() != tasks.len() {
            return Err(RunError::Internal(
                "superstep ended with a task that produced no update".into(),
            ));
        }
        let delta = if self.durable() {
            Some(persist::delta_json(
                &updates,
                &std::mem::take(&mut self.update_json),
            )?)
        } else {
            None
        };
        let updated = self.events.wants_state_updates().then(|| {
            let values: Vec<_> = updates
                .iter()
                .map(|u| serde_json::to_value(u).unwrap_or_default())
                .collect();
            let nodes: Vec<_> = tasks.iter().map(|t| t.node_name()).collect();
            (nodes, values)
        });
        superstep::merge(
            Arc::make_mut(&mut self.saved.state),
            &tasks,
            updates.into_iter().map(|u| *u),
        )?;
        if let Some((nodes, updates)) = updated {
            // The state as this superstep left it, built now: later it is the next one's.
            let values = self
                .events
                .wants_values()
                .then(|| serde_json::to_value(&*self.saved.state).unwrap_or_default());
            self.events.emit(|| RunEvent::StateUpdated {
                step: self.saved.step + 1,
                nodes,
                updates,
                values,
            });
        }
        self.saved.step += 1;
        self.steps_run += 1;
        for t in &tasks {
            if self.recent.len() == 8 {
                self.recent.pop_front();
            }
            self.recent.push_back(t.node.clone());
        }
        let gotos = std::mem::take(&mut self.saved.gotos);
        let next = superstep::next_tasks_after(
            &self.sh.graph,
            &self.saved.state,
            &tasks,
            &gotos,
            self.saved.step,
        )?;
        let waiting = std::mem::take(&mut self.saved.deferred);
        let (next, waiting) = superstep::schedule(&self.sh.graph, next, waiting, self.saved.step);
        let (graph, per_run) = (&self.sh.graph, &self.per_run);
        let pause = boundary::pause(
            &tasks,
            &next,
            |n| per_run.pauses_after(graph, n),
            |n| per_run.pauses_before(graph, n),
        );
        if self.durable() {
            let nodes = tasks.iter().map(|t| t.node_name()).collect();
            let rec = persist::step_record(
                &self.sh.graph,
                &self.thread,
                &mut self.saved,
                CheckpointSource::Loop,
                nodes,
                delta,
                &superstep::stored_next(&next, &waiting),
                serde_json::Value::Null,
                pause.clone(),
            )?;
            let sh = &self.sh;
            self.store
                .put_record(&sh.storage, || sh.others_running(), rec)
                .await?;
            self.store.settle().await?;
        } else {
            self.saved.head = Some(CheckpointId(self.saved.head.map_or(1, |h| h.0 + 1)));
        }
        self.saved.tasks = next;
        self.saved.deferred = waiting;
        self.saved.writes = Vec::new();
        self.saved.memos = Vec::new();
        self.saved.answers = Vec::new();
        self.reset_step();
        let limit = self.per_run.step_limit(&self.sh.graph);
        let at = AtBoundary {
            tasks_left: !self.saved.tasks.is_empty(),
            steps_run: self.steps_run,
            step_limit: limit,
            pause,
            draining: self.draining,
        };
        match boundary::step_end(at) {
            StepEnd::Finish => self.finish(Ok(RunStatus::Finished)).await,
            StepEnd::StepLimit => {
                return Err(RunError::StepLimit {
                    limit,
                    last_nodes: self.recent.iter().map(|n| n.to_string()).collect(),
                })
            }
            StepEnd::Pause(pause) => {
                self.saved.paused_before = true;
                self.saved.pause_at = pause.at;
                self.pause(pause.interrupts).await?;
            }
            StepEnd::Suspend => self.finish(Ok(RunStatus::Suspended)).await,
            StepEnd::Next => return Ok(true),
        }
        Ok(false)
    }

    async fn pause(&mut self, interrupts: Vec<Interrupt>) -> Result<(), RunError> {
        self.events.emit(|| RunEvent::Interrupted {
            interrupts: interrupts.clone(),
        });
        self.pauses = interrupts;
        self.finish(Ok(RunStatus::Interrupted)).await;
        Ok(())
    }

    /// Ends the run: final durability work, thread bookkeeping, events, outcome.
    async fn finish(&mut self, result: Result<RunStatus, RunError>) {
        let Some(outcome_tx) = self.outcome.take() else {
            return;
        };
        self.cancel.cancel();
        let settled = self.store.settle().await;
        let result = match (result, settled) {
            (Ok(status), Ok(())) => self.persist_end(status).await.map(|_| status),
            (Ok(_), Err(e)) => Err(e),
            (Err(e), settled) => {
                if let Err(lost) = settled {
                    // The run already failed with `e`; this one is only reported.
                    tracing::warn!(error = %lost, "a task update of a failed run was not stored");
                }
                Err(e)
            }
        };
        // Remember the thread's position for ephemeral engines and the pending writes for resume.
        // (Moved out of the superstep, which ends with the run, rather than copied.)
        let mut results = self.step.take_results().into_iter();
        self.saved.writes = (0..self.saved.tasks.len())
            .map(|_| match results.next() {
                Some((Some(u), _)) => Some(SavedWrite::Done(u)),
                Some((None, Some(int))) => Some(SavedWrite::Interrupted(int)),
                _ => None,
            })
            .collect();
        if self.sh.storage.checkpointer.is_none() {
            self.sh
                .ephemeral
                .insert(self.thread.clone(), self.saved.clone());
        } else {
            // A paused thread's state stays in memory for its resume; any other end makes what
            // was kept for the thread stale.
            match (&result, storage::Kept::of(&self.saved)) {
                (Ok(RunStatus::Interrupted), Some(kept)) => self.sh.paused.keep(&self.thread, kept),
                _ => self.sh.paused.forget(&self.thread),
            }
        }
        let status = match &result {
            Ok(s) => *s,
            Err(RunError::Cancelled) => RunStatus::Cancelled,
            Err(_) => RunStatus::Failed,
        };
        if let Err(e) = &result {
            self.events.emit(|| RunEvent::Error {
                node: None,
                message: e.to_string(),
            });
        }
        self.events.emit(|| RunEvent::RunFinished {
            status,
            steps: self.steps_run,
            node_executions: self.node_executions,
        });
        // The run is over: its pauses go to the outcome (and stay with the saved thread when it
        // paused before a step), not copied once more.
        let pauses = std::mem::take(&mut self.pauses);
        if self.saved.paused_before {
            self.saved.pauses = pauses.clone();
        }
        let interrupts: Vec<Interrupt> = if status == RunStatus::Interrupted {
            pauses
        } else {
            Vec::new()
        };
        let outcome = result.map(|status| RunOutcome {
            run_id: self.run_id,
            thread_id: self.thread.clone(),
            status,
            state: self.saved.state.clone(),
            interrupts,
            steps: self.steps_run,
            node_executions: self.node_executions,
        });
        self.sh.release(&self.thread, self.run_id);
        self.me = None;
        let _ = outcome_tx.send(outcome);
    }

    /// What the run's durability leaves for its end: waiting for the queued writes (`async`), or
    /// storing the run's position and a pause's writes (`exit`).
    async fn persist_end(&mut self, status: RunStatus) -> Result<(), RunError> {
        let Some(cp) = self.sh.storage.checkpointer.clone() else {
            return Ok(());
        };
        match self.store.durability() {
            Durability::Async => self.store.flush(&self.sh.storage, &self.thread).await?,
            Durability::Exit => {
                if self.store.persisted_head() != self.saved.head {
                    self.saved.head = self.store.persisted_head();
                    // The pause goes with the only checkpoint this run stores, or a reload would
                    // find the thread paused with nothing pending.
                    let pause = self.saved.paused_before.then(|| crate::checkpoint::Pause {
                        at: self.saved.pause_at,
                        interrupts: self.pauses.clone(),
                    });
                    let tasks = self.saved.stored_tasks();
                    let nodes = self
                        .recent
                        .back()
                        .map(|n| vec![n.to_string()])
                        .unwrap_or_default();
                    let rec = persist::step_record(
                        &self.sh.graph,
                        &self.thread,
                        &mut self.saved,
                        CheckpointSource::Loop,
                        nodes,
                        None,
                        &tasks,
                        serde_json::Value::Null,
                        pause,
                    )?;
                    self.store.put_final(&self.sh.storage, rec).await?;
                }
                if status == RunStatus::Interrupted {
                    let mut writes = Vec::new();
                    for (i, t) in self.saved.tasks.iter().enumerate() {
                        if let Some(Some(u)) = self.step.updates().get(i) {
                            writes.push(persist::update_write(&self.sh.graph, t, u)?);
                            if let Some(Some(g)) = self.saved.gotos.get(i) {
                                writes.push(persist::goto_write(t, g)?);
                            }
                        }
                        if let Some(Some(int)) = self.step.interrupts().get(i) {
                            writes.push(persist::interrupt_write(t, int)?);
                        }
                    }
                    if let (false, Some(head)) = (writes.is_empty(), self.saved.head) {
                        cp.put_writes(&self.thread, head, writes).await?;
                    }
                }
            }
            Durability::Sync => {}
        }
        Ok(())
    }

    async fn handle_result(&mut self, r: Result<(), RunError>) {
        if let Err(e) = r {
            self.finish(Err(e)).await;
        }
    }
}

impl<S: State> Message<Kick> for Supervisor<S> {
    type Reply = ();

    async fn handle(&mut self, _: Kick, ctx: &mut Context<Self, ()>) {
        let span = self.span.clone();
        async move { self.kick(ctx).await }.instrument(span).await
    }
}

impl<S: State> Supervisor<S> {
    async fn kick(&mut self, ctx: &mut Context<Self, ()>) {
        self.events.emit(|| RunEvent::RunStarted {
            run_id: self.run_id,
            thread_id: self.thread.clone(),
            step: self.saved.step,
        });
        let r = if self.saved.tasks.is_empty() {
            self.finish(Ok(RunStatus::Finished)).await;
            Ok(())
        } else if self.saved.paused_before && self.steps_run == 0 {
            // A new run whose first nodes are in `interrupt_before`: paused before they run.
            let pauses = self.saved.pauses.clone();
            self.pause(pauses).await
        } else {
            self.advance().await
        };
        self.handle_result(r).await;
        if self.outcome.is_none() {
            ctx.stop();
        }
    }
}

impl<S: State> Message<TaskDone<S>> for Supervisor<S> {
    type Reply = ();

    async fn handle(&mut self, done: TaskDone<S>, ctx: &mut Context<Self, ()>) {
        if self.outcome.is_none() {
            return;
        }
        let span = self.span.clone();
        async {
            let r = self.on_done(done).await;
            self.handle_result(r).await;
        }
        .instrument(span)
        .await;
        if self.outcome.is_none() {
            ctx.stop();
        }
    }
}

impl<S: State> Message<Retry> for Supervisor<S> {
    type Reply = ();

    async fn handle(&mut self, Retry(i): Retry, ctx: &mut Context<Self, ()>) {
        let i = i as usize;
        if self.outcome.is_none() || !self.step.retry_due(i) {
            return;
        }
        let span = self.span.clone();
        async {
            let r = self.advance().await;
            self.handle_result(r).await;
        }
        .instrument(span)
        .await;
        if self.outcome.is_none() {
            ctx.stop();
        }
    }
}

impl<S: State> Message<Cancel> for Supervisor<S> {
    type Reply = ();

    async fn handle(&mut self, _: Cancel, ctx: &mut Context<Self, ()>) {
        self.finish(Err(RunError::Cancelled)).await;
        ctx.stop();
    }
}

impl<S: State> RunControl for ActorRef<Supervisor<S>> {
    fn cancel(&self) {
        let _ = self.tell(Cancel).try_send();
    }

    fn drain(&self) {
        let _ = self.tell(Drain).try_send();
    }
}

impl<S: State> Message<Drain> for Supervisor<S> {
    type Reply = ();

    async fn handle(&mut self, _: Drain, _: &mut Context<Self, ()>) {
        self.draining = true;
    }
}
