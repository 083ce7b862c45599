//! Crons: runs the server starts on a schedule (the Agent Server API's `/runs/crons`).
//!
//! - `POST /threads/{thread_id}/runs/crons` schedules runs on a thread; `POST /runs/crons`
//!   schedules stateless runs, each on a new thread (`on_run_completed`: `delete`, the default,
//!   deletes the thread with its runs once the run ended; `keep` keeps it);
//! - `POST /runs/crons/search` (`assistant_id`, `thread_id`, `enabled`, `metadata`, `limit`,
//!   `offset`, `sort_by`, `sort_order`, `select`) and `POST /runs/crons/count`;
//! - `PATCH /runs/crons/{cron_id}` changes one (`end_time: null` clears the end);
//!   `DELETE /runs/crons/{cron_id}` removes it.
//!
//! A schedule has five fields in UTC (`cron_schedule.rs`). A cron's request (`input`,
//! `config`, `context`, `metadata`, `multitask_strategy`, `stream_mode`, …) is kept whole as its
//! `payload` and each firing starts a run with it as `POST /threads/{id}/runs` does
//! (`lifecycle::begin`), with `cron_id` and `scheduled_at` added to the run's metadata.
//!
//! Records live in the server's store under `["__planwright__", "crons"]`, so they outlive a
//! restart and every replica sees them. Every replica runs the scheduler ([`spawn_scheduler`]);
//! each firing — a cron and a scheduled minute — is claimed in the store by one atomic put that
//! only a free key accepts (`["__planwright__", "cron_firings"]`, key `{cron_id}:{ms}`), so
//! exactly one replica starts it. A firing whose minute passed while no replica ran (more than a
//! minute before a scheduler saw it) is skipped, not caught up; a replica that dies between the
//! claim and the run's start loses that firing.
//!
//! Crons are their creator's: another user gets 404 for them and does not find them, as with
//! threads; an admin sees all. A firing runs as the cron's creator: a stateless run's thread is
//! theirs.

use super::assistant_records::resolve;
use super::auth::Principal;
use super::cron_schedule::{parse_time, Schedule};
use super::errors::ApiError;
use super::time::rfc3339;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use planwright::store::{PutOptions, SearchQuery, StoreClock, StoreError};
use planwright::ThreadId;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Where crons live in the store.
pub const NAMESPACE: [&str; 2] = ["__planwright__", "crons"];
/// Where each firing is claimed by the one replica that starts it.
pub const FIRINGS: [&str; 2] = ["__planwright__", "cron_firings"];
/// How long a firing's claim is kept (long after its minute has passed, then swept).
const FIRING_TTL: Duration = Duration::from_secs(7 * 86_400);
/// How often the scheduler reads the crons (new ones, changed ones, ones another replica made).
pub const POLL: Duration = Duration::from_secs(1);
/// A firing this recent when a scheduler first sees its cron is still started.
const GRACE_MS: u64 = 60_000;
/// The most crons one listing reads.
const READ_CAP: usize = 100_000;
/// The most crons one search answers.
const MAX_LIMIT: usize = 1000;

/// A cron as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CronRecord {
    /// Its id.
    pub cron_id: String,
    /// The assistant (or graph) each firing runs.
    pub assistant_id: String,
    /// The thread each firing runs on (`None`: a new thread per firing).
    pub thread_id: Option<String>,
    /// The five-field schedule, in UTC.
    pub schedule: String,
    /// No firing after this (ms since the Unix epoch).
    pub end_time: Option<u64>,
    /// Fires only while enabled.
    pub enabled: bool,
    /// A stateless cron's thread after its run: `delete` or `keep`.
    pub on_run_completed: Option<String>,
    /// The run request each firing makes.
    pub payload: Value,
    /// Its metadata (a JSON object; also each run's).
    pub metadata: Value,
    /// Its creator (`None` without auth).
    pub user_id: Option<String>,
    /// When it was created (ms since the Unix epoch).
    pub created_at: u64,
    /// When it was last changed.
    pub updated_at: u64,
}

