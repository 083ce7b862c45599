//! Starting, continuing and resuming: loading a thread's position (with the migration hook when
//! the graph changed), applying new input, and checking and recording a resume value against the
//! pending interrupts.
use super::*;

impl<S: State> Engine<S> {
    /// Loads the thread (unless the caller said it is `unseen`: never stored) and applies the
    /// start mode: returns the position to run from.
    pub(super) async fn prepare(
        &self,
        thread: &ThreadId,
        mode: StartMode<S>,
        per_run: &PerRun,
        unseen: bool,
    ) -> Result<(SavedThread<S>, Option<CheckpointId>), RunError> {
        let loaded = if unseen {
            None
        } else {
            self.load(thread).await?
        };
        let mut saved = loaded.unwrap_or_else(SavedThread::new);
        let mut persisted_head = saved.head;
        if matches!(mode, StartMode::Replace(_)) && !saved.is_interrupted() {
            // The unfinished superstep (and any writes its finished tasks left) is abandoned;
            // the new input starts from the state of the newest checkpoint.
            saved.clear_tasks();
        }
        match mode {
            StartMode::Input(input) | StartMode::Replace(input) => {
                if !saved.tasks.is_empty() {
                    return Err(if saved.is_interrupted() {
                        Refusal::Interrupted(thread.clone())
                    } else {
                        Refusal::UnfinishedRun(thread.clone())
                    }
                    .into());
                }
                let delta = crate::json::to_vec(&[&input])?;
                let mut ctx = MergeCtx::new();
                ctx.set_writer("__input__");
                Arc::make_mut(&mut saved.state).apply(input, &mut ctx)?;
                let first = crate::runtime::machine::superstep::start_tasks(
                    &self.sh.graph,
                    &saved.state,
                    saved.step,
                )?;
                (saved.tasks, saved.deferred) = crate::runtime::machine::superstep::schedule(
                    &self.sh.graph,
                    first,
                    Vec::new(),
                    saved.step,
                );
                saved.writes = vec![None; saved.tasks.len()];
                saved.gotos = Vec::new();
                saved.answers = Vec::new();
                // `interrupt_before` a first node pauses before anything runs.
                let pauses = per_run.pauses_ahead_of(&self.sh.graph, &saved.tasks);
                if !pauses.is_empty() {
                    saved.paused_before = true;
                    saved.pause_at = crate::checkpoint::PauseAt::Before;
                    saved.pauses = pauses;
                }
                if self.sh.storage.checkpointer.is_some() {
                    let tasks = saved.stored_tasks();
                    let pause = saved.pause();
                    let rec = persist::step_record(
                        &self.sh.graph,
                        thread,
                        &mut saved,
                        CheckpointSource::Input,
                        vec!["__input__".into()],
                        Some(delta),
                        &tasks,
                        serde_json::Value::Null,
                        pause,
                    )?;
                    self.put(rec).await?;
                    return Ok((saved.clone(), saved.head));
                }
            }
            StartMode::Continue => {
                if saved.tasks.is_empty() {
                    return Err(Refusal::NothingToContinue(thread.clone()).into());
                }
                if saved.is_interrupted() && !saved.interrupts_answered() {
                    return Err(Refusal::Interrupted(thread.clone()).into());
                }
            }
            StartMode::Resume(value, update) => {
                if !saved.is_interrupted() {
                    return Err(Refusal::NotInterrupted(thread.clone()).into());
                }
                self.assign_resume(thread, &mut saved, value, update)
                    .await?;
                // Resuming a pause before a node stores a checkpoint marking it consumed: the run
                // goes on from there (an `Exit` run's one checkpoint must follow it).
                persisted_head = saved.head;
            }
        }
        Ok((saved, persisted_head))
    }

