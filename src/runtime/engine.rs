//! The engine: hosts many conversations of one compiled graph.
//!
//! It spawns one node actor per node (supervised by a root actor that restarts them when they
//! panic), keeps a registry of active runs by thread (so a thread never has two runs at once),
//! loads and saves threads through the checkpointer, and spawns a supervisor actor per run.

use super::error::RunError;
use super::node_actor::{NodeActor, NodeActorArgs};
use super::per_run::PerRun;
use super::persist::{self, Durability};
use super::saved::{SavedThread, SavedWrite};
use super::shared::{
    ActiveRun, BusyPolicy, MigrationHook, RunHandle, RunOptions, RunOutcome, Shared,
};
use super::stats::{NodeStats, NodeStatsSnapshot};
use super::supervisor::{Cancel, Drain, Kick, Supervisor, SupervisorArgs};
use super::writer::AsyncWriter;
use crate::checkpoint::{CheckpointMetadata, CheckpointSource, Checkpointer};
use crate::events::{EventSink, Interrupt};
use crate::graph::CompiledGraph;
use crate::ids::{CheckpointId, RunId, ThreadId};
use crate::reducer::MergeCtx;
use crate::state::State;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use kameo::actor::{Actor, ActorRef, Spawn};
use kameo::mailbox;
use kameo::supervision::RestartPolicy;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch, Semaphore};
use tokio_util::sync::CancellationToken;

/// A resume value: one value for the single pending interrupt, or one per interrupt id.
#[derive(Clone, Debug, PartialEq)]
pub enum Resume {
    /// The value for the only pending interrupt (or for every pending pause before/after a node).
    Value(serde_json::Value),
    /// Values by interrupt id; every pending interrupt needs one.
    ById(BTreeMap<String, serde_json::Value>),
}

/// A thread's state as seen from outside.
#[derive(Clone, Debug)]
pub struct ThreadState<S: State> {
    /// The state at the head checkpoint.
    pub values: Arc<S>,
    /// The head checkpoint (`None` for an ephemeral engine's thread).
    pub checkpoint: Option<CheckpointId>,
    /// Nodes of the pending superstep (empty: idle).
    pub next: Vec<String>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Supersteps run on the thread.
    pub step: u64,
}

/// One entry of a thread's history.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointInfo {
    /// The checkpoint.
    pub id: CheckpointId,
    /// Its parent.
    pub parent: Option<CheckpointId>,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
}

/// Root actor supervising the node actors.
struct Root;

impl Actor for Root {
    type Args = ();
    type Error = kameo::error::Infallible;

