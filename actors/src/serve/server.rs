//! The server as a library: [`Server::builder`] takes the storage and auth settings
//! ([`ServeArgs`]) and the assistants, opens the storage once for all of them, and gives a
//! [`Server`] whose [`Server::router`] an application mounts in its own axum app (with
//! [`Server::start_background`] for recovery, leases and sweepers, and [`Server::shutdown`] on
//! its way out), or which [`Server::serve`] runs alone with the listener, limits and graceful
//! stop of the `serve` command. `serve` itself ([`run`]) is one user: it registers the planners.

use super::assistant::{GraphAssistant, GraphIo, PlainIo};
use super::assistants::{AssistantRef, Assistants};
use super::{
    auth, health, kit, leases, lifecycle, listen, live_runs, metrics, planners, queue, recovery,
    replica, routes, store, AppState, ServeArgs, ServeError,
};
use axum::Router;
use futures::future::BoxFuture;
use planwright::checkpoint::Checkpointer;
use planwright::store::Store;
use planwright::{CompiledGraph, Engine, State};
use std::sync::Arc;

/// The storage a server opened, which its assistants' engines write to.
#[derive(Clone)]
pub struct Storage {
    /// Threads and checkpoints.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// Cross-thread memory (`/store`, and `NodeContext::store` in the graphs).
    pub store: Arc<dyn Store>,
}

type MakeAssistant =
    Box<dyn FnOnce(Storage) -> BoxFuture<'static, Result<AssistantRef, ServeError>> + Send>;

/// Collects a server's settings and assistants ([`Server::builder`]).
pub struct ServerBuilder {
    args: ServeArgs,
    makers: Vec<MakeAssistant>,
}

impl ServerBuilder {
    /// Serves `graph` as assistant `id`, its state as its serde form, on an engine over the
    /// server's storage.
    pub fn graph<S: State>(self, id: impl Into<String>, graph: CompiledGraph<S>) -> Self {
        self.graph_with(id, graph, PlainIo)
    }

    /// Serves `graph` as assistant `id`, its JSON shaped by `io`.
    pub fn graph_with<S: State, I: GraphIo<S>>(
        self,
        id: impl Into<String>,
        graph: CompiledGraph<S>,
        io: I,
    ) -> Self {
        let id = id.into();
        self.assistant(move |storage| async move {
            let engine = Engine::builder(graph)
                .checkpointer(storage.checkpointer)
                .store(storage.store)
                .build()
                .await;
            Ok(Arc::new(GraphAssistant::with_io(id, engine, io)) as AssistantRef)
        })
    }

    /// Serves the assistant `make` builds over the server's storage (an engine with settings of
    /// its own, a description, or an [`super::Assistant`] that is not a Planwright engine).
    pub fn assistant<F, Fut>(mut self, make: F) -> Self
    where
        F: FnOnce(Storage) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<AssistantRef, ServeError>> + Send + 'static,
    {
        self.makers.push(Box::new(move |s| Box::pin(make(s))));
        self
    }

    /// Serves the two planners, `research` (the default of unbound threads) and `acquire`, on
    /// the model the arguments name.
    pub fn planners(self) -> Self {
        let model = self.args.model.clone();
        self.assistant_list(move |storage| async move {
            planners::assistants(&model, &storage.checkpointer, &storage.store).await
        })
    }

    fn assistant_list<F, Fut>(mut self, make: F) -> Self
    where
        F: FnOnce(Storage) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Vec<AssistantRef>, ServeError>> + Send + 'static,
    {
        // Two entries share one build: the first makes both, the second takes its share.
        let slot: Arc<std::sync::Mutex<Vec<AssistantRef>>> = Arc::default();
        let first = slot.clone();
        self.makers.push(Box::new(move |s| {
            Box::pin(async move {
                let mut list = make(s).await?;
                let head = list.remove(0);
                *first.lock().unwrap_or_else(|p| p.into_inner()) = list;
                Ok(head)
            })
        }));
        self.makers.push(Box::new(move |_| {
            Box::pin(async move {
                slot.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop()
                    .ok_or_else(|| ServeError::Usage("an assistant list came out short".into()))
            })
        }));
        self
    }

    /// Opens the storage, builds every assistant over it and checks them (at least one, ids
    /// unique and fit for a URL). Nothing is served yet.
    pub async fn build(self) -> Result<Server, ServeError> {
        let state = build_state(&self.args, self.makers).await?;
        Ok(Server {
            state,
            args: self.args,
        })
    }
}

/// A built server: its state, its routes, its background work.
pub struct Server {
    state: Arc<AppState>,
    args: ServeArgs,
}

impl Server {
    /// A server with the storage, auth and limits of `args` and no assistant yet.
    pub fn builder(args: ServeArgs) -> ServerBuilder {
        ServerBuilder {
            args,
            makers: Vec::new(),
        }
    }

    /// What every handler shares.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The API's routes, with auth, for an application to mount (`Router::nest`) or serve. The
    /// per-client request cap needs the client's address: [`Server::serve`] adds it.
    pub fn router(&self) -> Router {
        routes::router(self.state.clone())
    }