impl CronRecord {
    /// The next firing after `now` (`None`: disabled, ended, or a schedule that never fires).
    pub fn next_after(&self, now: u64) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        let next = Schedule::parse(&self.schedule).ok()?.next_after(now)?;
        self.end_time.is_none_or(|end| next <= end).then_some(next)
    }

    /// As the API shows it, its `next_run_date` counted from `now`.
    pub fn to_json(&self, now: u64) -> Value {
        json!({
            "cron_id": self.cron_id, "assistant_id": self.assistant_id,
            "thread_id": self.thread_id, "schedule": self.schedule, "timezone": "UTC",
            "end_time": self.end_time.map(rfc3339), "enabled": self.enabled,
            "on_run_completed": self.on_run_completed, "payload": self.payload,
            "metadata": self.metadata, "user_id": self.user_id,
            "created_at": rfc3339(self.created_at), "updated_at": rfc3339(self.updated_at),
            "next_run_date": self.next_after(now).map(rfc3339),
        })
    }
}

fn ns(labels: [&str; 2]) -> Vec<String> {
    labels.iter().map(|s| s.to_string()).collect()
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn unprocessable(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
}

fn corrupt(key: &str, e: serde_json::Error) -> ApiError {
    ApiError::internal(format!("stored cron `{key}` is corrupt: {e}"))
}

/// Every cron in the store.
pub async fn all(state: &AppState) -> Result<Vec<CronRecord>, ApiError> {
    let q = SearchQuery::under(NAMESPACE).page(READ_CAP, 0);
    let items = state.store.search(&q).await.map_err(ApiError::internal)?;
    items
        .into_iter()
        .map(|i| serde_json::from_value(Value::Object(i.value)).map_err(|e| corrupt(&i.key, e)))
        .collect()
}

async fn get(state: &AppState, id: &str) -> Result<Option<CronRecord>, ApiError> {
    match state
        .store
        .get(&ns(NAMESPACE), id)
        .await
        .map_err(ApiError::internal)?
    {
        Some(i) => serde_json::from_value(Value::Object(i.value))
            .map(Some)
            .map_err(|e| corrupt(id, e)),
        None => Ok(None),
    }
}

async fn put(state: &AppState, rec: &CronRecord) -> Result<(), ApiError> {
    let Ok(Value::Object(value)) = serde_json::to_value(rec) else {
        return Err(ApiError::internal("a cron does not encode as an object"));
    };
    state
        .store
        .put(&ns(NAMESPACE), &rec.cron_id, value, PutOptions::default())
        .await
        .map_err(ApiError::internal)?;
    Ok(())
}

fn may_see(rec: &CronRecord) -> bool {
    super::auth::caller_may_see(&json!({ "owner": rec.user_id }))
}

/// The caller's cron `id`, or 404.
async fn visible(state: &AppState, id: &str) -> Result<CronRecord, ApiError> {
    get(state, id)
        .await?
        .filter(may_see)
        .ok_or_else(|| ApiError::not_found(format!("cron `{id}` does not exist")))
}

/// The routes, for `routes.rs` to mount.
pub fn routes() -> axum::Router<Arc<AppState>> {
    use axum::routing::{patch, post};
    axum::Router::new()
        .route("/runs/crons", post(create_stateless))
        .route("/threads/{thread_id}/runs/crons", post(create_for_thread))
        .route("/runs/crons/search", post(search))
        .route("/runs/crons/count", post(count))
        .route("/runs/crons/{cron_id}", patch(update).delete(delete))
}

/// What a cron request carries besides the run: `POST` and `PATCH` bodies alike (a `PATCH`
/// changes only the fields it names).
#[derive(Deserialize, Default)]
pub struct CronBody {
    #[serde(default)]
    assistant_id: Option<String>,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    /// `Some(None)`: `null`, which clears the end in a `PATCH`.
    #[serde(default, deserialize_with = "present")]
    end_time: Option<Option<String>>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    on_run_completed: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    webhook: Option<Value>,
    #[serde(default)]
    interrupt_before: Option<Value>,
    #[serde(default)]
    interrupt_after: Option<Value>,
    /// Everything else: the run request (`input`, `config`, `context`, `multitask_strategy`,
    /// `stream_mode`, …).
    #[serde(flatten)]
    run: Map<String, Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Fields of the Agent Server API this server refuses rather than ignore.
fn refuse_unsupported(b: &CronBody) -> Result<(), ApiError> {
    for (name, v) in [
        ("webhook", &b.webhook),
        ("interrupt_before", &b.interrupt_before),
        ("interrupt_after", &b.interrupt_after),
    ] {
        if v.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(unprocessable(format!(
                "{name} is not supported by this server's crons"
            )));
        }
    }
    match b.timezone.as_deref() {
        None | Some("UTC") | Some("Etc/UTC") | Some("utc") => Ok(()),
        Some(tz) => Err(unprocessable(format!(
            "timezone `{tz}`: schedules here are in UTC (write the schedule in UTC)"
        ))),
    }
}

fn metadata(v: Option<Value>) -> Result<Option<Value>, ApiError> {
    match v {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(json!({}))),
        Some(v @ Value::Object(_)) => {
            super::fields::check_size("metadata", Some(&v))?;
            Ok(Some(v))
        }
        Some(other) => Err(unprocessable(format!(
            "metadata must be a JSON object, not {other}"
        ))),
    }
}

