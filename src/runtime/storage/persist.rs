//! Turning supersteps into checkpoint records and checkpoint chains back into threads.
//!
//! The snapshot policy keeps storage linear in a thread's length: a step is stored as a delta
//! (its updates) until the deltas written since the last snapshot outweigh that snapshot; then the
//! whole state is stored once more. For a state that grows by a constant amount per step this
//! spaces snapshots geometrically, so the total is a small multiple of the final state's size,
//! where a full copy per step (LangGraph's savers) grows quadratically.

use super::paused::Kept;
use super::saved::{HeadIdentity, SavedThread, SavedWrite};
use crate::checkpoint::body_codec;
use crate::checkpoint::{
    BodyKind, CheckpointMetadata, CheckpointRecord, CheckpointSource, Checkpointer, TaskWrite,
    WriteKind,
};
use crate::events::Interrupt;
use crate::graph::CompiledGraph;
use crate::ids::{CheckpointId, TaskId, ThreadId};
use crate::reducer::MergeCtx;
use crate::runtime::error::RunError;
use crate::runtime::machine::superstep::{self, TaskSpec};
use crate::state::State;
use std::time::{SystemTime, UNIX_EPOCH};

/// Most deltas between two snapshots, whatever their size (bounds the replay on load).
pub(crate) const MAX_DELTAS: u64 = 256;
/// Deltas of up to this many stored bytes may follow a snapshot however small it is: replaying
/// them (16 KiB compressed is ~50–100 KiB of JSON) costs well under a millisecond, while a
/// snapshot every few kilobytes made a short conversation store its whole state two or three
/// times. Sizes are weighed as stored (compressed), the same measure for deltas and snapshots:
/// weighing the JSON made a 12-step research thread store a second snapshot once its deltas
/// passed 16 KiB of JSON though they took 4 KiB on disk.
pub(crate) const MIN_DELTA_BUDGET: u64 = 16 * 1024;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Builds the record of the checkpoint after a superstep. `updates_json` is the superstep's updates
/// (a JSON array, task order); the state is the merged one. Decides snapshot versus delta.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_record<S: State>(
    graph: &CompiledGraph<S>,
    thread: &ThreadId,
    saved: &mut SavedThread<S>,
    source: CheckpointSource,
    nodes: Vec<String>,
    updates_json: Option<Vec<u8>>,
    next: &[TaskSpec],
    extra: serde_json::Value,
    pause: Option<crate::checkpoint::Pause>,
) -> Result<CheckpointRecord, RunError> {
    let delta = updates_json
        .filter(|_| saved.head.is_some() && saved.deltas_since_snapshot < MAX_DELTAS)
        .map(|json| body_codec::encode_with(json, graph.body_dictionary()))
        .filter(|stored| {
            saved.delta_bytes_since_snapshot + stored.len() as u64
                <= saved.snapshot_bytes.max(MIN_DELTA_BUDGET)
        });
    let (kind, body) = match delta {
        Some(stored) => {
            saved.deltas_since_snapshot += 1;
            saved.delta_bytes_since_snapshot += stored.len() as u64;
            (BodyKind::Delta, stored)
        }
        None => {
            let stored = body_codec::encode_with(
                crate::json::to_vec(&*saved.state)?,
                graph.body_dictionary(),
            );
            saved.deltas_since_snapshot = 0;
            saved.delta_bytes_since_snapshot = 0;
            saved.snapshot_bytes = stored.len() as u64;
            (BodyKind::Snapshot, stored)
        }
    };
    let id = CheckpointId(saved.head.map_or(1, |h| h.0 + 1));
    let record = CheckpointRecord {
        thread_id: thread.clone(),
        id,
        parent: saved.head,
        graph_fingerprint: graph.fingerprint().to_string(),
        kind,
        body,
        next_tasks: body_codec::encode_with(crate::json::to_vec(next)?, graph.body_dictionary()),
        metadata: CheckpointMetadata {
            step: saved.step,
            source,
            nodes,
            created_at_ms: now_ms(),
            extra,
            pause,
        },
    };
    saved.head = Some(id);
    saved.head_identity = Some(HeadIdentity::of(&record));
    // Whatever command updates the old head carried, the new record holds them.
    saved.head_edits = 0;
    Ok(record)
}

