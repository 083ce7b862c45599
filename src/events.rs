//! Typed run events, streamed to whoever watches a run.
//!
//! Events are cheap when nobody listens: an [`EventSink`] without a subscriber never builds them.
//! When someone listens, the channel is unbounded on purpose: a slow reader must never stall a
//! supervisor (that could deadlock a run against its own observer), and an event is never dropped.
//! Every event serialises to one JSON object, so a stream is JSON lines.

use crate::ids::{InterruptId, RunId, TaskId, ThreadId};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Reached END.
    Finished,
    /// Paused by one or more interrupts; resume to continue.
    Interrupted,
    /// Failed with an error.
    Failed,
    /// Cancelled by a caller.
    Cancelled,
    /// Stopped at a superstep boundary by an engine shutdown; continuing the thread resumes it.
    Suspended,
}

/// An interrupt raised by a task, waiting for a resume value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// Stable id: resume with a map keyed by it when several are pending.
    pub id: InterruptId,
    /// The node that paused.
    pub node: String,
    /// What the node asked.
    pub value: serde_json::Value,
    /// Which `NodeContext::interrupt` call of its task this is (0 for the first): a task that asks
    /// again after an answer pauses at its next call, and its answers are kept in call order.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// The run began (or resumed) on a thread.
    RunStarted {
        /// The run.
        run_id: RunId,
        /// Its thread.
        thread_id: ThreadId,
        /// The superstep it starts from.
        step: u64,
    },
    /// A task started on its node actor.
    NodeStarted {
        /// The node.
        node: String,
        /// The task.
        task: TaskId,
        /// Attempt number, from 1.
        attempt: u32,
    },
    /// A task finished (successfully or not).
    NodeFinished {
        /// The node.
        node: String,
        /// The task.
        task: TaskId,
        /// Attempt number, from 1.
        attempt: u32,
        /// Time spent running, in microseconds.
        duration_us: u64,
        /// Time spent waiting in the node's mailbox and for a concurrency slot, in microseconds.
        queued_us: u64,
        /// The error, if the attempt failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A superstep's updates were merged.
    StateUpdated {
        /// The superstep that ended.
        step: u64,
        /// The nodes whose updates were merged, in task order.
        nodes: Vec<String>,
        /// The merged updates, in task order.
        updates: Vec<serde_json::Value>,
        /// The thread's whole state after this superstep, as JSON: sent only to runs started with
        /// [`RunOptions::with_values`](crate::RunOptions::with_values), built when the event is
        /// (a reader that looks the state up later may find a later superstep's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<serde_json::Value>,
    },
    /// A node emitted a custom event.
    Custom {
        /// The node.
        node: String,
        /// Its task.
        task: TaskId,
        /// What it emitted.
        payload: serde_json::Value,
    },
    /// A chunk of a message a node is streaming (a model's answer, token by token); sent only
    /// to runs started with `RunOptions::streaming()`.
    Message {
        /// The node.
        node: String,
        /// Its task.
        task: TaskId,
        /// Which message the chunk belongs to (chunks of one message share it).
        message_id: String,
        /// The text of this chunk.
        chunk: String,
    },
    /// The run paused.
    Interrupted {
        /// The pending interrupts.
        interrupts: Vec<Interrupt>,
    },
    /// An error (a failed attempt that will not be retried, or a run error).
    Error {
        /// The node, if a node failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// What went wrong.
        message: String,
    },
    /// The run ended.
    RunFinished {
        /// How it ended.
        status: RunStatus,
        /// Supersteps run by this run.
        steps: u64,
        /// Node executions by this run.
        node_executions: u64,
    },
    /// An event of a subgraph's run, under the subgraph's namespace (`node:checkpoint.index`,
    /// its child thread's id after the parent's).
    Subgraph {
        /// Which subgraph task the event comes from.
        namespace: String,
        /// The child run's event.
        inner: Box<RunEvent>,
    },
}

impl RunEvent {
    /// The event as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!("{{\"event\":\"error\",\"message\":\"unserialisable event: {e}\"}}")
        })
    }
}

