//! Replica races, reproduced step by step rather than by luck: two replicas of `serve` in this
//! process, each with its own run store connection and HTTP socket, on a PostgreSQL database of
//! their own (no other test's replica takes their runs over). A replica's run store is wrapped so
//! the test stops it at the exact step a frozen process stops at, or hears when it gets there.
//!
//! - A replica records a run, then freezes before claiming it; another takes the run over and
//!   finishes it. The first, awake again, answers its client the run's real outcome (`success`
//!   and its values), never "cancelled before it started" (a client retrying on that would run
//!   the input twice).
//! - A run starts between the keeper's renewal and its look at the runs it executes: it is not
//!   taken for lost (its renewal simply came before its claim), and it pauses normally.
//! - A replica freezes while its run waits on a model; another takes the run over. The first
//!   wakes while the other runs it, finds its lease gone and stops its copy: its client gets the
//!   pause the other replica reaches, never a 500 "run was cancelled".
//! - A replica's lease expires while its run goes on (its renewal came late: a database cut,
//!   a pause) and nobody takes the run: the renewal keeps it, the run pauses normally, and the
//!   client gets the pause (`interrupted`, `__interrupt__`), never a 500 "run was cancelled".
//! - A replica claims a run whose thread a newer token already fenced: it lets the lease go at
//!   once, instead of renewing a lease on a run it does not execute (nobody could take it over).

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;

use async_trait::async_trait;
use planwright::runs::{Claim, RunChange, RunRecord, RunRecordStatus, RunStore, RunStoreError};
use planwright_actors::serve::{self, AppState, ServeArgs};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

/// Runs `sql` on the database at `url`.
async fn sql(url: &str, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> u64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client.execute(sql, params).await.unwrap()
}

/// One step of a replica's run store the test stops at, or hears of.
#[derive(Default)]
struct Steps {
    /// The first claim of a run: announced with the run id, then held until released.
    freeze_claim: Mutex<Option<(oneshot::Sender<String>, Arc<Notify>)>>,
    /// Announced with the run id when a running run is claimed (the replica starts it).
    started: Mutex<Option<oneshot::Sender<String>>>,
    /// The next renewal: announced once the store has renewed, then held until released
    /// before its answer goes back.
    hold_renewal: Mutex<Option<(oneshot::Sender<()>, Arc<Notify>)>>,
    /// The next renewal: announced, then held until released before it reaches the store (the
    /// replica's keeper frozen).
    freeze_renewal: Mutex<Option<(oneshot::Sender<()>, Arc<Notify>)>>,
    /// Announced with the run id once a lease is released.
    released: Mutex<Option<oneshot::Sender<String>>>,
}

/// A run store that passes everything on to `inner`, with [`Steps`] in between.
struct Stepped {
    inner: Arc<dyn RunStore>,
    steps: Arc<Steps>,
}