/// The index of the null task: the task id of a command's update saved at a checkpoint whose
/// superstep is pending (LangGraph's `NULL_TASK_ID`), `step.` this. No real task has it.
pub(crate) const COMMAND_TASK_INDEX: u32 = u32::MAX;

/// The writer a command's update is applied as.
pub(crate) const COMMAND_WRITER: &str = "__command__";

/// The write of a command's `update` saved at the head of a thread paused inside a node: the
/// `n`-th such update of that superstep (key `n`, so several apply in order).
pub(crate) fn command_update_write<S: State>(
    graph: &CompiledGraph<S>,
    step: u64,
    n: u32,
    update: &S::Update,
) -> Result<TaskWrite, RunError> {
    Ok(TaskWrite {
        task: TaskId {
            step,
            index: COMMAND_TASK_INDEX,
        },
        node: COMMAND_WRITER.to_string(),
        kind: WriteKind::Update,
        key: n.to_string(),
        payload: body_codec::encode_slice_with(&update_json(update)?, graph.body_dictionary()),
    })
}

/// A task write of an update.
pub(crate) fn update_write<S: State>(
    graph: &CompiledGraph<S>,
    task: &TaskSpec,
    update: &S::Update,
) -> Result<TaskWrite, RunError> {
    Ok(update_write_of(graph, task, &update_json(update)?))
}

/// An update's JSON before compression.
pub(crate) fn update_json<U: serde::Serialize>(update: &U) -> Result<Vec<u8>, RunError> {
    Ok(crate::json::to_vec(update)?)
}

/// The task write of an update already serialised ([`update_json`]).
pub(crate) fn update_write_of<S: State>(
    graph: &CompiledGraph<S>,
    task: &TaskSpec,
    json: &[u8],
) -> TaskWrite {
    TaskWrite {
        payload: body_codec::encode_slice_with(json, graph.body_dictionary()),
        ..update_write_json(task, json)
    }
}

/// [`update_write_of`] with the payload left as JSON, for the checkpoint writer to compress
/// ([`encode_updates`]) if it stores it at all.
pub(crate) fn update_write_json(task: &TaskSpec, json: &[u8]) -> TaskWrite {
    TaskWrite {
        task: task.id,
        node: task.node_name(),
        kind: WriteKind::Update,
        key: String::new(),
        payload: json.to_vec(),
    }
}

/// Compresses the `Update` payloads of `writes` that are still JSON ([`update_write_json`]).
pub(crate) fn encode_updates(
    writes: &mut [TaskWrite],
    dict: Option<&'static body_codec::Dictionary>,
) {
    for w in writes.iter_mut().filter(|w| w.kind == WriteKind::Update) {
        w.payload = body_codec::encode_with(std::mem::take(&mut w.payload), dict);
    }
}

/// A task write of where a command node's finished task said to go next.
pub(crate) fn goto_write(
    task: &TaskSpec,
    goto: &crate::graph::Route,
) -> Result<TaskWrite, RunError> {
    Ok(TaskWrite {
        task: task.id,
        node: task.node_name(),
        kind: WriteKind::Goto,
        key: String::new(),
        payload: serde_json::to_vec(goto)?,
    })
}

/// A task write of an interrupt.
pub(crate) fn interrupt_write(
    task: &TaskSpec,
    interrupt: &Interrupt,
) -> Result<TaskWrite, RunError> {
    Ok(TaskWrite {
        task: task.id,
        node: task.node_name(),
        kind: WriteKind::Interrupt,
        key: String::new(),
        payload: serde_json::to_vec(interrupt)?,
    })
}

/// Task writes of memoised results.
pub(crate) fn memo_writes(
    task: &TaskSpec,
    memos: &[(String, serde_json::Value)],
) -> Result<Vec<TaskWrite>, RunError> {
    memos
        .iter()
        .map(|(key, v)| {
            Ok(TaskWrite {
                task: task.id,
                node: task.node_name(),
                kind: WriteKind::Memo,
                key: key.clone(),
                payload: serde_json::to_vec(v)?,
            })
        })
        .collect()
}