fn on_completed(v: Option<String>) -> Result<Option<String>, ApiError> {
    match v.as_deref() {
        None | Some("delete") | Some("keep") => Ok(v),
        Some(other) => Err(unprocessable(format!(
            "on_run_completed `{other}`: use delete or keep"
        ))),
    }
}

fn schedule(s: &str) -> Result<(), ApiError> {
    Schedule::parse(s)
        .map(|_| ())
        .map_err(|e| unprocessable(e.to_string()))
}

fn end_time(v: Option<String>) -> Result<Option<u64>, ApiError> {
    v.map(|s| parse_time(&s).map_err(|e| unprocessable(format!("end_time: {e}"))))
        .transpose()
}

/// The run request a firing makes, checked as a run request is: `None` fields dropped.
fn payload(assistant_id: &str, run: &Map<String, Value>, meta: &Value) -> Result<Value, ApiError> {
    let mut p: Map<String, Value> = run
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    p.insert("assistant_id".into(), json!(assistant_id));
    p.insert("metadata".into(), meta.clone());
    for f in ["config", "context", "stream_mode"] {
        super::fields::check_size(f, p.get(f))?;
    }
    let p = Value::Object(p);
    serde_json::from_value::<super::run_body::RunBody>(p.clone())
        .map_err(|e| unprocessable(format!("malformed run request: {e}")))?;
    Ok(p)
}

async fn create(
    state: &AppState,
    me: &Principal,
    thread_id: Option<String>,
    b: CronBody,
) -> Result<Json<Value>, ApiError> {
    refuse_unsupported(&b)?;
    let assistant_id = b
        .assistant_id
        .ok_or_else(|| unprocessable("assistant_id is required"))?;
    resolve(state, &assistant_id).await?;
    let sched = b
        .schedule
        .ok_or_else(|| unprocessable("schedule is required (five fields, UTC)"))?;
    schedule(&sched)?;
    if thread_id.is_some() && b.on_run_completed.is_some() {
        return Err(unprocessable(
            "on_run_completed applies to stateless crons (POST /runs/crons) only",
        ));
    }
    let meta = metadata(b.metadata)?.unwrap_or_else(|| json!({}));
    let now = wall_ms();
    let rec = CronRecord {
        cron_id: super::ids::new_uuid(),
        payload: payload(&assistant_id, &b.run, &meta)?,
        assistant_id,
        on_run_completed: match thread_id {
            Some(_) => None,
            None => Some(on_completed(b.on_run_completed)?.unwrap_or_else(|| "delete".into())),
        },
        thread_id,
        schedule: sched,
        end_time: end_time(b.end_time.flatten())?,
        enabled: b.enabled.unwrap_or(true),
        metadata: meta,
        user_id: Some(me.user.clone()),
        created_at: now,
        updated_at: now,
    };
    put(state, &rec).await?;
    Ok(Json(rec.to_json(now)))
}