    /// Starts what runs beside the routes: recovery of runs a stopped server left, lease
    /// renewal and takeover between replicas, store and retention sweepers, and the cron
    /// scheduler (`crons::spawn_scheduler`). Dropping the returned guard stops them.
    pub fn start_background(&self) -> Background {
        let state = &self.state;
        let args = &self.args;
        state
            .recovered
            .store(false, std::sync::atomic::Ordering::Release);
        let recovery = tokio::spawn(recover(state.clone()));
        let mut tasks = vec![recovery];
        tasks.push(store::spawn_sweeper(
            state.store.clone(),
            store::SWEEP_EVERY,
        ));
        tasks.extend(replica::spawn_keeper(state.clone()));
        tasks.push(super::crons::spawn_scheduler(
            state.clone(),
            planwright::store::system_clock(),
        ));
        let retention = args
            .retention
            .clone()
            .filter(|r| !r.keeps_all_threads())
            .map(|r| planwright::checkpoint::spawn_sweeper(state.checkpointer.clone(), r));
        let run_retention = args
            .retention
            .clone()
            .filter(|r| !r.keeps_all_runs())
            .map(|r| planwright::runs::spawn_sweeper(state.run_store.clone(), r));
        Background {
            tasks,
            _sweepers: (retention, run_retention),
        }
    }

    /// Stops every run at its next superstep boundary (running nodes finish, threads are
    /// checkpointed) and gives this replica's runs up to the others.
    pub async fn shutdown(&self) {
        if let Some(r) = &self.state.replica {
            r.stopping.store(true, std::sync::atomic::Ordering::Release);
        }
        futures::future::join_all(self.state.assistants.all().iter().map(|a| a.shutdown())).await;
        leases::release_all(&self.state).await;
    }

    /// Serves on `listener` until SIGTERM or Ctrl-C, with the connection limits of the
    /// arguments, then shuts down ([`Server::shutdown`]).
    pub async fn serve(self, listener: tokio::net::TcpListener) -> Result<(), ServeError> {
        let _background = self.start_background();
        let bound = listener
            .local_addr()
            .map_or_else(|_| self.args.addr.clone(), |a| a.to_string());
        tracing::info!("listening on http://{bound} (the studio: http://{bound}/studio)");
        let server = Arc::new(self);
        let stopped = Arc::new(tokio::sync::Notify::new());
        {
            let (server, stopped) = (server.clone(), stopped.clone());
            tokio::spawn(async move {
                stop_signal().await;
                tracing::info!("stopping: running nodes finish, threads are checkpointed");
                server.shutdown().await;
                stopped.notify_one();
            });
        }
        let limits = server.args.limits();
        listen::serve(
            listener,
            routes::router_with_limits(server.state.clone(), &limits),
            &limits,
            async move { stopped.notified().await },
            std::time::Duration::from_secs(30),
        )
        .await
        .map_err(|source| ServeError::Io {
            addr: server.args.addr.clone(),
            source,
        })?;
        tracing::info!("stopped: every thread is checkpointed");
        Ok(())
    }
}

/// What [`Server::start_background`] started; dropping it stops them.
pub struct Background {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _sweepers: (
        Option<planwright::checkpoint::Sweeper>,
        Option<planwright::runs::SweeperHandle>,
    ),
}

impl Drop for Background {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Picks up the runs a stopped server left, retrying while the run store cannot be read; `/ok`
/// says 503 `recovering` until this is done.
async fn recover(state: Arc<AppState>) {
    let started = std::time::Instant::now();
    // Only the index of unfinished runs is read: the time does not grow with the threads stored.
    let mut backoff = std::time::Duration::from_millis(200);
    let runs = loop {
        match recovery::recover(&state).await {
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
}

/// `serve`: the planners on the arguments' storage, until SIGTERM or Ctrl-C.
pub async fn run(args: &ServeArgs) -> Result<(), ServeError> {
    // The port first: a server that cannot listen stops before it creates or opens any storage.
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|source| ServeError::Io {
            addr: args.addr.clone(),
            source,
        })?;
    let server = Server::builder(args.clone()).planners().build().await?;
    server.serve(listener).await
}

/// Opens the storage once, builds every assistant over it and the state the handlers share.
async fn build_state(
    args: &ServeArgs,
    makers: Vec<MakeAssistant>,
) -> Result<Arc<AppState>, ServeError> {
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
    let storage = Storage {
        checkpointer: checkpointer.clone(),
        store: store.clone(),
    };
    let mut list = Vec::with_capacity(makers.len());
    for make in makers {
        list.push(make(storage.clone()).await?);
    }
    let assistants = Assistants::new(list)?;
    Ok(Arc::new(AppState {
        assistants,
        bindings: dashmap::DashMap::new(),
        checkpointer,
        store,
        auth,
        ok_requires_auth: args.ok_requires_auth,
        runs: metrics::RunCounters::default(),
        run_store,
        live: live_runs::LiveRuns::default(),
        queues: queue::RunQueues::new(lifecycle::run_queued),
        recovered: std::sync::atomic::AtomicBool::new(true),
        ok_probe: health::ProbeGate::default(),
        replica: run_store_leases.then(|| leases::Replica::new(args.lease_ttl)),
        events,
        durability: args.durability,
    }))
}

/// The state `serve` runs on: the planners over the arguments' storage (tests build servers
/// from it).
pub async fn state(args: &ServeArgs) -> Result<Arc<AppState>, ServeError> {
    Ok(Server::builder(args.clone())
        .planners()
        .build()
        .await?
        .state
        .clone())
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