    async fn on_start(_: (), _: ActorRef<Self>) -> Result<Self, Self::Error> {
        Ok(Root)
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder<S: State> {
    graph: CompiledGraph<S>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    durability: Durability,
    migration: Option<MigrationHook<S>>,
    store: Option<Arc<dyn crate::store::Store>>,
}

impl<S: State> EngineBuilder<S> {
    /// Gives every node of this engine's runs a store (cross-thread memory), read with
    /// [`NodeContext::store`](crate::NodeContext::store).
    pub fn store(mut self, store: Arc<dyn crate::store::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Stores threads in `cp` (without one, threads live in memory only).
    pub fn checkpointer(mut self, cp: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(cp);
        self
    }

    /// Stores threads in `cp` when given; without, threads live in memory only.
    pub fn maybe_checkpointer(mut self, cp: Option<Arc<dyn Checkpointer>>) -> Self {
        self.checkpointer = cp;
        self
    }

    /// Sets the default durability (default `sync`).
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// Handles threads written by a graph with another fingerprint: the hook gets the stored state
    /// and fingerprint, and returns the state to start a fresh run from.
    pub fn migration(
        mut self,
        hook: impl Fn(S, &str) -> Result<S, String> + Send + Sync + 'static,
    ) -> Self {
        self.migration = Some(Arc::new(hook));
        self
    }

    /// Spawns the node actors and returns the engine. Must be called inside a tokio runtime.
    pub async fn build(self) -> Engine<S> {
        let root = Root::spawn(());
        let mut nodes = Vec::new();
        let mut stats = Vec::new();
        for (i, n) in self.graph.nodes().iter().enumerate() {
            let s = Arc::new(NodeStats::default());
            let args = NodeActorArgs {
                graph: self.graph.clone(),
                node: crate::ids::NodeId(i as u32),
                limit: Arc::new(Semaphore::new(n.options.concurrency)),
                stats: s.clone(),
            };
            let actor = NodeActor::supervise(&root, args)
                .restart_policy(RestartPolicy::Permanent)
                .restart_limit(u32::MAX, Duration::from_secs(1))
                .spawn_with_mailbox(mailbox::bounded(n.options.mailbox))
                .await;
            nodes.push(actor);
            stats.push(s);
        }
        let writer = self.checkpointer.clone().map(AsyncWriter::spawn);
        Engine {
            sh: Arc::new(Shared {
                graph: self.graph,
                nodes,
                stats,
                checkpointer: self.checkpointer,
                durability: self.durability,
                writer,
                registry: DashMap::new(),
                ephemeral: DashMap::new(),
                counters: Default::default(),
                migration: self.migration,
                shutting_down: AtomicBool::new(false),
                total_node_executions: Default::default(),
                store: self.store,
            }),
            _root: root,
        }
    }
}

enum StartMode<S: State> {
    Input(S::Update),
    /// Input that replaces an unfinished (not interrupted) superstep the thread was left in.
    Replace(S::Update),
    Continue,
    Resume(Resume),
}

/// Runs conversations of one compiled graph. Cheap to clone; clones share everything.
pub struct Engine<S: State> {
    sh: Arc<Shared<S>>,
    _root: ActorRef<Root>,
}

impl<S: State> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Self {
            sh: self.sh.clone(),
            _root: self._root.clone(),
        }
    }
}

impl<S: State> Engine<S> {
    /// An engine builder for `graph`.
    pub fn builder(graph: CompiledGraph<S>) -> EngineBuilder<S> {
        EngineBuilder {
            graph,
            checkpointer: None,
            durability: Durability::Sync,
            migration: None,
            store: None,
        }
    }

    /// An in-memory engine with default settings.
    pub async fn new(graph: CompiledGraph<S>) -> Self {
        Self::builder(graph).build().await
    }

    /// The graph this engine runs.
    pub fn graph(&self) -> &CompiledGraph<S> {
        &self.sh.graph
    }

    /// The checkpointer, if any.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.sh.checkpointer.as_ref()
    }

