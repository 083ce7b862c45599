//! Who is calling, and what they own — LangGraph Platform's custom-auth model.
//!
//! A request's bearer token (the scheme in any case), or its `x-api-key` header (what LangGraph's
//! SDKs send for an API key; [`credential`]), names a [`Principal`]: a user and whether
//! they are an admin. Four modes: no auth (everyone is one admin, [`OPEN_USER`]), `--token` (one
//! admin token, [`TOKEN_USER`]), `--auth-file` (a JSON map of tokens to users), and JWTs
//! (`--jwt-secret` for HS256, or `--jwks FILE` for RS256/RS384/RS512/ES256/ES384 keys chosen by
//! `kid`; `sub` is the user, an `admin: true` claim makes an admin; `exp` and `nbf` are checked
//! when present, each allowed `--jwt-leeway` of clock skew).
//!
//! Ownership: a thread records the user who created it (`owner` in its record); a thread's
//! URLs (`/threads/{id}/…`: state, history, runs, copy, delete) answer 404 to any other user,
//! search lists only one's own threads, and an admin sees everything. Handlers read the caller
//! from the [`Principal`] this module puts in the request's extensions (nothing the client sends
//! can stand for it), and the store endpoints pass it on as the items' owner. The middleware's
//! check reads a thread's record before the handler does, and the thread can change hands in
//! between (deleted, or created by another user under the id the check found free): so a
//! handler that reads the record to act on it checks it again ([`caller_may_see`], the caller
//! kept for the request's task).
//!
//! The built-in users [`OPEN_USER`] and [`TOKEN_USER`] own what is written with auth off or with
//! `--token`. They are reserved: no non-admin of a token file or a JWT may have those names, and
//! [`Principal::may_see`] never matches them for a non-admin — so records written before auth was
//! turned on (or changed) stay the admins', as the docs say, with no migration of what is stored.

use super::errors::ApiError;
use super::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use planwright::ThreadId;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The user every caller is with auth off (an admin): the owner threads created then record.
pub const OPEN_USER: &str = "anonymous";

/// The admin user of `--token`: the owner threads created in that mode record.
pub const TOKEN_USER: &str = "admin";

/// The leeway on `exp` and `nbf` unless `--jwt-leeway` says otherwise: enough for the clocks of
/// a token issuer and this server kept by NTP (and a token used the second it is issued), far
/// from jsonwebtoken's 60 s default, so a token expired more than 5 s ago is refused.
pub const DEFAULT_JWT_LEEWAY: std::time::Duration = std::time::Duration::from_secs(5);

/// The largest `--jwt-leeway`.
const MAX_JWT_LEEWAY: std::time::Duration = std::time::Duration::from_secs(600);

/// Is `user` one of the built-in owners no authenticated non-admin may be?
fn reserved(user: &str) -> bool {
    user == OPEN_USER || user == TOKEN_USER
}

/// Parses `--jwt-leeway`: whole seconds from `0s` to `10m`.
pub fn parse_leeway(s: &str) -> Result<std::time::Duration, String> {
    let d = planwright::duration::parse(s, planwright::duration::BareUnit::Seconds)
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 0s, 5s, 1m)"))?;
    if d.subsec_nanos() != 0 {
        return Err(format!("`{s}`: JWT times are whole seconds (e.g. 5s)"));
    }
    if d > MAX_JWT_LEEWAY {
        return Err(format!(
            "`{s}` is more than 10m: tokens would outlive their `exp` by that much"
        ));
    }
    Ok(d)
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The user id (`sub` of a JWT, `user` of a token file entry).
    pub user: String,
    /// Sees and changes every user's threads and items.
    pub admin: bool,
}

impl Principal {
    /// May this caller see a thread whose record is `rec`? Admins see all; others their own —
    /// never a record owned by a built-in user ([`OPEN_USER`], [`TOKEN_USER`]) nor one with no
    /// owner.
    pub fn may_see(&self, rec: &serde_json::Value) -> bool {
        self.admin
            || rec
                .get("owner")
                .and_then(|o| o.as_str())
                .is_some_and(|o| o == self.user && !reserved(o))
    }
}

