//! The thread endpoints: create, get, delete, search and count threads, change their metadata,
//! read and write their state. A thread's record (metadata, creation time, owner, the assistant it
//! belongs to) is the checkpointer's thread metadata.

use super::assistant::EditError;
use super::assistants;
use super::auth::Principal;
use super::errors::ApiError;
use super::ids::new_uuid;
use super::thread_shape;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::checkpoint::CheckpointMetadata;
use planwright::{CheckpointId, Refusal, RunError, ThreadId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

#[derive(Deserialize, Default)]
pub struct CreateThread {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    if_exists: Option<String>,
}

pub(super) async fn record(state: &AppState, thread: &ThreadId) -> Result<Option<Value>, ApiError> {
    state
        .checkpointer
        .thread_metadata(thread)
        .await
        .map_err(ApiError::internal)
}

/// How many times [`update_record`] reads a thread's record again after another request changed
/// it between its read and its write.
pub const RECORD_UPDATE_TRIES: usize = 8;

/// Changes thread `thread`'s record `seen` with `change` (which says whether it changed
/// anything) and answers the record as it stands then, or `None` when the thread is no longer
/// the one `seen` was read from: deleted, or deleted and created again (by another user, say)
/// since, which another `owner` or `created_at` tells. Each write lands only on the record it
/// read ([`planwright::checkpoint::Checkpointer::replace_thread_metadata`]), so no update brings
/// a deleted thread back, loses a concurrent one, or gives a record another owner; a record
/// changed meanwhile is read again, at most [`RECORD_UPDATE_TRIES`] times (409 after).
pub async fn update_record(
    state: &AppState,
    thread: &ThreadId,
    seen: &Value,
    change: impl Fn(&mut Value) -> bool,
) -> Result<Option<Value>, ApiError> {
    let same_thread = |rec: &Value| {
        rec.is_object()
            && rec.get("owner") == seen.get("owner")
            && rec.get("created_at") == seen.get("created_at")
    };
    let mut current = seen.clone();
    for _ in 0..RECORD_UPDATE_TRIES {
        if !same_thread(&current) {
            return Ok(None);
        }
        let mut next = current.clone();
        if !change(&mut next) {
            return Ok(Some(current));
        }
        let replaced = state
            .checkpointer
            .replace_thread_metadata(thread, &current, next.clone())
            .await
            .map_err(ApiError::internal)?;
        if replaced {
            return Ok(Some(next));
        }
        match record(state, thread).await? {
            Some(rec) => current = rec,
            None => return Ok(None),
        }
    }
    tracing::warn!(thread_id = %thread, tries = RECORD_UPDATE_TRIES, "thread record kept changing; update given up");
    Err(ApiError::conflict(format!(
        "thread `{thread}`'s record changed under {RECORD_UPDATE_TRIES} updates in a row; try again"
    )))
}

/// Where checkpoint `at` of `thread` (its head when `None`) sits: its id, parent and metadata.
pub(super) async fn placement(
    state: &AppState,
    thread: &ThreadId,
    at: Option<CheckpointId>,
) -> Result<Option<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, ApiError> {
    let before = at.map(|c| CheckpointId(c.0.saturating_add(1)));
    let list = state
        .checkpointer
        .list(thread, before, 1)
        .await
        .map_err(ApiError::internal)?;
    Ok(list
        .into_iter()
        .next()
        .filter(|(id, ..)| at.is_none_or(|a| a == *id)))
}

async fn thread_json(state: &AppState, thread: &ThreadId, rec: Value) -> ApiResult {
    let assistant = assistants::of(state, thread, &rec);
    let st = assistant.view(thread).await.map_err(ApiError::internal)?;
    let status = match &st {
        _ if assistant.is_running(thread) => "busy",
        Some(s) if !s.interrupts.is_empty() => "interrupted",
        Some(s) if s.failed => "error",
        _ => "idle",
    };
    let head = placement(state, thread, None).await?;
    let created_at = super::time::stored(rec.get("created_at"));
    let state_updated_at = head.as_ref().map_or(created_at.clone(), |(_, _, m)| {
        json!(super::time::rfc3339(m.created_at_ms))
    });
    let metadata = shown_metadata(&rec);
    Ok(Json(json!({
        "thread_id": thread.as_str(),
        "created_at": created_at,
        "updated_at": state_updated_at,
        "state_updated_at": state_updated_at,
        "metadata": metadata,
        "status": status,
        "interrupts": st.as_ref().map_or(json!({}), thread_shape::interrupts_by_task),
        "config": {},
        "error": null,
        "values": st.map(|s| s.values),
    })))
}

/// `POST /threads`.
pub async fn create_thread(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<CreateThread>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let id = body.thread_id.unwrap_or_else(new_uuid);
    super::errors::check_thread_id(&id)?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    if !(body.metadata.is_null() || body.metadata.is_object()) {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("metadata must be a JSON object, not {}", body.metadata),
        ));
    }
    let thread = ThreadId::new(id);
    if let Some(rec) = record(&state, &thread).await? {
        if !me.may_see(&rec) {
            // Another user's thread: its id is taken, and nothing more is told.
            return Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            )));
        }
        return match body.if_exists.as_deref() {
            Some("do_nothing") => thread_json(&state, &thread, rec).await,
            _ => Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            ))),
        };
    }
    let metadata = if body.metadata.is_null() {
        json!({})
    } else {
        body.metadata
    };
    let rec = json!({"metadata": metadata, "created_at": super::time::now(), "owner": me.user});
    // The check above answers the common case; this one settles two creators of one id at once:
    // the first owns the thread, and the second's record never replaces it.
    let created = state
        .checkpointer
        .create_thread(&thread, rec.clone())
        .await
        .map_err(ApiError::internal)?;
    if !created {
        // Created by someone else a moment ago: the same answer as if it had been there first.
        return match record(&state, &thread).await? {
            Some(rec) if me.may_see(&rec) && body.if_exists.as_deref() == Some("do_nothing") => {
                thread_json(&state, &thread, rec).await
            }
            _ => Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            ))),
        };
    }
    thread_json(&state, &thread, rec).await
}

