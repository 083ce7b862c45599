//! `serve`: an HTTP JSON API over the research planner (assistant `research`) and the
//! field-acquisition planner (assistant `acquire`), following the LangGraph Server API for the
//! part it covers (threads, `runs/wait`, state, `command: {"resume": …}`), with bearer-token auth,
//! Prometheus metrics and a graceful stop on SIGTERM (running nodes finish, threads are
//! checkpointed, a restarted server continues them). See docs/server.md.

mod acquire;
pub mod assistants;
pub mod auth;
mod errors;
mod fields;
mod follow;
mod handlers;
mod history;
mod inspect;
mod lifecycle;
pub mod listen;
mod messages;
mod metrics;
mod publish;
mod queue;
pub mod replica;
mod run_log;
mod runs;
pub mod store;
mod stream;
mod studio;
pub mod time;

use crate::field::FieldPolicy;
use crate::field::{self, FieldState};
use crate::kit;
use crate::research::policy::ResearchPolicy;
use crate::research::{self, GraphOptions, ResearchState};
use axum::routing::{get, post, put};
use axum::Router;
use planwright::checkpoint::Checkpointer;
use planwright::runs::RunStore;
use planwright::store::Store;
use planwright::Engine;
use std::sync::Arc;

/// `serve` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Checkpointer URL: `sqlite:PATH`, `postgres://…` or `memory:`.
    #[arg(long, default_value = kit::SERVE_CHECKPOINT)]
    pub checkpoint: String,
    /// Require `Authorization: Bearer TOKEN` on every request (one admin user).
    #[arg(long)]
    pub token: Option<String>,
    /// Tokens mapped to users, from a JSON file `{"tokens": {TOKEN: {"user": …, "admin": …}}}`:
    /// each user sees only the threads they created; admins see all.
    #[arg(long)]
    pub auth_file: Option<std::path::PathBuf>,
    /// Accept HS256 JWTs signed with this secret (`sub` is the user, `admin: true` an admin).
    #[arg(long)]
    pub jwt_secret: Option<String>,
    /// Accept RS256/RS384/RS512/ES256/ES384 JWTs signed by a key of this JWKS file (chosen by
    /// `kid`).
    #[arg(long)]
    pub jwks: Option<std::path::PathBuf>,
    /// How far a JWT's `exp` and `nbf` may be off this server's clock (clock skew with the token
    /// issuer), in whole seconds from `0s` to `10m` (see docs/server.md).
    #[arg(long, default_value = "5s", value_parser = auth::parse_leeway)]
    pub jwt_leeway: std::time::Duration,
    /// The model (`offline`, `sim:…`, `openai`).
    #[arg(long, default_value = "offline")]
    pub model: String,
    /// Store URL for `/store` and the graphs' nodes (`memory:`, `sqlite:PATH`, `postgres://…`;
    /// default: the checkpoint URL, so items live beside the threads).
    #[arg(long)]
    pub store: Option<String>,
    /// Delete old threads, checkpoints and run records in the background: comma-separated
    /// `key=value` with `thread_age`, `max_threads`, `checkpoint_age`, `max_checkpoints`,
    /// `run_age`, `max_runs`, `interval`, `batch`, `prefix` (e.g.
    /// `thread_age=30d,max_checkpoints=50,max_runs=100000`; see docs/checkpoints.md). Default:
    /// keep everything.
    #[arg(long, value_parser = planwright::checkpoint::Retention::parse)]
    pub retention: Option<planwright::checkpoint::Retention>,
    /// Time a client has to send a request's headers; also how long an idle keep-alive
    /// connection stays open (`500ms`, `10s`, `2m`).
    #[arg(long, default_value = "10s", value_parser = listen::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// Time a client has to send a request's body.
    #[arg(long, default_value = "30s", value_parser = listen::parse_duration)]
    pub body_timeout: std::time::Duration,
    /// Connections open at once; more wait in the listen backlog until one closes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Requests one client address may have in progress at once; more are answered 429.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests_per_client: u32,
    /// With PostgreSQL, how long a replica's hold on a run lasts without renewal: a replica
    /// that dies has its runs taken over by another this long after its last renewal.
    #[arg(long, default_value = "5s", value_parser = listen::parse_duration)]
    pub lease_ttl: std::time::Duration,
    /// Where streaming runs' events go, for clients to follow and rejoin from any replica:
    /// `nats://host:port` (NATS JetStream). Default: beside the run records (a PostgreSQL table
    /// with `LISTEN/NOTIFY`, a table in the SQLite file, in memory for memory servers); any other
    /// place is refused (it would hold no run records to check appends against).
    #[arg(long)]
    pub events: Option<String>,
    /// Make `GET /ok` ask for the token like every other endpoint. Without it, with auth on,
    /// `/ok` answers health probes without a token and tells them only the status (not why the
    /// storage is unreachable).
    #[arg(long)]
    pub ok_requires_auth: bool,
}