/// A task write of the answer to the task's `index`-th `interrupt` call (key `""` for the first,
/// as before several calls were counted; then `"1"`, `"2"`, …).
pub(crate) fn resume_write(
    task: &TaskSpec,
    value: &serde_json::Value,
    index: usize,
) -> Result<TaskWrite, RunError> {
    Ok(TaskWrite {
        task: task.id,
        node: task.node_name(),
        kind: WriteKind::Resume,
        key: if index == 0 {
            String::new()
        } else {
            index.to_string()
        },
        payload: serde_json::to_vec(value)?,
    })
}

fn corrupt(thread: &ThreadId, what: impl std::fmt::Display) -> RunError {
    RunError::Checkpoint(crate::checkpoint::CheckpointError::Corrupt {
        thread: thread.clone(),
        reason: what.to_string(),
    })
}

/// What was loaded: the thread (with the answers its tasks were given) and the graph it was
/// written by.
pub(crate) struct Loaded<S: State> {
    pub saved: SavedThread<S>,
    pub fingerprint: String,
}

/// Rebuilds a thread from storage at checkpoint `at` (the head when `None`); `None` if it has no
/// checkpoint.
pub(crate) async fn load<S: State>(
    cp: &dyn Checkpointer,
    graph: &CompiledGraph<S>,
    thread: &ThreadId,
    at: Option<CheckpointId>,
) -> Result<Option<Loaded<S>>, RunError> {
    let chain = cp.load_chain(thread, at).await?;
    let Some(first) = chain.first() else {
        return Ok(None);
    };
    if first.kind != BodyKind::Snapshot {
        return Err(corrupt(
            thread,
            format!("chain starts at checkpoint {} with a delta", first.id),
        ));
    }
    let mut saved = SavedThread::<S>::new();
    fn body<'r>(
        thread: &ThreadId,
        rec: &'r crate::checkpoint::CheckpointRecord,
    ) -> Result<std::borrow::Cow<'r, [u8]>, RunError> {
        body_codec::decode(&rec.body)
            .map_err(|e| corrupt(thread, format!("checkpoint {}: {e}", rec.id)))
    }
    let first_body = body(thread, first)?;
    saved.state = serde_json::from_slice::<S>(&first_body)
        .map(std::sync::Arc::new)
        .map_err(|e| corrupt(thread, format!("checkpoint {}: {e}", first.id)))?;
    saved.snapshot_bytes = first.body.len() as u64;
    for rec in &chain[1..] {
        let json = body(thread, rec)?;
        match rec.kind {
            BodyKind::Snapshot => {
                saved.state = serde_json::from_slice::<S>(&json)
                    .map(std::sync::Arc::new)
                    .map_err(|e| corrupt(thread, format!("checkpoint {}: {e}", rec.id)))?;
                saved.snapshot_bytes = rec.body.len() as u64;
                saved.deltas_since_snapshot = 0;
                saved.delta_bytes_since_snapshot = 0;
            }
            BodyKind::Delta => {
                let updates: Vec<S::Update> = serde_json::from_slice(&json)
                    .map_err(|e| corrupt(thread, format!("checkpoint {}: {e}", rec.id)))?;
                let mut ctx = MergeCtx::new();
                for (i, u) in updates.into_iter().enumerate() {
                    ctx.set_writer(rec.metadata.nodes.get(i).map(String::as_str).unwrap_or("?"));
                    std::sync::Arc::make_mut(&mut saved.state).apply(u, &mut ctx)?;
                }
                saved.deltas_since_snapshot += 1;
                saved.delta_bytes_since_snapshot += rec.body.len() as u64;
            }
        }
    }
    let head = chain.last().unwrap_or(first);
    saved.head_identity = Some(HeadIdentity::of(head));
    let writes = if at.is_none() {
        WritesAt::Fetch
    } else {
        WritesAt::Ignore
    };
    let fingerprint = position_at(cp, graph, thread, head, writes, &mut saved).await?;
    Ok(Some(Loaded { saved, fingerprint }))
}

