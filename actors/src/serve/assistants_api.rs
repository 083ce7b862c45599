//! The assistants endpoints of the Agent Server API, as the official SDKs call them:
//!
//! - `POST /assistants` creates an assistant of a registered graph (`graph_id`), with an optional
//!   `assistant_id` (default: a fresh UUID), `config`, `context`, `metadata`, `name`,
//!   `description`, and `if_exists` (`raise`, the default: 409 on a taken id; `do_nothing`: the
//!   existing assistant);
//! - `GET`, `PATCH` (a new version, current from then on) and `DELETE /assistants/{id}`;
//! - `POST /assistants/search` (`graph_id`, `metadata`, `name`: a case-insensitive substring,
//!   `limit`, `offset`, `sort_by`, `sort_order`, `select`; `X-Pagination-Next` names the next
//!   offset when there is more) and `POST /assistants/count`;
//! - `GET /assistants/{id}/graph` (`xray` accepted: graphs here have no subgraphs), `/schemas`,
//!   `/subgraphs` (`{}`: no graph served here has subgraphs), and `/nodes` (a Planwright
//!   extension: each node's live statistics);
//! - `POST /assistants/{id}/versions` and `POST /assistants/{id}/latest` (make a version current).
//!
//! A graph registered in code is a system assistant whose id is its graph id: listed, read and
//! run like the others, but never changed or deleted (409 says why). Created assistants live in
//! the store ([`super::assistant_records`]) and are their creator's: another user gets 404 for
//! them and does not find them in a search, as with threads; an admin sees all.

use super::assistant_records::{visible, AssistantRecord, AssistantRecords};
use super::assistants::AssistantRef;
use super::auth::Principal;
use super::errors::ApiError;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

/// The longest assistant id the server accepts.
const MAX_ASSISTANT_ID: usize = 128;
/// The most assistants one search answers.
const MAX_LIMIT: usize = 1000;

/// The assistants routes, for [`super::routes`] to mount.
pub fn routes() -> axum::Router<Arc<AppState>> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/assistants", post(create))
        .route("/assistants/search", post(search))
        .route("/assistants/count", post(count))
        .route(
            "/assistants/{assistant_id}",
            get(get_one).patch(patch).delete(delete),
        )
        .route("/assistants/{assistant_id}/graph", get(get_graph))
        .route("/assistants/{assistant_id}/schemas", get(schemas))
        .route("/assistants/{assistant_id}/subgraphs", get(subgraphs))
        .route(
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            get(subgraphs),
        )
        .route("/assistants/{assistant_id}/nodes", get(nodes))
        .route("/assistants/{assistant_id}/versions", post(versions))
        .route("/assistants/{assistant_id}/latest", post(set_latest))
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A registered graph as the API shows it: a system assistant, version 1 since the server
/// started.
pub fn system_json(a: &AssistantRef) -> Value {
    json!({
        "assistant_id": a.id(), "graph_id": a.id(), "name": a.id(),
        "description": a.description(), "config": {}, "context": {},
        "metadata": {"created_by": "system"},
        "version": 1, "created_at": super::time::STARTED_AT.as_str(),
        "updated_at": super::time::STARTED_AT.as_str(),
    })
}

/// A created assistant (one version of it) as the API shows it.
pub fn record_json(r: &AssistantRecord) -> Value {
    json!({
        "assistant_id": r.assistant_id, "graph_id": r.graph_id, "name": r.name,
        "description": r.description, "config": r.config, "context": r.context,
        "metadata": r.metadata, "version": r.version,
        "created_at": super::time::rfc3339(r.created_at),
        "updated_at": super::time::rfc3339(r.updated_at),
    })
}

fn unprocessable(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
}

/// A client-named field that must be a JSON object (absent or `null`: `{}`), within the stored
/// field cap.
fn object(field: &str, v: Option<Value>) -> Result<Value, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => {
            super::fields::check_size(field, Some(&v))?;
            Ok(v)
        }
        Some(other) => Err(unprocessable(format!(
            "{field} must be a JSON object, not {other}"
        ))),
    }
}

fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = (1..=MAX_ASSISTANT_ID).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        && id != "."
        && id != "..";
    if ok {
        Ok(())
    } else {
        let shown: String = id.chars().take(40).collect();
        Err(unprocessable(format!(
            "assistant_id `{shown}`: use 1 to {MAX_ASSISTANT_ID} characters of A-Z a-z 0-9 . _ : -"
        )))
    }
}

