//! Per-owner OAuth 2 on loopback: an authorization server with a consent
//! page (an HTML form with an "Allow" button), the authorization code grant
//! with a PKCE check, and refresh tokens that rotate; a refresh token used
//! twice revokes its whole family, as strict providers do. Beside it, `crm`,
//! an OpenAPI service that accepts only the live access tokens it issued and
//! counts the calls it answers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Form, Json, Router};
use base64::Engine as _;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::serve as listen;

pub const CLIENT_ID: &str = "executor-web";
pub const CLIENT_SECRET: &str = "ac-secret-9d1f7e";
pub const SECRET_VAR: &str = "EXECUTOR_CATALOG_TEST_AUTHCODE_SECRET";
/// Seconds an access token lives.
pub const LIFETIME_SECONDS: u64 = 3600;

pub const CRM_SPEC: &str = r##"
openapi: 3.1.0
info: {title: crm, version: "1"}
paths:
  /contacts:
    get: {tags: [contacts], operationId: list, responses: {"200": {description: ok}}}
"##;

pub fn set_secret() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, under `Once`, before any test of the binary reads it, with a name only these tests use.
    ONCE.call_once(|| unsafe { std::env::set_var(SECRET_VAR, CLIENT_SECRET) });
}

/// A code waiting for its exchange.
struct Grant {
    challenge: String,
    redirect_uri: String,
    scope: String,
    account: usize,
}

#[derive(Default)]
struct Families {
    /// Refresh token -> (family, spent).
    refresh: HashMap<String, (usize, bool)>,
    /// Access token -> family.
    access: HashMap<String, usize>,
    revoked: HashSet<usize>,
}

#[derive(Clone, Default)]
pub struct AuthServer {
    codes: Arc<Mutex<HashMap<String, Grant>>>,
    families: Arc<Mutex<Families>>,
    issued: Arc<AtomicUsize>,
    pub consents: Arc<AtomicUsize>,
    pub code_exchanges: Arc<AtomicUsize>,
    pub refreshes: Arc<AtomicUsize>,
    /// Spent refresh tokens sent again (each revoked a family).
    pub replays: Arc<AtomicUsize>,
    /// Calls `crm` answered with data.
    pub crm_calls: Arc<AtomicUsize>,
    /// The access token of each call `crm` answered (its text names the account: `at-<account>-...`).
    pub crm_tokens: Arc<Mutex<Vec<String>>>,
    /// Every token text issued, access and refresh: what must never be stored or logged in clear.
    pub secrets: Arc<Mutex<Vec<String>>>,
    /// The scope each authorization asked for.
    pub scopes: Arc<Mutex<Vec<String>>>,
}

impl AuthServer {
    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }

    pub fn revoked_families(&self) -> usize {
        self.families.lock().unwrap().revoked.len()
    }

    /// Revoke every family, as a user removing the app's access at the provider.
    pub fn revoke_all(&self) {
        let mut families = self.families.lock().unwrap();
        let all: Vec<usize> = families.access.values().copied().collect();
        families.revoked.extend(all);
    }

    pub fn secrets(&self) -> Vec<String> {
        self.secrets.lock().unwrap().clone()
    }

    /// A new access token (and refresh token) in `family`.
    fn issue(&self, families: &mut Families, family: usize, account: usize, scope: &str) -> serde_json::Value {
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let access = format!("at-{account}-{n}-c1d9e8f7a6");
        let refresh = format!("rt-{account}-{n}-0b4c7d2e5f");
        families.access.insert(access.clone(), family);
        families.refresh.insert(refresh.clone(), (family, false));
        self.secrets.lock().unwrap().extend([access.clone(), refresh.clone()]);
        json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": LIFETIME_SECONDS,
            "refresh_token": refresh,
            "scope": scope,
        })
    }
}

fn refuse(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"error": error}))).into_response()
}

