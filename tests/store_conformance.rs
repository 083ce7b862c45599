//! One store conformance suite, every backend (memory, SQLite file, PostgreSQL server), and a
//! property test of SQLite and of PostgreSQL against the in-memory model.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/store_suite.rs"]
mod store_suite;

use planwright::store::{
    connect, Index, MemoryStore, NamespaceQuery, PostgresStore, PutOptions, SearchQuery,
    SqliteStore, Store,
};
use proptest::prelude::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use store_suite::{ns, obj, Clock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    let clock = Clock::new();
    let s = Arc::new(MemoryStore::with_clock(clock.store_clock()));
    store_suite::run_all(s, clock, "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_conforms() {
    let clock = Clock::new();
    let path = backends::sqlite_path("store");
    let s = SqliteStore::open_with_clock(path.display().to_string(), clock.store_clock())
        .await
        .unwrap();
    assert!(path.exists(), "a real file");
    store_suite::run_all(Arc::new(s), clock, "sqlite").await;
}

/// The PostgreSQL tests of this file take turns: `sweep` deletes every expired item of the
/// table, and each test's manual clock would expire the others' items.
static PG_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_conforms() {
    let _turn = PG_TURN.lock().await;
    if backends::postgres().await.is_none() {
        return;
    }
    let clock = Clock::new();
    let s = PostgresStore::connect_with_clock(&backends::pg_url(), clock.store_clock())
        .await
        .expect("the PostgreSQL store opens");
    let root = format!("pg{}", backends::unique());
    store_suite::run_all(Arc::new(s), clock, &root).await;
    clean_postgres(&root).await;
}

/// Deletes what a test wrote under `root` in the shared database.
async fn clean_postgres(root: &str) {
    let (client, conn) = tokio_postgres::connect(&backends::pg_url(), tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL is reachable");
    tokio::spawn(conn);
    client
        .execute(
            "DELETE FROM planwright_store WHERE namespace LIKE $1",
            &[&format!("{root}%")],
        )
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn store_urls_select_the_backend_and_bad_ones_are_named() {
    assert_eq!(connect("memory:").await.unwrap().backend_name(), "memory");
    let path = backends::sqlite_path("store-url");
    let s = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(s.backend_name(), "sqlite");
    for bad in ["redis://x", "sqlite:", "nonsense"] {
        let err = connect(bad).await.err().expect("rejected").to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[tokio::test]
async fn a_sqlite_store_keeps_its_items_across_reopening() {
    let path = backends::sqlite_path("store-reopen").display().to_string();
    {
        let s = SqliteStore::open(path.clone()).await.unwrap();
        s.put(
            &ns(&["a"]),
            "k",
            obj(json!({"v": 1})),
            PutOptions::default(),
        )
        .await
        .unwrap();
    }
    let s = SqliteStore::open(path).await.unwrap();
    let got = s.get(&ns(&["a"]), "k").await.unwrap().expect("kept");
    assert_eq!(got.value, obj(json!({"v": 1})));
}

#[tokio::test]
async fn a_sqlite_table_from_before_indexes_is_upgraded_in_place() {
    let path = backends::sqlite_path("store-old");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE planwright_store (namespace TEXT NOT NULL, key TEXT NOT NULL,
               value TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
               expires_at INTEGER, ttl_ms INTEGER, owner TEXT, PRIMARY KEY (namespace, key));
             INSERT INTO planwright_store VALUES ('a', 'k', '{\"t\": \"old words\"}', 1, 1,
               NULL, NULL, NULL);",
        )
        .unwrap();
    }
    let s = SqliteStore::open(path.display().to_string()).await.unwrap();
    let old = s.get(&ns(&["a"]), "k").await.unwrap().expect("kept");
    assert_eq!(
        old.index,
        Index::Value,
        "an old item indexes its whole value"
    );
    let hits = s
        .search_text(&SearchQuery::under(["a"]), "words")
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let opts = PutOptions {
        index: Index::Off,
        ..PutOptions::default()
    };
    s.put(&ns(&["a"]), "k", obj(json!({"t": "new words"})), opts)
        .await
        .unwrap();
    let reopened = SqliteStore::open(path.display().to_string()).await.unwrap();
    let new = reopened.get(&ns(&["a"]), "k").await.unwrap().unwrap();
    assert_eq!(
        new.index,
        Index::Off,
        "the index is stored in the new column"
    );
}

#[tokio::test]
async fn a_corrupt_stored_value_is_an_error_not_a_default() {
    let path = backends::sqlite_path("store-corrupt");
    let s = SqliteStore::open(path.display().to_string()).await.unwrap();
    s.put(&ns(&["a"]), "k", obj(json!({})), PutOptions::default())
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE planwright_store SET value = '[1'", [])
        .unwrap();
    let e = s.get(&ns(&["a"]), "k").await.unwrap_err().to_string();
    assert!(e.contains("corrupt") && e.contains("not JSON"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn the_default_clock_follows_paused_tokio_time() {
    let s = MemoryStore::new();
    let n = ns(&["t"]);
    s.put(
        &n,
        "k",
        obj(json!({})),
        PutOptions::ttl(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(s.get(&n, "k").await.unwrap().is_some());
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(s.get(&n, "k").await.unwrap().is_none());
}

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize, i64, Option<u64>, Option<usize>),
    Get(usize, usize, Option<usize>),
    Delete(usize, usize, Option<usize>),
    Search(usize, Option<i64>, Option<usize>, usize, usize),
    SearchText(usize, i64, Option<usize>, usize, usize),
    Namespaces(usize, Option<usize>, Option<usize>),
    Advance(u64),
    Sweep,
}

const SPACES: [&[&str]; 5] = [&["a"], &["a", "b"], &["a", "bc"], &["b"], &["a", "b", "c"]];
const OWNERS: [&str; 2] = ["alice", "bob"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..5usize, 0..3usize, 0..3i64, prop::option::of(1..20u64), prop::option::of(0..2usize))
            .prop_map(|(n, k, v, t, o)| Op::Put(n, k, v, t, o)),
        2 => (0..5usize, 0..3usize, prop::option::of(0..2usize)).prop_map(|(n, k, o)| Op::Get(n, k, o)),
        1 => (0..5usize, 0..3usize, prop::option::of(0..2usize)).prop_map(|(n, k, o)| Op::Delete(n, k, o)),
        2 => (0..5usize, prop::option::of(0..3i64), prop::option::of(0..2usize), 1..5usize, 0..3usize)
            .prop_map(|(n, v, o, l, off)| Op::Search(n, v, o, l, off)),
        1 => (0..5usize, 0..3i64, prop::option::of(0..2usize), 1..5usize, 0..3usize)
            .prop_map(|(n, v, o, l, off)| Op::SearchText(n, v, o, l, off)),
        1 => (0..5usize, prop::option::of(1..3usize), prop::option::of(0..2usize))
            .prop_map(|(n, d, o)| Op::Namespaces(n, d, o)),
        2 => (0..15u64).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
    ]
}

/// Applies `op` under the root label `root` (so runs sharing a database never meet).
async fn apply(s: &dyn Store, op: &Op, root: &str) -> String {
    let space = |i: usize| {
        let mut n = vec![root.to_string()];
        n.extend(ns(SPACES[i]));
        n
    };
    match op {
        Op::Put(n, k, v, ttl, owner) => {
            let opts = PutOptions {
                ttl: ttl.map(Duration::from_secs),
                owner: owner.map(|o| OWNERS[o].to_string()),
                // Key `k2` is never found by a text search; `k1` only by its `t` field.
                index: match k {
                    2 => Index::Off,
                    1 => Index::from_json(&json!(["t"])).unwrap(),
                    _ => Index::Value,
                },
            };
            format!(
                "{:?}",
                s.put(
                    &space(*n),
                    &format!("k{k}"),
                    obj(json!({"v": v, "t": format!("w{v} w{k}")})),
                    opts
                )
                .await
                .map(|i| i.created_at)
            )
        }
        Op::Get(n, k, None) => format!("{:?}", s.get(&space(*n), &format!("k{k}")).await.unwrap()),
        Op::Get(n, k, Some(o)) => format!(
            "{:?}",
            s.get_as(&space(*n), &format!("k{k}"), OWNERS[*o])
                .await
                .unwrap()
        ),
        Op::Delete(n, k, None) => format!(
            "{:?}",
            s.delete(&space(*n), &format!("k{k}")).await.unwrap()
        ),
        Op::Delete(n, k, Some(o)) => format!(
            "{:?}",
            s.delete_as(&space(*n), &format!("k{k}"), OWNERS[*o]).await
        ),
        Op::Search(n, v, owner, limit, offset) => {
            let mut q = SearchQuery::under(space(*n)).page(*limit, *offset);
            if let Some(v) = v {
                q = q.with("v", json!(v));
            }
            q.owner = owner.map(|o| OWNERS[o].to_string());
            format!("{:?}", s.search(&q).await.unwrap())
        }
        Op::SearchText(n, v, owner, limit, offset) => {
            let mut q = SearchQuery::under(space(*n)).page(*limit, *offset);
            q.owner = owner.map(|o| OWNERS[o].to_string());
            let hits = s.search_text(&q, &format!("{v} w{v}")).await.unwrap();
            format!("{hits:?}")
        }
        Op::Namespaces(n, depth, owner) => {
            let q = NamespaceQuery {
                prefix: space(*n)[..2].to_vec(),
                max_depth: *depth,
                owner: owner.map(|o| OWNERS[o].to_string()),
                ..NamespaceQuery::default()
            };
            format!("{:?}", s.list_namespaces(&q).await.unwrap())
        }
        Op::Advance(_) | Op::Sweep => String::new(),
    }
}

/// Runs `ops` on the model and on `other` (both on `clock`), comparing every answer; sweep counts
/// are compared only when `other` is private to this run.
async fn compare(
    ops: &[Op],
    clock: &Clock,
    model: &MemoryStore,
    other: &dyn Store,
    root: &str,
    private: bool,
) -> Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Advance(secs) => clock.advance(secs * 1000),
            Op::Sweep => {
                let (a, b) = (model.sweep().await.unwrap(), other.sweep().await.unwrap());
                if private {
                    prop_assert_eq!(a, b, "sweep count at op {}", i);
                }
            }
            _ => {
                let (a, b) = (apply(model, op, root).await, apply(other, op, root).await);
                prop_assert_eq!(a, b, "op {} {:?}", i, op);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn sqlite_answers_every_sequence_as_the_memory_model_does(ops in prop::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let clock = Clock::new();
            let model = MemoryStore::with_clock(clock.store_clock());
            let path = backends::sqlite_path("store-prop").display().to_string();
            let sql = SqliteStore::open_with_clock(path, clock.store_clock()).await.unwrap();
            compare(&ops, &clock, &model, &sql, "r", true).await
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn postgres_answers_every_sequence_as_the_memory_model_does(ops in prop::collection::vec(op(), 1..30)) {
        let _turn = PG_TURN.blocking_lock();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            if backends::postgres().await.is_none() {
                return Ok(());
            }
            let clock = Clock::new();
            let model = MemoryStore::with_clock(clock.store_clock());
            let pg = PostgresStore::connect_with_clock(&backends::pg_url(), clock.store_clock())
                .await
                .expect("the PostgreSQL store opens");
            let root = format!("prop{}", backends::unique());
            let r = compare(&ops, &clock, &model, &pg, &root, false).await;
            clean_postgres(&root).await;
            r
        })?;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_takes_the_checkpointers_url_options_and_tls() {
    let _turn = PG_TURN.lock().await;
    if backends::postgres().await.is_none() {
        return;
    }
    let sep = if backends::pg_url().contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!("{}{sep}sslmode=require&pool_size=2", backends::pg_url());
    let s = PostgresStore::connect(&url)
        .await
        .expect("the store opens over TLS with the checkpointer's options");
    let root = format!("tls{}", backends::unique());
    let n = vec![root.clone(), "k".to_string()];
    let mut v = serde_json::Map::new();
    v.insert("x".into(), serde_json::json!(1));
    s.put(&n, "a", v, planwright::store::PutOptions::default())
        .await
        .unwrap();
    assert!(s.get(&n, "a").await.unwrap().is_some());
    clean_postgres(&root).await;
    let bad = PostgresStore::connect(&format!("{}{sep}pool_size=lots", backends::pg_url()))
        .await
        .err()
        .expect("a bad option is refused");
    assert!(
        matches!(bad, planwright::store::StoreError::BadUrl { .. }),
        "{bad}"
    );
}