/// A paused thread's state kept in memory ([`super::paused`]) with the rest of its position read
/// from storage, if storage still has the kept head checkpoint; `None` when it does not (the
/// caller then loads the thread in full).
pub(crate) async fn reload_kept<S: State>(
    cp: &dyn Checkpointer,
    graph: &CompiledGraph<S>,
    thread: &ThreadId,
    kept: Kept<S>,
) -> Result<Option<Loaded<S>>, RunError> {
    // The head and its writes in one read: what the resume needs besides the kept state.
    let Some((head, writes)) = cp.head_with_writes(thread).await? else {
        return Ok(None);
    };
    if head.id != kept.head.id || HeadIdentity::of(&head) != kept.head {
        return Ok(None);
    }
    let mut saved = SavedThread::<S>::new();
    saved.state = kept.state;
    saved.deltas_since_snapshot = kept.deltas_since_snapshot;
    saved.delta_bytes_since_snapshot = kept.delta_bytes_since_snapshot;
    saved.snapshot_bytes = kept.snapshot_bytes;
    saved.head_identity = Some(kept.head); // just compared equal: not hashed again
    let fingerprint =
        position_at(cp, graph, thread, &head, WritesAt::Read(writes), &mut saved).await?;
    Ok(Some(Loaded { saved, fingerprint }))
}

/// Which task writes [`position_at`] takes into account.
pub(crate) enum WritesAt {
    /// None: a load of an older checkpoint ignores the writes of the superstep that ran from it.
    Ignore,
    /// The head's, read from storage when it has pending tasks.
    Fetch,
    /// The head's, already read with it ([`Checkpointer::head_with_writes`]).
    Read(Vec<crate::checkpoint::TaskWrite>),
}

