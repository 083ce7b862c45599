//! The `/store` endpoints over a real socket, on a SQLite file beside the threads: put, get,
//! delete, search by prefix and filter with paging, namespaces, TTL in minutes, and errors that
//! name the problem.

use planwright_actors::serve::{router, state, ServeArgs};
use reqwest::Method;
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-serve-store-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("secret".into()),
        model: "offline".into(),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    assert_eq!(
        st.store.backend_name(),
        "sqlite",
        "the store defaults to the checkpoint URL"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn call(method: Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .bearer_auth("secret");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_put_read_searched_listed_and_deleted() {
    let base = start().await;
    let items = format!("{base}/store/items");
    for (ns, key, value) in [
        (
            json!(["users", "u1"]),
            "prefs",
            json!({"lang": "fr", "tier": "pro"}),
        ),
        (
            json!(["users", "u1", "notes"]),
            "n1",
            json!({"text": "likes tables", "tier": "pro"}),
        ),
        (
            json!(["users", "u2"]),
            "prefs",
            json!({"lang": "de", "tier": "free"}),
        ),
    ] {
        let (s, _) = call(
            Method::PUT,
            &items,
            Some(json!({"namespace": ns, "key": key, "value": value})),
        )
        .await;
        assert_eq!(s, 204);
    }
    let (s, item) = call(
        Method::GET,
        &format!("{items}?namespace=users.u1&key=prefs"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(item["value"], json!({"lang": "fr", "tier": "pro"}));
    assert_eq!(item["namespace"], json!(["users", "u1"]));
    assert!(
        item["created_at"].as_str().unwrap().ends_with('Z'),
        "{item}"
    );
    assert_eq!(item["expires_at"], Value::Null);

    let search = format!("{base}/store/items/search");
    let (s, found) = call(
        Method::POST,
        &search,
        Some(json!({"namespace_prefix": ["users"], "filter": {"tier": "pro"}})),
    )
    .await;
    assert_eq!(s, 200, "{found}");
    let keys: Vec<&str> = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["prefs", "n1"],
        "namespace order: users.u1 before users.u1.notes"
    );
    let (_, page) = call(
        Method::POST,
        &search,
        Some(json!({"namespace_prefix": ["users"], "limit": 1, "offset": 2})),
    )
    .await;
    assert_eq!(page["items"][0]["namespace"], json!(["users", "u2"]));

    let (s, spaces) = call(
        Method::POST,
        &format!("{base}/store/namespaces"),
        Some(json!({"prefix": ["users"], "max_depth": 2})),
    )
    .await;
    assert_eq!(s, 200, "{spaces}");
    assert_eq!(
        spaces["namespaces"],
        json!([["users", "u1"], ["users", "u2"]])
    );

    let (s, _) = call(
        Method::DELETE,
        &items,
        Some(json!({"namespace": ["users", "u2"], "key": "prefs"})),
    )
    .await;
    assert_eq!(s, 204);
    let (s, err) = call(
        Method::GET,
        &format!("{items}?namespace=users.u2&key=prefs"),
        None,
    )
    .await;
    assert_eq!(s, 404, "{err}");
    let (s, _) = call(
        Method::DELETE,
        &items,
        Some(json!({"namespace": ["users", "u2"], "key": "prefs"})),
    )
    .await;
    assert_eq!(s, 404, "a second delete finds nothing");

    let (s, _) = call(
        Method::PUT,
        &items,
        Some(json!({"namespace": ["tmp"], "key": "k", "value": {}, "ttl": 5})),
    )
    .await;
    assert_eq!(s, 204);
    let (_, item) = call(Method::GET, &format!("{items}?namespace=tmp&key=k"), None).await;
    assert!(
        item["expires_at"].is_string(),
        "a TTL in minutes gives an expiry: {item}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_ranks_the_items_whose_indexed_text_holds_its_words() {
    let base = start().await;
    let items = format!("{base}/store/items");
    for (key, value, index) in [
        (
            "once",
            json!({"text": "the rust book", "kind": "doc"}),
            None,
        ),
        (
            "twice",
            json!({"text": "rust and more rust", "kind": "doc"}),
            None,
        ),
        (
            "title",
            json!({"title": "Rust", "body": "beta"}),
            Some(json!(["title"])),
        ),
        ("off", json!({"text": "rust beta"}), Some(json!(false))),
        ("other", json!({"text": "python", "kind": "doc"}), None),
    ] {
        let mut body = json!({"namespace": ["q", "docs"], "key": key, "value": value});
        if let Some(i) = index {
            body["index"] = i;
        }
        let (s, err) = call(Method::PUT, &items, Some(body)).await;
        assert_eq!(s, 204, "{err}");
    }
    let search = |body: Value| {
        let url = format!("{base}/store/items/search");
        async move {
            let (s, got) = call(Method::POST, &url, Some(body)).await;
            assert_eq!(s, 200, "{got}");
            let items = got["items"].as_array().unwrap().clone();
            let scores: Vec<f64> = items.iter().map(|i| i["score"].as_f64().unwrap()).collect();
            assert!(scores.iter().all(|s| *s > 0.0), "{got}");
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {got}");
            let keys: Vec<String> = items
                .iter()
                .map(|i| i["key"].as_str().unwrap().to_string())
                .collect();
            keys
        }
    };
    assert_eq!(
        search(json!({"namespace_prefix": ["q"], "query": "RUST"})).await,
        ["title", "twice", "once"],
        "`off` is not indexed; the short title and the repeated word rank first"
    );
    assert_eq!(
        search(json!({"namespace_prefix": ["q"], "query": "beta"})).await,
        Vec::<String>::new(),
        "`title` indexes its title only, `off` nothing"
    );
    assert_eq!(
        search(
            json!({"namespace_prefix": ["q"], "query": "rust", "filter": {"kind": "doc"},
                      "limit": 1, "offset": 1})
        )
        .await,
        ["once"],
        "filtered, ranked, then paged"
    );
    let (_, plain) = call(
        Method::POST,
        &format!("{base}/store/items/search"),
        Some(json!({"namespace_prefix": ["q"], "query": " "})),
    )
    .await;
    assert_eq!(
        plain["items"].as_array().unwrap().len(),
        5,
        "a blank query is a plain search: {plain}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_store_requests_are_refused_naming_the_problem() {
    let base = start().await;
    let items = format!("{base}/store/items");
    let cases = [
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "k", "value": [1]}),
            "must be a JSON object",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a.b"], "key": "k", "value": {}}),
            "must not contain `.`",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": [], "key": "k", "value": {}}),
            "at least one label",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "", "value": {}}),
            "key must not be empty",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}),
            "must be positive",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "k", "value": {}, "colour": 1}),
            "unknown field",
        ),
        (
            Method::POST,
            format!("{base}/store/items/search"),
            json!({"query": "?!"}),
            "no word to look for",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "k", "value": {}, "index": ["a[x]"]}),
            "index path `a[x]` is malformed",
        ),
        (
            Method::PUT,
            items.clone(),
            json!({"namespace": ["a"], "key": "k", "value": {}, "index": true}),
            "`index` must be false, null or a list",
        ),
        (
            Method::POST,
            format!("{base}/store/items/search"),
            json!({"limit": 0}),
            "at least 1",
        ),
        (
            Method::POST,
            format!("{base}/store/items/search"),
            json!({"limit": 5000}),
            "maximum",
        ),
        (
            Method::POST,
            format!("{base}/store/namespaces"),
            json!({"max_depth": 0}),
            "max_depth",
        ),
    ];
    for (method, url, body, words) in cases {
        let (s, err) = call(method, &url, Some(body.clone())).await;
        assert!((400..500).contains(&s), "{body}: {s} {err}");
        assert!(err.to_string().contains(words), "{body}: {err}");
    }
    let (s, err) = call(Method::GET, &format!("{items}?namespace=a"), None).await;
    assert_eq!(s, 400, "a GET without a key: {err}");
    let resp = reqwest::Client::new()
        .get(format!("{items}?namespace=a&key=k"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        401,
        "the store is behind the same auth"
    );
}