pub(super) async fn existing(state: &AppState, id: &str) -> Result<(ThreadId, Value), ApiError> {
    let thread = ThreadId::new(id);
    match record(state, &thread).await? {
        // The caller's, as the auth check found it, unless it changed hands since.
        Some(rec) if super::auth::caller_may_see(&rec) => Ok((thread, rec)),
        _ => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// `GET /threads/{thread_id}`.
pub async fn get_thread(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let (thread, rec) = existing(&state, &id).await?;
    thread_json(&state, &thread, rec).await
}

/// `DELETE /threads/{thread_id}`.
pub async fn delete_thread(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let (thread, rec) = existing(&state, &id).await?;
    if delete_one(&state, &thread, &rec).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::conflict(format!("thread `{id}` is busy")))
    }
}

/// Deletes `thread` (whose record is `rec`) and its runs; `false` when it is busy.
async fn delete_one(state: &AppState, thread: &ThreadId, rec: &Value) -> Result<bool, ApiError> {
    let assistant = assistants::of(state, thread, rec);
    let deleted = assistant.delete_thread(thread).await;
    assistants::unbind(state, thread);
    match deleted {
        Ok(()) => {
            // Its runs go with it; a queued one finds its record gone and never starts.
            state
                .run_store
                .delete_thread(thread.as_str())
                .await
                .map_err(ApiError::internal)?;
            Ok(true)
        }
        Err(RunError::Refused(Refusal::ThreadBusy(_))) => Ok(false),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// `POST /threads/search` and `POST /threads/count` body: LangGraph's filters, plus `prefix`.
#[derive(Deserialize, Default)]
pub struct Search {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    /// Only threads in this status (`idle`, `busy`, `interrupted`, `error`).
    #[serde(default)]
    status: Option<String>,
    /// Only threads whose id starts with this (a Planwright extension).
    #[serde(default)]
    prefix: Option<String>,
    /// Only threads whose metadata holds these keys and values ([`thread_shape::json_contains`]).
    #[serde(default)]
    metadata: Option<Value>,
    /// Only threads whose values hold these keys and values.
    #[serde(default)]
    values: Option<Value>,
    /// Only these threads.
    #[serde(default)]
    ids: Option<Vec<String>>,
    /// `thread_id` (the default), `status`, `created_at`, `updated_at` or `state_updated_at`.
    #[serde(default)]
    sort_by: Option<String>,
    /// `asc` (the default) or `desc`.
    #[serde(default)]
    sort_order: Option<String>,
    /// Only these fields of each thread.
    #[serde(default)]
    select: Option<Vec<String>>,
}

/// The statuses a thread can be in.
const THREAD_STATUSES: [&str; 4] = ["idle", "busy", "interrupted", "error"];
/// The fields threads can be sorted by.
const SORT_FIELDS: [&str; 5] = [
    "thread_id",
    "status",
    "created_at",
    "updated_at",
    "state_updated_at",
];
/// Threads read per page while scanning.
const SCAN_PAGE: usize = 200;

fn unprocessable(msg: String) -> ApiError {
    ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg)
}

impl Search {
    /// Refuses unknown statuses, sort fields and orders, and filters that are not objects.
    fn check(&self) -> Result<(), ApiError> {
        if let Some(s) = self.status.as_deref() {
            if !THREAD_STATUSES.contains(&s) {
                return Err(unprocessable(format!(
                    "status `{s}`: use one of {}",
                    THREAD_STATUSES.join(", ")
                )));
            }
        }
        if let Some(s) = self.sort_by.as_deref() {
            if !SORT_FIELDS.contains(&s) {
                return Err(unprocessable(format!(
                    "sort_by `{s}`: use one of {}",
                    SORT_FIELDS.join(", ")
                )));
            }
        }
        if let Some(s) = self.sort_order.as_deref() {
            if s != "asc" && s != "desc" {
                return Err(unprocessable(format!("sort_order `{s}`: use asc or desc")));
            }
        }
        for (name, v) in [("metadata", &self.metadata), ("values", &self.values)] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_null() && !v.is_object()) {
                return Err(unprocessable(format!(
                    "{name} must be a JSON object, not {v}"
                )));
            }
        }
        Ok(())
    }

    /// True when the threads come in id order, the order the checkpointer lists them in: the
    /// scan can stop once it has found a page's worth.
    fn in_list_order(&self) -> bool {
        matches!(self.sort_by.as_deref(), None | Some("thread_id"))
            && self.sort_order.as_deref() != Some("desc")
            && self.ids.is_none()
    }
}