/// `POST /runs/crons`: a stateless cron (a new thread per firing).
pub async fn create_stateless(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    body: Result<Json<CronBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    create(&state, &me, None, b).await
}

/// `POST /threads/{thread_id}/runs/crons`: a cron on the caller's thread.
pub async fn create_for_thread(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    Path(thread_id): Path<String>,
    body: Result<Json<CronBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    let rec = state
        .checkpointer
        .thread_metadata(&ThreadId::new(&thread_id))
        .await
        .map_err(ApiError::internal)?;
    if !rec.is_some_and(|r| super::auth::caller_may_see(&r)) {
        return Err(ApiError::not_found(format!(
            "thread `{thread_id}` does not exist"
        )));
    }
    create(&state, &me, Some(thread_id), b).await
}

/// `PATCH /runs/crons/{cron_id}`.
pub async fn update(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<CronBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    refuse_unsupported(&b)?;
    let mut rec = visible(&state, &id).await?;
    if let Some(a) = b.assistant_id {
        resolve(&state, &a).await?;
        rec.assistant_id = a;
    }
    if let Some(s) = b.schedule {
        schedule(&s)?;
        rec.schedule = s;
    }
    if let Some(end) = b.end_time {
        rec.end_time = end_time(end)?;
    }
    if let Some(e) = b.enabled {
        rec.enabled = e;
    }
    if let Some(o) = on_completed(b.on_run_completed)? {
        if rec.thread_id.is_some() {
            return Err(unprocessable(
                "on_run_completed applies to stateless crons (POST /runs/crons) only",
            ));
        }
        rec.on_run_completed = Some(o);
    }
    if let Some(m) = metadata(b.metadata)? {
        rec.metadata = m;
    }
    let mut run = rec.payload.as_object().cloned().unwrap_or_default();
    run.extend(b.run);
    rec.payload = payload(&rec.assistant_id, &run, &rec.metadata)?;
    rec.updated_at = wall_ms();
    put(&state, &rec).await?;
    Ok(Json(rec.to_json(rec.updated_at)))
}

/// `DELETE /runs/crons/{cron_id}`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    visible(&state, &id).await?;
    state
        .store
        .delete(&ns(NAMESPACE), &id)
        .await
        .map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /runs/crons/search` and `/count` body.
#[derive(Deserialize, Default)]
pub struct SearchBody {
    #[serde(default)]
    assistant_id: Option<String>,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    sort_by: Option<String>,
    #[serde(default)]
    sort_order: Option<String>,
    #[serde(default)]
    select: Option<Vec<String>>,
}

fn body<T: Default + serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| unprocessable(format!("malformed request: {e}")))
}

/// The caller's crons passing the filters, as JSON, sorted as asked (default: oldest first).
async fn matching(state: &AppState, b: &SearchBody) -> Result<Vec<Value>, ApiError> {
    let now = wall_ms();
    let mut list: Vec<CronRecord> = all(state)
        .await?
        .into_iter()
        .filter(|c| {
            may_see(c)
                && b.assistant_id.as_ref().is_none_or(|a| *a == c.assistant_id)
                && b.thread_id
                    .as_ref()
                    .is_none_or(|t| Some(t) == c.thread_id.as_ref())
                && b.enabled.is_none_or(|e| e == c.enabled)
                && b.metadata
                    .as_ref()
                    .is_none_or(|m| m.iter().all(|(k, v)| c.metadata.get(k) == Some(v)))
        })
        .collect();
    list.sort_by(|x, y| (x.created_at, &x.cron_id).cmp(&(y.created_at, &y.cron_id)));
    let mut out: Vec<Value> = list.iter().map(|c| c.to_json(now)).collect();
    if let Some(field) = &b.sort_by {
        const FIELDS: [&str; 7] = [
            "cron_id",
            "assistant_id",
            "thread_id",
            "created_at",
            "updated_at",
            "next_run_date",
            "end_time",
        ];
        if !FIELDS.contains(&field.as_str()) {
            return Err(unprocessable(format!(
                "sort_by `{field}`: use one of {}",
                FIELDS.join(", ")
            )));
        }
        // Times are RFC 3339 UTC with milliseconds: their text sorts as the times do.
        out.sort_by(|x, y| x[field].as_str().cmp(&y[field].as_str()));
    }
    match b.sort_order.as_deref() {
        None | Some("asc") => {}
        Some("desc") => out.reverse(),
        Some(other) => {
            return Err(unprocessable(format!(
                "sort_order `{other}`: use asc or desc"
            )))
        }
    }
    Ok(out)
}

/// `POST /runs/crons/search`.
pub async fn search(State(state): State<Arc<AppState>>, bytes: axum::body::Bytes) -> Response {
    let run = async {
        let b: SearchBody = body(&bytes)?;
        let all = matching(&state, &b).await?;
        let (limit, offset) = (b.limit.unwrap_or(10).min(MAX_LIMIT), b.offset.unwrap_or(0));
        let page: Vec<Value> = all
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|v| match (v, b.select.as_deref()) {
                (Value::Object(m), Some(f)) if !f.is_empty() => {
                    Value::Object(m.into_iter().filter(|(k, _)| f.contains(k)).collect())
                }
                (v, _) => v,
            })
            .collect();
        Ok::<_, ApiError>(Json(Value::Array(page)).into_response())
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /runs/crons/count`.
pub async fn count(
    State(state): State<Arc<AppState>>,
    bytes: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: SearchBody = body(&bytes)?;
    Ok(Json(json!(matching(&state, &b).await?.len())))
}