impl Default for ServeArgs {
    /// The defaults of the command line.
    fn default() -> Self {
        let limits = listen::Limits::default();
        Self {
            addr: "127.0.0.1:8080".into(),
            checkpoint: kit::SERVE_CHECKPOINT.into(),
            token: None,
            auth_file: None,
            jwt_secret: None,
            jwks: None,
            jwt_leeway: auth::DEFAULT_JWT_LEEWAY,
            model: "offline".into(),
            header_timeout: limits.header_timeout,
            body_timeout: limits.body_timeout,
            max_connections: limits.max_connections as u32,
            max_requests_per_client: limits.max_requests_per_client as u32,
            store: None,
            retention: None,
            lease_ttl: std::time::Duration::from_secs(5),
            events: None,
            ok_requires_auth: false,
        }
    }
}

impl ServeArgs {
    /// The connection and request limits these arguments set.
    pub fn limits(&self) -> listen::Limits {
        listen::Limits {
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            max_connections: self.max_connections as usize,
            max_requests_per_client: self.max_requests_per_client as usize,
        }
    }
}

/// What every handler shares.
pub struct AppState {
    /// The research planner's engine.
    pub research: Engine<ResearchState>,
    /// The field-acquisition planner's engine.
    pub acquire: Engine<FieldState>,
    /// Threads bound to an assistant by a run of this process (the thread records keep the
    /// binding; this settles two concurrent first runs).
    pub bindings: dashmap::DashMap<String, assistants::Assistant>,
    /// Its storage.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// Cross-thread memory (`/store`, and `NodeContext::store` in both graphs).
    pub store: Arc<dyn Store>,
    /// How callers are authenticated.
    pub auth: auth::Auth,
    /// `GET /ok` asks for the token too (`--ok-requires-auth`); otherwise it is open.
    pub ok_requires_auth: bool,
    /// Runs by final status.
    pub runs: metrics::RunCounters,
    /// Run records (pending, running and ended runs), beside the threads.
    pub run_store: Arc<dyn RunStore>,
    /// This process's runs that have not ended.
    pub live: lifecycle::LiveRuns,
    /// Enqueued runs waiting for their thread.
    pub queues: queue::RunQueues,
    /// False while a starting server picks up the threads a stopped one left mid-run.
    pub recovered: std::sync::atomic::AtomicBool,
    /// `/ok`'s storage probes, one at a time and shared by the callers waiting for it.
    pub ok_probe: handlers::ProbeGate,
    /// This process as one replica of several, when the run store keeps leases (PostgreSQL).
    pub replica: Option<replica::Replica>,
    /// The events of streaming runs, which clients follow (and rejoin) from any replica.
    pub events: Arc<dyn planwright::runs::RunEventLog>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// Storage could not be opened.
    #[error(transparent)]
    Checkpoint(#[from] planwright::checkpoint::CheckpointError),
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] planwright::store::StoreError),
    /// The run records could not be opened.
    #[error(transparent)]
    Runs(#[from] planwright::runs::RunStoreError),
    /// The socket could not be bound or served.
    #[error("cannot serve on {addr}: {source}")]
    Io {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Builds the state: engine, storage and policy.
pub async fn state(args: &ServeArgs) -> Result<Arc<AppState>, ServeError> {
    let usage = |e: crate::model::ModelError| ServeError::Usage(e.to_string());
    let policy = kit::policy_for::<dyn ResearchPolicy>(&args.model).map_err(usage)?;
    let auth = auth::Auth::from_flags(
        args.token.as_deref(),
        args.auth_file.as_deref(),
        args.jwt_secret.as_deref(),
        args.jwks.as_deref(),
        args.jwt_leeway,
    )
    .map_err(ServeError::Usage)?;
    // One pool per PostgreSQL URL for the whole process: its `pool_size` is the process's
    // connection budget (docs/deployment.md).
    let pools = planwright::checkpoint::PgPools::new();
    // Every flag is checked before storage is opened: a refused start leaves no file behind.
    if let Some(e) = args.events.as_deref() {
        let nats = e.starts_with("nats://") || e.starts_with("tls://");
        if !nats && e != args.checkpoint {
            return Err(ServeError::Usage(format!(
                "--events {e}: a run's events go to NATS JetStream (`nats://HOST:PORT`) or beside \
                 its run record (leave --events out; here `{}`): a log anywhere else holds no run \
                 records to check appends against",
                args.checkpoint
            )));
        }
    }
    // The default file's directory is made here (the documented default); any other must exist.
    kit::prepare_default(&args.checkpoint, kit::SERVE_CHECKPOINT).map_err(|e| match e {
        kit::OpenError::BadUrl(e) | kit::OpenError::Unreachable { source: e, .. } => e,
    })?;
    let checkpointer = planwright::checkpoint::connect_in(&args.checkpoint, &pools).await?;
    let run_store = planwright::runs::connect_in(&args.checkpoint, &pools).await?;
    let run_store_leases = run_store.leases();
    let events = planwright::runs::connect_events_in(
        args.events.as_deref().unwrap_or(&args.checkpoint),
        run_store.clone(),
        &pools,
    )
    .await
    .map_err(|e| match e {
        e @ planwright::runs::RunStoreError::BadUrl { .. } => {
            ServeError::Usage(format!("--events: {e}"))
        }
        e => e.into(),
    })?;
    let store =
        planwright::store::connect_in(args.store.as_deref().unwrap_or(&args.checkpoint), &pools)
            .await
            .map_err(|e| match e {
                e @ planwright::store::StoreError::BadUrl { .. } => {
                    ServeError::Usage(e.to_string())
                }
                e => ServeError::Store(e),
            })?;
    let graph = research::graph(policy, GraphOptions::default())
        .map_err(|e| ServeError::Usage(format!("research graph: {e}")))?;
    let research = Engine::builder(graph)
        .checkpointer(checkpointer.clone())
        .store(store.clone())
        .build()
        .await;
    let field_policy = kit::policy_for::<dyn FieldPolicy>(&args.model).map_err(usage)?;
    let field_graph = field::graph(field_policy, &field::GraphOptions::default())
        .map_err(|e| ServeError::Usage(format!("acquire graph: {e}")))?;
    let acquire = Engine::builder(field_graph)
        .checkpointer(checkpointer.clone())
        .migration(field::runner::migration)
        .store(store.clone())
        .build()
        .await;
    Ok(Arc::new(AppState {
        research,
        acquire,
        bindings: dashmap::DashMap::new(),
        checkpointer,
        store,
        auth,
        ok_requires_auth: args.ok_requires_auth,
        runs: metrics::RunCounters::default(),
        run_store,
        live: lifecycle::LiveRuns::default(),
        queues: queue::RunQueues::default(),
        recovered: std::sync::atomic::AtomicBool::new(true),
        ok_probe: handlers::ProbeGate::default(),
        replica: run_store_leases.then(|| replica::Replica::new(args.lease_ttl)),
        events,
    }))
}

/// The router over `state` with the per-client request cap of `limits` (what `serve` runs;
/// connections must come through [`listen::serve`] for the client address to be known).
pub fn router_with_limits(state: Arc<AppState>, limits: &listen::Limits) -> Router {
    let table = Arc::new(listen::InFlight::default());
    let cap = limits.max_requests_per_client;
    router(state).layer(axum::middleware::from_fn(move |req, next| {
        listen::per_client(table.clone(), cap, req, next)
    }))
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/ok", get(handlers::ok))
        .route("/metrics", get(metrics::render))
        .route("/threads", post(handlers::create_thread))
        .route("/threads/search", post(handlers::search_threads))
        .route(
            "/threads/{thread_id}",
            get(handlers::get_thread).delete(handlers::delete_thread),
        )
        .route("/threads/{thread_id}/state", get(handlers::thread_state))
        .route("/threads/{thread_id}/runs/wait", post(handlers::run_wait))
        .route("/threads/{thread_id}/runs/stream", post(stream::run_stream))
        .route(
            "/threads/{thread_id}/runs",
            post(runs::create).get(runs::list),
        )
        .route("/threads/{thread_id}/runs/{run_id}", get(runs::get))
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(follow::join_stream),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        )
        .route("/threads/{thread_id}/history", post(history::history))
        .route("/assistants/search", post(inspect::search_assistants))
        .route("/assistants/{assistant_id}", get(inspect::get_assistant))
        .route("/assistants/{assistant_id}/graph", get(inspect::graph))
        .route("/assistants/{assistant_id}/nodes", get(inspect::nodes))
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(inspect::state_at),
        )
        .route("/threads/{thread_id}/copy", post(inspect::copy))
        .route(
            "/store/items",
            put(store::put_item)
                .get(store::get_item)
                .delete(store::delete_item),
        )
        .route("/store/items/search", post(store::search_items))
        .route("/store/namespaces", post(store::list_namespaces))
        .fallback(errors::no_route)
        .method_not_allowed_fallback(errors::no_method)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        // The studio's page and scripts hold no data: they load without a token and ask for one.
        .merge(studio::routes())
        .layer(axum::extract::DefaultBodyLimit::max(2 * 1024 * 1024))
        .layer(axum::middleware::from_fn(errors::request_span))
        .with_state(state)
}