#[async_trait]
impl RunStore for Stepped {
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
    async fn insert(&self, record: RunRecord) -> Result<RunRecord, RunStoreError> {
        self.inner.insert(record).await
    }
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
        self.inner.get(run_id).await
    }
    async fn list_thread(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        self.inner.list_thread(thread_id, limit, offset).await
    }
    async fn unfinished(&self, limit: usize) -> Result<Vec<RunRecord>, RunStoreError> {
        self.inner.unfinished(limit).await
    }
    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError> {
        self.inner.transition(run_id, from, to, change).await
    }
    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError> {
        self.inner.delete(run_id).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError> {
        self.inner.delete_thread(thread_id).await
    }
    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError> {
        self.inner.sweep(prefix, ended_before, keep, batch).await
    }
    fn leases(&self) -> bool {
        self.inner.leases()
    }
    async fn claim(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Claim, RunStoreError> {
        let frozen = self.steps.freeze_claim.lock().unwrap().take();
        let now_ms = match frozen {
            Some((reached, thaw)) => {
                let _ = reached.send(run_id.to_string());
                thaw.notified().await;
                // The process was frozen: its clock moved on meanwhile.
                planwright::runs::now_ms().max(now_ms)
            }
            None => now_ms,
        };
        let claim = self.inner.claim(run_id, owner, now_ms, ttl_ms).await?;
        if let Claim::Granted {
            status: RunRecordStatus::Running,
            ..
        } = claim
        {
            if let Some(tx) = self.steps.started.lock().unwrap().take() {
                let _ = tx.send(run_id.to_string());
            }
        }
        Ok(claim)
    }
    async fn renew(
        &self,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Vec<(String, bool)>, RunStoreError> {
        let frozen = self.steps.freeze_renewal.lock().unwrap().take();
        let now_ms = match frozen {
            Some((reached, thaw)) => {
                let _ = reached.send(());
                thaw.notified().await;
                planwright::runs::now_ms().max(now_ms)
            }
            None => now_ms,
        };
        let held = self.inner.renew(owner, now_ms, ttl_ms).await?;
        let hold = self.steps.hold_renewal.lock().unwrap().take();
        if let Some((renewed, answer)) = hold {
            let _ = renewed.send(());
            answer.notified().await;
        }
        Ok(held)
    }
    async fn lease_holder(&self, run_id: &str) -> Result<Option<String>, RunStoreError> {
        self.inner.lease_holder(run_id).await
    }
    async fn request_cancel(&self, run_id: &str) -> Result<bool, RunStoreError> {
        self.inner.request_cancel(run_id).await
    }
    async fn release(&self, run_id: &str, owner: &str) -> Result<(), RunStoreError> {
        self.inner.release(run_id, owner).await?;
        if let Some(tx) = self.steps.released.lock().unwrap().take() {
            let _ = tx.send(run_id.to_string());
        }
        Ok(())
    }
    async fn release_all(&self, owner: &str) -> Result<(), RunStoreError> {
        self.inner.release_all(owner).await
    }
    async fn expired(
        &self,
        now_ms: u64,
        grace_ms: u64,
        limit: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        self.inner.expired(now_ms, grace_ms, limit).await
    }
}

/// A replica on `db` (offline or `model`, leases of `ttl`) serving HTTP on a socket of its own,
/// its run store stepped by `steps`, its lease keeper running when `keeper`: its state and URL.
async fn replica(
    db: &str,
    model: &str,
    ttl: Duration,
    steps: Arc<Steps>,
    keeper: bool,
) -> (Arc<AppState>, String) {
    let args = ServeArgs {
        checkpoint: db.to_string(),
        model: model.to_string(),
        lease_ttl: ttl,
        ..ServeArgs::default()
    };
    let mut state = serve::state(&args).await.expect("the replica starts");
    let me = Arc::get_mut(&mut state).expect("nothing shares the state yet");
    me.run_store = Arc::new(Stepped {
        inner: me.run_store.clone(),
        steps,
    });
    assert!(state.replica.is_some(), "PostgreSQL keeps leases");
    if keeper {
        serve::replica::spawn_keeper(state.clone());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = serve::router(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, url)
}

async fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn new_thread(url: &str) -> String {
    let (s, t) = call("POST", &format!("{url}/threads"), Some(json!({}))).await;
    assert_eq!(s, 200, "{t}");
    t["thread_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_frozen_before_claiming_its_run_answers_the_takeovers_success() {
    let Some(database) = pg_database::FreshDatabase::create("pwraces").await else {
        return;
    };
    let db = database.url();
    let steps = Arc::new(Steps::default());
    let (reached_tx, reached) = oneshot::channel();
    let thaw = Arc::new(Notify::new());
    *steps.freeze_claim.lock().unwrap() = Some((reached_tx, thaw.clone()));
    // A: its keeper is frozen with it (not running); B: a live replica.
    let ttl = Duration::from_secs(1);
    let (_a, a_url) = replica(&db, "offline", ttl, steps, false).await;
    let (_b, b_url) = replica(&db, "offline", ttl, Arc::default(), true).await;
    let thread = new_thread(&a_url).await;
    let client = tokio::spawn({
        let url = format!("{a_url}/threads/{thread}/runs/wait");
        async move {
            call(
                "POST",
                &url,
                Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
            )
            .await
        }
    });
    // A recorded the run and froze before claiming it.
    let run = reached.await.expect("A reaches its claim");
    // Frozen for an hour, as far as the record tells: B's keeper takes the run over.
    let backdated = sql(
        &db,
        "UPDATE planwright_runs SET updated_at = updated_at - 3600000 WHERE run_id = $1",
        &[&run],
    )
    .await;
    assert_eq!(backdated, 1);
    let (s, joined) = call(
        "GET",
        &format!("{b_url}/threads/{thread}/runs/{run}/join"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{joined}");
    let (_, rec) = call("GET", &format!("{b_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(rec["status"], "success", "B finished it: {rec}");
    // A wakes: its client gets the run's outcome, as B finished it.
    thaw.notify_one();
    let (s, answer) = client.await.unwrap();
    assert_eq!(s, 200, "A answers the run's outcome: {answer}");
    assert!(
        matches!(answer["status"].as_str(), Some("ok" | "needs_review")),
        "{answer}"
    );
    assert_eq!(answer, joined, "the values of the run B finished");
    let (_, rec) = call("GET", &format!("{a_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(rec["status"], "success", "A changed nothing: {rec}");
    let (_, runs) = call("GET", &format!("{a_url}/threads/{thread}/runs"), None).await;
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "one run: {runs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_renewed_late_keeps_its_run_and_the_client_gets_the_pause() {
    let Some(database) = pg_database::FreshDatabase::create("pwraces").await else {
        return;
    };
    let db = database.url();
    let steps = Arc::new(Steps::default());
    let (started_tx, started) = oneshot::channel();
    *steps.started.lock().unwrap() = Some(started_tx);
    // Model calls of a second or more: the run is under way when its lease expires.
    let model = "sim:p50=1500ms,p99=2s,seed=3";
    let (a, a_url) = replica(&db, model, Duration::from_millis(600), steps, true).await;
    let thread = new_thread(&a_url).await;
    let client = tokio::spawn({
        let url = format!("{a_url}/threads/{thread}/runs/wait");
        async move {
            let input = json!({"input": GOAL, "constraints": {"require_approval": true}});
            call(
                "POST",
                &url,
                Some(json!({"assistant_id": "research", "input": input})),
            )
            .await
        }
    });
    let run = started.await.expect("the run starts");
    // The renewal comes late (the database was cut for longer than a lease): the lease has
    // expired, and no other replica took the run.
    let expired = sql(
        &db,
        "UPDATE planwright_runs SET lease_until = 1 WHERE run_id = $1",
        &[&run],
    )
    .await;
    assert_eq!(expired, 1);
    let (s, answer) = client.await.unwrap();
    assert_eq!(s, 200, "the pause, not a cancel: {answer}");
    assert_eq!(answer["status"], "interrupted", "{answer}");
    assert!(answer["__interrupt__"][0]["value"].is_object(), "{answer}");
    let (_, rec) = call("GET", &format!("{a_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(rec["status"], "interrupted", "{rec}");
    // The keeper renewed the expired lease while the run went on (it is A's, and was never lost).
    let holder = a.run_store.lease_holder(&run).await.unwrap();
    assert_eq!(
        holder.as_deref(),
        a.replica.as_ref().map(|r| r.owner.as_str())
    );
    let (client, conn) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let until: i64 = client
        .query_one(
            "SELECT lease_until FROM planwright_runs WHERE run_id = $1",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert!(until > 1, "renewed after it expired: {until}");
}

/// The replica's `planwright_replica_runs_held` (runs it executes), from `/metrics`.
async fn runs_held(url: &str) -> u64 {
    let page = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    page.lines()
        .find(|l| l.starts_with("planwright_replica_runs_held"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_between_a_renewal_and_its_check_is_not_taken_for_lost() {
    let Some(database) = pg_database::FreshDatabase::create("pwraces").await else {
        return;
    };
    let db = database.url();
    let steps = Arc::new(Steps::default());
    let (renewed_tx, renewed) = oneshot::channel();
    let answer = Arc::new(Notify::new());
    *steps.hold_renewal.lock().unwrap() = Some((renewed_tx, answer.clone()));
    let (started_tx, started) = oneshot::channel();
    *steps.started.lock().unwrap() = Some(started_tx);
    let model = "sim:p50=1500ms,p99=2s,seed=3";
    let (_a, a_url) = replica(&db, model, Duration::from_millis(600), steps, true).await;
    // The keeper has renewed (nothing: no run yet); its answer is on its way back.
    renewed.await.expect("the keeper renews");
    let thread = new_thread(&a_url).await;
    let client = tokio::spawn({
        let url = format!("{a_url}/threads/{thread}/runs/wait");
        async move {
            let input = json!({"input": GOAL, "constraints": {"require_approval": true}});
            call(
                "POST",
                &url,
                Some(json!({"assistant_id": "research", "input": input})),
            )
            .await
        }
    });
    // Meanwhile a run is claimed and starts here.
    let run = started.await.expect("the run starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while runs_held(&a_url).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never showed as executing here"
        );
        tokio::task::yield_now().await;
    }
    // Then the renewal's answer, which does not name the run, reaches the keeper.
    answer.notify_one();
    let (s, answer) = client.await.unwrap();
    assert_eq!(s, 200, "the pause, not a cancel: {answer}");
    assert_eq!(answer["status"], "interrupted", "{answer}");
    let (_, rec) = call("GET", &format!("{a_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(rec["status"], "interrupted", "{rec}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replicas_client_gets_the_pause_the_takeover_reached() {
    let Some(database) = pg_database::FreshDatabase::create("pwraces").await else {
        return;
    };
    let db = database.url();
    let steps = Arc::new(Steps::default());
    let (frozen_tx, frozen) = oneshot::channel();
    let thaw = Arc::new(Notify::new());
    *steps.freeze_renewal.lock().unwrap() = Some((frozen_tx, thaw.clone()));
    let (started_tx, started) = oneshot::channel();
    *steps.started.lock().unwrap() = Some(started_tx);
    // A's model call outlasts the test: A's run is waiting on it all along, writing nothing.
    let ttl = Duration::from_millis(600);
    let (_a, a_url) = replica(&db, "sim:p50=60s,p99=70s,seed=3", ttl, steps, true).await;
    frozen
        .await
        .expect("A's keeper reaches its renewal, and freezes there");
    let thread = new_thread(&a_url).await;
    let client = tokio::spawn({
        let url = format!("{a_url}/threads/{thread}/runs/wait");
        async move {
            let input = json!({"input": GOAL, "constraints": {"require_approval": true}});
            call(
                "POST",
                &url,
                Some(json!({"assistant_id": "research", "input": input})),
            )
            .await
        }
    });
    let run = started.await.expect("the run starts on A");
    // A's lease runs out (A is frozen); B takes the run over and brings it to its pause.
    let expired = sql(
        &db,
        "UPDATE planwright_runs SET lease_until = 1 WHERE run_id = $1",
        &[&run],
    )
    .await;
    assert_eq!(expired, 1);
    let b_steps = Arc::new(Steps::default());
    let (taken_tx, taken) = oneshot::channel();
    *b_steps.started.lock().unwrap() = Some(taken_tx);
    let b_model = "sim:p50=1500ms,p99=2s,seed=3";
    let (b, b_url) = replica(&db, b_model, ttl, b_steps, true).await;
    assert_eq!(taken.await.expect("B takes the run over"), run);
    let holder = b.run_store.lease_holder(&run).await.unwrap();
    assert_eq!(
        holder.as_deref(),
        b.replica.as_ref().map(|r| r.owner.as_str())
    );
    // A wakes while B runs it: its renewal does not return the run, B holds it, A stops its
    // copy of the run, and its client waits for the run's end on B.
    thaw.notify_one();
    let (s, joined) = call(
        "GET",
        &format!("{b_url}/threads/{thread}/runs/{run}/join"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{joined}");
    let (_, rec) = call("GET", &format!("{b_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(
        rec["status"], "interrupted",
        "B brought it to its pause: {rec}"
    );
    let (s, answer) = client.await.unwrap();
    assert_eq!(s, 200, "the pause B reached, not a cancel: {answer}");
    assert_eq!(answer["status"], "interrupted", "{answer}");
    assert!(answer["__interrupt__"][0]["value"].is_object(), "{answer}");
    assert_eq!(
        answer["plan"], joined["plan"],
        "the plan B paused on: {answer}"
    );
    let (_, rec) = call("GET", &format!("{a_url}/threads/{thread}/runs/{run}"), None).await;
    assert_eq!(
        rec["status"], "interrupted",
        "A left B's record alone: {rec}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_fence_is_refused_lets_the_lease_go() {
    let Some(database) = pg_database::FreshDatabase::create("pwraces").await else {
        return;
    };
    let db = database.url();
    let steps = Arc::new(Steps::default());
    let (released_tx, released) = oneshot::channel();
    *steps.released.lock().unwrap() = Some(released_tx);
    let (a, a_url) = replica(&db, "offline", Duration::from_millis(300), steps, true).await;
    let thread = new_thread(&a_url).await;
    // A running run whose replica is gone (its lease lapsed at once), on a thread a newer token
    // fenced meanwhile.
    let now = planwright::runs::now_ms();
    let rec = RunRecord::pending("ghost-run", thread.as_str(), "research", now);
    a.run_store.insert(rec).await.unwrap();
    let change = RunChange::at(now);
    let running = RunRecordStatus::Running;
    assert!(a
        .run_store
        .transition("ghost-run", &[RunRecordStatus::Pending], running, change)
        .await
        .unwrap());
    let ghost = a
        .run_store
        .claim("ghost-run", "ghost", now, 1)
        .await
        .unwrap();
    assert!(ghost.token().is_some(), "{ghost:?}");
    let t = planwright::ThreadId::new(&thread);
    assert!(a.checkpointer.fence(&t, 1 << 40).await.unwrap());
    // A's keeper claims the run, cannot fence the thread, and releases the lease.
    let run = tokio::time::timeout(Duration::from_secs(30), released)
        .await
        .expect("the lease is released")
        .unwrap();
    assert_eq!(run, "ghost-run");
}