tokio::task_local! {
    /// The caller of the request this task serves, set by [`authenticate`] around its handler.
    static CALLER: Principal;
}

/// Whether the request this task serves may see the thread whose record is `rec`
/// ([`Principal::may_see`]); true outside a request (the server's own work: recovery, takeovers,
/// a queued run's start). Handlers check the record they act on with it, so a thread that
/// changed hands after [`authenticate`] let the request through is answered as absent.
pub fn caller_may_see(rec: &serde_json::Value) -> bool {
    CALLER.try_with(|p| p.may_see(rec)).unwrap_or(true)
}

/// The caller of the request this task serves (`None` outside a request: the server's own work).
pub fn caller() -> Option<Principal> {
    CALLER.try_with(Principal::clone).ok()
}

/// Runs `work` as a request of `caller` would (what [`authenticate`] sets around a handler; a
/// WebSocket's task, which outlives its request, sets it again).
pub async fn as_caller<F: std::future::Future>(caller: Principal, work: F) -> F::Output {
    CALLER.scope(caller, work).await
}

/// The readiness endpoint, open to callers without a token unless `--ok-requires-auth`.
pub const OK_PATH: &str = "/ok";

/// How callers are authenticated.
pub enum Auth {
    /// Nobody is asked: everyone is one admin.
    Open,
    /// One token, for one admin.
    Token(String),
    /// Tokens → users, from `--auth-file`.
    Tokens(HashMap<String, Principal>),
    /// JWTs checked against keys.
    Jwt {
        /// The keys.
        keys: Vec<JwtKey>,
        /// Seconds `exp` and `nbf` may be off.
        leeway: u64,
    },
}

/// A key JWTs may be signed with.
pub struct JwtKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Deserialize)]
struct TokenFile {
    tokens: HashMap<String, TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    user: String,
    #[serde(default)]
    admin: bool,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    admin: bool,
}

fn read(path: &Path, what: &str) -> Result<String, String> {
    crate::kit::read_capped(path, what, 1024 * 1024).map_err(|e| e.to_string())
}