/// A thread a search found.
struct Found {
    thread: ThreadId,
    rec: Value,
    /// When its newest checkpoint was written (its record's creation without one).
    updated_at: Value,
    /// The thread as the API shows it, once read (the status and values filters read it).
    shown: Option<Value>,
}

/// The metadata a thread shows: its record's, with the assistant (and graph) it runs once
/// bound, as LangGraph's threads carry them (and as the `metadata` filter sees them).
fn shown_metadata(rec: &Value) -> Value {
    let mut metadata = rec.get("metadata").cloned().unwrap_or(json!({}));
    if let (Some(a), Some(m)) = (rec.get("assistant_id"), metadata.as_object_mut()) {
        m.insert("assistant_id".into(), a.clone());
        m.insert("graph_id".into(), a.clone());
    }
    metadata
}

/// `thread` if `q` keeps it for `me`: the caller's (an admin's: any), with the metadata, status
/// and values asked for. Only the status and values filters read the thread's state.
async fn keep(
    state: &AppState,
    me: &Principal,
    q: &Search,
    thread: ThreadId,
    rec: Value,
    head_ms: Option<u64>,
) -> Result<Option<Found>, ApiError> {
    if !me.may_see(&rec) {
        return Ok(None);
    }
    if let Some(want) = q.metadata.as_ref().filter(|m| !m.is_null()) {
        if !thread_shape::json_contains(&shown_metadata(&rec), want) {
            return Ok(None);
        }
    }
    let mut shown = None;
    let values = q.values.as_ref().filter(|v| !v.is_null());
    if q.status.is_some() || values.is_some() {
        let Json(v) = thread_json(state, &thread, rec.clone()).await?;
        if q.status.as_deref().is_some_and(|s| v["status"] != s) {
            return Ok(None);
        }
        if values.is_some_and(|want| !thread_shape::json_contains(&v["values"], want)) {
            return Ok(None);
        }
        shown = Some(v);
    }
    let updated_at = match head_ms {
        Some(ms) => json!(super::time::rfc3339(ms)),
        None => super::time::stored(rec.get("created_at")),
    };
    Ok(Some(Found {
        thread,
        rec,
        updated_at,
        shown,
    }))
}

