//! Who is calling, and what they own — LangGraph Platform's custom-auth model.
//!
//! A request's bearer token (the scheme in any case) names a [`Principal`]: a user and whether
//! they are an admin. Four modes: no auth (everyone is one admin), `--token` (one admin token),
//! `--auth-file` (a JSON map of tokens to users), and JWTs (`--jwt-secret` for HS256, or
//! `--jwks FILE` for RS256/RS384/RS512/ES256/ES384 keys chosen by `kid`; `sub` is the user, an
//! `admin: true` claim makes an admin, `exp` is checked when present).
//!
//! Ownership: a thread records the user who created it (`owner` in its record); a thread's
//! URLs (`/threads/{id}/…`: state, history, runs, copy, delete) answer 404 to any other user,
//! search lists only one's own threads, and an admin sees everything. Store items carry their
//! owner through the `x-planwright-user` header this module sets (never the client's).

use super::errors::ApiError;
use super::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use planwright::ThreadId;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The header carrying the authenticated non-admin user to handlers (set here, never trusted
/// from the client).
pub const USER_HEADER: &str = "x-planwright-user";

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The user id (`sub` of a JWT, `user` of a token file entry).
    pub user: String,
    /// Sees and changes every user's threads and items.
    pub admin: bool,
}

impl Principal {
    /// May this caller see a thread whose record is `rec`? Admins see all; others their own.
    pub fn may_see(&self, rec: &serde_json::Value) -> bool {
        self.admin || rec.get("owner").and_then(|o| o.as_str()) == Some(self.user.as_str())
    }
}

/// How callers are authenticated.
pub enum Auth {
    /// Nobody is asked: everyone is one admin.
    Open,
    /// One token, for one admin.
    Token(String),
    /// Tokens → users, from `--auth-file`.
    Tokens(HashMap<String, Principal>),
    /// JWTs checked against keys.
    Jwt(Vec<JwtKey>),
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
    sub: String,
    #[serde(default)]
    admin: bool,
}

fn read(path: &Path, what: &str) -> Result<String, String> {
    crate::kit::read_capped(path, what, 1024 * 1024).map_err(|e| e.to_string())
}

impl Auth {
    /// The mode the flags ask for (at most one of them), or a message naming the problem.
    pub fn from_flags(
        token: Option<&str>,
        auth_file: Option<&Path>,
        jwt_secret: Option<&str>,
        jwks: Option<&Path>,
    ) -> Result<Auth, String> {
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
            return Ok(Auth::Jwt(vec![JwtKey {
                kid: None,
                alg: Algorithm::HS256,
                key: DecodingKey::from_secret(secret.as_bytes()),
            }]));
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
            return Ok(Auth::Jwt(keys));
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
            Auth::Open => Ok(admin("anonymous")),
            Auth::Token(t) => match bearer {
                Some(b) if constant_eq(b, t) => Ok(admin("admin")),
                _ => Err("missing or wrong `Authorization: Bearer TOKEN`".into()),
            },
            Auth::Tokens(map) => bearer
                .and_then(|b| map.iter().find(|(t, _)| constant_eq(b, t)))
                .map(|(_, p)| p.clone())
                .ok_or_else(|| "missing or unknown bearer token".into()),
            Auth::Jwt(keys) => {
                let token = bearer.ok_or("missing `Authorization: Bearer JWT`")?;
                let header = decode_header(token).map_err(|e| format!("malformed JWT: {e}"))?;
                let key = keys
                    .iter()
                    .find(|k| k.alg == header.alg && (header.kid.is_none() || k.kid == header.kid))
                    .ok_or_else(|| format!("no key for a JWT signed with {:?}", header.alg))?;
                let mut v = Validation::new(key.alg);
                v.required_spec_claims = ["sub".to_string()].into_iter().collect();
                v.validate_aud = false;
                let data = decode::<Claims>(token, &key.key, &v)
                    .map_err(|e| format!("JWT refused: {e}"))?;
                if data.claims.sub.trim().is_empty() {
                    return Err("JWT refused: empty `sub`".into());
                }
                Ok(Principal {
                    user: data.claims.sub,
                    admin: data.claims.admin,
                })
            }
        }
    }
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
    if id.is_empty() || (id == "search" && !rest.contains('/')) {
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
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
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

/// Middleware: authenticates the caller (401 when refused), keeps other users out of a
/// thread's URLs (404), and passes the caller on to handlers.
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    req.headers_mut().remove(USER_HEADER);
    let principal = match state.auth.authenticate(super::errors::bearer(&req)) {
        Ok(p) => p,
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
        if let Ok(v) = HeaderValue::from_str(&principal.user) {
            req.headers_mut().insert(USER_HEADER, v);
        }
    }
    req.extensions_mut().insert(principal);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_paths_are_recognised() {
        assert_eq!(thread_of_path("/threads/a-1/state").as_deref(), Some("a-1"));
        assert_eq!(thread_of_path("/threads/a-1").as_deref(), Some("a-1"));
        assert_eq!(thread_of_path("/threads/search"), None);
        assert_eq!(
            thread_of_path("/threads/search/runs").as_deref(),
            Some("search")
        );
        assert_eq!(thread_of_path("/threads/a%3Ab").as_deref(), Some("a:b"));
        assert_eq!(thread_of_path("/threads"), None);
        assert_eq!(thread_of_path("/store/items"), None);
    }

    #[test]
    fn one_mode_at_a_time_and_bad_files_are_named() {
        assert!(Auth::from_flags(Some("a"), None, Some("0123456789abcdef"), None).is_err());
        assert!(Auth::from_flags(None, None, Some("short"), None).is_err());
        let e = Auth::from_flags(None, Some(Path::new("/nonexistent")), None, None)
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent"), "{e}");
        assert!(matches!(
            Auth::from_flags(None, None, None, None),
            Ok(Auth::Open)
        ));
    }
}