/// The consent page: what the app asks for, and Allow.
async fn consent(State(server): State<AuthServer>, Query(query): Query<HashMap<String, String>>) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    if field("response_type") != "code" || field("client_id") != CLIENT_ID || field("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    server.scopes.lock().unwrap().push(field("scope"));
    let hidden: String = ["redirect_uri", "state", "code_challenge", "scope"]
        .iter()
        .map(|name| format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", html_escape(&field(name))))
        .collect();
    Html(format!(
        "<!doctype html><html><body><main><h1>Allow executor-web to read your contacts?</h1>\
         <p>Scopes: {}</p><form method=\"post\" action=\"/authorize\">{hidden}\
         <button type=\"submit\">Allow</button></form></main></body></html>",
        html_escape(&field("scope"))
    ))
    .into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;")
}

/// "Allow": a code for a new account, sent back to the client's redirect URI.
async fn allow(State(server): State<AuthServer>, Form(form): Form<HashMap<String, String>>) -> Response {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let account = server.consents.fetch_add(1, Ordering::SeqCst) + 1;
    let code = format!("code-{account}-{}", server.issued.load(Ordering::SeqCst));
    let grant = Grant {
        challenge: field("code_challenge"),
        redirect_uri: field("redirect_uri"),
        scope: field("scope"),
        account,
    };
    server.codes.lock().unwrap().insert(code.clone(), grant);
    let mut target = url::Url::parse(&field("redirect_uri")).unwrap();
    target.query_pairs_mut().append_pair("code", &code).append_pair("state", &field("state"));
    Redirect::to(target.as_str()).into_response()
}

async fn token(State(server): State<AuthServer>, headers: HeaderMap, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    if basic != Some(expected.as_str()) {
        return refuse(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    match field("grant_type").as_str() {
        "authorization_code" => {
            server.code_exchanges.fetch_add(1, Ordering::SeqCst);
            let Some(grant) = server.codes.lock().unwrap().remove(&field("code")) else {
                return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(field("code_verifier").as_bytes()));
            if challenge != grant.challenge || field("redirect_uri") != grant.redirect_uri {
                return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            let mut families = server.families.lock().unwrap();
            let family = families.access.len() + families.revoked.len() + 1000 * grant.account;
            Json(server.issue(&mut families, family, grant.account, &grant.scope)).into_response()
        }
        "refresh_token" => {
            server.refreshes.fetch_add(1, Ordering::SeqCst);
            // Wide enough that refreshers racing each other overlap; never part of an assertion.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut families = server.families.lock().unwrap();
            let presented = field("refresh_token");
            let Some((family, spent)) = families.refresh.get(&presented).copied() else {
                return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            if spent {
                // A replayed refresh token: the whole family is revoked.
                server.replays.fetch_add(1, Ordering::SeqCst);
                families.revoked.insert(family);
                return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            if families.revoked.contains(&family) {
                return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            families.refresh.insert(presented, (family, true));
            Json(server.issue(&mut families, family, family / 1000, "contacts.read")).into_response()
        }
        _ => refuse(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
}

async fn contacts(State(server): State<AuthServer>, headers: HeaderMap) -> Response {
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let families = server.families.lock().unwrap();
    let live = token.and_then(|t| families.access.get(t)).is_some_and(|family| !families.revoked.contains(family));
    if !live {
        return (StatusCode::UNAUTHORIZED, "invalid or expired token").into_response();
    }
    server.crm_calls.fetch_add(1, Ordering::SeqCst);
    server.crm_tokens.lock().unwrap().extend(token.map(str::to_owned));
    Json(json!([{"name": "Ada"}])).into_response()
}

/// The authorization server and `crm`, on one loopback port: (server, base URL).
pub async fn start() -> (AuthServer, String) {
    let server = AuthServer::default();
    let router = Router::new()
        .route("/authorize", get(consent).post(allow))
        .route("/token", axum::routing::post(token))
        .route("/crm/contacts", get(contacts))
        .with_state(server.clone());
    (server, listen(router).await)
}

/// A sources file with `crm` connecting per owner (its spec in `dir`).
pub fn config(base: &str, dir: &std::path::Path) -> executor_catalog::CatalogConfig {
    set_secret();
    std::fs::write(dir.join("crm.yaml"), CRM_SPEC).unwrap();
    let toml = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "crm"
        kind = "openapi"
        spec = "crm.yaml"
        base_url = "{base}/crm"
        auth = {{ type = "oauth2", authorization_url = "{base}/authorize", token_url = "{base}/token", client_id = "{CLIENT_ID}", client_secret = "env:{SECRET_VAR}", scopes = ["contacts.read"], refresh_scope = "offline_access" }}
        "#
    );
    let file = dir.join("executor.toml");
    std::fs::write(&file, toml).unwrap();
    executor_catalog::CatalogConfig::load(&file).unwrap()
}

/// This server's consent page, reached through a connect link (the redirect
/// followed) and not answered yet: where its form posts, and the form.
pub struct Consent {
    authorize: url::Url,
    pub form: Vec<(&'static str, String)>,
}

impl Consent {
    /// The `state` the connect link started.
    pub fn state(&self) -> &str {
        &self.form.iter().find(|(name, _)| *name == "state").unwrap().1
    }

    /// "Allow" (each time as a new account), then the redirect to the
    /// callback followed: the callback's status and page.
    pub async fn allow(&self) -> (u16, String) {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(&self.form).finish();
        let done = browser()
            .post(self.authorize.join("/authorize").unwrap())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        (done.status().as_u16(), done.text().await.unwrap())
    }
}

fn browser() -> reqwest::Client {
    executor_http_client::builder().redirect(reqwest::redirect::Policy::limited(5)).build().unwrap()
}

/// Open a connect link as a browser without JavaScript would, up to the consent page.
pub async fn open_consent(connect_url: &str) -> Consent {
    let consent = browser().get(connect_url).send().await.unwrap();
    let authorize = consent.url().clone();
    let html = consent.text().await.unwrap();
    let field = |name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} in {html}")) + marker.len();
        html[start..].split('"').next().unwrap().replace("&amp;", "&").replace("&quot;", "\"")
    };
    let form = ["redirect_uri", "state", "code_challenge", "scope"].iter().map(|n| (*n, field(n))).collect();
    Consent { authorize, form }
}

/// Follow a connect link as a browser without JavaScript would: the redirect
/// to this server's consent page, its form's "Allow", the redirect to the
/// callback. The `redirect_uri` the form carried, and the final page.
pub async fn allow_by_http(connect_url: &str) -> (String, String) {
    let consent = open_consent(connect_url).await;
    let (status, page) = consent.allow().await;
    assert_eq!(status, 200, "{page}");
    (consent.form[0].1.clone(), page)
}
