//! One PostgreSQL connection budget per process, on the real server: everything a process opens
//! on one URL through one `PgPools` (checkpointer, run records, run event log, store) holds at
//! most `pool_size` connections together, counted in `pg_stat_activity` under a fresh
//! `application_name`; and a budget the server has no room for is refused at once, naming the
//! numbers (more than `max_connections`, or more than a role's `CONNECTION LIMIT`), instead of
//! retrying "too many clients" for `retry_for`.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/pg_database.rs"]
mod pg_database;

use pg_database::{admin, open_under};
use planwright::checkpoint::{connect, connect_in, CheckpointError, PgPools};
use planwright::runs::{RunRecord, RunStore};
use planwright::store::PutOptions;
use planwright::ThreadId;
use std::sync::Arc;
use std::time::Duration;

/// `pg_url()` with `options` added.
fn url_with(options: &str) -> String {
    let base = backends::pg_url();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{options}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_part_of_a_process_shares_one_budget_of_pool_size_connections() {
    if backends::postgres().await.is_none() {
        return;
    }
    let admin = admin().await;
    let app = format!("pwbudget{}", backends::unique().replace('-', ""));
    let url = url_with(&format!("application_name={app}&pool_size=3"));
    let pools = PgPools::new();
    let cp = connect_in(&url, &pools).await.expect("checkpointer opens");
    let runs = planwright::runs::connect_in(&url, &pools)
        .await
        .expect("run store opens");
    let events = planwright::runs::connect_events_in(&url, runs.clone(), &pools)
        .await
        .expect("event log opens");
    let store = planwright::store::connect_in(&url, &pools)
        .await
        .expect("store opens");
    drop(pools);

    // Many operations at once on every part: each pool would grow to serve them.
    let prefix = format!("budget-{}", backends::unique());
    let mut tasks = Vec::new();
    for i in 0..24u64 {
        let (cp, runs, events, store, prefix) = (
            cp.clone(),
            runs.clone(),
            events.clone(),
            store.clone(),
            prefix.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let thread = format!("{prefix}-{i}");
            cp.set_thread_metadata(&ThreadId::new(&thread), serde_json::json!({"i": i}))
                .await
                .expect("thread stored");
            let run = format!("{thread}-run");
            runs.insert(RunRecord::pending(&run, &thread, "research", 1))
                .await
                .expect("run stored");
            events
                .append(&run, None, 0, vec![("values".into(), "{}".into())])
                .await
                .expect("event stored");
            let mut value = serde_json::Map::new();
            value.insert("i".into(), i.into());
            store
                .put(
                    std::slice::from_ref(&prefix),
                    &thread,
                    value,
                    PutOptions::default(),
                )
                .await
                .expect("item stored");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // The LISTEN connection opens in the background; wait (bounded) until it is there, so the
    // count below includes it.
    let mut counted = open_under(&admin, &app).await;
    for _ in 0..400 {
        if counted.1 == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        counted = open_under(&admin, &app).await;
    }
    let (open, listening) = counted;
    assert_eq!(listening, 1, "one LISTEN connection");
    // Idle pooled connections stay open, so this is the most the process ever held.
    assert!(
        open <= 3,
        "{open} connections under pool_size=3 (the pools are not shared)"
    );
    assert_eq!(
        open, 3,
        "two pooled connections (saturated) and the LISTEN one"
    );
    drop((cp, runs, events, store));
}

#[tokio::test]
async fn a_budget_beyond_max_connections_is_refused_at_once_naming_the_numbers() {
    if backends::postgres().await.is_none() {
        return;
    }
    let admin = admin().await;
    let max: String = admin
        .query_one("SHOW max_connections", &[])
        .await
        .unwrap()
        .get(0);
    let reserved: String = admin
        .query_one("SHOW superuser_reserved_connections", &[])
        .await
        .unwrap()
        .get(0);
    let url = url_with("pool_size=10000&retry_for=60s");
    let err = connect(&url).await.err().expect("refused");
    assert!(
        matches!(&err, CheckpointError::Database { code: Some(c), .. } if c == "53300"),
        "{err}"
    );
    let msg = err.to_string();
    for says in [
        format!("max_connections {max}"),
        format!("superuser_reserved_connections {reserved}"),
        "pool_size=10000".to_string(),
        "room for".to_string(),
    ] {
        assert!(msg.contains(&says), "{says}: {msg}");
    }
    // The run store and the store refuse the same way.
    let runs = planwright::runs::connect(&url)
        .await
        .err()
        .expect("refused");
    assert!(runs.to_string().contains("pool_size=10000"), "{runs}");
    let store = planwright::store::connect(&url)
        .await
        .err()
        .expect("refused");
    assert!(store.to_string().contains("pool_size=10000"), "{store}");
}

/// A fresh login role with `CONNECTION LIMIT limit`, dropped by [`drop_role`].
async fn limited_role(admin: &tokio_postgres::Client, limit: i32) -> String {
    let role = format!("pwlimit{}", backends::unique().replace('-', ""));
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN CONNECTION LIMIT {limit}"
        ))
        .await
        .unwrap();
    role
}

async fn drop_role(admin: &tokio_postgres::Client, role: &str) {
    let _ = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1",
            &[&role],
        )
        .await;
    let _ = admin
        .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
        .await;
}

/// `pg_url()` as `role`.
fn url_as(role: &str, options: &str) -> String {
    let cfg: tokio_postgres::Config = backends::pg_url().parse().unwrap();
    let (addr, _) = pg_database::server();
    let db = cfg.get_dbname().unwrap_or("postgres");
    format!("postgres://{role}@{addr}/{db}?{options}")
}

#[tokio::test]
async fn a_budget_beyond_a_roles_connection_limit_is_refused_naming_the_role() {
    if backends::postgres().await.is_none() {
        return;
    }
    let admin = admin().await;
    let role = limited_role(&admin, 2).await;
    let err = connect(&url_as(&role, "pool_size=3&retry_for=60s"))
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    drop_role(&admin, &role).await;
    assert!(msg.contains("53300"), "{msg}");
    assert!(
        msg.contains(&format!("role `{role}` has CONNECTION LIMIT 2")),
        "{msg}"
    );
    assert!(msg.contains("room for 2"), "{msg}");
    assert!(msg.contains("pool_size=3"), "{msg}");
}

#[tokio::test]
async fn a_first_connection_refused_as_too_many_is_not_retried() {
    if backends::postgres().await.is_none() {
        return;
    }
    let admin = admin().await;
    let role = limited_role(&admin, 0).await;
    // With `retry_for=600s`, a retried 53300 would hold this test for ten minutes and then say
    // "unreachable"; the refusal comes at once and says why.
    let err = connect(&url_as(&role, "pool_size=2&retry_for=600s"))
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    drop_role(&admin, &role).await;
    assert!(msg.contains("53300"), "{msg}");
    assert!(
        msg.contains("refused this process's first connection"),
        "{msg}"
    );
    assert!(msg.contains("pool_size=2"), "{msg}");
}

#[tokio::test]
async fn pool_size_1_leaves_no_connection_for_listen_and_says_so() {
    if backends::postgres().await.is_none() {
        return;
    }
    let url = url_with("pool_size=1");
    let runs: Arc<dyn RunStore> = planwright::runs::connect(&url).await.unwrap();
    let err = planwright::runs::connect_events(&url, runs)
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("pool_size=1"), "{msg}");
    assert!(msg.contains("LISTEN"), "{msg}");
}