/// Turns a run's event stream on and off while the run goes on
/// ([`RunOptions::events_while`](crate::RunOptions::events_while)). While it is off the run
/// builds no events at all — a server that streams a run only while a client follows it pays
/// nothing for a run nobody watches — and the run's receiver still closes when the run ends.
/// Clones share one switch.
#[derive(Clone, Debug)]
pub struct EventSwitch(Arc<AtomicBool>);

impl EventSwitch {
    /// A switch, on or off.
    pub fn new(on: bool) -> Self {
        Self(Arc::new(AtomicBool::new(on)))
    }

    /// Events are built and sent from now on.
    pub fn turn_on(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Events are no longer built.
    pub fn turn_off(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Whether events are built now.
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Where a run sends its events. Cloned into every task's context.
#[derive(Clone, Debug, Default)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<RunEvent>>,
    /// Whether [`RunEvent::StateUpdated`] is wanted (see [`EventSink::wants_state_updates`]).
    state_updates: bool,
    /// Whether [`RunEvent::StateUpdated`] carries the state after its superstep.
    values: bool,
    /// When set, events are built only while it is on.
    switch: Option<EventSwitch>,
}

impl EventSink {
    /// A sink that discards events without building them.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// A sink and the receiver of its events.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<RunEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx: Some(tx),
                state_updates: true,
                values: false,
                switch: None,
            },
            rx,
        )
    }

    /// The same sink, without [`RunEvent::StateUpdated`].
    pub fn without_state_updates(mut self) -> Self {
        self.state_updates = false;
        self
    }

    /// The same sink, its [`RunEvent::StateUpdated`] carrying the state after each superstep.
    pub fn with_values(mut self) -> Self {
        self.values = true;
        self
    }

    /// True when [`RunEvent::StateUpdated`] is wanted with the state after its superstep.
    pub fn wants_values(&self) -> bool {
        self.values && self.wants_state_updates()
    }

    /// The same sink, building events only while `switch` is on.
    pub fn switched_by(mut self, switch: EventSwitch) -> Self {
        self.switch = Some(switch);
        self
    }

    /// The switch this sink obeys, if any (a subgraph's run obeys its parent's).
    pub fn switch(&self) -> Option<&EventSwitch> {
        self.switch.as_ref()
    }

    /// True when someone listens (and the sink's switch, if any, is on).
    pub fn is_enabled(&self) -> bool {
        self.tx.is_some() && self.switch.as_ref().is_none_or(EventSwitch::is_on)
    }

    /// True when someone listens for [`RunEvent::StateUpdated`]: the supervisor builds that
    /// event (every update of the superstep as JSON) only then.
    pub fn wants_state_updates(&self) -> bool {
        self.state_updates && self.is_enabled()
    }

    /// True when the listener takes [`RunEvent::StateUpdated`], whether or not the sink's switch
    /// is on now (what a subgraph's run, which obeys the same switch, is told).
    pub fn listens_for_state_updates(&self) -> bool {
        self.tx.is_some() && self.state_updates
    }

    /// Builds and sends an event, only if someone listens. A receiver that went away is not an
    /// error: the run goes on.
    pub fn emit(&self, make: impl FnOnce() -> RunEvent) {
        if let Some(tx) = self.tx.as_ref().filter(|_| self.is_enabled()) {
            let _ = tx.send(make());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switched_sink_builds_events_only_while_its_switch_is_on() {
        let switch = EventSwitch::new(true);
        let (sink, mut rx) = EventSink::channel();
        let sink = sink.switched_by(switch.clone());
        let built = std::cell::Cell::new(0);
        let event = || {
            built.set(built.get() + 1);
            RunEvent::Custom {
                node: "n".into(),
                task: TaskId { step: 1, index: 0 },
                payload: serde_json::Value::Null,
            }
        };
        sink.emit(event);
        switch.turn_off();
        assert!(!sink.is_enabled() && !sink.wants_state_updates());
        assert!(sink.listens_for_state_updates(), "what a subgraph is told");
        sink.emit(event);
        switch.turn_on();
        sink.emit(event);
        assert_eq!(built.get(), 2, "nothing built while off");
        assert!(rx.try_recv().is_ok() && rx.try_recv().is_ok() && rx.try_recv().is_err());
    }
}
