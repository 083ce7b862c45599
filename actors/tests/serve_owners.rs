//! Owners over HTTP, in each auth mode: a thread belongs to the user who created it, another
//! user gets 404 for every URL of it and never sees it in a search, an admin sees all; JWTs
//! signed with a shared secret or by a JWKS key name the user; bad or expired tokens get 401.

use jsonwebtoken::{encode, EncodingKey, Header};
use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth")
}

async fn start(args: ServeArgs) -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-owners-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
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