    /// Checks the resume value ([`super::resume_plan::plan`], pure) and performs what it says:
    /// stores the answers, or the checkpoint that marks a pause consumed; a command's `update`
    /// is stored with them in the same write (see [`Engine::start_resume_updated`]).
    pub(super) async fn assign_resume(
        &self,
        thread: &ThreadId,
        saved: &mut SavedThread<S>,
        value: Resume,
        update: Option<S::Update>,
    ) -> Result<(), RunError> {
        use super::resume_plan::ResumePlan;
        let plan = super::resume_plan::plan(thread, saved, value)?;
        if let ResumePlan::ConsumePause = plan {
            saved.paused_before = false;
            saved.pauses.clear();
            // The update, if any, goes into the checkpoint that marks the pause consumed.
            let (writer, delta) = match &update {
                Some(u) => (persist::COMMAND_WRITER, crate::json::to_vec(&[u])?),
                None => ("__resume__", b"[]".to_vec()),
            };
            if let Some(u) = update {
                let mut ctx = MergeCtx::new();
                ctx.set_writer(writer);
                Arc::make_mut(&mut saved.state).apply(u, &mut ctx)?;
            }
            if self.sh.storage.checkpointer.is_some() {
                // Mark the pause consumed so a crash now does not pause again.
                let tasks = saved.stored_tasks();
                let rec = persist::step_record(
                    &self.sh.graph,
                    thread,
                    saved,
                    CheckpointSource::Update,
                    vec![writer.into()],
                    Some(delta),
                    &tasks,
                    serde_json::Value::Null,
                    None,
                )?;
                self.put(rec).await?;
            }
            return Ok(());
        }
        let mut writes = Vec::new();
        if let Some(u) = update {
            // Saved at the head beside the answers (the null task's write), applied now for
            // this run and by every later load until the superstep's checkpoint holds it.
            writes.push(persist::command_update_write(
                &self.sh.graph,
                saved.step,
                saved.head_edits,
                &u,
            )?);
            let mut ctx = MergeCtx::new();
            ctx.set_writer(persist::COMMAND_WRITER);
            Arc::make_mut(&mut saved.state).apply(u, &mut ctx)?;
            saved.head_edits += 1;
            saved.deltas_since_snapshot = u64::MAX;
        }
        match plan {
            ResumePlan::ConsumePause => {}
            ResumePlan::Rerun(tasks) => {
                // The paused tasks run again from their start; their unanswered calls pause
                // again. Their stored interrupts stay until those runs replace them.
                for i in tasks {
                    saved.writes[i] = None;
                }
            }
            ResumePlan::Answer(answers) => {
                if saved.answers.len() != saved.tasks.len() {
                    saved.answers.resize(saved.tasks.len(), Vec::new());
                }
                for (i, v) in answers {
                    let index = saved.answers[i].len();
                    writes.push(persist::resume_write(&saved.tasks[i], &v, index)?);
                    saved.answers[i].push(v);
                }
            }
        }
        if !writes.is_empty() {
            if let Some(head) = saved.head {
                self.sh
                    .storage
                    .writes_and_wait(thread, head, writes, || self.sh.others_running())
                    .await?;
            }
        }
        Ok(())
    }

    /// Stores `rec` and waits for its commit: with other runs going, in the writer's next
    /// transaction with theirs, as the supervisors' checkpoints do (a start's input checkpoint
    /// committed alone would cost a commit per conversation).
    pub(super) async fn put(
        &self,
        rec: crate::checkpoint::CheckpointRecord,
    ) -> Result<(), RunError> {
        if self.sh.storage.checkpointer.is_some() {
            self.sh.storage.counters.record(rec.stored_bytes());
        }
        self.sh
            .storage
            .put_and_wait(rec, || self.sh.others_running())
            .await
    }

    /// Loads a thread's resumable position, applying the migration hook when the graph changed.
    pub(super) async fn load(&self, thread: &ThreadId) -> Result<Option<SavedThread<S>>, RunError> {
        let Some(cp) = &self.sh.storage.checkpointer else {
            return Ok(self.sh.ephemeral.get(thread).map(|s| s.clone()));
        };
        // A paused thread's state kept in memory, if storage still has its head checkpoint.
        let reloaded = match self.sh.paused.get(thread) {
            Some(kept) => persist::reload_kept(&**cp, &self.sh.graph, thread, kept).await?,
            None => None,
        };
        self.sh.paused.count_load(reloaded.is_some());
        let loaded = match reloaded {
            Some(loaded) => Some(loaded),
            None => {
                self.sh.paused.forget(thread);
                persist::load(&**cp, &self.sh.graph, thread, None).await?
            }
        };
        let Some(loaded) = loaded else {
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
                RunError::MigrationRefused {
                    thread: thread.clone(),
                    reason,
                }
            })?;
            saved.state = Arc::new(migrated);
            // The next checkpoint must be a snapshot: the migrated state is not the stored parent
            // plus the next superstep's updates, so a delta on top of it would replay wrongly.
            saved.deltas_since_snapshot = u64::MAX;
            saved.clear_tasks();
            saved.paused_before = false;
            saved.pauses.clear();
            saved.answers.clear();
            return Ok(Some(saved));
        }
        Ok(Some(saved))
    }
}
