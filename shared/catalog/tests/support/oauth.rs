//! OAuth 2 client credentials on loopback: an authorization server that
//! issues tokens (and counts every request for one), and an OpenAPI service,
//! `vault`, that accepts only the tokens it issued.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use executor_catalog::CatalogConfig;
use serde_json::{Value, json};

use super::serve as listen;

pub const CLIENT_ID: &str = "executor ci";
pub const CLIENT_SECRET: &str = "cs-4e8a/b1+c9=d2";
pub const SECRET_VAR: &str = "EXECUTOR_CATALOG_TEST_CLIENT_SECRET";
pub const WRONG_SECRET_VAR: &str = "EXECUTOR_CATALOG_TEST_WRONG_CLIENT_SECRET";
pub const LIFETIME_SECONDS: u64 = 3600;

pub fn set_secrets() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, under `Once`, before any test of the binary reads the
    // environment, with names only these tests use.
    ONCE.call_once(|| unsafe {
        std::env::set_var(SECRET_VAR, CLIENT_SECRET);
        std::env::set_var(WRONG_SECRET_VAR, "not-the-secret");
    });
}

const VAULT_SPEC: &str = r##"
openapi: 3.1.0
info: {title: vault, version: "1"}
paths:
  /items:
    get: {tags: [items], operationId: listItems, responses: {"200": {description: ok}}}
    post:
      tags: [items]
      operationId: addItem
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: added}}
  /whoami:
    get: {tags: [debug], operationId: whoami, summary: Echoes the caller's token, responses: {"200": {description: ok}}}
  /leak:
    get: {tags: [debug], operationId: leak, summary: Refuses and echoes the caller's token, responses: {"403": {description: no}}}
"##;

/// The authorization server and the service it protects, sharing the set of live tokens.
#[derive(Clone, Default)]
pub struct Fixture {
    pub token_requests: Arc<AtomicUsize>,
    pub issued: Arc<Mutex<Vec<String>>>,
    pub live: Arc<Mutex<HashSet<String>>>,
    /// What each token request asked for: (client id, scope).
    pub asked: Arc<Mutex<Vec<(String, String)>>>,
    /// The token each accepted service request carried.
    pub seen: Arc<Mutex<Vec<String>>>,
    pub added: Arc<AtomicUsize>,
    /// The service refuses every token, new ones too.
    pub refuse_all: Arc<AtomicBool>,
    /// The authorization server refuses the client from now on.
    pub refuse_clients: Arc<AtomicBool>,
}

impl Fixture {
    pub fn issued(&self) -> Vec<String> {
        self.issued.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }

    /// The service stops accepting `token`, as after a revocation.
    pub fn revoke(&self, token: &str) {
        self.live.lock().unwrap().remove(token);
    }
}

async fn token(State(f): State<Fixture>, headers: HeaderMap, body: String) -> Response {
    f.token_requests.fetch_add(1, Ordering::SeqCst);
    // Wide enough that callers racing for a new token overlap; never part of an assertion.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_default();
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
    let decoded = basic.and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let decoded = decoded.map(|d| String::from_utf8(d).unwrap()).unwrap_or_default();
    let (id, secret) = decoded.split_once(':').unwrap_or_default();
    let decode =
        |text: &str| url::form_urlencoded::parse(format!("x={text}").as_bytes()).next().unwrap().1.into_owned();
    let (id, secret) = (decode(id), decode(secret));
    f.asked.lock().unwrap().push((id.clone(), field("scope")));
    if field("grant_type") != "client_credentials" {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"}))).into_response();
    }
    if id != CLIENT_ID || secret != CLIENT_SECRET || f.refuse_clients.load(Ordering::SeqCst) {
        // A careless server that repeats what it was sent.
        let echo = json!({"error": "invalid_client", "error_description": format!("unknown client {id}:{secret}")});
        return (StatusCode::UNAUTHORIZED, Json(echo)).into_response();
    }
    let mut issued = f.issued.lock().unwrap();
    let value = format!("cc-token-{}-5f0e2d9a7b", issued.len() + 1);
    issued.push(value.clone());
    f.live.lock().unwrap().insert(value.clone());
    Json(json!({"access_token": value, "token_type": "Bearer", "expires_in": LIFETIME_SECONDS})).into_response()
}

/// The bearer token of a request the service accepts.
fn accepted(f: &Fixture, headers: &HeaderMap) -> Option<String> {
    let token = headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ")?.to_owned();
    if f.refuse_all.load(Ordering::SeqCst) {
        return None;
    }
    f.live.lock().unwrap().contains(&token).then(|| {
        f.seen.lock().unwrap().push(token.clone());
        token
    })
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, "invalid or expired token").into_response()
}

pub async fn start() -> (Fixture, String) {
    let fixture = Fixture::default();
    let router = Router::new()
        .route("/oauth/token", post(token))
        .route(
            "/api/openapi.yaml",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(_) => VAULT_SPEC.into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/items",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(_) => Json(json!([{"name": "key"}])).into_response(),
                    None => unauthorized(),
                }
            })
            .post(|State(f): State<Fixture>, h: HeaderMap, Json(body): Json<Value>| async move {
                match accepted(&f, &h) {
                    Some(_) => {
                        f.added.fetch_add(1, Ordering::SeqCst);
                        (StatusCode::CREATED, Json(body)).into_response()
                    }
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/whoami",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(token) => Json(json!({"token": token})).into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/leak",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(token) => (StatusCode::FORBIDDEN, format!("token {token} may not read this")).into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .with_state(fixture.clone());
    (fixture, listen(router).await)
}

pub fn config(base: &str, secret_var: &str, dir: &std::path::Path) -> CatalogConfig {
    let toml = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "vault"
        kind = "openapi"
        spec = "{base}/api/openapi.yaml"
        base_url = "{base}/api"
        auth = {{ type = "oauth2_client_credentials", token_url = "{base}/oauth/token", client_id = "{CLIENT_ID}", client_secret = "env:{secret_var}", scopes = ["items:read", "items:write"] }}
        "#
    );
    CatalogConfig::from_toml_str(&toml, &dir.join("executor.toml")).unwrap()
}