    /// Starts a run on `thread` with `input` merged into its state, and waits for it to end.
    pub async fn run(
        &self,
        thread: ThreadId,
        input: S::Update,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>, RunError> {
        self.start(thread, input, opts).await?.wait().await
    }

    /// Starts a run and returns its handle at once.
    pub async fn start(
        &self,
        thread: ThreadId,
        input: S::Update,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        self.launch(thread, StartMode::Input(input), opts).await
    }

    /// Starts a run with `input` on a thread whose last run stopped between supersteps (a
    /// cancel), abandoning that unfinished superstep: the new run starts from the thread's
    /// state at its newest checkpoint, as a new input does in LangGraph. A thread paused on an
    /// interrupt is still refused (resume it); a thread with nothing unfinished starts as with
    /// [`Engine::start`].
    pub async fn start_replacing(
        &self,
        thread: ThreadId,
        input: S::Update,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        self.launch(thread, StartMode::Replace(input), opts).await
    }

    /// Continues a thread whose run stopped between supersteps (a crash, a cancel, a shutdown).
    pub async fn continue_run(
        &self,
        thread: ThreadId,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>, RunError> {
        self.start_continue(thread, opts).await?.wait().await
    }

    /// Continues a thread whose run stopped between supersteps, and returns the run's handle at
    /// once (a server's "run with no input": go on from the newest checkpoint).
    pub async fn start_continue(
        &self,
        thread: ThreadId,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        self.launch(thread, StartMode::Continue, opts).await
    }

    /// Resumes an interrupted thread and waits for the run to end.
    pub async fn resume(
        &self,
        thread: ThreadId,
        resume: Resume,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>, RunError> {
        self.start_resume(thread, resume, opts).await?.wait().await
    }

    /// Resumes an interrupted thread and returns the run's handle at once.
    pub async fn start_resume(
        &self,
        thread: ThreadId,
        resume: Resume,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        self.launch(thread, StartMode::Resume(resume), opts).await
    }

    /// Cancels the thread's active run; false if it has none.
    pub fn cancel(&self, thread: &ThreadId) -> bool {
        match self.sh.registry.get(thread) {
            Some(run) => {
                run.cancel.cancel();
                if let Some(s) = &run.supervisor {
                    let _ = s.tell(Cancel).try_send();
                }
                true
            }
            None => false,
        }
    }

    /// True when the thread has an active run.
    pub fn is_running(&self, thread: &ThreadId) -> bool {
        self.sh.registry.contains_key(thread)
    }

    /// Number of active runs.
    pub fn active_runs(&self) -> usize {
        self.sh.registry.len()
    }

    /// Per-node counters: mailbox depth, executions, queue and work time.
    pub fn node_stats(&self) -> Vec<NodeStatsSnapshot> {
        self.sh
            .graph
            .nodes()
            .iter()
            .zip(&self.sh.stats)
            .map(|(n, s)| {
                let mut snap = s.snapshot(&n.name);
                if let Some(c) = &n.cache {
                    (snap.cache_hits, snap.cache_misses) = (c.hits(), c.misses());
                }
                snap
            })
            .collect()
    }

    /// Checkpoint records and bytes written by this engine.
    pub fn checkpoint_counters(&self) -> (u64, u64, u64) {
        let c = &self.sh.counters;
        (
            c.records.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
            c.writes.load(Ordering::Relaxed),
        )
    }

    /// Node executions across every run of this engine.
    pub fn total_node_executions(&self) -> u64 {
        self.sh.total_node_executions.load(Ordering::Relaxed)
    }

    async fn claim(
        &self,
        thread: &ThreadId,
        policy: BusyPolicy,
    ) -> Result<(RunId, CancellationToken), RunError> {
        loop {
            if self.sh.shutting_down.load(Ordering::SeqCst) {
                return Err(RunError::ShuttingDown);
            }
            let mut wait = match self.sh.registry.entry(thread.clone()) {
                Entry::Vacant(v) => {
                    let run_id = RunId::next();
                    let cancel = CancellationToken::new();
                    let (ended, _) = watch::channel(false);
                    v.insert(ActiveRun {
                        run_id,
                        cancel: cancel.clone(),
                        supervisor: None,
                        ended,
                    });
                    return Ok((run_id, cancel));
                }
                Entry::Occupied(o) => match policy {
                    BusyPolicy::Reject => return Err(RunError::ThreadBusy(thread.clone())),
                    BusyPolicy::Enqueue => o.get().ended.subscribe(),
                },
            };
            let _ = wait.wait_for(|ended| *ended).await;
        }
    }

    async fn launch(
        &self,
        thread: ThreadId,
        mode: StartMode<S>,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        let per_run = PerRun::resolve(&self.sh.graph, &opts)?;
        let (run_id, cancel) = self.claim(&thread, opts.on_busy).await?;
        match self.prepare(&thread, mode, &per_run).await {
            Ok((saved, resume, persisted_head)) => {
                let (events, rx) = if opts.stream_events {
                    let (s, r) = EventSink::channel();
                    (s, Some(r))
                } else {
                    (EventSink::disabled(), None)
                };
                let (tx, outcome) = oneshot::channel();
                let args = Box::new(SupervisorArgs {
                    shared: self.sh.clone(),
                    thread: thread.clone(),
                    run_id,
                    saved,
                    resume,
                    persisted_head,
                    durability: opts.durability.unwrap_or(self.sh.durability),
                    per_run,
                    events,
                    cancel,
                    outcome: tx,
                });
                let sup = Supervisor::spawn_with_mailbox(args, mailbox::unbounded());
                if let Some(mut run) = self.sh.registry.get_mut(&thread) {
                    run.supervisor = Some(sup.clone());
                }
                let _ = sup.tell(Kick).try_send();
                Ok(RunHandle {
                    run_id,
                    events: rx,
                    outcome,
                })
            }
            Err(e) => {
                self.sh.release(&thread, run_id);
                Err(e)
            }
        }
    }

    /// Loads the thread and applies the start mode: returns the position to run from.
    async fn prepare(
        &self,
        thread: &ThreadId,
        mode: StartMode<S>,
        per_run: &PerRun,
    ) -> Result<
        (
            SavedThread<S>,
            Vec<Option<serde_json::Value>>,
            Option<CheckpointId>,
        ),
        RunError,
    > {
        let (mut saved, mut resume) = match self.load(thread).await? {
            Some(x) => x,
            None => (SavedThread::new(), Vec::new()),
        };
        let persisted_head = saved.head;
        if matches!(mode, StartMode::Replace(_)) && !saved.is_interrupted() {
            // The unfinished superstep (and any writes its finished tasks left) is abandoned;
            // the new input starts from the state of the newest checkpoint.
            saved.tasks.clear();
            saved.writes.clear();
        }
        match mode {
            StartMode::Input(input) | StartMode::Replace(input) => {
                if !saved.tasks.is_empty() {
                    return Err(if saved.is_interrupted() {
                        RunError::BadResume {
                            thread: thread.clone(),
                            reason:
                                "the thread is interrupted: resume it instead of starting a new run"
                                    .into(),
                        }
                    } else {
                        RunError::BadResume { thread: thread.clone(), reason: "the thread has an unfinished run: continue it instead of starting a new run".into() }
                    });
                }
                let delta = serde_json::to_vec(&[&input])?;
                let mut ctx = MergeCtx::new();
                ctx.set_writer("__input__");
                Arc::make_mut(&mut saved.state).apply(input, &mut ctx)?;
                saved.tasks =
                    super::superstep::start_tasks(&self.sh.graph, &saved.state, saved.step)?;
                saved.writes = vec![None; saved.tasks.len()];
                resume = Vec::new();
                // `interrupt_before` a first node pauses before anything runs.
                let pauses = per_run.pauses_before(&self.sh.graph, &saved.tasks);
                let extra = if pauses.is_empty() {
                    serde_json::Value::Null
                } else {
                    saved.paused_before = true;
                    saved.pauses = pauses.clone();
                    serde_json::json!({ "paused_before": true, "pauses": pauses })
                };
                if self.sh.checkpointer.is_some() {
                    let tasks = saved.tasks.clone();
                    let rec = persist::step_record(
                        &self.sh.graph,
                        thread,
                        &mut saved,
                        CheckpointSource::Input,
                        vec!["__input__".into()],
                        Some(delta),
                        &tasks,
                        extra,
                    )?;
                    self.put(rec).await?;
                    return Ok((saved.clone(), resume, saved.head));
                }
            }
            StartMode::Continue => {
                if saved.tasks.is_empty() {
                    return Err(RunError::BadResume {
                        thread: thread.clone(),
                        reason: "the thread has no unfinished run to continue".into(),
                    });
                }
                if saved.is_interrupted() && resume.iter().all(Option::is_none) {
                    return Err(RunError::BadResume {
                        thread: thread.clone(),
                        reason: "the thread is interrupted: resume it with a value".into(),
                    });
                }
            }
            StartMode::Resume(value) => {
                if !saved.is_interrupted() {
                    return Err(RunError::NotInterrupted(thread.clone()));
                }
                resume = self.assign_resume(thread, &mut saved, value).await?;
            }
        }
        Ok((saved, resume, persisted_head))
    }

    async fn assign_resume(
        &self,
        thread: &ThreadId,
        saved: &mut SavedThread<S>,
        value: Resume,
    ) -> Result<Vec<Option<serde_json::Value>>, RunError> {
        let bad = |reason: String| RunError::BadResume {
            thread: thread.clone(),
            reason,
        };
        if saved.paused_before {
            if let Resume::ById(map) = &value {
                let ids: Vec<String> = saved.pauses.iter().map(|p| p.id.0.clone()).collect();
                if let Some(unknown) = map.keys().find(|k| !ids.contains(k)) {
                    return Err(bad(format!(
                        "unknown interrupt id `{unknown}`; pending: {}",
                        ids.join(", ")
                    )));
                }
            }
            saved.paused_before = false;
            saved.pauses.clear();
            if let Some(cp) = &self.sh.checkpointer {
                // Mark the pause consumed so a crash now does not pause again.
                let tasks = saved.tasks.clone();
                let rec = persist::step_record(
                    &self.sh.graph,
                    thread,
                    saved,
                    CheckpointSource::Update,
                    vec!["__resume__".into()],
                    Some(b"[]".to_vec()),
                    &tasks,
                    serde_json::Value::Null,
                )?;
                self.sh.counters.record(rec.stored_bytes());
                cp.put(rec).await?;
            }
            return Ok(vec![None; saved.tasks.len()]);
        }
        let pending: Vec<(usize, Interrupt)> = saved
            .writes
            .iter()
            .enumerate()
            .filter_map(|(i, w)| match w {
                Some(SavedWrite::Interrupted(int)) => Some((i, int.clone())),
                _ => None,
            })
            .collect();
        let mut resume = vec![None; saved.tasks.len()];
        match value {
            Resume::Value(v) => {
                if pending.len() != 1 {
                    let ids: Vec<&str> = pending.iter().map(|(_, p)| p.id.0.as_str()).collect();
                    return Err(bad(format!(
                        "{} interrupts are pending ({}); resume with a map of id to value",
                        pending.len(),
                        ids.join(", ")
                    )));
                }
                resume[pending[0].0] = Some(v);
            }
            Resume::ById(map) => {
                let ids: Vec<&str> = pending.iter().map(|(_, p)| p.id.0.as_str()).collect();
                if let Some(unknown) = map.keys().find(|k| !ids.contains(&k.as_str())) {
                    return Err(bad(format!(
                        "unknown interrupt id `{unknown}`; pending: {}",
                        ids.join(", ")
                    )));
                }
                for (i, p) in &pending {
                    let v = map
                        .get(&p.id.0)
                        .ok_or_else(|| bad(format!("no value for interrupt `{}`", p.id)))?;
                    resume[*i] = Some(v.clone());
                }
            }
        }
        if let (Some(cp), Some(head)) = (&self.sh.checkpointer, saved.head) {
            let mut writes = Vec::new();
            for (i, v) in resume.iter().enumerate() {
                if let Some(v) = v {
                    writes.push(persist::resume_write(&saved.tasks[i], v)?);
                }
            }
            cp.put_writes(thread, head, writes).await?;
        }
        Ok(resume)
    }

    async fn put(&self, rec: crate::checkpoint::CheckpointRecord) -> Result<(), RunError> {
        if let Some(cp) = &self.sh.checkpointer {
            self.sh.counters.record(rec.stored_bytes());
            cp.put(rec).await?;
        }
        Ok(())
    }

    /// Loads a thread's resumable position, applying the migration hook when the graph changed.
    async fn load(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<(SavedThread<S>, Vec<Option<serde_json::Value>>)>, RunError> {
        let Some(cp) = &self.sh.checkpointer else {
            return Ok(self
                .sh
                .ephemeral
                .get(thread)
                .map(|s| (s.clone(), Vec::new())));
        };
        let Some(loaded) = persist::load(&**cp, &self.sh.graph, thread, None).await? else {
            return Ok(None);
        };
        let mut saved = loaded.saved;
        if loaded.fingerprint != self.sh.graph.fingerprint() {
            let hook = self
                .sh
                .migration
                .as_ref()
                .ok_or_else(|| RunError::FingerprintMismatch {
                    thread: thread.clone(),
                    expected: self.sh.graph.fingerprint().to_string(),
                    found: loaded.fingerprint.clone(),
                })?;
            let migrated = hook((*saved.state).clone(), &loaded.fingerprint).map_err(|reason| {
                RunError::BadResume {
                    thread: thread.clone(),
                    reason: format!("migration refused: {reason}"),
                }
            })?;
            saved.state = Arc::new(migrated);
            // The next checkpoint must be a snapshot: the migrated state is not the stored parent
            // plus the next superstep's updates, so a delta on top of it would replay wrongly.
            saved.deltas_since_snapshot = u64::MAX;
            saved.tasks.clear();
            saved.writes.clear();
            saved.paused_before = false;
            saved.pauses.clear();
            return Ok(Some((saved, Vec::new())));
        }
        Ok(Some((saved, loaded.resume)))
    }

    /// The thread's current state, pending nodes and interrupts; `None` for an unknown thread.
    pub async fn get_state(&self, thread: &ThreadId) -> Result<Option<ThreadState<S>>, RunError> {
        Ok(self.load(thread).await?.map(|(s, _)| ThreadState {
            next: s.tasks.iter().map(|t| t.node.to_string()).collect(),
            interrupts: s.interrupts(),
            checkpoint: if self.sh.checkpointer.is_some() {
                s.head
            } else {
                None
            },
            step: s.step,
            values: s.state,
        }))
    }

    fn storage(&self) -> Result<&Arc<dyn Checkpointer>, RunError> {
        self.sh.checkpointer.as_ref().ok_or_else(|| {
            RunError::Internal("this engine has no checkpointer; history needs one".into())
        })
    }

    /// The thread's checkpoints, newest first.
    pub async fn history(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<CheckpointInfo>, RunError> {
        let list = self.storage()?.list(thread, None, limit).await?;
        Ok(list
            .into_iter()
            .map(|(id, parent, metadata)| CheckpointInfo {
                id,
                parent,
                metadata,
            })
            .collect())
    }

    /// The state at one checkpoint of the thread.
    pub async fn state_at(&self, thread: &ThreadId, id: CheckpointId) -> Result<Arc<S>, RunError> {
        let cp = self.storage()?;
        let loaded = persist::load(&**cp, &self.sh.graph, thread, Some(id))
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.clone()))?;
        Ok(loaded.saved.state)
    }

    /// Writes `update` to an idle thread as if node `as_node` had written it: the node's edges
    /// decide what runs next when the thread is continued. Returns the new checkpoint.
    pub async fn update_state(
        &self,
        thread: &ThreadId,
        update: S::Update,
        as_node: &str,
    ) -> Result<CheckpointId, RunError> {
        let node_id = self
            .sh
            .graph
            .node_id(as_node)
            .ok_or_else(|| RunError::UnknownNode(as_node.to_string()))?;
        let (run_id, _) = self.claim(thread, BusyPolicy::Reject).await?;
        let result = async {
            let (mut saved, _) = self
                .load(thread)
                .await?
                .ok_or_else(|| RunError::UnknownThread(thread.clone()))?;
            let delta = serde_json::to_vec(&[&update])?;
            let mut ctx = MergeCtx::new();
            ctx.set_writer(as_node);
            Arc::make_mut(&mut saved.state).apply(update, &mut ctx)?;
            let as_task = super::superstep::TaskSpec {
                id: crate::ids::TaskId {
                    step: saved.step,
                    index: 0,
                },
                node: Arc::from(as_node),
                node_id,
                input: None,
                after: vec![],
                batch: None,
                batch_limit: None,
            };
            saved.tasks =
                super::superstep::next_tasks(&self.sh.graph, &saved.state, &[as_task], saved.step)?;
            saved.writes = vec![None; saved.tasks.len()];
            // Nodes that pause before running pause after an edit too, as they would after a
            // superstep: the edit is what the approver reviews.
            let pauses = super::superstep::pauses_before(&self.sh.graph, &saved.tasks);
            saved.paused_before = !pauses.is_empty();
            let extra = if pauses.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::json!({ "paused_before": true, "pauses": pauses })
            };
            saved.pauses = pauses;
            let tasks = saved.tasks.clone();
            let rec = persist::step_record(
                &self.sh.graph,
                thread,
                &mut saved,
                CheckpointSource::Update,
                vec![as_node.to_string()],
                Some(delta),
                &tasks,
                extra,
            )?;
            let id = rec.id;
            self.put(rec).await?;
            Ok(id)
        }
        .await;
        self.sh.release(thread, run_id);
        result
    }

    /// Copies the thread's state at checkpoint `at` into a new thread (one snapshot checkpoint,
    /// with the same pending tasks); the source thread is untouched.
    pub async fn fork(
        &self,
        thread: &ThreadId,
        at: CheckpointId,
        new_thread: &ThreadId,
    ) -> Result<CheckpointId, RunError> {
        let cp = self.storage()?;
        let src = cp.get(thread, at).await?;
        let mut loaded = persist::load(&**cp, &self.sh.graph, thread, Some(at))
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.clone()))?;
        loaded.saved.head = None;
        let tasks = loaded.saved.tasks.clone();
        let extra = serde_json::json!({ "forked_from": { "thread": thread, "checkpoint": at } });
        let mut rec = persist::step_record(
            &self.sh.graph,
            new_thread,
            &mut loaded.saved,
            CheckpointSource::Fork,
            src.metadata.nodes.clone(),
            None,
            &tasks,
            extra,
        )?;
        rec.next_tasks = src.next_tasks;
        let id = rec.id;
        self.put(rec).await?;
        Ok(id)
    }