/// The registered graph `graph_id` names (404 naming the graphs there are).
fn graph(state: &AppState, graph_id: &str) -> Result<AssistantRef, ApiError> {
    state.assistants.find(graph_id).cloned().ok_or_else(|| {
        let ids: Vec<String> = state
            .assistants
            .all()
            .iter()
            .map(|a| format!("`{}`", a.id()))
            .collect();
        let shown: String = graph_id.chars().take(40).collect();
        ApiError::not_found(format!(
            "unknown graph_id `{shown}`: this server serves {}",
            ids.join(", ")
        ))
    })
}

/// 409 for a change of a system assistant.
fn read_only(id: &str, what: &str) -> ApiError {
    ApiError::conflict(format!(
        "assistant `{id}` is the graph registered in code under that id: it cannot be {what} \
         (create an assistant of graph `{id}` with POST /assistants and change that one)"
    ))
}

/// Whether the caller may change `rec` (its creator, or an admin).
fn may_change(me: &Principal, rec: &AssistantRecord) -> bool {
    me.may_see(&json!({ "owner": rec.owner }))
}

fn json_body<T: Default + serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| unprocessable(format!("malformed request: {e}")))
}

/// `POST /assistants` body.
#[derive(Deserialize, Default)]
pub struct CreateBody {
    #[serde(default)]
    graph_id: Option<String>,
    #[serde(default)]
    assistant_id: Option<String>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    if_exists: Option<String>,
}

/// `POST /assistants`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    body: Result<Json<CreateBody>, JsonRejection>,
) -> ApiResult {
    let Json(b) = body?;
    let do_nothing = match b.if_exists.as_deref() {
        None | Some("raise") => false,
        Some("do_nothing") => true,
        Some(other) => {
            return Err(unprocessable(format!(
                "if_exists `{other}`: use raise or do_nothing"
            )))
        }
    };
    let graph_id = b
        .graph_id
        .ok_or_else(|| unprocessable("graph_id is required: the registered graph to run"))?;
    graph(&state, &graph_id)?;
    let id = b.assistant_id.unwrap_or_else(super::ids::new_uuid);
    check_id(&id)?;
    if let Some(system) = state.assistants.find(&id) {
        return if do_nothing {
            Ok(Json(system_json(system)))
        } else {
            Err(ApiError::conflict(format!(
                "assistant `{id}` already exists (the graph registered in code under that id)"
            )))
        };
    }
    let now = now_ms();
    let rec = AssistantRecord {
        assistant_id: id.clone(),
        graph_id,
        name: b.name.unwrap_or_else(|| "Untitled".into()),
        description: b.description,
        config: object("config", b.config)?,
        context: object("context", b.context)?,
        metadata: object("metadata", b.metadata)?,
        version: 1,
        created_at: now,
        updated_at: now,
        owner: Some(me.user.clone()),
    };
    match AssistantRecords::new(state.store.as_ref())
        .create(&rec)
        .await?
    {
        None => Ok(Json(record_json(&rec))),
        // Another user's assistant: its id is taken, and nothing more is told.
        Some(existing) if do_nothing && may_change(&me, &existing) => {
            Ok(Json(record_json(&existing)))
        }
        Some(_) => Err(ApiError::conflict(format!(
            "assistant `{id}` already exists"
        ))),
    }
}

/// `GET /assistants/{assistant_id}`.
pub async fn get_one(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    if let Some(a) = state.assistants.find(&id) {
        return Ok(Json(system_json(a)));
    }
    Ok(Json(record_json(&visible(&state, &id).await?)))
}