impl Auth {
    /// The mode the flags ask for (at most one of them), or a message naming the problem;
    /// `jwt_leeway` is how far a JWT's `exp` and `nbf` may be off (whole seconds count).
    pub fn from_flags(
        token: Option<&str>,
        auth_file: Option<&Path>,
        jwt_secret: Option<&str>,
        jwks: Option<&Path>,
        jwt_leeway: std::time::Duration,
    ) -> Result<Auth, String> {
        let leeway = jwt_leeway.as_secs();
        let given = [
            token.is_some(),
            auth_file.is_some(),
            jwt_secret.is_some(),
            jwks.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(
                "use one of --token, --auth-file, --jwt-secret and --jwks, not several".into(),
            );
        }
        if let Some(t) = token {
            if t.trim().is_empty() {
                return Err("--token must not be empty".into());
            }
            return Ok(Auth::Token(t.to_string()));
        }
        if let Some(path) = auth_file {
            let text = read(path, "auth file")?;
            let file: TokenFile = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "auth file {}: expected {{\"tokens\": {{TOKEN: {{\"user\": …, \"admin\": …}}}}}}: {e}",
                    path.display()
                )
            })?;
            if file.tokens.is_empty() {
                return Err(format!("auth file {} names no token", path.display()));
            }
            let mut map = HashMap::new();
            for (token, e) in file.tokens {
                if token.trim().is_empty() || e.user.trim().is_empty() {
                    return Err(format!(
                        "auth file {}: tokens and users must not be empty",
                        path.display()
                    ));
                }
                if !e.admin && reserved(&e.user) {
                    return Err(format!(
                        "auth file {}: user `{}` is reserved: it owns what was written with auth \
                         off (`{OPEN_USER}`) or with --token (`{TOKEN_USER}`), which only admins \
                         see; name the user otherwise, or make it an admin",
                        path.display(),
                        e.user
                    ));
                }
                map.insert(
                    token,
                    Principal {
                        user: e.user,
                        admin: e.admin,
                    },
                );
            }
            return Ok(Auth::Tokens(map));
        }
        if let Some(secret) = jwt_secret {
            if secret.len() < 16 {
                return Err("--jwt-secret must be at least 16 bytes".into());
            }
            return Ok(Auth::Jwt {
                keys: vec![JwtKey {
                    kid: None,
                    alg: Algorithm::HS256,
                    key: DecodingKey::from_secret(secret.as_bytes()),
                }],
                leeway,
            });
        }
        if let Some(path) = jwks {
            let text = read(path, "JWKS file")?;
            let set: jsonwebtoken::jwk::JwkSet = serde_json::from_str(&text)
                .map_err(|e| format!("JWKS file {}: {e}", path.display()))?;
            let mut keys = Vec::new();
            for jwk in &set.keys {
                let key = DecodingKey::from_jwk(jwk)
                    .map_err(|e| format!("JWKS file {}: a key: {e}", path.display()))?;
                let alg = match jwk.common.key_algorithm {
                    Some(a) => <Algorithm as std::str::FromStr>::from_str(&a.to_string()).map_err(
                        |_| format!("JWKS file {}: unsupported alg {a}", path.display()),
                    )?,
                    None => match &jwk.algorithm {
                        jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => {
                            Algorithm::ES256
                        }
                        _ => Algorithm::RS256,
                    },
                };
                if alg == Algorithm::HS256 || alg == Algorithm::HS384 || alg == Algorithm::HS512 {
                    return Err(format!(
                        "JWKS file {}: symmetric keys are not accepted; use --jwt-secret",
                        path.display()
                    ));
                }
                keys.push(JwtKey {
                    kid: jwk.common.key_id.clone(),
                    alg,
                    key,
                });
            }
            if keys.is_empty() {
                return Err(format!("JWKS file {} holds no key", path.display()));
            }
            return Ok(Auth::Jwt { keys, leeway });
        }
        Ok(Auth::Open)
    }

    /// Who presents `bearer`, or why they are refused.
    pub fn authenticate(&self, bearer: Option<&str>) -> Result<Principal, String> {
        let admin = |user: &str| Principal {
            user: user.into(),
            admin: true,
        };
        match self {
            Auth::Open => Ok(admin(OPEN_USER)),
            Auth::Token(t) => match bearer {
                Some(b) if constant_eq(b, t) => Ok(admin(TOKEN_USER)),
                _ => Err(
                    "missing or wrong `Authorization: Bearer TOKEN` (or `x-api-key: TOKEN`)".into(),
                ),
            },
            Auth::Tokens(map) => bearer
                .and_then(|b| map.iter().find(|(t, _)| constant_eq(b, t)))
                .map(|(_, p)| p.clone())
                .ok_or_else(|| "missing or unknown bearer token".into()),
            Auth::Jwt { keys, leeway } => {
                let token =
                    bearer.ok_or("missing `Authorization: Bearer JWT` (or `x-api-key: JWT`)")?;
                jwt_principal(token, keys, *leeway)
            }
        }
    }
}