/// The threads `q` finds for `me`, in id order; at most `enough` when given. Without `ids` this
/// reads every thread record under the prefix, page by page: a thread's owner is a field of its
/// record, which no backend indexes, so a user who is not an admin scans the others' too.
async fn find(
    state: &AppState,
    me: &Principal,
    q: &Search,
    enough: Option<usize>,
) -> Result<Vec<Found>, ApiError> {
    let prefix = q.prefix.as_deref().unwrap_or("");
    let full = |out: &Vec<Found>| enough.is_some_and(|n| out.len() >= n);
    let mut out = Vec::new();
    if let Some(ids) = &q.ids {
        let mut ids: Vec<&String> = ids.iter().filter(|i| i.starts_with(prefix)).collect();
        ids.sort();
        ids.dedup();
        for id in ids {
            let thread = ThreadId::new(id.as_str());
            let Some(rec) = record(state, &thread).await? else {
                continue;
            };
            let head = placement(state, &thread, None).await?;
            let head_ms = head.map(|(_, _, m)| m.created_at_ms);
            if let Some(f) = keep(state, me, q, thread, rec, head_ms).await? {
                out.push(f);
            }
        }
        return Ok(out);
    }
    let mut from = 0;
    loop {
        let page = state
            .checkpointer
            .list_threads(prefix, SCAN_PAGE, from)
            .await
            .map_err(ApiError::internal)?;
        let done = page.len() < SCAN_PAGE;
        from += page.len();
        for t in page {
            let head_ms = t.head_metadata.map(|m| m.created_at_ms);
            if let Some(f) = keep(state, me, q, t.thread_id, t.metadata, head_ms).await? {
                out.push(f);
                if full(&out) {
                    return Ok(out);
                }
            }
        }
        if done {
            return Ok(out);
        }
    }
}

/// The thread `f` as the API shows it (read now unless a filter read it).
async fn shown(state: &AppState, f: &mut Found) -> Result<Value, ApiError> {
    if f.shown.is_none() {
        let Json(v) = thread_json(state, &f.thread, f.rec.clone()).await?;
        f.shown = Some(v);
    }
    Ok(f.shown.clone().unwrap_or_default())
}

