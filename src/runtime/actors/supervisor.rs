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

mod dispatch;

use super::node_actor::TaskDone;
use super::shared::{RunControl, Shared};
use crate::events::{EventSink, Interrupt, RunEvent, RunStatus};
use crate::ids::{CheckpointId, InterruptId, RunId, ThreadId};
use crate::node::{Memos, NodeError};
use crate::runtime::error::RunError;
use crate::runtime::machine::boundary::{self, AfterResult, AtBoundary, AtStart};
use crate::runtime::machine::boundary::{RecentNodes, StepEnd};
use crate::runtime::machine::per_run::PerRun;
use crate::runtime::machine::step::{End, Outcome, Step};
use crate::runtime::machine::superstep;
use crate::runtime::run::RunOutcome;
use crate::runtime::storage::{Durability, FinishedTask, Place, RunEnd};
use crate::runtime::storage::{RunStorage, SavedThread};
use crate::state::State;
use kameo::actor::{Actor, ActorRef};
use kameo::message::{Context, Message};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
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
    /// The thread and effect journal every task's context points to (one per run).
    effects: Arc<crate::effect::EffectScope>,
    /// Per task of a command node, where its running attempt leaves its `goto`.
    goto_slots: Vec<Option<Arc<crate::node::SpecialTask>>>,
    events: EventSink,
    cancel: CancellationToken,
    outcome: Option<oneshot::Sender<Result<RunOutcome<S>, RunError>>>,
    recent: RecentNodes,
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
        let effects = crate::effect::EffectScope::new(
            a.thread.clone(),
            a.shared.storage.checkpointer.as_ref(),
        );
        let mut s = Self(Box::new(Run {
            sh: a.shared,
            thread: a.thread,
            run_id: a.run_id,
            saved: a.saved,
            store: RunStorage::new(a.durability, a.persisted_head),
            per_run: a.per_run,
            step: Step::new(0),
            ready: Vec::new(),
            memo_stores: Vec::new(),
            effects,
            goto_slots: Vec::new(),
            events: a.events,
            cancel: a.cancel,
            outcome: Some(a.outcome),
            recent: RecentNodes::default(),
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
        // What storage keeps of each result, then the machine's verdict.
        let sh = &self.sh;
        let others = || sh.others_running();
        let at = Place {
            storage: &sh.storage,
            thread: &self.thread,
            others_running: &others,
        };
        let head = self.saved.head;
        let (outcome, failure) = match done.result {
            Ok(update) => {
                let goto = self
                    .goto_slots
                    .get_mut(i)
                    .and_then(Option::take)
                    .and_then(|s| s.goto.lock().unwrap_or_else(|p| p.into_inner()).take());
                let n = self.saved.tasks.len();
                let finished = FinishedTask {
                    task: &spec,
                    update: &update,
                    goto: goto.as_ref(),
                    parallel: n > 1,
                    completes_step: self.step.completes_with(i),
                };
                let dict = sh.graph.body_dictionary();
                self.store.task_updated(&at, head, finished, dict).await?;
                if let Some(g) = goto {
                    self.saved.gotos.resize(self.saved.gotos.len().max(n), None);
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
                (self.store.task_paused(&at, head, &spec, &int, &fresh_memos)).await?;
                (Outcome::Interrupted(int), None)
            }
            Err(NodeError::Cancelled) => return Err(RunError::Cancelled),
            Err(e) => {
                let policy = &sh.graph.node(spec.node_id).options.retry;
                let then = boundary::on_failure(policy, &e, done.attempt, self.rng.random::<f64>());
                let retry = then.retries();
                (Outcome::Failed { retry }, Some((e, then)))
            }
        };
        let effect = self.step.complete(i, done.attempt, outcome);
        match boundary::after_result(effect, failure.as_ref().map(|f| f.1)) {
            AfterResult::RetryAfter(wait) => {
                let me = self.me.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    if let Some(me) = me {
                        let _ = me.tell(Retry(i as u32)).try_send();
                    }
                });
            }
            AfterResult::Fail => {
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
            AfterResult::Go => {}
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
        let delta = self.store.step_delta(&self.sh.storage, &updates)?;
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
        self.recent.ran(&tasks);
        let gotos = std::mem::take(&mut self.saved.gotos);
        let waiting = std::mem::take(&mut self.saved.deferred);
        let (sh, saved) = (&self.sh, &mut self.saved);
        let next = boundary::next_superstep(
            &sh.graph,
            &self.per_run,
            &saved.state,
            &tasks,
            &gotos,
            waiting,
            saved.step,
        )?;
        let others = || sh.others_running();
        let at = Place {
            storage: &sh.storage,
            thread: &self.thread,
            others_running: &others,
        };
        let ahead = (&next.run[..], &next.waiting[..]);
        (self.store)
            .store_step(
                &at,
                &sh.graph,
                saved,
                &tasks,
                delta,
                ahead,
                next.pause.as_ref(),
            )
            .await?;
        self.saved.tasks = next.run;
        self.saved.deferred = next.waiting;
        self.saved.writes = Vec::new();
        self.saved.memos = Vec::new();
        self.saved.answers = Vec::new();
        self.reset_step();
        let limit = self.per_run.step_limit(&self.sh.graph);
        let at = AtBoundary {
            tasks_left: !self.saved.tasks.is_empty(),
            steps_run: self.steps_run,
            step_limit: limit,
            pause: next.pause,
            draining: self.draining,
        };
        match boundary::step_end(at) {
            StepEnd::Finish => self.finish(Ok(RunStatus::Finished)).await,
            StepEnd::StepLimit => {
                return Err(RunError::StepLimit {
                    limit,
                    last_nodes: self.recent.names(),
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
        let sh = &self.sh;
        let others = || sh.others_running();
        let at = Place {
            storage: &sh.storage,
            thread: &self.thread,
            others_running: &others,
        };
        let end = RunEnd {
            pauses: &self.pauses,
            last_node: self.recent.last(),
            updates: self.step.updates(),
            interrupts: self.step.interrupts(),
        };
        let result = (self.store)
            .close(&at, &sh.graph, &mut self.saved, result, end)
            .await;
        // Remember the thread's position for ephemeral engines and the pending writes for resume.
        // (Moved out of the superstep, which ends with the run, rather than copied.)
        self.saved.keep_results(self.step.take_results());
        let status = boundary::end_status(&result);
        if self.sh.storage.checkpointer.is_none() {
            let saved = self.saved.clone();
            self.sh.ephemeral.insert(self.thread.clone(), saved);
        } else {
            let paused = result.is_ok() && status == RunStatus::Interrupted;
            self.sh.paused.run_ended(&self.thread, &self.saved, paused);
        }
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
        let r = match boundary::at_start(!self.saved.tasks.is_empty(), self.saved.paused_before) {
            AtStart::Finish => {
                self.finish(Ok(RunStatus::Finished)).await;
                Ok(())
            }
            AtStart::Pause => {
                let pauses = self.saved.pauses.clone();
                self.pause(pauses).await
            }
            AtStart::Run => self.advance().await,
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