/// Claims firing `at` of cron `id` for the holder of `token`: true for the one claim that wins
/// it, on whichever replica.
pub async fn claim(state: &AppState, id: &str, at: u64, token: &str) -> Result<bool, StoreError> {
    let opts = PutOptions {
        ttl: Some(FIRING_TTL),
        owner: Some(token.to_string()),
        ..PutOptions::default()
    };
    match state
        .store
        .put(&ns(FIRINGS), &format!("{id}:{at}"), Map::new(), opts)
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::NotOwner { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Starts cron `cron`'s firing scheduled at `at` as `POST /threads/{id}/runs` starts a run (a new
/// thread first when the cron is stateless); returns the run's id. The run goes on in the
/// background; a stateless cron's thread is deleted after it when `on_run_completed` says so.
pub async fn fire(state: &Arc<AppState>, cron: &CronRecord, at: u64) -> Result<String, ApiError> {
    let r = resolve(state, &cron.assistant_id).await?;
    let mut p = cron.payload.as_object().cloned().unwrap_or_default();
    // The registered graph runs the created assistant (run requests name graphs until runs
    // resolve assistant ids themselves).
    p.insert("assistant_id".into(), json!(r.graph.id()));
    let mut meta = p
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert("cron_id".into(), json!(cron.cron_id));
    meta.insert("scheduled_at".into(), json!(rfc3339(at)));
    if r.assistant_id != r.graph.id() {
        meta.insert("assistant_id".into(), json!(r.assistant_id));
    }
    p.insert("metadata".into(), Value::Object(meta));
    let body: super::run_body::RunBody = serde_json::from_value(Value::Object(p))
        .map_err(|e| unprocessable(format!("malformed run request: {e}")))?;
    let stateless = cron.thread_id.is_none();
    let thread_id = match &cron.thread_id {
        Some(t) => t.clone(),
        None => {
            let id = super::ids::new_uuid();
            let rec = json!({
                "metadata": {"cron_id": cron.cron_id},
                "created_at": super::time::now(),
                "owner": cron.user_id,
            });
            state
                .checkpointer
                .create_thread(&ThreadId::new(&id), rec)
                .await
                .map_err(ApiError::internal)?;
            id
        }
    };
    let delete_after = stateless && cron.on_run_completed.as_deref() != Some("keep");
    let begun = super::lifecycle::begin(state, &thread_id, body).await;
    let (rec, thread, assistant, handle) = match begun {
        Ok(super::lifecycle::Begun::Here(rec, t, a, h)) => (rec, t, a, h),
        Ok(super::lifecycle::Begun::Elsewhere(rec)) => return Ok(rec.run_id),
        Err(e) => {
            if stateless {
                drop_thread(state, &ThreadId::new(&thread_id)).await;
            }
            return Err(e);
        }
    };
    let run_id = rec.run_id.clone();
    let st = state.clone();
    tokio::spawn(async move {
        let _ = super::publish::drive(&st, &rec, assistant, &thread, handle, false).await;
        if delete_after {
            drop_thread(&st, &thread).await;
        }
    });
    Ok(run_id)
}

/// Deletes a stateless firing's thread and its runs.
async fn drop_thread(state: &AppState, thread: &ThreadId) {
    let rec = state
        .checkpointer
        .thread_metadata(thread)
        .await
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    let a = super::assistants::of(state, thread, &rec);
    let deleted = a.delete_thread(thread).await;
    super::assistants::unbind(state, thread);
    let runs = state.run_store.delete_thread(thread.as_str()).await;
    if let Err(e) = deleted {
        tracing::warn!(thread_id = %thread, error = %e, "a cron's thread could not be deleted");
    }
    if let Err(e) = runs {
        tracing::warn!(thread_id = %thread, error = %e, "a cron's runs could not be deleted");
    }
}

/// One replica's scheduler: the next firing of each cron it knows, and its claim token.
struct Scheduler {
    state: Arc<AppState>,
    clock: StoreClock,
    token: String,
    /// Cron id → (the schedule and change time the next firing was computed from, the firing).
    next: HashMap<String, ((String, u64), Option<u64>)>,
}

impl Scheduler {
    /// Starts the crons due now; returns how long to sleep.
    async fn tick(&mut self) -> Duration {
        let now = (self.clock)();
        let crons = match all(&self.state).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e.1, "crons cannot be read; trying again");
                return POLL;
            }
        };
        let seen: std::collections::HashSet<String> =
            crons.iter().map(|c| c.cron_id.clone()).collect();
        self.next.retain(|id, _| seen.contains(id));
        let mut wake = now + POLL.as_millis() as u64;
        for c in crons {
            let basis = (c.schedule.clone(), c.updated_at);
            let entry = self
                .next
                .entry(c.cron_id.clone())
                .or_insert((basis.clone(), None));
            if entry.0 != basis || entry.1.is_none() {
                // First sight (or a change): a firing of the last minute still counts.
                let from = now.saturating_sub(GRACE_MS).max(c.updated_at);
                *entry = (basis, c.next_after(from.saturating_sub(1)));
            }
            let Some(at) = entry.1 else { continue };
            if at <= now {
                entry.1 = c.next_after(now);
                match claim(&self.state, &c.cron_id, at, &self.token).await {
                    Ok(true) => {
                        let (st, c) = (self.state.clone(), c.clone());
                        tokio::spawn(async move {
                            match fire(&st, &c, at).await {
                                Ok(run_id) => tracing::info!(
                                    cron_id = c.cron_id, run_id, scheduled_at = %rfc3339(at),
                                    "cron fired"
                                ),
                                Err(e) => tracing::warn!(
                                    cron_id = c.cron_id, scheduled_at = %rfc3339(at),
                                    error = %e.1, "cron firing refused"
                                ),
                            }
                        });
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(cron_id = c.cron_id, error = %planwright::ErrorChain(&e), "a cron firing cannot be claimed")
                    }
                }
            }
            if let Some(n) = entry.1 {
                wake = wake.min(n);
            }
        }
        Duration::from_millis(wake.saturating_sub(now).max(1))
    }
}

/// Starts this replica's scheduler: every [`POLL`] (or sooner, at the next firing it knows) it
/// reads the crons and starts the due firings it wins the claim of. `clock` is "now" in
/// milliseconds since the Unix epoch ([`planwright::store::system_clock`] follows tokio's
/// clock, so tests move it with paused time).
pub fn spawn_scheduler(state: Arc<AppState>, clock: StoreClock) -> tokio::task::JoinHandle<()> {
    let mut s = Scheduler {
        state,
        clock,
        token: format!("scheduler-{}", super::ids::new_uuid()),
        next: HashMap::new(),
    };
    tokio::spawn(async move {
        loop {
            let wait = s.tick().await;
            tokio::time::sleep(wait).await;
        }
    })
}
