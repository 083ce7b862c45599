//! `POST /threads/search` and `POST /threads/count`: threads filtered by metadata and values
//! (containment), status, ids and prefix, sorted and paged, as the SDKs ask.

use super::auth::Principal;
use super::errors::ApiError;
use super::thread_records::*;
use super::thread_shape;
use super::threads::thread_json;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::Json;
use planwright::ThreadId;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

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

impl Search {
    /// Refuses unknown statuses, sort fields and orders, and filters that are not objects.
    fn check(&self) -> Result<(), ApiError> {
        if let Some(s) = self.status.as_deref() {
            if !THREAD_STATUSES.contains(&s) {
                return Err(ApiError::unprocessable(format!(
                    "status `{s}`: use one of {}",
                    THREAD_STATUSES.join(", ")
                )));
            }
        }
        if let Some(s) = self.sort_by.as_deref() {
            if !SORT_FIELDS.contains(&s) {
                return Err(ApiError::unprocessable(format!(
                    "sort_by `{s}`: use one of {}",
                    SORT_FIELDS.join(", ")
                )));
            }
        }
        if let Some(s) = self.sort_order.as_deref() {
            if s != "asc" && s != "desc" {
                return Err(ApiError::unprocessable(format!(
                    "sort_order `{s}`: use asc or desc"
                )));
            }
        }
        for (name, v) in [("metadata", &self.metadata), ("values", &self.values)] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_null() && !v.is_object()) {
                return Err(ApiError::unprocessable(format!(
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
