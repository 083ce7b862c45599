//! The store conformance suite: every backend must pass it. Each backend is built on a manual
//! clock (`Clock`), so TTLs are tested by moving time, never by sleeping; every test writes
//! under its own root label so a shared PostgreSQL database never mixes runs.

#![allow(dead_code)]

use planwright::store::{
    Index, NamespaceQuery, PutOptions, ScoredItem, SearchQuery, Store, StoreClock, StoreError,
};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A manual clock, starting at a fixed time.
#[derive(Clone)]
pub struct Clock(pub Arc<AtomicU64>);

impl Clock {
    pub fn new() -> Self {
        Self(Arc::new(AtomicU64::new(1_700_000_000_000)))
    }
    pub fn store_clock(&self) -> StoreClock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

pub fn ns(labels: &[&str]) -> Vec<String> {
    labels.iter().map(|s| s.to_string()).collect()
}

pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// Runs every check on `store` (built on `clock`), under the root label `root`.
pub async fn run_all(store: Arc<dyn Store>, clock: Clock, root: &str) {
    put_get_replace_and_delete(&*store, &clock, &format!("{root}-pgd")).await;
    bad_namespaces_and_keys_are_refused(&*store).await;
    search_by_prefix_filter_owner_and_page(&*store, &format!("{root}-search")).await;
    text_search_ranks_indexed_words(&*store, &format!("{root}-text")).await;
    ttl_expires_refreshes_on_read_and_sweeps(&*store, &clock, &format!("{root}-ttl")).await;
    namespaces_list_by_prefix_suffix_and_depth(&*store, &format!("{root}-ns")).await;
    concurrent_writers_all_land(store.clone(), &format!("{root}-conc")).await;
    owners_guard_writes_reads_and_deletes(&*store, &clock, &format!("{root}-own")).await;
    users_racing_for_one_key_leave_one_winner(store.clone(), &format!("{root}-race")).await;
}

async fn put_get_replace_and_delete(s: &dyn Store, clock: &Clock, root: &str) {
    let n = ns(&[root, "users", "u1"]);
    assert!(s.get(&n, "prefs").await.unwrap().is_none());
    let first = s
        .put(
            &n,
            "prefs",
            obj(json!({"lang": "fr", "n": 1})),
            PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(first.created_at, clock.now());
    let got = s.get(&n, "prefs").await.unwrap().expect("stored");
    assert_eq!(got.value, obj(json!({"lang": "fr", "n": 1})));
    assert_eq!(
        (got.namespace.clone(), got.key.as_str()),
        (n.clone(), "prefs")
    );
    assert_eq!(got.owner, None);
    assert_eq!(got.expires_at, None);
    clock.advance(5_000);
    s.put(
        &n,
        "prefs",
        obj(json!({"lang": "de"})),
        PutOptions::default(),
    )
    .await
    .unwrap();
    let got = s.get(&n, "prefs").await.unwrap().unwrap();
    assert_eq!(
        got.value,
        obj(json!({"lang": "de"})),
        "put replaces the value"
    );
    assert_eq!(got.created_at, first.created_at, "created_at is kept");
    assert_eq!(got.updated_at, first.created_at + 5_000, "updated_at moves");
    assert_eq!(got.owner, None);
    assert!(s.delete(&n, "prefs").await.unwrap());
    assert!(
        !s.delete(&n, "prefs").await.unwrap(),
        "a second delete finds nothing"
    );
    assert!(s.get(&n, "prefs").await.unwrap().is_none());
    // Unicode, quotes and SQL wildcards are plain text.
    let odd = ns(&[root, "ü-%_'\"", "x"]);
    s.put(&odd, "k'%", obj(json!({"a": "b"})), PutOptions::default())
        .await
        .unwrap();
    assert!(s.get(&odd, "k'%").await.unwrap().is_some());
}

async fn bad_namespaces_and_keys_are_refused(s: &dyn Store) {
    let v = || obj(json!({}));
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (vec![], "k", "at least one label"),
        (ns(&["a", ""]), "k", "must not be empty"),
        (ns(&["a.b"]), "k", "must not contain `.`"),
        (ns(&["a"]), "", "key must not be empty"),
    ];
    for (n, k, words) in cases {
        let e = s.put(&n, k, v(), PutOptions::default()).await.unwrap_err();
        assert!(e.to_string().contains(words), "{e}");
        assert!(matches!(
            s.get(&n, k).await.unwrap_err(),
            StoreError::BadNamespace { .. } | StoreError::EmptyKey
        ));
    }
    let e = s.search(&SearchQuery::under(["x", ""])).await.unwrap_err();
    assert!(matches!(e, StoreError::BadNamespace { .. }), "{e}");
}

async fn search_by_prefix_filter_owner_and_page(s: &dyn Store, root: &str) {
    let put = |n: Vec<String>, k: &'static str, v: Value, owner: Option<&str>| {
        let opts = PutOptions {
            owner: owner.map(str::to_string),
            ..PutOptions::default()
        };
        async move { s.put(&n, k, obj(v), opts).await.unwrap() }
    };
    put(
        ns(&[root, "a"]),
        "k1",
        json!({"kind": "note", "n": 1}),
        Some("alice"),
    )
    .await;
    put(
        ns(&[root, "a"]),
        "k2",
        json!({"kind": "pref", "n": 2}),
        Some("bob"),
    )
    .await;
    put(
        ns(&[root, "a", "b"]),
        "k3",
        json!({"kind": "note", "n": 3, "tag": {"x": [1, 2]}}),
        None,
    )
    .await;
    put(
        ns(&[root, "ab"]),
        "k4",
        json!({"kind": "note", "n": 4}),
        Some("alice"),
    )
    .await;
    let keys = |items: Vec<planwright::store::Item>| -> Vec<String> {
        items.into_iter().map(|i| i.key).collect()
    };
    let all = SearchQuery::under([root]).page(100, 0);
    assert_eq!(
        keys(s.search(&all).await.unwrap()),
        ["k1", "k2", "k3", "k4"],
        "ordered by namespace, key"
    );
    let under_a = SearchQuery::under([root, "a"]).page(100, 0);
    assert_eq!(
        keys(s.search(&under_a).await.unwrap()),
        ["k1", "k2", "k3"],
        "a prefix is a whole label: `ab` is not under `a`"
    );
    let notes = all.clone().with("kind", json!("note"));
    assert_eq!(keys(s.search(&notes).await.unwrap()), ["k1", "k3", "k4"]);
    let n2 = all.clone().with("kind", json!("pref")).with("n", json!(2));
    assert_eq!(keys(s.search(&n2).await.unwrap()), ["k2"]);
    let nested = all.clone().with("tag", json!({"x": [1, 2]}));
    assert_eq!(
        keys(s.search(&nested).await.unwrap()),
        ["k3"],
        "a nested value compares whole"
    );
    let missing = all.clone().with("colour", json!("red"));
    assert!(s.search(&missing).await.unwrap().is_empty());
    let wrong_type = all.clone().with("n", json!("1"));
    assert!(
        s.search(&wrong_type).await.unwrap().is_empty(),
        "\"1\" is not 1"
    );
    let mut alice = all.clone();
    alice.owner = Some("alice".into());
    assert_eq!(keys(s.search(&alice).await.unwrap()), ["k1", "k4"]);
    assert_eq!(
        keys(s.search(&all.clone().page(2, 1)).await.unwrap()),
        ["k2", "k3"]
    );
    assert!(s.search(&all.clone().page(10, 4)).await.unwrap().is_empty());
    assert_eq!(
        keys(s.search(&SearchQuery::under([root])).await.unwrap()).len(),
        4,
        "the default limit is 10"
    );
}