/// The caller a JWT names, once its header, signature, `exp`, `nbf` and `sub` are checked.
fn jwt_principal(token: &str, keys: &[JwtKey], leeway: u64) -> Result<Principal, String> {
    // `alg: none` (or any algorithm jsonwebtoken does not know) fails here.
    let header = decode_header(token).map_err(|e| format!("malformed JWT: {e}"))?;
    let key = keys
        .iter()
        .find(|k| k.alg == header.alg && (header.kid.is_none() || k.kid == header.kid))
        .ok_or_else(|| match &header.kid {
            Some(kid) => format!(
                "JWT refused: no key `{kid}` for a JWT signed with {:?}",
                header.alg
            ),
            None => format!("JWT refused: no key for a JWT signed with {:?}", header.alg),
        })?;
    let mut v = Validation::new(key.alg);
    v.required_spec_claims = ["sub".to_string()].into_iter().collect();
    v.validate_aud = false;
    v.validate_exp = true;
    v.validate_nbf = true;
    v.leeway = leeway;
    let data = decode::<Claims>(token, &key.key, &v).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind as K;
        match e.kind() {
            K::ExpiredSignature => {
                format!("JWT refused: expired (`exp` is more than {leeway} s ago)")
            }
            K::ImmatureSignature => {
                format!("JWT refused: not valid yet (`nbf` is more than {leeway} s ahead)")
            }
            K::InvalidSignature => "JWT refused: bad signature".to_string(),
            K::MissingRequiredClaim(c) => format!("JWT refused: no `{c}` claim"),
            _ => format!("JWT refused: {e}"),
        }
    })?;
    let Claims { sub, admin } = data.claims;
    let sub = sub.ok_or("JWT refused: no `sub` claim")?;
    if sub.trim().is_empty() {
        return Err("JWT refused: empty `sub`".into());
    }
    if !admin && reserved(&sub) {
        return Err(format!(
            "JWT refused: `sub` `{sub}` is reserved for what is written with auth off or \
             --token (only admins see it)"
        ));
    }
    Ok(Principal { user: sub, admin })
}

/// Compares two secrets in time independent of where they differ.
fn constant_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The thread a request's path names (`/threads/{id}` or below; not `/threads/search`).
fn thread_of_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/threads/")?;
    let id = rest.split('/').next()?;
    // `/threads/search`, `/threads/count` and `/threads/prune` name collections, not threads.
    let collection = matches!(id, "search" | "count" | "prune") && !rest.contains('/');
    if id.is_empty() || collection {
        return None;
    }
    let decoded = percent_decode(id);
    Some(decoded)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
            if let Some(Ok(b)) = hex.map(|h| u8::from_str_radix(h, 16)) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token a request presents: `Authorization: Bearer TOKEN`, else `x-api-key: TOKEN` (the
/// header LangGraph's SDKs send an API key in), for every mode (`--token`, `--auth-file`, JWTs).
pub fn credential(req: &Request) -> Option<&str> {
    super::errors::bearer(req).or_else(|| {
        req.headers()
            .get("x-api-key")?
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|k| !k.is_empty())
    })
}

