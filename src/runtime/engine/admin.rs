//! Thread administration: state, history, a past checkpoint's state, editing the state as a node,
//! forking, deleting and pruning.
use super::*;

impl<S: State> Engine<S> {
    /// The thread's current state, pending nodes and interrupts; `None` for an unknown thread.
    pub async fn get_state(&self, thread: &ThreadId) -> Result<Option<ThreadState<S>>, RunError> {
        Ok(self.load(thread).await?.map(|s| ThreadState {
            next: s.stored_tasks().iter().map(|t| t.node_name()).collect(),
            interrupts: s.interrupts(),
            checkpoint: if self.sh.storage.checkpointer.is_some() {
                s.head
            } else {
                None
            },
            step: s.step,
            values: s.state,
        }))
    }

    /// The child threads of the thread's pending subgraph tasks (LangGraph's
    /// `get_state(..., subgraphs=True)`): for a thread paused inside a subgraph, where the
    /// subgraph stands. Empty when no pending task is a subgraph's.
    pub async fn subgraph_states(
        &self,
        thread: &ThreadId,
    ) -> Result<Vec<subgraph::SubgraphState>, RunError> {
        let Some(saved) = self.load(thread).await? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for t in &saved.tasks {
            let node = self.sh.graph.node(t.node_id);
            if let Some(sub) = node.subgraph.as_ref().and_then(subgraph::handle) {
                let child = subgraph::child_thread(thread, &t.node, saved.head, t.id.index);
                if let Some(st) = sub.state(&t.node, &child).await? {
                    out.push(st);
                }
            }
        }
        Ok(out)
    }

