//! Owners over HTTP, in each auth mode: a thread belongs to the user who created it, another
//! user gets 404 for every URL of it and never sees it in a search, an admin sees all; store
//! items likewise; JWTs signed with a shared secret or by a JWKS key name the user; bad, expired
//! or not-yet-valid tokens get 401. The owners suite walks every endpoint of the router with
//! another user's token against a thread, its runs, its checkpoints and its owner's store items,
//! and checks that nothing leaks or changes; what was written with auth off stays the admins'
//! when auth is turned on.

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;

use jsonwebtoken::{encode, EncodingKey, Header};
use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth")
}

/// A fresh SQLite file for a server's threads, runs and store.
fn fresh_db() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-owners-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite:{}", dir.join("serve.sqlite").display())
}

async fn start(args: ServeArgs) -> String {
    start_on(fresh_db(), args).await
}

/// A server on the checkpoint URL `db` (a second one on the same file is a restart).
async fn start_on(db: String, args: ServeArgs) -> String {
    let args = ServeArgs {
        checkpoint: db,
        ..args
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn call(method: &str, url: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let c = reqwest::Client::new();
    let mut req = c.request(method.parse().unwrap(), url).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let s = r.status().as_u16();
    let text = r.text().await.unwrap();
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The status and raw body text (for streams, and to look for leaked data).
async fn raw(method: &str, url: &str, token: &str, body: Option<Value>) -> (u16, String) {
    let c = reqwest::Client::new();
    let mut req = c.request(method.parse().unwrap(), url).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.text().await.unwrap())
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_string())
        .collect()
}

/// The checks every mode must pass: `ann` and `bob` are users, `admin` an admin token.
async fn owners_hold(url: &str, ann: &str, bob: &str, admin: &str) {
    let goal = json!({"assistant_id": "research", "input": {"input": "Should our support team adopt retrieval-augmented generation?", "constraints": {"require_approval": true}}});
    assert_eq!(
        call(
            "POST",
            &format!("{url}/threads"),
            ann,
            Some(json!({"thread_id": "ann-1"}))
        )
        .await
        .0,
        200
    );
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/ann-1/runs/wait"),
        ann,
        Some(goal.clone()),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        call(
            "POST",
            &format!("{url}/threads"),
            bob,
            Some(json!({"thread_id": "bob-1"}))
        )
        .await
        .0,
        200
    );
    // (Searches list threads with checkpoints: bob's gets a run too.)
    let (s, v) = call("POST", &format!("{url}/threads/bob-1/runs/wait"), bob, Some(json!({"assistant_id": "research", "input": {"input": "What does retrieval-augmented generation cost?"}}))).await;
    assert_eq!(s, 200, "{v}");
    // Every URL of ann's thread is a 404 for bob.
    for (m, path, body) in [
        ("GET", "/threads/ann-1", None),
        ("GET", "/threads/ann-1/state", None),
        ("POST", "/threads/ann-1/history", Some(json!({}))),
        ("GET", "/threads/ann-1/runs", None),
        (
            "POST",
            "/threads/ann-1/runs/wait",
            Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
        ),
        ("POST", "/threads/ann-1/copy", Some(json!({}))),
        ("DELETE", "/threads/ann-1", None),
    ] {
        let (s, v) = call(m, &format!("{url}{path}"), bob, body).await;
        assert_eq!(s, 404, "{m} {path} for bob: {v}");
    }
    // Taking ann's id is refused without telling more.
    assert_eq!(
        call(
            "POST",
            &format!("{url}/threads"),
            bob,
            Some(json!({"thread_id": "ann-1", "if_exists": "do_nothing"}))
        )
        .await
        .0,
        409
    );
    // Searches list one's own threads; an admin's lists all.
    let (_, v) = call(
        "POST",
        &format!("{url}/threads/search"),
        bob,
        Some(json!({})),
    )
    .await;
    assert_eq!(ids(&v), ["bob-1"]);
    let (_, v) = call(
        "POST",
        &format!("{url}/threads/search"),
        ann,
        Some(json!({"status": "interrupted"})),
    )
    .await;
    assert_eq!(ids(&v), ["ann-1"]);
    let (_, v) = call(
        "POST",
        &format!("{url}/threads/search"),
        admin,
        Some(json!({})),
    )
    .await;
    assert_eq!(ids(&v), ["ann-1", "bob-1"]);
    // Ann resumes her own thread; the admin reads it.
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/ann-1/runs/wait"),
        ann,
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    assert_eq!(
        call("GET", &format!("{url}/threads/ann-1/state"), admin, None)
            .await
            .0,
        200
    );
    store_items_hold(url, ann, bob, admin).await;
    // No token, or a wrong one: 401.
    assert_eq!(
        call("GET", &format!("{url}/threads/bob-1"), "nonsense", None)
            .await
            .0,
        401
    );
}