/// `PATCH /assistants/{assistant_id}` body: what changes (`metadata` is merged into the
/// assistant's; the rest replaces).
#[derive(Deserialize, Default)]
pub struct PatchBody {
    #[serde(default)]
    graph_id: Option<String>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// `PATCH /assistants/{assistant_id}`: a new version, current from now on.
pub async fn patch(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    if state.assistants.find(&id).is_some() {
        return Err(read_only(&id, "changed"));
    }
    let b: PatchBody = json_body(&body)?;
    let current = visible(&state, &id).await?;
    if !may_change(&me, &current) {
        return Err(ApiError::not_found(format!("unknown assistant `{id}`")));
    }
    let mut next = current.clone();
    if let Some(g) = b.graph_id {
        graph(&state, &g)?;
        next.graph_id = g;
    }
    if b.config.is_some() {
        next.config = object("config", b.config)?;
    }
    if b.context.is_some() {
        next.context = object("context", b.context)?;
    }
    if b.metadata.is_some() {
        let add = object("metadata", b.metadata)?;
        let mut merged = current.metadata.as_object().cloned().unwrap_or_default();
        merged.extend(add.as_object().cloned().unwrap_or_default());
        let merged = Value::Object(merged);
        super::fields::check_size("metadata", Some(&merged))?;
        next.metadata = merged;
    }
    if let Some(n) = b.name {
        next.name = n;
    }
    if b.description.is_some() {
        next.description = b.description;
    }
    next.updated_at = now_ms();
    let stored = AssistantRecords::new(state.store.as_ref())
        .add_version(&current, next)
        .await?;
    Ok(Json(record_json(&stored)))
}

/// `DELETE /assistants/{assistant_id}` (`delete_threads=true` is refused: threads belong to
/// graphs here, not to the assistants created of them).
pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<StatusCode, ApiError> {
    if state.assistants.find(&id).is_some() {
        return Err(read_only(&id, "deleted"));
    }
    match q.get("delete_threads").map(String::as_str) {
        None | Some("false") | Some("False") | Some("0") => {}
        Some(_) => {
            return Err(unprocessable(
                "delete_threads: threads belong to the graph they ran, not to an assistant; \
                 delete them with DELETE /threads/{thread_id}",
            ))
        }
    }
    let rec = visible(&state, &id).await?;
    if !may_change(&me, &rec) {
        return Err(ApiError::not_found(format!("unknown assistant `{id}`")));
    }
    AssistantRecords::new(state.store.as_ref())
        .delete(&id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /assistants/search` and `/count` body.
#[derive(Deserialize, Default)]
pub struct SearchBody {
    #[serde(default)]
    graph_id: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    name: Option<String>,
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

/// Whether `meta` has every field of `filter`, equal.
fn meta_matches(meta: &Value, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(k, v)| meta.get(k) == Some(v))
}

/// Every assistant the caller sees that passes the body's filters: registered graphs first, in
/// registration order, then created assistants, oldest first (unless `sort_by` says otherwise).
async fn matching(state: &AppState, b: &SearchBody) -> Result<Vec<Value>, ApiError> {
    let filter = match &b.metadata {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(unprocessable(format!(
                "metadata must be a JSON object, not {other}"
            )))
        }
    };
    let name = b.name.as_ref().map(|n| n.to_lowercase());
    let keep = |v: &Value| {
        b.graph_id.as_ref().is_none_or(|g| v["graph_id"] == **g)
            && name.as_ref().is_none_or(|n| {
                v["name"]
                    .as_str()
                    .is_some_and(|s| s.to_lowercase().contains(n))
            })
            && meta_matches(&v["metadata"], &filter)
    };
    let mut out: Vec<Value> = state.assistants.all().iter().map(system_json).collect();
    let mut created = AssistantRecords::new(state.store.as_ref()).all().await?;
    created.retain(|r| super::auth::caller_may_see(&json!({ "owner": r.owner })));
    created.sort_by(|a, b| (a.created_at, &a.assistant_id).cmp(&(b.created_at, &b.assistant_id)));
    out.extend(created.iter().map(record_json));
    out.retain(keep);
    if let Some(field) = &b.sort_by {
        const FIELDS: [&str; 5] = [
            "assistant_id",
            "graph_id",
            "name",
            "created_at",
            "updated_at",
        ];
        if !FIELDS.contains(&field.as_str()) {
            return Err(unprocessable(format!(
                "sort_by `{field}`: use one of {}",
                FIELDS.join(", ")
            )));
        }
        // Times are RFC 3339 with milliseconds in UTC: their text sorts as the times do.
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

/// `POST /assistants/search`.
pub async fn search(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> Response {
    let run = async {
        let b: SearchBody = json_body(&body)?;
        let all = matching(&state, &b).await?;
        let (limit, offset) = (b.limit.unwrap_or(10).min(MAX_LIMIT), b.offset.unwrap_or(0));
        let more = all.len() > offset.saturating_add(limit);
        let page: Vec<Value> = all
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|v| select(v, b.select.as_deref()))
            .collect();
        let mut resp = Json(Value::Array(page)).into_response();
        if more {
            resp.headers_mut().insert(
                "x-pagination-next",
                axum::http::HeaderValue::from(offset + limit),
            );
        }
        Ok::<_, ApiError>(resp)
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

fn select(v: Value, fields: Option<&[String]>) -> Value {
    match (v, fields) {
        (Value::Object(m), Some(f)) if !f.is_empty() => {
            Value::Object(m.into_iter().filter(|(k, _)| f.contains(k)).collect())
        }
        (v, _) => v,
    }
}

/// `POST /assistants/count`: how many assistants a search with these filters finds.
pub async fn count(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> ApiResult {
    let b: SearchBody = json_body(&body)?;
    Ok(Json(json!(matching(&state, &b).await?.len())))
}

/// The registered graph assistant `id` runs (a system assistant's own, a created one's).
async fn graph_of(state: &AppState, id: &str) -> Result<AssistantRef, ApiError> {
    Ok(super::assistant_records::resolve(state, id).await?.graph)
}

/// `GET /assistants/{assistant_id}/graph?xray=…` (the graphs served here have no subgraphs: any
/// `xray` shows the same graph).
pub async fn get_graph(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    if let Some(x) = q.get("xray") {
        let ok =
            matches!(x.as_str(), "true" | "false" | "True" | "False") || x.parse::<u32>().is_ok();
        if !ok {
            return Err(unprocessable(format!(
                "xray `{x}`: use true, false or a depth"
            )));
        }
    }
    Ok(Json(graph_of(&state, &id).await?.graph_json()))
}

/// `GET /assistants/{assistant_id}/schemas`: the JSON Schemas of its graph's input, output,
/// state, config and context.
pub async fn schemas(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let g = graph_of(&state, &id).await?;
    let mut out = g.schemas();
    out["graph_id"] = json!(g.id());
    Ok(Json(out))
}

/// `GET /assistants/{assistant_id}/subgraphs` (and `/subgraphs/{namespace}`): `{}`, as no graph
/// served here has subgraphs.
pub async fn subgraphs(
    State(state): State<Arc<AppState>>,
    Path(params): Path<HashMap<String, String>>,
) -> ApiResult {
    let id = params.get("assistant_id").cloned().unwrap_or_default();
    graph_of(&state, &id).await?;
    Ok(Json(json!({})))
}

/// `GET /assistants/{assistant_id}/nodes`: each node of its graph's statistics now (executions,
/// failures, running tasks, mailbox depth, queue and work p50/p99 in microseconds) and the
/// graph's active runs.
pub async fn nodes(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let a = graph_of(&state, &id).await?;
    let (stats, active) = (a.node_stats(), a.active_runs());
    Ok(Json(
        json!({"assistant_id": id, "active_runs": active, "nodes": stats}),
    ))
}

/// `POST /assistants/{assistant_id}/versions` body.
#[derive(Deserialize, Default)]
pub struct VersionsBody {
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// `POST /assistants/{assistant_id}/versions`: its versions, newest first (a system assistant
/// has one).
pub async fn versions(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: VersionsBody = json_body(&body)?;
    let filter = match object("metadata", b.metadata)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let all: Vec<Value> = match state.assistants.find(&id) {
        Some(a) => vec![system_json(a)],
        None => {
            visible(&state, &id).await?;
            AssistantRecords::new(state.store.as_ref())
                .versions(&id)
                .await?
                .iter()
                .map(record_json)
                .collect()
        }
    };
    let (limit, offset) = (b.limit.unwrap_or(10).min(MAX_LIMIT), b.offset.unwrap_or(0));
    Ok(Json(Value::Array(
        all.into_iter()
            .filter(|v| meta_matches(&v["metadata"], &filter))
            .skip(offset)
            .take(limit)
            .collect(),
    )))
}

/// `POST /assistants/{assistant_id}/latest` body.
#[derive(Deserialize)]
pub struct LatestBody {
    version: u64,
}

/// `POST /assistants/{assistant_id}/latest`: makes one of its versions current.
pub async fn set_latest(
    State(state): State<Arc<AppState>>,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Json<LatestBody>, JsonRejection>,
) -> ApiResult {
    let Json(b) = body?;
    if let Some(a) = state.assistants.find(&id) {
        return if b.version == 1 {
            Ok(Json(system_json(a)))
        } else {
            Err(ApiError::not_found(format!(
                "assistant `{id}` has one version, 1 (it is the graph registered in code)"
            )))
        };
    }
    let rec = visible(&state, &id).await?;
    if !may_change(&me, &rec) {
        return Err(ApiError::not_found(format!("unknown assistant `{id}`")));
    }
    AssistantRecords::new(state.store.as_ref())
        .set_latest(&id, b.version, now_ms())
        .await?
        .map(|r| Json(record_json(&r)))
        .ok_or_else(|| {
            ApiError::not_found(format!("assistant `{id}` has no version {}", b.version))
        })
}
