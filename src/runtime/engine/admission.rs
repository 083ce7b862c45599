//! Run admission: one writer per thread. A run claims its thread in the registry (or waits its
//! turn, or is refused, as its `BusyPolicy` says), then its position is prepared and its
//! supervisor spawned.
use super::*;

impl<S: State> Engine<S> {
    pub(super) async fn claim(
        &self,
        thread: &ThreadId,
        policy: BusyPolicy,
    ) -> Result<(RunId, CancellationToken), RunError> {
        loop {
            if self.sh.shutting_down.load(Ordering::SeqCst) {
                return Err(Refusal::ShuttingDown.into());
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
                    BusyPolicy::Reject => return Err(Refusal::ThreadBusy(thread.clone()).into()),
                    BusyPolicy::Enqueue => o.get().ended.subscribe(),
                },
            };
            let _ = wait.wait_for(|ended| *ended).await;
        }
    }

    pub(super) async fn launch(
        &self,
        thread: ThreadId,
        mode: StartMode<S>,
        opts: RunOptions,
    ) -> Result<RunHandle<S>, RunError> {
        let per_run = PerRun::resolve(&self.sh.graph, &opts)?;
        let (run_id, cancel) = self.claim(&thread, opts.on_busy).await?;
        let durability = opts.durability.unwrap_or(self.sh.durability);
        // Only where the run waits for its first checkpoint: a refused one stops it there.
        let unseen = opts.new_thread
            && durability == Durability::Sync
            && self.sh.storage.checkpointer.is_some()
            && matches!(mode, StartMode::Input(_));
        match self.prepare(&thread, mode, &per_run, unseen).await {
            Ok((saved, persisted_head)) => {
                let (events, rx) = if opts.stream_events {
                    let (s, r) = EventSink::channel();
                    let s = if opts.without_state_updates {
                        s.without_state_updates()
                    } else if opts.stream_values {
                        s.with_values()
                    } else {
                        s
                    };
                    let s = match &opts.events_switch {
                        Some(switch) => s.switched_by(switch.clone()),
                        None => s,
                    };
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
                    persisted_head,
                    durability,
                    per_run,
                    events,
                    cancel,
                    outcome: tx,
                });
                let sup = Supervisor::spawn_with_mailbox(args, mailbox::unbounded());
                if let Some(mut run) = self.sh.registry.get_mut(&thread) {
                    run.supervisor = Some(Box::new(sup.clone()));
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
}