/// Serves until SIGTERM or Ctrl-C, then stops accepting, lets running nodes finish and
/// checkpoints every thread (`Engine::shutdown`).
pub async fn run(args: &ServeArgs) -> Result<(), ServeError> {
    // The port first: a server that cannot listen stops before it creates or opens any storage.
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|source| ServeError::Io {
            addr: args.addr.clone(),
            source,
        })?;
    let state = state(args).await?;
    // The port is open at once; threads a stopped server left mid-run are picked up in the
    // background, and `/ok` says 503 `recovering` until that is done.
    state
        .recovered
        .store(false, std::sync::atomic::Ordering::Release);
    {
        let state = state.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            // Only the index of unfinished runs is read: the time does not grow with the
            // threads stored. A store that cannot be read now is tried again.
            let mut backoff = std::time::Duration::from_millis(200);
            let runs = loop {
                match lifecycle::recover(&state).await {
                    Ok(n) => break n,
                    Err(e) => {
                        tracing::error!(error = %e.1, "recovery: the run store cannot be read; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(std::time::Duration::from_secs(10));
                    }
                }
            };
            state
                .recovered
                .store(true, std::sync::atomic::Ordering::Release);
            tracing::info!(
                runs,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "recovery done"
            );
        });
    }
    let sweeper = store::spawn_sweeper(state.store.clone(), store::SWEEP_EVERY);
    // With replicas: leases renewed, and runs of a replica that is gone taken over.
    let keeper = replica::spawn_keeper(state.clone());
    // Retention runs beside the server (small batches, never blocking writes); dropping the
    // handle at the end stops it.
    let _retention = args
        .retention
        .clone()
        .filter(|r| !r.keeps_all_threads())
        .map(|r| planwright::checkpoint::spawn_sweeper(state.checkpointer.clone(), r));
    let _run_retention = args
        .retention
        .clone()
        .filter(|r| !r.keeps_all_runs())
        .map(|r| planwright::runs::spawn_sweeper(state.run_store.clone(), r));
    // The bound address (`--addr 127.0.0.1:0` gets a port of the system's choosing).
    let bound = listener
        .local_addr()
        .map_or_else(|_| args.addr.clone(), |a| a.to_string());
    tracing::info!("listening on http://{bound} (the studio: http://{bound}/studio)");
    // On SIGTERM: first the engine stops every run at its next superstep boundary (running nodes
    // finish, threads are checkpointed, waiting requests get a 503), then the server stops.
    let stopped = Arc::new(tokio::sync::Notify::new());
    {
        let (state, stopped) = (state.clone(), stopped.clone());
        tokio::spawn(async move {
            stop_signal().await;
            tracing::info!("stopping: running nodes finish, threads are checkpointed");
            if let Some(r) = &state.replica {
                r.stopping.store(true, std::sync::atomic::Ordering::Release);
            }
            tokio::join!(state.research.shutdown(), state.acquire.shutdown());
            replica::release_all(&state).await;
            stopped.notify_one();
        });
    }
    let limits = args.limits();
    listen::serve(
        listener,
        router_with_limits(state.clone(), &limits),
        &limits,
        async move { stopped.notified().await },
        std::time::Duration::from_secs(30),
    )
    .await
    .map_err(|source| ServeError::Io {
        addr: args.addr.clone(),
        source,
    })?;
    sweeper.abort();
    if let Some(k) = keeper {
        k.abort();
    }
    tracing::info!("stopped: every thread is checkpointed");
    Ok(())
}

async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