/// `search_text`: the prefix, filter and owner of `search`, then only items whose indexed text
/// (the whole value, the paths of their `index`, never an `index: false` item's) holds a query
/// word, ranked by relevance, paged after ranking; the index survives the round trip.
async fn text_search_ranks_indexed_words(s: &dyn Store, root: &str) {
    let put = |k: &'static str, v: Value, index: Value, owner: Option<&str>| {
        let opts = PutOptions {
            owner: owner.map(str::to_string),
            index: Index::from_json(&index).unwrap(),
            ..PutOptions::default()
        };
        async move { s.put(&ns(&[root, "m"]), k, obj(v), opts).await.unwrap() }
    };
    put(
        "one",
        json!({"text": "Rust is fast", "kind": "a"}),
        Value::Null,
        None,
    )
    .await;
    put(
        "two",
        json!({"text": "rust, rust and rust", "kind": "a"}),
        Value::Null,
        None,
    )
    .await;
    put(
        "tokio",
        json!({"text": "tokio on rust", "kind": "b"}),
        Value::Null,
        Some("ann"),
    )
    .await;
    put(
        "title",
        json!({"title": "Beta", "body": "rust"}),
        json!(["title"]),
        None,
    )
    .await;
    put(
        "hidden",
        json!({"text": "rust beta tokio"}),
        json!(false),
        None,
    )
    .await;
    let got = s.get(&ns(&[root, "m"]), "title").await.unwrap().unwrap();
    assert_eq!(got.index.to_json(), json!(["title"]), "the index is kept");
    let q = SearchQuery::under([root]).page(100, 0);
    let keys = |hits: Vec<ScoredItem>| -> Vec<String> {
        assert!(hits.iter().all(|h| h.score > 0.0), "scores above 0");
        assert!(
            hits.windows(2).all(|w| w[0].score >= w[1].score),
            "best first"
        );
        hits.into_iter().map(|h| h.item.key).collect()
    };
    assert_eq!(
        keys(s.search_text(&q, "RUST tokio").await.unwrap()),
        ["tokio", "two", "one"],
        "the rarer word and more occurrences rank higher; `title` indexes only its title,          `hidden` nothing"
    );
    assert_eq!(keys(s.search_text(&q, "beta").await.unwrap()), ["title"]);
    assert!(s.search_text(&q, "python").await.unwrap().is_empty());
    let a = q.clone().with("kind", json!("a"));
    assert_eq!(
        keys(s.search_text(&a, "rust").await.unwrap()),
        ["two", "one"]
    );
    let mut ann = q.clone();
    ann.owner = Some("ann".into());
    assert_eq!(keys(s.search_text(&ann, "rust").await.unwrap()), ["tokio"]);
    let page = q.clone().page(1, 1);
    assert_eq!(
        keys(s.search_text(&page, "rust tokio").await.unwrap()),
        ["two"]
    );
    let e = s
        .search_text(&SearchQuery::under(["x", ""]), "rust")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::BadNamespace { .. }), "{e}");
}