    /// Deletes a thread and everything stored for it.
    pub async fn delete_thread(&self, thread: &ThreadId) -> Result<(), RunError> {
        if self.is_running(thread) {
            return Err(RunError::ThreadBusy(thread.clone()));
        }
        self.sh.ephemeral.remove(thread);
        if let Some(cp) = &self.sh.checkpointer {
            cp.delete_thread(thread).await?;
        }
        Ok(())
    }

    /// Keeps only the thread's newest `keep` checkpoints (at least 1); the oldest kept becomes a snapshot.
    pub async fn prune(&self, thread: &ThreadId, keep: usize) -> Result<(), RunError> {
        let cp = self.storage()?;
        let list = cp.list(thread, None, keep.max(1)).await?;
        let Some((oldest, _, _)) = list.last() else {
            return Ok(());
        };
        let loaded = persist::load(&**cp, &self.sh.graph, thread, Some(*oldest))
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.clone()))?;
        let snapshot = serde_json::to_vec(&*loaded.saved.state)?;
        cp.prune(thread, *oldest, snapshot).await?;
        Ok(())
    }

    /// Stops taking runs, lets every active run finish its current superstep, checkpoints it and
    /// stops it (status `Suspended`; `continue_run` resumes it later), then waits for all of them.
    pub async fn shutdown(&self) {
        self.sh.shutting_down.store(true, Ordering::SeqCst);
        let mut waits = Vec::new();
        for run in self.sh.registry.iter() {
            if let Some(s) = &run.supervisor {
                let _ = s.tell(Drain).try_send();
            }
            waits.push(run.ended.subscribe());
        }
        for mut w in waits {
            let _ = w.wait_for(|e| *e).await;
        }
    }
}
