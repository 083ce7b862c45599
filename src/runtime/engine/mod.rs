//! The engine: hosts many conversations of one compiled graph.
//!
//! It spawns one node actor per node (supervised by a root actor that restarts them when they
//! panic), keeps a registry of active runs by thread (so a thread never has two runs at once),
//! loads and saves threads through the checkpointer, and spawns a supervisor actor per run.

use super::actors::node_actor::{NodeActor, NodeActorArgs};
use super::actors::shared::{ActiveRun, Shared};
use super::actors::stats::{NodeStats, NodeStatsSnapshot};
use super::actors::supervisor::{Kick, Supervisor, SupervisorArgs};
use super::error::{Refusal, RunError};
use super::machine::per_run::PerRun;
use super::run::{
    BusyPolicy, CheckpointInfo, MigrationHook, Resume, RunHandle, RunOptions, RunOutcome,
    ThreadState,
};
use super::storage::{self, persist, AsyncWriter, Durability, SavedThread, Storage};
use super::subgraph;
use crate::checkpoint::{CheckpointSource, Checkpointer};
use crate::events::EventSink;
use crate::graph::CompiledGraph;
use crate::ids::{CheckpointId, RunId, ThreadId};
use crate::reducer::MergeCtx;
use crate::state::State;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use kameo::actor::{Actor, ActorRef, Spawn};
use kameo::mailbox;
use kameo::supervision::RestartPolicy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch, Semaphore};
use tokio_util::sync::CancellationToken;

mod admin;
mod admission;
mod resume_plan;
mod start;
mod subgraph_node;

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
    commit_window: Option<crate::runtime::CommitWindow>,
    keep_paused: usize,
}

impl<S: State> EngineBuilder<S> {
    /// How the checkpoint writer gathers concurrent conversations' writes into one commit
    /// (default [`CommitWindow::for_backend`](crate::runtime::CommitWindow::for_backend): 2 ms
    /// under load on SQLite, none on PostgreSQL;
    /// [`CommitWindow::OFF`](crate::runtime::CommitWindow::OFF) commits at once).
    pub fn commit_window(mut self, window: crate::runtime::CommitWindow) -> Self {
        self.commit_window = Some(window);
        self
    }

    /// Keeps at most `threads` paused threads' states in memory for their resume (default
    /// [`DEFAULT_KEEP_PAUSED`](crate::runtime::DEFAULT_KEEP_PAUSED); 0 keeps none). Each holds
    /// its thread's state until the thread is resumed, changed or deleted, or newer pauses push it
    /// out: size it by the states (docs/checkpoints.md, "A paused thread's state stays in
    /// memory").
    pub fn keep_paused(mut self, threads: usize) -> Self {
        self.keep_paused = threads;
        self
    }

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
        let window = self.commit_window;
        let writer = self.checkpointer.clone().map(|cp| {
            let window = window.unwrap_or_else(|| crate::runtime::CommitWindow::for_backend(&*cp));
            AsyncWriter::spawn(cp, window)
        });
        for n in self.graph.nodes() {
            if let Some(sub) = n.subgraph.as_ref().and_then(subgraph::handle) {
                sub.attach(subgraph::Services {
                    checkpointer: self.checkpointer.clone(),
                    store: self.store.clone(),
                    durability: self.durability,
                })
                .await;
            }
        }
        Engine {
            sh: Arc::new(Shared {
                graph: self.graph,
                nodes,
                stats,
                storage: Storage {
                    checkpointer: self.checkpointer,
                    writer,
                    counters: Default::default(),
                },
                durability: self.durability,
                registry: DashMap::new(),
                ephemeral: DashMap::new(),
                paused: storage::PausedThreads::holding(self.keep_paused),
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
    /// A resume, with a command's update applied first when there is one.
    Resume(Resume, Option<S::Update>),
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
            commit_window: None,
            keep_paused: crate::runtime::DEFAULT_KEEP_PAUSED,
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
        self.sh.storage.checkpointer.as_ref()
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
        self.launch(thread, StartMode::Resume(resume, None), opts)
            .await
    }

    /// Writes `update` to an interrupted thread and resumes it (LangGraph's
    /// `Command(update=…, resume=…)`), returning the run's handle at once. On a thread paused
    /// inside a node, the update is saved beside the answers at the thread's head checkpoint
    /// (the null task's writes: no new checkpoint, one commit with the answers) and applied
    /// before the pending tasks run: the paused node runs again from its start, sees the
    /// updated state, and its `interrupt` call returns the answer. A crash before the node
    /// finishes loses neither: loading the thread applies the update again and a continue runs
    /// the answered node. On a thread paused before or after a node, the update goes into the
    /// checkpoint that marks the pause consumed. The resume is checked before anything is
    /// written.
    pub async fn start_resume_updated(
        &self,
        thread: ThreadId,
        update: S::Update,
        resume: Resume,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        self.launch(thread, StartMode::Resume(resume, Some(update)), opts)
            .await
    }

    /// Cancels the thread's active run; false if it has none.
    pub fn cancel(&self, thread: &ThreadId) -> bool {
        match self.sh.registry.get(thread) {
            Some(run) => {
                run.cancel.cancel();
                if let Some(s) = &run.supervisor {
                    s.cancel();
                }
                true
            }
            None => false,
        }
    }

    /// Waits until the thread has no active run (at once when it has none now). Another run may
    /// claim the thread right after; a start with `RunOptions::enqueue` then waits its turn.
    pub async fn wait_idle(&self, thread: &ThreadId) {
        loop {
            let mut ended = match self.sh.registry.get(thread) {
                Some(run) => run.ended.subscribe(),
                None => return,
            };
            let _ = ended.wait_for(|e| *e).await;
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
        let c = &self.sh.storage.counters;
        (
            c.records.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
            c.writes.load(Ordering::Relaxed),
        )
    }

    /// How this engine loaded threads to run them or read their state: with a paused thread's
    /// state kept in memory, or from storage (docs/checkpoints.md, "A paused thread's state stays
    /// in memory").
    pub fn thread_loads(&self) -> crate::runtime::ThreadLoads {
        self.sh.paused.loads()
    }

    /// Node executions across every run of this engine.
    pub fn total_node_executions(&self) -> u64 {
        self.sh.total_node_executions.load(Ordering::Relaxed)
    }

    /// Stops taking runs, lets every active run finish its current superstep, checkpoints it and
    /// stops it (status `Suspended`; `continue_run` resumes it later), then waits for all of them.
    pub async fn shutdown(&self) {
        self.sh.shutting_down.store(true, Ordering::SeqCst);
        let mut waits = Vec::new();
        for run in self.sh.registry.iter() {
            if let Some(s) = &run.supervisor {
                s.drain();
            }
            waits.push(run.ended.subscribe());
        }
        for mut w in waits {
            let _ = w.wait_for(|e| *e).await;
        }
        for n in self.sh.graph.nodes() {
            if let Some(sub) = n.subgraph.as_ref().and_then(subgraph::handle) {
                sub.shutdown().await;
            }
        }
    }
}
