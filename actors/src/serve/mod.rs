//! The Agent Server: the LangGraph Agent Server API over any graphs registered as assistants
//! ([`Assistant`], [`GraphAssistant`]), as a library ([`Server`]: a `Router` an application
//! mounts, or a whole server with its listener, limits, auth, replicas and studio) and as the
//! `serve` command, which registers the two planners (`research`, `acquire`: [`planners`]).
//! Bearer-token, API-key and JWT auth, Prometheus metrics and a graceful stop on SIGTERM
//! (running nodes finish, threads are checkpointed, a restarted server continues them). See
//! docs/server.md.

mod acquire;
pub mod assistant;
mod assistant_records;
pub mod assistants;
mod assistants_api;
pub mod auth;
mod cancel;
mod cron_schedule;
pub mod crons;
mod errors;
mod fields;
mod follow;
mod graph_shape;
mod half_open;
mod health;
mod history;
mod ids;
mod leases;
mod lifecycle;
pub mod listen;
mod live_runs;
mod mcp;
mod messages;
mod metrics;
pub mod planners;
mod protocol;
mod publish;
mod queue;
mod recovery;
pub mod replica;
mod routes;
mod run_body;
mod run_log;
pub mod run_request;
mod runs;
mod server;
mod start;
mod start_writes;
mod stateless;
pub mod store;
mod stream;
mod stream_modes;
mod studio;
mod thread_copy;
mod thread_followers;
mod thread_records;
mod thread_search;
mod thread_shape;
mod thread_state;
mod thread_stream;
mod threads;
pub mod time;
mod webhook;

use crate::kit;
use planwright::checkpoint::Checkpointer;
use planwright::runs::RunStore;
use planwright::store::Store;
use std::sync::Arc;

pub use assistant::{Assistant, GraphAssistant, GraphIo, PlainIo};
pub use routes::{router, router_with_limits};
pub use run_request::RunRequest;
pub use server::{run, state, Server, ServerBuilder};

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
    /// When a run that names no `durability` stores its checkpoints: `sync` (each before the
    /// next superstep), `async` (in the background, in order; the run's end waits for them) or
    /// `exit` (only where the run ends or pauses). Default: each graph's engine's own (`sync`
    /// unless its engine was built with another).
    #[arg(long, value_parser = run_body::parse_durability)]
    pub durability: Option<planwright::Durability>,
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
            durability: None,
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
    /// The assistants served (the first is the default of unbound threads).
    pub assistants: assistants::Assistants,
    /// Threads bound to an assistant by a run of this process (the thread records keep the
    /// binding; this settles two concurrent first runs).
    pub bindings: dashmap::DashMap<String, assistants::AssistantRef>,
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
    pub live: live_runs::LiveRuns,
    /// Enqueued runs waiting for their thread.
    pub queues: queue::RunQueues,
    /// False while a starting server picks up the threads a stopped one left mid-run.
    pub recovered: std::sync::atomic::AtomicBool,
    /// `/ok`'s storage probes, one at a time and shared by the callers waiting for it.
    pub ok_probe: health::ProbeGate,
    /// This process as one replica of several, when the run store keeps leases (PostgreSQL).
    pub replica: Option<leases::Replica>,
    /// The events of streaming runs, which clients follow (and rejoin) from any replica.
    pub events: Arc<dyn planwright::runs::RunEventLog>,
    /// The durability of runs whose request names none (`--durability`; `None`: the engine's).
    pub durability: Option<planwright::Durability>,
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
    /// The assistants cannot be served together.
    #[error(transparent)]
    Assistants(#[from] assistants::RegistryError),
    /// The socket could not be bound or served.
    #[error("cannot serve on {addr}: {source}")]
    Io {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}