/// The part of a thread's position its head checkpoint and the writes saved at it give: head,
/// step, pause, pending tasks and what they already did (see [`WritesAt`]). Returns the graph
/// fingerprint the head was written with.
pub(crate) async fn position_at<S: State>(
    cp: &dyn Checkpointer,
    graph: &CompiledGraph<S>,
    thread: &ThreadId,
    head: &crate::checkpoint::CheckpointRecord,
    writes: WritesAt,
    saved: &mut SavedThread<S>,
) -> Result<String, RunError> {
    saved.head = Some(head.id);
    saved.step = head.metadata.step;
    // Corrupt pause data is an error naming the checkpoint, never a thread that silently
    // forgets it was paused. The typed pause first; the keys older versions kept in `extra`
    // after it.
    if let Some(p) = &head.metadata.pause {
        saved.paused_before = true;
        saved.pause_at = p.at;
        saved.pauses = p.interrupts.clone();
    } else {
        saved.paused_before = match head.metadata.extra.get("paused_before") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(other) => {
                return Err(corrupt(
                    thread,
                    format!(
                        "checkpoint {}: paused_before is {other}, not a boolean",
                        head.id
                    ),
                ))
            }
        };
        if let Some(p) = head.metadata.extra.get("pauses") {
            saved.pauses = serde_json::from_value(p.clone())
                .map_err(|e| corrupt(thread, format!("checkpoint {}: pauses: {e}", head.id)))?;
        }
    }
    let fingerprint = head.graph_fingerprint.clone();
    if fingerprint == graph.fingerprint() {
        let stored = body_codec::decode(&head.next_tasks)
            .map_err(|e| corrupt(thread, format!("next tasks of {}: {e}", head.id)))?;
        let mut tasks: Vec<TaskSpec> = serde_json::from_slice(&stored)
            .map_err(|e| corrupt(thread, format!("next tasks of {}: {e}", head.id)))?;
        for t in &mut tasks {
            t.node_id = graph.node_id(&t.node).ok_or_else(|| {
                corrupt(
                    thread,
                    format!("task {} names unknown node `{}`", t.id, t.node),
                )
            })?;
        }
        let (tasks, deferred) = superstep::split_stored(tasks);
        saved.writes = vec![None; tasks.len()];
        let mut answers: Vec<std::collections::BTreeMap<usize, serde_json::Value>> =
            vec![Default::default(); tasks.len()];
        let writes = match writes {
            _ if tasks.is_empty() => Vec::new(),
            WritesAt::Ignore => Vec::new(),
            WritesAt::Fetch => cp.get_writes(thread, head.id).await?,
            WritesAt::Read(writes) => writes,
        };
        let mut edits: Vec<(u32, S::Update)> = Vec::new();
        for w in writes {
            if w.task.index == COMMAND_TASK_INDEX && w.kind == WriteKind::Update {
                let n = w.key.parse::<u32>().map_err(|_| {
                    corrupt(
                        thread,
                        format!("command update at {}: key `{}`", head.id, w.key),
                    )
                })?;
                let json = body_codec::decode(&w.payload)
                    .map_err(|e| corrupt(thread, format!("command update at {}: {e}", head.id)))?;
                let u = serde_json::from_slice(&json)
                    .map_err(|e| corrupt(thread, format!("command update at {}: {e}", head.id)))?;
                edits.push((n, u));
                continue;
            }
            let Some(i) = task_index(&tasks, w.task) else {
                continue;
            };
            match w.kind {
                WriteKind::Update => {
                    let json = body_codec::decode(&w.payload)
                        .map_err(|e| corrupt(thread, format!("write of task {}: {e}", w.task)))?;
                    let u = serde_json::from_slice(&json)
                        .map_err(|e| corrupt(thread, format!("write of task {}: {e}", w.task)))?;
                    saved.writes[i] = Some(SavedWrite::Done(u));
                }
                WriteKind::Interrupt => {
                    if !matches!(saved.writes[i], Some(SavedWrite::Done(_))) {
                        let int = serde_json::from_slice(&w.payload).map_err(|e| {
                            corrupt(thread, format!("interrupt of task {}: {e}", w.task))
                        })?;
                        saved.writes[i] = Some(SavedWrite::Interrupted(int));
                    }
                }
                WriteKind::Resume => {
                    let at = match w.key.as_str() {
                        "" => 0,
                        k => k.parse::<usize>().map_err(|_| {
                            corrupt(thread, format!("resume of task {}: key `{k}`", w.task))
                        })?,
                    };
                    let v = serde_json::from_slice(&w.payload)
                        .map_err(|e| corrupt(thread, format!("resume of task {}: {e}", w.task)))?;
                    answers[i].insert(at, v);
                }
                WriteKind::Memo => {
                    let v = serde_json::from_slice(&w.payload)
                        .map_err(|e| corrupt(thread, format!("memo of task {}: {e}", w.task)))?;
                    if saved.memos.len() < tasks.len() {
                        saved.memos.resize(tasks.len(), Default::default());
                    }
                    saved.memos[i].insert(w.key, v);
                }
                WriteKind::Goto => {
                    let goto = serde_json::from_slice(&w.payload)
                        .map_err(|e| corrupt(thread, format!("goto of task {}: {e}", w.task)))?;
                    if saved.gotos.len() < tasks.len() {
                        saved.gotos.resize(tasks.len(), None);
                    }
                    saved.gotos[i] = Some(goto);
                }
                WriteKind::Error => {}
            }
        }
        // Answers in call order, with no gap (a gap is a lost answer: an error, not a skip).
        saved.answers = answers
            .into_iter()
            .zip(&tasks)
            .map(|(a, t)| {
                if a.keys().copied().eq(0..a.len()) {
                    Ok(a.into_values().collect())
                } else {
                    Err(corrupt(
                        thread,
                        format!("answers of task {} have a gap: {:?}", t.id, a.keys()),
                    ))
                }
            })
            .collect::<Result<_, _>>()?;
        saved.tasks = tasks;
        saved.deferred = deferred;
        // Command updates saved at the head apply, in order, before its pending tasks run.
        edits.sort_by_key(|(n, _)| *n);
        let mut ctx = MergeCtx::new();
        ctx.set_writer(COMMAND_WRITER);
        for (_, u) in edits {
            std::sync::Arc::make_mut(&mut saved.state).apply(u, &mut ctx)?;
            saved.head_edits += 1;
            // The state is no longer the head's: the next checkpoint must be a snapshot.
            saved.deltas_since_snapshot = u64::MAX;
        }
    }
    Ok(fingerprint)
}

fn task_index(tasks: &[TaskSpec], id: TaskId) -> Option<usize> {
    tasks.iter().position(|t| t.id == id)
}