async fn ttl_expires_refreshes_on_read_and_sweeps(s: &dyn Store, clock: &Clock, root: &str) {
    let n = ns(&[root, "cache"]);
    let ttl = PutOptions::ttl(Duration::from_secs(10));
    let item = s
        .put(&n, "short", obj(json!({"v": 1})), ttl.clone())
        .await
        .unwrap();
    assert_eq!(item.expires_at, Some(clock.now() + 10_000));
    s.put(&n, "forever", obj(json!({"v": 2})), PutOptions::default())
        .await
        .unwrap();
    clock.advance(9_999);
    let read = s.get(&n, "short").await.unwrap().expect("alive at 9.999 s");
    assert_eq!(
        read.expires_at,
        Some(clock.now() + 10_000),
        "a read refreshes the TTL"
    );
    clock.advance(9_999);
    assert!(
        s.get(&n, "short").await.unwrap().is_some(),
        "refreshed by the read"
    );
    clock.advance(10_000);
    assert!(s.get(&n, "short").await.unwrap().is_none(), "expired");
    let left = s.search(&SearchQuery::under([root])).await.unwrap();
    assert_eq!(
        left.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(),
        ["forever"]
    );
    assert!(
        !s.delete(&n, "short").await.unwrap(),
        "an expired item is not there to delete"
    );
    // Search does not refresh; an expired item disappears from namespaces too.
    let only = ns(&[root, "gone"]);
    s.put(&only, "x", obj(json!({})), ttl.clone())
        .await
        .unwrap();
    clock.advance(5_000);
    s.search(&SearchQuery::under([root, "gone"])).await.unwrap();
    clock.advance(5_000);
    let spaces = s
        .list_namespaces(&NamespaceQuery {
            prefix: ns(&[root]),
            ..NamespaceQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(spaces, vec![n.clone()]);
    s.put(&n, "again", obj(json!({})), ttl).await.unwrap();
    clock.advance(10_000);
    assert!(s.sweep().await.unwrap() >= 1, "sweep deletes expired items");
    // A new item under an expired one's key is created anew.
    let fresh = s
        .put(&n, "short", obj(json!({"v": 3})), PutOptions::default())
        .await
        .unwrap();
    assert_eq!(fresh.created_at, clock.now());
}

async fn namespaces_list_by_prefix_suffix_and_depth(s: &dyn Store, root: &str) {
    for n in [
        ns(&[root, "users", "u1", "prefs"]),
        ns(&[root, "users", "u2", "prefs"]),
        ns(&[root, "users", "u2", "notes"]),
        ns(&[root, "teams", "t1"]),
    ] {
        s.put(&n, "k", obj(json!({})), PutOptions::default())
            .await
            .unwrap();
        s.put(&n, "k2", obj(json!({})), PutOptions::default())
            .await
            .unwrap();
    }
    let q =
        |prefix: &[&str], suffix: &[&str], depth: Option<usize>, limit, offset| NamespaceQuery {
            prefix: ns(prefix),
            suffix: ns(suffix),
            max_depth: depth,
            owner: None,
            limit,
            offset,
        };
    let list = |q: NamespaceQuery| async move { s.list_namespaces(&q).await.unwrap() };
    assert_eq!(
        list(q(&[root], &[], None, 100, 0)).await,
        vec![
            ns(&[root, "teams", "t1"]),
            ns(&[root, "users", "u1", "prefs"]),
            ns(&[root, "users", "u2", "notes"]),
            ns(&[root, "users", "u2", "prefs"]),
        ]
    );
    assert_eq!(
        list(q(&[root], &["prefs"], None, 100, 0)).await,
        vec![
            ns(&[root, "users", "u1", "prefs"]),
            ns(&[root, "users", "u2", "prefs"])
        ]
    );
    assert_eq!(
        list(q(&[root, "users"], &[], Some(3), 100, 0)).await,
        vec![ns(&[root, "users", "u1"]), ns(&[root, "users", "u2"])],
        "cut to depth, deduplicated"
    );
    assert_eq!(
        list(q(&[root], &[], Some(2), 1, 1)).await,
        vec![ns(&[root, "users"])]
    );
}

async fn concurrent_writers_all_land(s: Arc<dyn Store>, root: &str) {
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = s.clone();
        let n = ns(&[root, "w"]);
        tasks.push(tokio::spawn(async move {
            s.put(
                &n,
                &format!("k{i:02}"),
                obj(json!({"i": i})),
                PutOptions::default(),
            )
            .await
            .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let all = s
        .search(&SearchQuery::under([root]).page(100, 0))
        .await
        .unwrap();
    assert_eq!(all.len(), 16);
}

fn by(user: &str) -> PutOptions {
    PutOptions {
        owner: Some(user.into()),
        ..PutOptions::default()
    }
}

fn refused(r: Result<impl std::fmt::Debug, StoreError>, n: &[String], k: &str) {
    match r {
        Err(StoreError::NotOwner { namespace, key }) => {
            assert_eq!((namespace.as_slice(), key.as_str()), (n, k))
        }
        other => panic!("expected NotOwner for {n:?}/{k}, got {other:?}"),
    }
}

/// A user writes, reads and deletes only what is absent, expired or theirs; an item nobody owns
/// (an admin's or a node's) is no user's; unrestricted writes keep the owner.
async fn owners_guard_writes_reads_and_deletes(s: &dyn Store, clock: &Clock, root: &str) {
    let ann_ns = ns(&[root, "users", "ann"]);
    let ann = s
        .put(&ann_ns, "prefs", obj(json!({"lang": "fr"})), by("ann"))
        .await
        .unwrap();
    assert_eq!(ann.owner.as_deref(), Some("ann"));
    clock.advance(1_000);
    // Another user can neither overwrite, nor take over, nor delete it, nor read it.
    refused(
        s.put(&ann_ns, "prefs", obj(json!({"lang": "xx"})), by("bob"))
            .await,
        &ann_ns,
        "prefs",
    );
    refused(s.delete_as(&ann_ns, "prefs", "bob").await, &ann_ns, "prefs");
    assert!(s.get_as(&ann_ns, "prefs", "bob").await.unwrap().is_none());
    let kept = s.get_as(&ann_ns, "prefs", "ann").await.unwrap().unwrap();
    assert_eq!(kept.value, obj(json!({"lang": "fr"})), "ann's value stands");
    assert_eq!(kept.owner.as_deref(), Some("ann"));
    assert_eq!(kept.updated_at, ann.updated_at, "bob's put changed nothing");
    // Ann rewrites her own item.
    let again = s
        .put(&ann_ns, "prefs", obj(json!({"lang": "de"})), by("ann"))
        .await
        .unwrap();
    assert_eq!(again.created_at, ann.created_at);
    // An unrestricted write (an admin, a node) replaces it and keeps ann as the owner.
    let admin = s
        .put(
            &ann_ns,
            "prefs",
            obj(json!({"lang": "en"})),
            PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(admin.owner.as_deref(), Some("ann"));
    let read = s.get(&ann_ns, "prefs").await.unwrap().unwrap();
    assert_eq!(read.owner.as_deref(), Some("ann"));
    assert!(s.get_as(&ann_ns, "prefs", "ann").await.unwrap().is_some());
    // An item nobody owns is no user's to change.
    let shared = ns(&[root, "shared"]);
    s.put(&shared, "k", obj(json!({"v": 1})), PutOptions::default())
        .await
        .unwrap();
    refused(
        s.put(&shared, "k", obj(json!({"v": 2})), by("bob")).await,
        &shared,
        "k",
    );
    refused(s.delete_as(&shared, "k", "bob").await, &shared, "k");
    assert!(s.get_as(&shared, "k", "bob").await.unwrap().is_none());
    assert_eq!(
        s.get(&shared, "k").await.unwrap().unwrap().value,
        obj(json!({"v": 1}))
    );
    // Another user's read does not refresh the TTL; an expired item is anyone's to create anew.
    let cache = ns(&[root, "users", "ann", "cache"]);
    let short = s
        .put(
            &cache,
            "c",
            obj(json!({})),
            PutOptions {
                ttl: Some(Duration::from_secs(10)),
                owner: Some("ann".into()),
                ..PutOptions::default()
            },
        )
        .await
        .unwrap();
    clock.advance(6_000);
    assert!(s.get_as(&cache, "c", "bob").await.unwrap().is_none());
    let seen = s.search(&SearchQuery::under(cache.clone())).await.unwrap();
    assert_eq!(
        seen[0].expires_at, short.expires_at,
        "bob's read must not refresh it"
    );
    clock.advance(5_000);
    assert!(
        !s.delete_as(&cache, "c", "bob").await.unwrap(),
        "an expired item is nobody's to refuse"
    );
    let ann_ttl = PutOptions {
        ttl: Some(Duration::from_secs(10)),
        owner: Some("ann".into()),
        ..PutOptions::default()
    };
    s.put(&cache, "c", obj(json!({"n": 1})), ann_ttl.clone())
        .await
        .unwrap();
    clock.advance(11_000);
    let taken = s
        .put(&cache, "c", obj(json!({"n": 2})), by("bob"))
        .await
        .expect("an expired item is gone: anyone creates it anew");
    assert_eq!(
        (taken.owner.as_deref(), taken.created_at),
        (Some("bob"), clock.now())
    );
    // Namespaces of one owner.
    let bob_ns = ns(&[root, "users", "bob"]);
    s.put(&bob_ns, "prefs", obj(json!({})), by("bob"))
        .await
        .unwrap();
    let of = |owner: Option<&str>| NamespaceQuery {
        prefix: ns(&[root]),
        owner: owner.map(str::to_string),
        ..NamespaceQuery::default()
    };
    assert_eq!(
        s.list_namespaces(&of(Some("bob"))).await.unwrap(),
        vec![cache.clone(), bob_ns.clone()]
    );
    assert_eq!(
        s.list_namespaces(&of(Some("ann"))).await.unwrap(),
        vec![ann_ns.clone()]
    );
    assert_eq!(
        s.list_namespaces(&of(None)).await.unwrap(),
        vec![
            shared.clone(),
            ann_ns.clone(),
            cache.clone(),
            bob_ns.clone()
        ]
    );
    // A user deletes their own item once.
    assert!(s.delete_as(&ann_ns, "prefs", "ann").await.unwrap());
    assert!(!s.delete_as(&ann_ns, "prefs", "ann").await.unwrap());
    assert!(!s.delete_as(&ann_ns, "nothing", "bob").await.unwrap());
}

/// Eight users put the same new key at once: the check and the write are one step, so exactly
/// one wins and the item holds the winner's value.
async fn users_racing_for_one_key_leave_one_winner(s: Arc<dyn Store>, root: &str) {
    for round in 0..5 {
        let n = ns(&[root, "contested"]);
        let key = format!("k{round}");
        let start = Arc::new(tokio::sync::Barrier::new(8));
        let mut tasks = Vec::new();
        for u in 0..8 {
            let (s, n, key, start) = (s.clone(), n.clone(), key.clone(), start.clone());
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let user = format!("user{u}");
                let r = s.put(&n, &key, obj(json!({"by": user})), by(&user)).await;
                (user, r)
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (user, r) = t.await.unwrap();
            match r {
                Ok(_) => winners.push(user),
                Err(StoreError::NotOwner { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let got = s.get(&n, &key).await.unwrap().unwrap();
        assert_eq!(got.owner.as_deref(), Some(winners[0].as_str()));
        assert_eq!(got.value, obj(json!({"by": winners[0]})));
    }
}