    pub(super) fn storage(&self) -> Result<&Arc<dyn Checkpointer>, RunError> {
        self.sh
            .storage
            .checkpointer
            .as_ref()
            .ok_or_else(|| Refusal::NoCheckpointer("thread history").into())
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

    /// The thread as it stood at checkpoint `id`: its state, the nodes that were to run next and
    /// the interrupts pending there (what [`Engine::get_state`] says of the head).
    pub async fn thread_state_at(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<ThreadState<S>, RunError> {
        let cp = self.storage()?;
        let s = persist::load(&**cp, &self.sh.graph, thread, Some(id))
            .await?
            .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?
            .saved;
        Ok(ThreadState {
            next: s.stored_tasks().iter().map(|t| t.node_name()).collect(),
            interrupts: s.interrupts(),
            checkpoint: Some(id),
            step: s.step,
            values: s.state,
        })
    }

    /// The state at one checkpoint of the thread.
    pub async fn state_at(&self, thread: &ThreadId, id: CheckpointId) -> Result<Arc<S>, RunError> {
        let cp = self.storage()?;
        let loaded = persist::load(&**cp, &self.sh.graph, thread, Some(id))
            .await?
            .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?;
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
        self.edit(thread, update, Edit::AsNode(as_node)).await
    }

    /// Writes `update` to an idle thread and makes `goto` the nodes that run next (LangGraph's
    /// `Command(update=…, goto=…)` as a run's input): the thread's pending tasks are replaced by
    /// them, and a continue runs them. With no `goto`, the pending tasks stay as they were (a
    /// thread whose pending tasks already wrote or asked something is refused). Returns the new
    /// checkpoint.
    pub async fn update_state_goto(
        &self,
        thread: &ThreadId,
        update: S::Update,
        goto: &[String],
    ) -> Result<CheckpointId, RunError> {
        self.edit(thread, update, Edit::Goto(goto)).await
    }

    async fn edit(
        &self,
        thread: &ThreadId,
        update: S::Update,
        how: Edit<'_>,
    ) -> Result<CheckpointId, RunError> {
        let graph = &self.sh.graph;
        let node_of = |name: &str| {
            graph
                .node_id(name)
                .ok_or_else(|| RunError::from(Refusal::UnknownNode(name.to_string())))
        };
        let (writer, targets) = match how {
            Edit::AsNode(name) => (name, vec![(name, node_of(name)?)]),
            Edit::Goto(nodes) => {
                let mut targets = Vec::with_capacity(nodes.len());
                for n in nodes {
                    targets.push((n.as_str(), node_of(n)?));
                }
                ("__command__", targets)
            }
        };
        let (run_id, _) = self.claim(thread, BusyPolicy::Reject).await?;
        let result = async {
            let mut saved = self
                .load(thread)
                .await?
                .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?;
            let delta = crate::json::to_vec(&[&update])?;
            let mut ctx = MergeCtx::new();
            ctx.set_writer(writer);
            Arc::make_mut(&mut saved.state).apply(update, &mut ctx)?;
            let tasks: Vec<_> = targets
                .iter()
                .enumerate()
                .map(
                    |(i, (name, node_id))| crate::runtime::machine::superstep::TaskSpec {
                        id: crate::ids::TaskId {
                            step: saved.step,
                            index: i as u32,
                        },
                        node: Arc::from(*name),
                        node_id: *node_id,
                        input: None,
                        after: vec![],
                        batch: None,
                        batch_limit: None,
                        deferred: false,
                    },
                )
                .collect();
            let next = match how {
                // The node's edges decide what runs after it.
                Edit::AsNode(_) => Some(crate::runtime::machine::superstep::next_tasks(
                    &self.sh.graph,
                    &saved.state,
                    &tasks,
                    saved.step,
                )?),
                // An update with no goto leaves the pending superstep (and a pause before it) as
                // it was; one whose tasks already wrote (or asked) is refused: those writes
                // belong to the checkpoint the update would replace.
                Edit::Goto([]) if saved.writes.iter().any(Option::is_some) => {
                    return Err(Refusal::Interrupted(thread.clone()).into());
                }
                Edit::Goto([]) => None,
                // The goto targets run next.
                Edit::Goto(_) => Some(tasks),
            };
            if let Some(next) = next {
                // Deferred tasks the thread was holding keep waiting behind the edit's next tasks.
                let waiting = std::mem::take(&mut saved.deferred);
                (saved.tasks, saved.deferred) = crate::runtime::machine::superstep::schedule(
                    &self.sh.graph,
                    next,
                    waiting,
                    saved.step,
                );
                saved.writes = vec![None; saved.tasks.len()];
                saved.gotos = Vec::new();
                // Nodes that pause before running pause after an edit too, as they would after a
                // superstep: the edit is what the approver reviews (the graph's own pauses: no
                // run's options apply to an edit).
                let pauses = crate::runtime::machine::per_run::PerRun::default()
                    .pauses_ahead_of(&self.sh.graph, &saved.tasks);
                saved.paused_before = !pauses.is_empty();
                saved.pause_at = crate::checkpoint::PauseAt::Before;
                saved.pauses = pauses;
            }
            let tasks = saved.stored_tasks();
            let pause = saved.pause();
            let rec = persist::step_record(
                &self.sh.graph,
                thread,
                &mut saved,
                CheckpointSource::Update,
                vec![writer.to_string()],
                Some(delta),
                &tasks,
                serde_json::Value::Null,
                pause,
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
        let extra = serde_json::json!({ "forked_from": { "thread": thread, "checkpoint": at } });
        let (rec, _) = self
            .copy_of(thread, at, new_thread, None, CheckpointSource::Fork, extra)
            .await?;
        let id = rec.id;
        self.put(rec).await?;
        Ok(id)
    }

    /// The record that copies checkpoint `at` of `thread` — its state as a snapshot, its pending
    /// tasks and its pause — as the checkpoint after `parent` on `into` (fork and branch), with
    /// the fingerprint `at` was written with.
    async fn copy_of(
        &self,
        thread: &ThreadId,
        at: CheckpointId,
        into: &ThreadId,
        parent: Option<CheckpointId>,
        source: CheckpointSource,
        extra: serde_json::Value,
    ) -> Result<(crate::checkpoint::CheckpointRecord, String), RunError> {
        let cp = self.storage()?;
        let src = cp.get(thread, at).await?;
        let loaded = persist::load(&**cp, &self.sh.graph, thread, Some(at))
            .await?
            .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?;
        let mut saved = loaded.saved;
        saved.head = parent;
        let tasks = saved.stored_tasks();
        let mut rec = persist::step_record(
            &self.sh.graph,
            into,
            &mut saved,
            source,
            src.metadata.nodes.clone(),
            None,
            &tasks,
            extra,
            src.metadata.pause.clone(),
        )?;
        rec.next_tasks = src.next_tasks;
        Ok((rec, loaded.fingerprint))
    }

    /// Time travel on the same thread: takes the thread back to checkpoint `at`. A new head
    /// checkpoint (source `Branch`, `extra.branched_from = at`) holds `at`'s state, pending tasks
    /// and pause, so the next run, resume or `update_state` goes on from there; the checkpoints
    /// written after `at` stay in the history, which now shows the branch. The thread's chain
    /// stays linear (one writer, parent = the previous head), so a branch can never fork it.
    /// Branching to the head changes nothing and returns it. Refused while a run is active
    /// (`ThreadBusy`); needs a checkpointer.
    pub async fn branch(
        &self,
        thread: &ThreadId,
        at: CheckpointId,
    ) -> Result<CheckpointId, RunError> {
        let cp = self.storage()?.clone();
        let (run_id, _) = self.claim(thread, BusyPolicy::Reject).await?;
        let result = async {
            let head = cp
                .head(thread)
                .await?
                .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?;
            if head == at {
                return Ok(head);
            }
            let extra = serde_json::json!({ "branched_from": at });
            let (rec, fingerprint) = self
                .copy_of(
                    thread,
                    at,
                    thread,
                    Some(head),
                    CheckpointSource::Branch,
                    extra,
                )
                .await?;
            if fingerprint != self.sh.graph.fingerprint() {
                return Err(RunError::FingerprintMismatch {
                    thread: thread.clone(),
                    expected: self.sh.graph.fingerprint().to_string(),
                    found: fingerprint,
                });
            }
            let id = rec.id;
            self.put(rec).await?;
            Ok(id)
        }
        .await;
        self.sh.release(thread, run_id);
        result
    }

    /// Replays the thread from checkpoint `at` ([`Engine::branch`], then
    /// [`Engine::continue_run`]): the supersteps after `at` run again, on the same thread.
    pub async fn replay(
        &self,
        thread: ThreadId,
        at: CheckpointId,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>, RunError> {
        self.branch(&thread, at).await?;
        self.continue_run(thread, opts).await
    }

    /// Deletes a thread and everything stored for it.
    pub async fn delete_thread(&self, thread: &ThreadId) -> Result<(), RunError> {
        if self.is_running(thread) {
            return Err(Refusal::ThreadBusy(thread.clone()).into());
        }
        self.sh.ephemeral.remove(thread);
        self.sh.paused.forget(thread);
        if let Some(cp) = &self.sh.storage.checkpointer {
            cp.delete_thread(thread).await?;
            // Subgraphs' child threads live in the thread's namespace: they go with it.
            if self.sh.graph.nodes().iter().any(|n| n.subgraph.is_some()) {
                let prefix = format!("{thread}|");
                loop {
                    let children = cp.list_threads(&prefix, 100, 0).await?;
                    if children.is_empty() {
                        break;
                    }
                    for c in children {
                        cp.delete_thread(&c.thread_id).await?;
                    }
                }
            }
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
            .ok_or_else(|| Refusal::UnknownThread(thread.clone()))?;
        let snapshot = crate::checkpoint::body_codec::encode_with(
            crate::json::to_vec(&*loaded.saved.state)?,
            self.sh.graph.body_dictionary(),
        );
        cp.prune(thread, *oldest, snapshot).await?;
        Ok(())
    }
}

/// How [`Engine::edit`] places an update.
#[derive(Clone, Copy)]
enum Edit<'a> {
    /// As this node's write: its edges decide what runs next.
    AsNode(&'a str),
    /// As a command's: these nodes run next.
    Goto(&'a [String]),
}