/// Store items belong to their writer: another user can neither overwrite, take over, read,
/// delete, find nor list them; an admin sees them and an admin's write keeps the owner.
async fn store_items_hold(url: &str, ann: &str, bob: &str, admin: &str) {
    let items = format!("{url}/store/items");
    let ann_prefs = json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"lang": "fr"}});
    let (s, v) = call("PUT", &items, ann, Some(ann_prefs)).await;
    assert_eq!(s, 204, "{v}");
    let get = format!("{items}?namespace=users.ann&key=prefs");
    // Bob's put on ann's key is refused and changes nothing.
    let (s, v) = call(
        "PUT",
        &items,
        bob,
        Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"lang": "xx"}})),
    )
    .await;
    assert_eq!(s, 403, "bob overwrote ann's item: {v}");
    assert!(
        v["detail"].as_str().unwrap().contains("another user"),
        "{v}"
    );
    let (s, v) = call("GET", &get, ann, None).await;
    assert_eq!((s, &v["value"]), (200, &json!({"lang": "fr"})), "{v}");
    let (s, v) = call("GET", &get, bob, None).await;
    assert_eq!(s, 404, "bob cannot read ann's item: {v}");
    let (s, v) = call(
        "DELETE",
        &items,
        bob,
        Some(json!({"namespace": ["users", "ann"], "key": "prefs"})),
    )
    .await;
    assert_eq!(s, 404, "bob cannot delete ann's item: {v}");
    // Searches and namespace listings show bob only his own.
    let (s, v) = call(
        "PUT",
        &items,
        bob,
        Some(json!({"namespace": ["users", "bob"], "key": "prefs", "value": {"lang": "fr"}})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
    let namespaces = |who: &'static str| {
        let url = format!("{url}/store/namespaces");
        let token = match who {
            "bob" => bob.to_string(),
            "ann" => ann.to_string(),
            _ => admin.to_string(),
        };
        async move {
            let (s, v) = call("POST", &url, &token, Some(json!({"prefix": ["users"]}))).await;
            assert_eq!(s, 200, "{v}");
            v["namespaces"].clone()
        }
    };
    assert_eq!(namespaces("bob").await, json!([["users", "bob"]]));
    assert_eq!(namespaces("ann").await, json!([["users", "ann"]]));
    assert_eq!(
        namespaces("admin").await,
        json!([["users", "ann"], ["users", "bob"]])
    );
    let search = format!("{url}/store/items/search");
    let (_, v) = call(
        "POST",
        &search,
        bob,
        Some(json!({"namespace_prefix": ["users"], "filter": {"lang": "fr"}})),
    )
    .await;
    let keys: Vec<&Value> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["namespace"])
        .collect();
    assert_eq!(keys, [&json!(["users", "bob"])], "{v}");
    // An admin reads and writes anyone's item; ann keeps it.
    let (s, v) = call(
        "PUT",
        &items,
        admin,
        Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"lang": "de"}})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
    let (s, v) = call("GET", &get, ann, None).await;
    assert_eq!((s, &v["value"]), (200, &json!({"lang": "de"})), "{v}");
    // Ann deletes her own.
    let (s, v) = call(
        "DELETE",
        &items,
        ann,
        Some(json!({"namespace": ["users", "ann"], "key": "prefs"})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_maps_tokens_to_users() {
    let url = start(ServeArgs {
        auth_file: Some(fixtures().join("tokens.json")),
        ..ServeArgs::default()
    })
    .await;
    owners_hold(&url, "ann-token", "bob-token", "ops-token").await;
}

/// A request with the token in `x-api-key` (the header LangGraph's SDKs send an API key in).
async fn with_api_key(method: &str, url: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let c = reqwest::Client::new();
    let mut req = c.request(method.parse().unwrap(), url);
    if !key.is_empty() {
        req = req.header("x-api-key", key);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_header_is_taken_as_the_bearer_token_with_a_token_and_with_jwts() {
    let url = start(ServeArgs {
        token: Some("the-token".into()),
        ..ServeArgs::default()
    })
    .await;
    let threads = format!("{url}/threads");
    let (s, t) = with_api_key("POST", &threads, "the-token", Some(json!({}))).await;
    assert_eq!(s, 200, "{t}");
    let (s, e) = with_api_key("POST", &threads, "another", Some(json!({}))).await;
    assert_eq!(s, 401, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("x-api-key"), "{e}");
    assert_eq!(
        with_api_key("POST", &threads, "", Some(json!({}))).await.0,
        401
    );

    let secret = "a-shared-secret-of-32-bytes-long";
    let url = start(ServeArgs {
        jwt_secret: Some(secret.into()),
        ..ServeArgs::default()
    })
    .await;
    let key = EncodingKey::from_secret(secret.as_bytes());
    let jwt = |sub: &str| {
        let claims = Claims {
            sub,
            exp: in_an_hour(),
            admin: false,
        };
        encode(&Header::default(), &claims, &key).unwrap()
    };
    let (ann, bob) = (jwt("ann"), jwt("bob"));
    let body = json!({"thread_id": "ann-key"});
    let (s, t) = with_api_key("POST", &format!("{url}/threads"), &ann, Some(body)).await;
    assert_eq!(s, 200, "{t}");
    // The key names its user: ann's thread is ann's, with either header, and not bob's.
    let thread = format!("{url}/threads/ann-key");
    assert_eq!(with_api_key("GET", &thread, &ann, None).await.0, 200);
    assert_eq!(call("GET", &thread, &ann, None).await.0, 200);
    assert_eq!(with_api_key("GET", &thread, &bob, None).await.0, 404);
    let (s, e) = with_api_key("GET", &thread, "not-a-jwt", None).await;
    assert_eq!(s, 401, "{e}");
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    sub: &'a str,
    exp: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    admin: bool,
}

fn in_an_hour() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_signed_with_the_shared_secret_name_the_user() {
    let secret = "a-shared-secret-of-32-bytes-long";
    let url = start(ServeArgs {
        jwt_secret: Some(secret.into()),
        ..ServeArgs::default()
    })
    .await;
    let key = EncodingKey::from_secret(secret.as_bytes());
    let jwt = |sub: &str, admin: bool, exp: u64| {
        encode(&Header::default(), &Claims { sub, exp, admin }, &key).unwrap()
    };
    let (ann, bob, admin) = (
        jwt("ann", false, in_an_hour()),
        jwt("bob", false, in_an_hour()),
        jwt("ops", true, in_an_hour()),
    );
    owners_hold(&url, &ann, &bob, &admin).await;
    let expired = jwt("ann", false, 1_000_000);
    let (s, v) = call("GET", &format!("{url}/threads/ann-1"), &expired, None).await;
    assert_eq!(s, 401, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("JWT refused"), "{v}");
    let forged = encode(
        &Header::default(),
        &Claims {
            sub: "ops",
            exp: in_an_hour(),
            admin: true,
        },
        &EncodingKey::from_secret(b"another-secret-of-32-bytes-long!"),
    )
    .unwrap();
    assert_eq!(
        call("GET", &format!("{url}/threads/ann-1"), &forged, None)
            .await
            .0,
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_signed_by_a_jwks_key_name_the_user() {
    let url = start(ServeArgs {
        jwks: Some(fixtures().join("test-jwks.json")),
        ..ServeArgs::default()
    })
    .await;
    let pem = std::fs::read(fixtures().join("test-rs256.pem")).unwrap();
    let key = EncodingKey::from_rsa_pem(&pem).unwrap();
    let mut header = Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("test-1".into());
    let jwt = |sub: &str, admin: bool| {
        encode(
            &header,
            &Claims {
                sub,
                exp: in_an_hour(),
                admin,
            },
            &key,
        )
        .unwrap()
    };
    owners_hold(
        &url,
        &jwt("ann", false),
        &jwt("bob", false),
        &jwt("ops", true),
    )
    .await;
    // An HS256 token is not accepted by a JWKS server, even with a plausible secret.
    let hs = encode(
        &Header::default(),
        &Claims {
            sub: "ops",
            exp: in_an_hour(),
            admin: true,
        },
        &EncodingKey::from_secret(b"a-shared-secret-of-32-bytes-long"),
    )
    .unwrap();
    assert_eq!(
        call("GET", &format!("{url}/threads/ann-1"), &hs, None)
            .await
            .0,
        401
    );
}

/// Any status (what matters is that nothing of the other user's shows).
const ANY: u16 = 0;

/// Ann's thread (paused on an approval), its run and checkpoints, and her store item; Bob, a
/// user with a thread of his own, tries every endpoint of the router on them. Every answer is a
/// 404 (403 for a store write, 409 for taking the thread's id), none carries Ann's data, and
/// afterwards everything of Ann's is as it was — then she resumes her thread to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_token_reaches_nothing_on_any_endpoint() {
    let url = start(ServeArgs {
        auth_file: Some(fixtures().join("tokens.json")),
        ..ServeArgs::default()
    })
    .await;
    let (ann, bob, admin) = ("ann-token", "bob-token", "ops-token");
    // Ann's goal carries a word that appears nowhere else: it must never reach Bob.
    let secret = "Zanzibar";
    let (s, v) = call(
        "POST",
        &format!("{url}/threads"),
        ann,
        Some(json!({"thread_id": "ann-1", "metadata": {"team": secret}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let goal = json!({"assistant_id": "research", "input": {"input": format!("Should the {secret} support team adopt retrieval-augmented generation?"), "constraints": {"require_approval": true}}});
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/ann-1/runs/wait"),
        ann,
        Some(goal),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(
        "PUT",
        &format!("{url}/store/items"),
        ann,
        Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"team": secret}, "ttl": 60})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
    let (s, v) = call(
        "POST",
        &format!("{url}/threads"),
        bob,
        Some(json!({"thread_id": "bob-1"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = call("POST", &format!("{url}/threads/bob-1/runs/wait"), bob, Some(json!({"assistant_id": "research", "input": {"input": "What does retrieval-augmented generation cost?"}}))).await;
    assert_eq!(s, 200, "{v}");
    let (_, runs) = call("GET", &format!("{url}/threads/ann-1/runs"), ann, None).await;
    let run = runs[0]["run_id"].as_str().unwrap().to_string();
    let (_, history) = call(
        "POST",
        &format!("{url}/threads/ann-1/history"),
        ann,
        Some(json!({})),
    )
    .await;
    let cp = history[0]["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    // What Ann has, read by the admin (a search does not refresh the item's TTL).
    let snapshot = || async {
        let mut all = Vec::new();
        for (m, path, body) in [
            ("GET", "/threads/ann-1".to_string(), None),
            ("GET", "/threads/ann-1/state".to_string(), None),
            (
                "POST",
                "/threads/ann-1/history".to_string(),
                Some(json!({"limit": 100})),
            ),
            ("GET", "/threads/ann-1/runs".to_string(), None),
            ("GET", format!("/threads/ann-1/runs/{run}"), None),
            (
                "POST",
                "/store/items/search".to_string(),
                Some(json!({"namespace_prefix": ["users", "ann"]})),
            ),
        ] {
            let (s, v) = call(m, &format!("{url}{path}"), admin, body).await;
            assert_eq!(s, 200, "{m} {path}: {v}");
            all.push(v);
        }
        all
    };
    let before = snapshot().await;
    let resume = json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}});
    let fresh = json!({"assistant_id": "research", "input": {"input": "Is this my thread now?"}});
    let item = json!({"namespace": ["users", "ann"], "key": "prefs"});
    let mut tries: Vec<(&str, String, Option<Value>, u16)> = vec![
        // The thread's URLs (and the same, percent-encoded).
        ("GET", "/threads/ann-1".into(), None, 404),
        ("GET", "/threads/ann%2D1".into(), None, 404),
        ("GET", "/threads/ann-1/state".into(), None, 404),
        ("GET", "/threads/ann%2d1/state".into(), None, 404),
        ("GET", format!("/threads/ann-1/state/{cp}"), None, 404),
        (
            "POST",
            "/threads/ann-1/history".into(),
            Some(json!({})),
            404,
        ),
        (
            "POST",
            "/threads/ann-1/runs/wait".into(),
            Some(resume.clone()),
            404,
        ),
        (
            "POST",
            "/threads/ann-1/runs/wait".into(),
            Some(fresh.clone()),
            404,
        ),
        (
            "POST",
            "/threads/ann-1/runs/stream".into(),
            Some(resume.clone()),
            404,
        ),
        (
            "POST",
            "/threads/ann-1/runs".into(),
            Some(resume.clone()),
            404,
        ),
        (
            "POST",
            "/threads/ann-1/runs".into(),
            Some(
                json!({"assistant_id": "research", "input": null, "multitask_strategy": "enqueue"}),
            ),
            404,
        ),
        ("GET", "/threads/ann-1/runs".into(), None, 404),
        ("GET", format!("/threads/ann-1/runs/{run}"), None, 404),
        ("GET", format!("/threads/ann-1/runs/{run}/join"), None, 404),
        (
            "GET",
            format!("/threads/ann-1/runs/{run}/stream"),
            None,
            404,
        ),
        (
            "POST",
            format!("/threads/ann-1/runs/{run}/cancel"),
            None,
            404,
        ),
        (
            "POST",
            format!("/threads/ann-1/runs/{run}/cancel?action=rollback&wait=true"),
            None,
            404,
        ),
        ("POST", "/threads/ann-1/copy".into(), Some(json!({})), 404),
        ("DELETE", "/threads/ann-1".into(), None, 404),
        // Ann's run and checkpoint reached through Bob's own thread.
        ("GET", format!("/threads/bob-1/runs/{run}"), None, 404),
        ("GET", format!("/threads/bob-1/runs/{run}/join"), None, 404),
        (
            "GET",
            format!("/threads/bob-1/runs/{run}/stream"),
            None,
            404,
        ),
        (
            "POST",
            format!("/threads/bob-1/runs/{run}/cancel?action=rollback"),
            None,
            404,
        ),
        // Checkpoint ids count per thread: Bob's thread has its own of that number, and he
        // gets his own (any status), never Ann's (the leak check below).
        ("GET", format!("/threads/bob-1/state/{cp}"), None, ANY),
        (
            "POST",
            "/threads/bob-1/copy".into(),
            Some(json!({"checkpoint_id": cp})),
            ANY,
        ),
        (
            "POST",
            "/threads/bob-1/copy".into(),
            Some(json!({"thread_id": "ann-1"})),
            409,
        ),
        (
            "POST",
            "/threads/bob-1/runs/wait".into(),
            Some(json!({"assistant_id": "research", "input": null, "checkpoint_id": cp})),
            ANY,
        ),
        // Taking the thread's id.
        (
            "POST",
            "/threads".into(),
            Some(json!({"thread_id": "ann-1"})),
            409,
        ),
        (
            "POST",
            "/threads".into(),
            Some(json!({"thread_id": "ann-1", "if_exists": "do_nothing"})),
            409,
        ),
        // The store.
        (
            "PUT",
            "/store/items".into(),
            Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"x": 1}})),
            403,
        ),
        (
            "GET",
            "/store/items?namespace=users.ann&key=prefs".into(),
            None,
            404,
        ),
        ("DELETE", "/store/items".into(), Some(item.clone()), 404),
    ];
    // Searches and listings answer, with nothing of Ann's.
    for (m, path, body) in [
        ("POST", "/threads/search", json!({})),
        ("POST", "/threads/search", json!({"prefix": "ann"})),
        ("POST", "/threads/search", json!({"status": "interrupted"})),
        ("POST", "/store/items/search", json!({})),
        (
            "POST",
            "/store/items/search",
            json!({"namespace_prefix": ["users"], "filter": {"team": secret}}),
        ),
        ("POST", "/store/namespaces", json!({})),
        (
            "POST",
            "/store/namespaces",
            json!({"prefix": ["users"], "max_depth": 1}),
        ),
    ] {
        tries.push((m, path.into(), Some(body), 200));
    }
    for (m, path) in [
        ("GET", "/ok"),
        ("GET", "/metrics"),
        ("POST", "/assistants/search"),
        ("GET", "/assistants/research"),
        ("GET", "/assistants/research/graph"),
        ("GET", "/assistants/research/nodes"),
    ] {
        tries.push((m, path.into(), None, 200));
    }
    for (m, path, body, want) in &tries {
        let (s, text) = raw(m, &format!("{url}{path}"), bob, body.clone()).await;
        if *want != ANY {
            assert_eq!(s, *want, "bob's {m} {path}: {text}");
        }
        for leak in [secret, "ann-1", run.as_str(), "\"ann\""] {
            // (A refusal may repeat the id Bob sent; nothing else of Ann's.)
            let sent = path.replace("%2D", "-").replace("%2d", "-");
            let echoed =
                sent.contains(leak) || body.as_ref().is_some_and(|b| b.to_string().contains(leak));
            assert!(
                echoed || !text.contains(leak),
                "bob's {m} {path} shows `{leak}`: {text}"
            );
        }
    }
    let (_, v) = call(
        "POST",
        &format!("{url}/threads/search"),
        bob,
        Some(json!({"limit": 100})),
    )
    .await;
    // Bob's own thread and the copy he made of it; never Ann's.
    let mine = ids(&v);
    assert!(
        mine.contains(&"bob-1".to_string()) && !mine.contains(&"ann-1".to_string()),
        "{mine:?}"
    );
    let (_, v) = call(
        "POST",
        &format!("{url}/store/namespaces"),
        bob,
        Some(json!({})),
    )
    .await;
    assert_eq!(v["namespaces"], json!([]), "{v}");
    // Nothing of Ann's changed, and her thread goes on.
    assert_eq!(snapshot().await, before);
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/ann-1/runs/wait"),
        ann,
        Some(resume),
    )
    .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    let (s, v) = call(
        "GET",
        &format!("{url}/store/items?namespace=users.ann&key=prefs"),
        ann,
        None,
    )
    .await;
    assert_eq!((s, &v["value"]), (200, &json!({"team": secret})), "{v}");
}

/// Threads and store items written with auth off belong to no user: after a restart with auth
/// on, a user named like the open mode's built-in user is refused (a token file naming one does
/// not load; a JWT with that `sub` gets 401), other users get 404, and admins see both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_written_with_auth_off_stays_the_admins() {
    let db = fresh_db();
    let open = start_on(db.clone(), ServeArgs::default()).await;
    let (s, v) = call(
        "POST",
        &format!("{open}/threads"),
        "",
        Some(json!({"thread_id": "open-1"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(
        "PUT",
        &format!("{open}/store/items"),
        "",
        Some(json!({"namespace": ["shared"], "key": "k", "value": {"v": 1}})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
    // A token file with a non-admin `anonymous` is refused, naming the user.
    let dir = std::env::temp_dir().join(format!("planwright-owners-anon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens.json");
    std::fs::write(
        &file,
        json!({"tokens": {"anon-token": {"user": "anonymous"}, "ops-token": {"user": "ops", "admin": true}}}).to_string(),
    )
    .unwrap();
    let refused = state(&ServeArgs {
        checkpoint: db.clone(),
        auth_file: Some(file),
        ..ServeArgs::default()
    })
    .await
    .err()
    .expect("a non-admin `anonymous` is refused");
    assert!(
        refused.to_string().contains("`anonymous` is reserved"),
        "{refused}"
    );
    // With JWTs: `anonymous` gets 401, ann 404, an admin both.
    let key = "a-shared-secret-of-32-bytes-long";
    let url = start_on(
        db,
        ServeArgs {
            jwt_secret: Some(key.into()),
            ..ServeArgs::default()
        },
    )
    .await;
    let jwt = |sub: &str, admin: bool| {
        encode(
            &Header::default(),
            &Claims {
                sub,
                exp: in_an_hour(),
                admin,
            },
            &EncodingKey::from_secret(key.as_bytes()),
        )
        .unwrap()
    };
    let thread = format!("{url}/threads/open-1");
    let item = format!("{url}/store/items?namespace=shared&key=k");
    let (s, v) = call("GET", &thread, &jwt("anonymous", false), None).await;
    assert_eq!(s, 401, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("reserved"), "{v}");
    assert_eq!(
        call("GET", &item, &jwt("anonymous", false), None).await.0,
        401
    );
    assert_eq!(call("GET", &thread, &jwt("ann", false), None).await.0, 404);
    assert_eq!(call("GET", &item, &jwt("ann", false), None).await.0, 404);
    let (_, v) = call(
        "POST",
        &format!("{url}/threads/search"),
        &jwt("ann", false),
        Some(json!({})),
    )
    .await;
    assert!(ids(&v).is_empty(), "{v}");
    let ops = jwt("ops", true);
    assert_eq!(call("GET", &thread, &ops, None).await.0, 200);
    let (s, v) = call("GET", &item, &ops, None).await;
    assert_eq!((s, &v["value"]), (200, &json!({"v": 1})), "{v}");
}

/// JWTs with each claim wrong, over HTTP (the unit tests in `serve::auth` cover each case; this
/// checks the server applies `--jwt-leeway`, `nbf` and `exp`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_outside_their_time_window_get_401() {
    let key = "a-shared-secret-of-32-bytes-long";
    let url = start(ServeArgs {
        jwt_secret: Some(key.into()),
        jwt_leeway: std::time::Duration::from_secs(10),
        ..ServeArgs::default()
    })
    .await;
    let now = in_an_hour() as i64 - 3600;
    let jwt = |claims: Value| {
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(key.as_bytes()),
        )
        .unwrap()
    };
    let search = format!("{url}/threads/search");
    for (claims, want, words) in [
        (json!({"sub": "ann", "exp": now + 3600}), 200, ""),
        (
            json!({"sub": "ann", "exp": now + 3600, "nbf": now + 3600}),
            401,
            "not valid yet",
        ),
        (
            json!({"sub": "ann", "exp": now + 3600, "nbf": now + 3}),
            200,
            "",
        ),
        (json!({"sub": "ann", "exp": now - 30}), 401, "expired"),
        (json!({"sub": "ann", "exp": now - 3}), 200, ""),
        (json!({"sub": "", "exp": now + 3600}), 401, "empty `sub`"),
        (json!({"exp": now + 3600}), 401, "no `sub`"),
    ] {
        let (s, v) = call("POST", &search, &jwt(claims.clone()), Some(json!({}))).await;
        assert_eq!(s, want, "{claims}: {v}");
        if want == 401 {
            assert!(
                v["detail"].as_str().unwrap().contains(words),
                "{claims}: {v}"
            );
        }
    }
}

/// The caller travels to the handlers inside the request, not in a header: a user whose name no
/// HTTP header can carry (a control character) is still that user, not an admin, and a client's
/// own `x-planwright-user` header stands for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_cannot_be_lost_or_forged_on_the_way_to_the_store() {
    let dir = std::env::temp_dir().join(format!("planwright-owners-eve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens.json");
    std::fs::write(
        &file,
        json!({"tokens": {"ann-token": {"user": "ann"}, "eve-token": {"user": "eve\u{7}"}}})
            .to_string(),
    )
    .unwrap();
    let url = start(ServeArgs {
        auth_file: Some(file),
        ..ServeArgs::default()
    })
    .await;
    let items = format!("{url}/store/items");
    let (s, v) = call(
        "PUT",
        &items,
        "ann-token",
        Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"lang": "fr"}})),
    )
    .await;
    assert_eq!(s, 204, "{v}");
    let (s, v) = call(
        "PUT",
        &items,
        "eve-token",
        Some(json!({"namespace": ["users", "ann"], "key": "prefs", "value": {"lang": "xx"}})),
    )
    .await;
    assert_eq!(s, 403, "eve wrote ann's item as if an admin: {v}");
    let (s, v) = call(
        "POST",
        &format!("{url}/store/namespaces"),
        "eve-token",
        Some(json!({})),
    )
    .await;
    assert_eq!((s, &v["namespaces"]), (200, &json!([])), "{v}");
    let r = reqwest::Client::new()
        .get(format!("{items}?namespace=users.ann&key=prefs"))
        .bearer_auth("eve-token")
        .header("x-planwright-user", "ann")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let (s, v) = call(
        "GET",
        &format!("{items}?namespace=users.ann&key=prefs"),
        "ann-token",
        None,
    )
    .await;
    assert_eq!((s, &v["value"]), (200, &json!({"lang": "fr"})), "{v}");
}

/// Ann and Bob, four requests each, create the same new thread id at the same moment, many
/// times over, on SQLite and on PostgreSQL: exactly one request gets it each time, every other
/// hears 409, and the thread stays the winner's (its record is never replaced by a loser's,
/// and the other user cannot read it). The check and the write are one step in storage
/// (`Checkpointer::create_thread`, in the conformance suite); with a read and then a write, two
/// requests on PostgreSQL both answer 200 here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_creating_one_thread_id_at_once_cannot_both_own_it() {
    let args = || ServeArgs {
        auth_file: Some(fixtures().join("tokens.json")),
        ..ServeArgs::default()
    };
    contest_thread_ids(&start(args()).await).await;
    if let Some(db) = pg_database::FreshDatabase::create("pwowners").await {
        contest_thread_ids(&start_on(db.url(), args()).await).await;
    }
}

async fn contest_thread_ids(url: &str) {
    let users = ["ann-token", "bob-token"];
    for round in 0..30 {
        let id = format!("contested-{round}");
        let go = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let tries: Vec<_> = (0..8)
            .map(|i| {
                let (url, id, go) = (url.to_string(), id.clone(), go.clone());
                let token = users[i % 2];
                tokio::spawn(async move {
                    let body = json!({"thread_id": id, "metadata": {"by": i}});
                    go.wait().await;
                    let (s, v) = call("POST", &format!("{url}/threads"), token, Some(body)).await;
                    (i, token, s, v)
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tries {
            results.push(t.await.unwrap());
        }
        let winners: Vec<_> = results.iter().filter(|r| r.2 == 200).collect();
        assert_eq!(winners.len(), 1, "{url} round {round}: {results:?}");
        assert!(
            results.iter().all(|r| r.2 == 200 || r.2 == 409),
            "{url} round {round}: {results:?}"
        );
        let (i, token) = (winners[0].0, winners[0].1);
        let other = if token == users[0] {
            users[1]
        } else {
            users[0]
        };
        let (s, v) = call("GET", &format!("{url}/threads/{id}"), token, None).await;
        assert_eq!((s, &v["metadata"]["by"]), (200, &json!(i)), "{v}");
        let (s, _) = call("GET", &format!("{url}/threads/{id}"), other, None).await;
        assert_eq!(
            s, 404,
            "{url} round {round}: the loser reads the winner's thread"
        );
    }
}