/// Middleware: authenticates the caller (401 when refused), keeps other users out of a
/// thread's URLs (404), and passes the caller on to handlers. `GET /ok` is open unless
/// `--ok-requires-auth`: a health probe has no token, so a caller refused there goes on without a
/// [`Principal`] (and `/ok` tells it only the status).
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let principal = match state.auth.authenticate(credential(&req)) {
        Ok(p) => p,
        Err(_) if req.uri().path() == OK_PATH && !state.ok_requires_auth => {
            return next.run(req).await
        }
        Err(why) => return ApiError(StatusCode::UNAUTHORIZED, why).into_response(),
    };
    if !principal.admin {
        if let Some(id) = thread_of_path(req.uri().path()) {
            let rec = state
                .checkpointer
                .thread_metadata(&ThreadId::new(&id))
                .await;
            match rec {
                Ok(Some(rec)) if !principal.may_see(&rec) => {
                    return ApiError::not_found(format!("thread `{id}` does not exist"))
                        .into_response()
                }
                Err(e) => return ApiError::internal(e).into_response(),
                _ => {}
            }
        }
    }
    req.extensions_mut().insert(principal.clone());
    CALLER.scope(principal, next.run(req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_thread_that_changed_hands_after_the_check_is_absent_to_the_handler() {
        let args = super::super::ServeArgs {
            checkpoint: "memory:".into(),
            model: "offline".into(),
            ..super::super::ServeArgs::default()
        };
        let st = super::super::state(&args).await.unwrap();
        // The auth check found `t` free (or Bob's); by the time Bob's handler reads it, Ann
        // owns it.
        let t = ThreadId::new("t");
        let ann = serde_json::json!({"owner": "ann", "created_at": "x", "metadata": {}});
        assert!(st.checkpointer.create_thread(&t, ann).await.unwrap());
        let as_user = |user: &str, admin: bool| Principal {
            user: user.into(),
            admin,
        };
        let bob = CALLER
            .scope(
                as_user("bob", false),
                super::super::thread_records::existing(&st, "t"),
            )
            .await;
        let e = bob.unwrap_err();
        assert_eq!(e.0, StatusCode::NOT_FOUND, "{}", e.1);
        for (who, admin) in [("ann", false), ("root", true)] {
            let seen = CALLER
                .scope(
                    as_user(who, admin),
                    super::super::thread_records::existing(&st, "t"),
                )
                .await;
            assert!(seen.is_ok(), "{who}");
        }
        // The server's own work, outside any request, reads it.
        assert!(super::super::thread_records::existing(&st, "t")
            .await
            .is_ok());
    }

    #[test]
    fn an_api_key_header_stands_for_a_bearer_token() {
        let req = |headers: &[(&str, &str)]| {
            let mut b = axum::http::Request::builder().uri("/threads");
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(axum::body::Body::empty()).unwrap()
        };
        assert_eq!(credential(&req(&[("x-api-key", "k1")])), Some("k1"));
        assert_eq!(credential(&req(&[("X-Api-Key", " k1 ")])), Some("k1"));
        let both = req(&[("authorization", "Bearer b1"), ("x-api-key", "k1")]);
        assert_eq!(credential(&both), Some("b1"), "the bearer token first");
        assert_eq!(credential(&req(&[])), None);
        assert_eq!(credential(&req(&[("x-api-key", " ")])), None);
        let auth = Auth::Token("k1".into());
        let key = req(&[("x-api-key", "k1")]);
        assert!(auth.authenticate(credential(&key)).unwrap().admin);
        let wrong = req(&[("x-api-key", "k2")]);
        assert!(auth.authenticate(credential(&wrong)).is_err());
    }

    #[test]
    fn thread_paths_are_recognised() {
        assert_eq!(thread_of_path("/threads/a-1/state").as_deref(), Some("a-1"));
        assert_eq!(thread_of_path("/threads/a-1").as_deref(), Some("a-1"));
        assert_eq!(thread_of_path("/threads/search"), None);
        assert_eq!(thread_of_path("/threads/count"), None);
        assert_eq!(thread_of_path("/threads/prune"), None);
        assert_eq!(
            thread_of_path("/threads/count/state").as_deref(),
            Some("count")
        );
        assert_eq!(
            thread_of_path("/threads/search/runs").as_deref(),
            Some("search")
        );
        assert_eq!(thread_of_path("/threads/a%3Ab").as_deref(), Some("a:b"));
        assert_eq!(thread_of_path("/threads/a%3").as_deref(), Some("a%3"));
        assert_eq!(thread_of_path("/threads/a%xé").as_deref(), Some("a%xé"));
        assert_eq!(thread_of_path("/threads/a%+4").as_deref(), Some("a%+4"));
        assert_eq!(thread_of_path("/threads"), None);
        assert_eq!(thread_of_path("/store/items"), None);
    }

    #[test]
    fn one_mode_at_a_time_and_bad_files_are_named() {
        let l = DEFAULT_JWT_LEEWAY;
        assert!(Auth::from_flags(Some("a"), None, Some("0123456789abcdef"), None, l).is_err());
        assert!(Auth::from_flags(None, None, Some("short"), None, l).is_err());
        let e = Auth::from_flags(None, Some(Path::new("/nonexistent")), None, None, l)
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent"), "{e}");
        assert!(matches!(
            Auth::from_flags(None, None, None, None, l),
            Ok(Auth::Open)
        ));
    }

    #[test]
    fn the_built_in_owners_are_no_non_admins() {
        let user = |name: &str| Principal {
            user: name.into(),
            admin: false,
        };
        for owner in [OPEN_USER, TOKEN_USER] {
            let rec = serde_json::json!({"owner": owner});
            assert!(!user(owner).may_see(&rec), "{owner}");
            assert!(Principal {
                user: "ops".into(),
                admin: true
            }
            .may_see(&rec));
        }
        assert!(user("ann").may_see(&serde_json::json!({"owner": "ann"})));
        assert!(!user("ann").may_see(&serde_json::json!({"owner": "bob"})));
        assert!(!user("ann").may_see(&serde_json::json!({})), "no owner");
        // A token file may not give a non-admin a built-in name; an admin may have it.
        let dir = std::env::temp_dir().join(format!("planwright-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, admin, ok) in [
            ("anonymous", false, false),
            ("admin", false, false),
            ("anonymous", true, true),
        ] {
            let path = dir.join(format!("{name}-{admin}.json"));
            let file = serde_json::json!({"tokens": {"t": {"user": name, "admin": admin}}});
            std::fs::write(&path, file.to_string()).unwrap();
            let r = Auth::from_flags(None, Some(&path), None, None, DEFAULT_JWT_LEEWAY);
            match r {
                Ok(_) => assert!(ok, "{name} admin={admin} accepted"),
                Err(e) => {
                    assert!(!ok, "{e}");
                    assert!(e.contains(&format!("`{name}` is reserved")), "{e}");
                }
            }
        }
    }

    #[test]
    fn the_leeway_flag_takes_whole_seconds_up_to_ten_minutes() {
        use std::time::Duration;
        assert_eq!(parse_leeway("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_leeway("0"), Ok(Duration::ZERO));
        assert_eq!(parse_leeway("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_leeway("10m"), Ok(Duration::from_secs(600)));
        for bad in ["1.5s", "500ms", "11m", "-1s", "soon", ""] {
            assert!(parse_leeway(bad).is_err(), "{bad}");
        }
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: crate::serve::ServeArgs,
        }
        let cli = <Cli as clap::Parser>::parse_from(["serve"]);
        assert_eq!(cli.serve.jwt_leeway, DEFAULT_JWT_LEEWAY, "flag default");
    }

    /// JWTs with each claim wrong, against a shared secret and a JWKS file.
    mod jwt {
        use super::super::*;
        use jsonwebtoken::{encode, EncodingKey, Header};
        use serde_json::{json, Value};
        use std::time::Duration;

        const SECRET: &str = "a-shared-secret-of-32-bytes-long";

        fn now() -> i64 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
        }

        fn fixtures() -> std::path::PathBuf {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth")
        }

        fn hs(claims: Value) -> String {
            encode(
                &Header::default(),
                &claims,
                &EncodingKey::from_secret(SECRET.as_bytes()),
            )
            .unwrap()
        }

        fn rs(kid: Option<&str>, claims: Value) -> String {
            let pem = std::fs::read(fixtures().join("test-rs256.pem")).unwrap();
            let mut h = Header::new(Algorithm::RS256);
            h.kid = kid.map(String::from);
            encode(&h, &claims, &EncodingKey::from_rsa_pem(&pem).unwrap()).unwrap()
        }

        fn secret(leeway: u64) -> Auth {
            Auth::from_flags(None, None, Some(SECRET), None, Duration::from_secs(leeway)).unwrap()
        }

        fn refused(auth: &Auth, token: &str, words: &str) {
            match auth.authenticate(Some(token)) {
                Ok(p) => panic!("accepted as {p:?}; expected refusal with `{words}`"),
                Err(e) => assert!(e.contains(words), "`{e}` does not say `{words}`"),
            }
        }

        fn accepted(auth: &Auth, token: &str) -> Principal {
            auth.authenticate(Some(token))
                .unwrap_or_else(|e| panic!("refused: {e}"))
        }

        #[test]
        fn exp_and_nbf_are_checked_within_the_leeway() {
            let a = secret(5);
            let t = now();
            let ok = accepted(&a, &hs(json!({"sub": "ann", "exp": t + 3600})));
            assert_eq!(
                ok,
                Principal {
                    user: "ann".into(),
                    admin: false
                }
            );
            refused(
                &a,
                &hs(json!({"sub": "ann", "exp": t + 3600, "nbf": t + 3600})),
                "not valid yet",
            );
            accepted(
                &a,
                &hs(json!({"sub": "ann", "exp": t + 3600, "nbf": t + 2})),
            );
            refused(&a, &hs(json!({"sub": "ann", "exp": t - 60})), "expired");
            accepted(&a, &hs(json!({"sub": "ann", "exp": t - 2})));
            // No leeway: a token is refused the second after its `exp`.
            let strict = secret(0);
            refused(&strict, &hs(json!({"sub": "ann", "exp": t - 2})), "expired");
            refused(
                &strict,
                &hs(json!({"sub": "ann", "exp": t + 3600, "nbf": t + 2})),
                "not valid yet",
            );
            // A wide leeway lets the 30-second-old token through.
            accepted(&secret(60), &hs(json!({"sub": "ann", "exp": t - 30})));
        }

        #[test]
        fn signature_algorithm_and_sub_are_checked() {
            let a = secret(5);
            let exp = now() + 3600;
            let forged = encode(
                &Header::default(),
                &json!({"sub": "ops", "admin": true, "exp": exp}),
                &EncodingKey::from_secret(b"another-secret-of-32-bytes-long!"),
            )
            .unwrap();
            refused(&a, &forged, "bad signature");
            // A signature cut off, or a payload swapped under a valid signature.
            let good = hs(json!({"sub": "ann", "exp": exp}));
            let cut = &good[..good.len() - 4];
            assert!(a.authenticate(Some(cut)).is_err());
            let other = hs(json!({"sub": "ops", "admin": true, "exp": exp}));
            let parts: Vec<&str> = good.split('.').collect();
            let swapped = format!(
                "{}.{}.{}",
                parts[0],
                other.split('.').nth(1).unwrap(),
                parts[2]
            );
            refused(&a, &swapped, "bad signature");
            // `alg: none`, unsigned.
            use base64::Engine as _;
            let b64 =
                |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
            let none = format!(
                "{}.{}.",
                b64(json!({"alg": "none", "typ": "JWT"})),
                b64(json!({"sub": "ops", "admin": true, "exp": exp}))
            );
            refused(&a, &none, "malformed JWT");
            // An RS256 token at an HS256 server.
            refused(
                &a,
                &rs(Some("test-1"), json!({"sub": "ann", "exp": exp})),
                "no key",
            );
            // `sub`: missing, empty, not a string, or a built-in owner for a non-admin.
            refused(&a, &hs(json!({"exp": exp})), "no `sub` claim");
            refused(&a, &hs(json!({"sub": "", "exp": exp})), "empty `sub`");
            refused(&a, &hs(json!({"sub": "  ", "exp": exp})), "empty `sub`");
            refused(&a, &hs(json!({"sub": 42, "exp": exp})), "JWT refused");
            refused(&a, &hs(json!({"sub": "anonymous", "exp": exp})), "reserved");
            refused(&a, &hs(json!({"sub": "admin", "exp": exp})), "reserved");
            let op = accepted(&a, &hs(json!({"sub": "admin", "admin": true, "exp": exp})));
            assert!(op.admin);
            refused(
                &a,
                &hs(json!({"sub": "ann", "admin": "yes", "exp": exp})),
                "JWT refused",
            );
            refused(&a, "not-a-jwt", "malformed JWT");
        }

        #[test]
        fn a_jwks_server_takes_its_keys_only() {
            let a = Auth::from_flags(
                None,
                None,
                None,
                Some(&fixtures().join("test-jwks.json")),
                DEFAULT_JWT_LEEWAY,
            )
            .unwrap();
            let t = now();
            let claims = json!({"sub": "ann", "exp": t + 3600});
            assert_eq!(
                accepted(&a, &rs(Some("test-1"), claims.clone())).user,
                "ann"
            );
            accepted(&a, &rs(None, claims.clone()));
            refused(&a, &rs(Some("test-2"), claims.clone()), "no key `test-2`");
            // HS256 signed with anything (the public key's bytes included) finds no key.
            refused(&a, &hs(claims), "no key for a JWT signed with HS256");
            refused(
                &a,
                &rs(
                    Some("test-1"),
                    json!({"sub": "ann", "exp": t + 3600, "nbf": t + 600}),
                ),
                "not valid yet",
            );
            refused(
                &a,
                &rs(Some("test-1"), json!({"sub": "ann", "exp": t - 600})),
                "expired",
            );
        }
    }
}