/// `POST /threads/search`: the caller's threads (an admin's: all) that hold the `metadata` and
/// `values` asked for, in `status`, among `ids`, with an id `prefix`; sorted by `sort_by`
/// (`thread_id` unless named) in `sort_order` (`asc` unless named); `limit` (default 10, at most
/// 1000) from `offset` (which counts matches); only the `select`ed fields when named. Threads
/// never run are listed too (`values` `null` until a run or an update gives them state).
pub async fn search_threads(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<Search>, JsonRejection>,
) -> ApiResult {
    let Json(q) = body?;
    q.check()?;
    let limit = q.limit.unwrap_or(10).min(1000);
    let offset = q.offset.unwrap_or(0);
    let enough = q.in_list_order().then(|| offset.saturating_add(limit));
    let mut found = find(&state, &me, &q, enough).await?;
    let sort_by = q.sort_by.as_deref().unwrap_or("thread_id");
    if sort_by == "status" {
        for f in &mut found {
            shown(&state, f).await?;
        }
    }
    let key = |f: &Found| -> Value {
        match sort_by {
            "status" => f
                .shown
                .as_ref()
                .map_or(Value::Null, |v| v["status"].clone()),
            "created_at" => super::time::stored(f.rec.get("created_at")),
            "updated_at" | "state_updated_at" => f.updated_at.clone(),
            _ => json!(f.thread.as_str()),
        }
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let desc = q.sort_order.as_deref() == Some("desc");
    found.sort_by(|a, b| {
        let by_key = text(&key(a)).cmp(&text(&key(b)));
        let by_key = if desc { by_key.reverse() } else { by_key };
        by_key.then_with(|| a.thread.as_str().cmp(b.thread.as_str()))
    });
    let mut out = Vec::new();
    for f in found.iter_mut().skip(offset).take(limit) {
        let mut v = shown(&state, f).await?;
        if let (Some(fields), Some(obj)) = (&q.select, v.as_object_mut()) {
            obj.retain(|k, _| fields.iter().any(|f| f == k));
        }
        out.push(v);
    }
    Ok(Json(Value::Array(out)))
}

/// `POST /threads/count`: how many threads `POST /threads/search` finds with the same filters
/// (`limit`, `offset`, sorting and `select` aside).
pub async fn count_threads(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<Search>, JsonRejection>,
) -> ApiResult {
    let Json(q) = body?;
    q.check()?;
    Ok(Json(json!(find(&state, &me, &q, None).await?.len())))
}

/// `PATCH /threads/{thread_id}` body.
#[derive(Deserialize, Default)]
pub struct PatchThread {
    #[serde(default)]
    metadata: Value,
}

/// `PATCH /threads/{thread_id}`: merges `metadata` into the thread's (key by key, as LangGraph
/// does) through the record's compare-and-set ([`update_record`]); answers the thread.
pub async fn patch_thread(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<PatchThread>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    let add = match body.metadata {
        Value::Null => serde_json::Map::new(),
        Value::Object(m) => m,
        other => {
            return Err(unprocessable(format!(
                "metadata must be a JSON object, not {other}"
            )))
        }
    };
    let (thread, rec) = existing(&state, &id).await?;
    let now = update_record(&state, &thread, &rec, |rec| {
        let Some(obj) = rec.as_object_mut() else {
            return false;
        };
        let metadata = obj.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        let Some(m) = metadata.as_object_mut() else {
            return false;
        };
        let mut changed = false;
        for (k, v) in &add {
            if m.get(k) != Some(v) {
                m.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed
    })
    .await?;
    match now {
        Some(rec) => thread_json(&state, &thread, rec).await,
        None => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// The thread record's key holding metadata added to its checkpoints by
/// `PATCH /threads/{id}/state`, by checkpoint id: the checkpointer stores a checkpoint's metadata
/// once, with the checkpoint, and has no way to change it, so the additions live in the record
/// and are merged into the state's `metadata` when shown ([`with_patched_metadata`]).
pub const CHECKPOINT_METADATA: &str = "checkpoint_metadata";

/// `state` (a state object) with the metadata `PATCH /threads/{id}/state` added to its
/// checkpoint merged into its `metadata`.
pub fn with_patched_metadata(rec: &Value, mut state: Value) -> Value {
    let Some(cp) = state
        .pointer("/checkpoint/checkpoint_id")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return state;
    };
    let Some(added) = rec
        .get(CHECKPOINT_METADATA)
        .and_then(|m| m.get(&cp))
        .and_then(Value::as_object)
    else {
        return state;
    };
    if let Some(m) = state.get_mut("metadata").and_then(Value::as_object_mut) {
        for (k, v) in added {
            m.insert(k.clone(), v.clone());
        }
    }
    state
}

/// `GET /threads/{thread_id}/state`.
pub async fn thread_state(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let (thread, rec) = existing(&state, &id).await?;
    let assistant = assistants::of(&state, &thread, &rec);
    let st = assistant.view(&thread).await.map_err(ApiError::internal)?;
    let head = match st.as_ref().and_then(|s| s.checkpoint) {
        Some(cp) => placement(&state, &thread, Some(cp)).await?,
        None => None,
    };
    let placed = head
        .as_ref()
        .map(|(_, parent, metadata)| thread_shape::Placed {
            parent: *parent,
            metadata,
        });
    let shown = thread_shape::state_json(thread.as_str(), st.as_ref(), placed);
    Ok(Json(with_patched_metadata(&rec, shown)))
}

/// The checkpoint a body names: `checkpoint_id`, else `checkpoint.checkpoint_id`.
fn named_checkpoint(
    checkpoint_id: Option<&str>,
    checkpoint: Option<&Value>,
) -> Result<Option<CheckpointId>, ApiError> {
    let named = checkpoint_id
        .map(|s| Value::String(s.to_string()))
        .or_else(|| checkpoint?.get("checkpoint_id").cloned());
    match named {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => super::ids::checkpoint_id(&s).map(Some),
        Some(other) => Err(ApiError::bad(format!(
            "checkpoint_id must be a string, not {other}"
        ))),
    }
}

/// `POST /threads/{thread_id}/state/checkpoint` body (the SDKs' `get_state(checkpoint=…)`).
#[derive(Deserialize, Default)]
pub struct StateAt {
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// `POST /threads/{thread_id}/state/checkpoint`: the state at `checkpoint.checkpoint_id` (as
/// `GET /threads/{id}/state/{checkpoint_id}`), or the current state when it names none.
pub async fn state_at_checkpoint(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<StateAt>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let Some(cp) = named_checkpoint(None, body.checkpoint.as_ref())? else {
        return thread_state(State(state), Path(id)).await;
    };
    let (_, rec) = existing(&state, &id).await?;
    let Json(v) = super::inspect::state_at(State(state), Path((id, cp.0.to_string()))).await?;
    Ok(Json(with_patched_metadata(&rec, v)))
}

/// `POST /threads/{thread_id}/state` body (the SDKs' `update_state`).
#[derive(Deserialize, Default)]
pub struct UpdateState {
    #[serde(default)]
    values: Value,
    #[serde(default)]
    as_node: Option<String>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// The writer of an update that comes before every node, as LangGraph's `as_node: "__start__"`:
/// the update is the graph's input, and the nodes `START` leads to run next.
const START: &str = "__start__";

/// The nodes `START` leads to, from the graph as `assistant` shows it; `None` when a router
/// decides them (then the update needs an `as_node`).
fn start_targets(assistant: &assistants::AssistantRef) -> Option<Vec<String>> {
    let graph = assistant.graph_json();
    let edges = graph["edges"].as_array()?;
    let mut out = Vec::new();
    for e in edges.iter().filter(|e| e["source"] == START) {
        if e["conditional"] == true {
            return None;
        }
        if let Some(t) = e["target"].as_str().filter(|t| *t != "__end__") {
            out.push(t.to_string());
        }
    }
    Some(out)
}

/// The node an update is written as when the request names none: the one that wrote the
/// checkpoint it starts from, as LangGraph does, or the graph's only node; [`START`] when no node
/// wrote it (the thread's input checkpoint), as LangGraph does; 400 naming the nodes when several
/// did.
async fn default_node(
    state: &AppState,
    thread: &ThreadId,
    at: Option<CheckpointId>,
    nodes: &[String],
) -> Result<String, ApiError> {
    let wrote = placement(state, thread, at)
        .await?
        .map(|(_, _, m)| m.nodes)
        .unwrap_or_default();
    let mut wrote: Vec<&String> = wrote.iter().filter(|n| nodes.contains(n)).collect();
    wrote.dedup();
    match (wrote.as_slice(), nodes) {
        ([one], _) => Ok(one.to_string()),
        ([], [only]) => Ok(only.clone()),
        ([], _) => Ok(START.to_string()),
        (many, _) => Err(ApiError::bad(format!(
            "nodes {} wrote thread `{thread}`'s checkpoint: name the one the update is written as with `as_node`",
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// `POST /threads/{thread_id}/state`: writes `values` to the idle thread as node `as_node` would
/// ([`default_node`] when not named; `__start__`: as the graph's input, the nodes `START` leads
/// to running next); with `checkpoint_id` (or `checkpoint.checkpoint_id`) the
/// thread goes back to that checkpoint first (a time-travel branch). Answers
/// `{"checkpoint": {…}}`, the new checkpoint. 409 while a run is going, 404 for an unknown
/// thread or checkpoint, 400 naming what is wrong with the values or the node.
pub async fn update_state(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<UpdateState>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let at = named_checkpoint(body.checkpoint_id.as_deref(), body.checkpoint.as_ref())?;
    let (thread, rec) = existing(&state, &id).await?;
    // A thread created with LangGraph's `graph_id` metadata and never run belongs to that graph.
    let wanted = match (
        rec.get("assistant_id"),
        rec.pointer("/metadata/graph_id").and_then(Value::as_str),
    ) {
        (None, Some(g)) => state.assistants.get(g)?.clone(),
        _ => assistants::of(&state, &thread, &rec),
    };
    let busy = || ApiError::conflict(format!("thread `{id}` has a run in progress"));
    if wanted.is_running(&thread) {
        return Err(busy());
    }
    let nodes = wanted.node_names();
    let as_node = match body.as_node {
        Some(n) if nodes.contains(&n) || n == START => n,
        Some(n) => {
            return Err(ApiError::bad(format!(
                "as_node `{n}` is not a node of assistant `{}`: use one of {}",
                wanted.id(),
                nodes.join(", ")
            )))
        }
        None => default_node(&state, &thread, at, &nodes).await?,
    };
    let checked = wanted
        .check_update(body.values)
        .map_err(|e| ApiError::bad(format!("values: {e}")))?;
    assistants::bind(&state, &thread, rec, &wanted, false).await?;
    if let Some(at) = at {
        wanted.branch(&thread, at).await.map_err(|e| match e {
            RunError::Checkpoint(planwright::checkpoint::CheckpointError::NotFound { .. }) => {
                ApiError::not_found(format!("thread `{id}` has no checkpoint {}", at.0))
            }
            RunError::Refused(Refusal::ThreadBusy(_)) => busy(),
            e => ApiError::internal(e),
        })?;
    }
    let written = if as_node == START {
        let Some(goto) = start_targets(&wanted) else {
            return Err(ApiError::bad(format!(
                "a router decides where assistant `{}` starts: name the node the update is written as with `as_node`, one of {}",
                wanted.id(),
                nodes.join(", ")
            )));
        };
        wanted.update_goto(&thread, Some(checked), &goto).await
    } else {
        wanted.update_state(&thread, checked, &as_node).await
    };
    let cp = written.map_err(|e| match e {
        EditError::Values(v) => ApiError::bad(format!("values: {v}")),
        EditError::Run(RunError::Refused(Refusal::ThreadBusy(_))) => busy(),
        EditError::Run(RunError::Refused(Refusal::UnknownThread(_))) => ApiError::conflict(
            format!("thread `{id}` has no state yet: run it before updating its state"),
        ),
        EditError::Run(RunError::Refused(r @ Refusal::UnknownNode(_))) => {
            ApiError::bad(r.to_string())
        }
        EditError::Run(e) => ApiError::internal(e),
    })?;
    Ok(Json(
        json!({"checkpoint": thread_shape::checkpoint_ref(thread.as_str(), cp)}),
    ))
}

/// `PATCH /threads/{thread_id}/state` body (the JS SDK's `patchState`).
#[derive(Deserialize, Default)]
pub struct PatchState {
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// `PATCH /threads/{thread_id}/state`: merges `metadata` into the metadata of the thread's
/// current checkpoint (or the one named), kept in the thread's record under
/// [`CHECKPOINT_METADATA`]; 204. 400 when the thread has no checkpoint yet.
pub async fn patch_state(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<PatchState>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(body) = body?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    let add = match body.metadata {
        Value::Object(m) => m,
        other => {
            return Err(unprocessable(format!(
                "metadata must be a JSON object, not {other}"
            )))
        }
    };
    let at = named_checkpoint(body.checkpoint_id.as_deref(), body.checkpoint.as_ref())?;
    let (thread, rec) = existing(&state, &id).await?;
    let Some((cp, ..)) = placement(&state, &thread, at).await? else {
        return Err(match at {
            Some(at) => ApiError::not_found(format!("thread `{id}` has no checkpoint {}", at.0)),
            None => ApiError::bad(format!(
                "thread `{id}` has no checkpoint yet: its state has no metadata to patch"
            )),
        });
    };
    let key = cp.0.to_string();
    let now = update_record(&state, &thread, &rec, |rec| {
        let Some(obj) = rec.as_object_mut() else {
            return false;
        };
        let all = obj.entry(CHECKPOINT_METADATA).or_insert_with(|| json!({}));
        if !all.is_object() {
            *all = json!({});
        }
        let Some(mine) = all
            .as_object_mut()
            .map(|a| a.entry(key.clone()).or_insert_with(|| json!({})))
        else {
            return false;
        };
        let Some(m) = mine.as_object_mut() else {
            return false;
        };
        let mut changed = false;
        for (k, v) in &add {
            if m.get(k) != Some(v) {
                m.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed
    })
    .await?;
    match now {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// `POST /threads/prune` body.
#[derive(Deserialize, Default)]
pub struct Prune {
    #[serde(default)]
    thread_ids: Vec<String>,
    #[serde(default)]
    strategy: Option<String>,
}

/// `POST /threads/prune`: deletes the caller's threads among `thread_ids` (strategy `delete`,
/// the default) as `DELETE /threads/{id}` does; answers `{"pruned_count": n}`. Unknown threads,
/// other users' and busy ones are left out of the count. `keep_latest` (drop all but the newest
/// checkpoint) is refused (422): assistants have no way to prune a thread yet.
pub async fn prune_threads(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<Prune>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    match body.strategy.as_deref() {
        None | Some("delete") => {}
        Some("keep_latest") => {
            return Err(unprocessable(
                "strategy `keep_latest` is not supported by this server; use `delete`".into(),
            ))
        }
        Some(other) => {
            return Err(unprocessable(format!(
                "strategy `{other}`: use delete or keep_latest"
            )))
        }
    }
    let mut pruned = 0;
    for id in &body.thread_ids {
        let thread = ThreadId::new(id.as_str());
        let Some(rec) = record(&state, &thread).await? else {
            continue;
        };
        if !me.may_see(&rec) {
            continue;
        }
        if delete_one(&state, &thread, &rec).await? {
            pruned += 1;
        }
    }
    Ok(Json(json!({"pruned_count": pruned})))
}
