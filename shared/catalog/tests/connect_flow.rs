//! Per-owner OAuth (`auth.type = "oauth2"`) end to end on `executor serve`'s
//! host, against the authorization server and OpenAPI service of
//! `support/authcode.rs`: the connect pause, the consent page in headless
//! Chromium, the callback that continues the execution, refresh races
//! (within a process and across two), a dead refresh token, disconnecting,
//! states that died with their pause (replaced, used, declined, expired),
//! and no token text in the store, the logs or the API.
//!
//! The log of every thread goes to one capture (the process's subscriber),
//! which the secrets test greps.

#[path = "support/capture.rs"]
mod capture;
mod support;

use std::sync::Arc;
use std::time::Duration;

use capture::Capture;
use executor_catalog::{Catalog, CatalogConfig, OAuthBacking, TokenKey, Vault};
use executor_cli::{keys, serve};
use executor_core::ManualClock;
use executor_service::HostConfig;
use executor_store::{EmbeddedStore, Store};
use serde_json::{Value, json};
use support::authcode::{AuthServer, LIFETIME_SECONDS, allow_by_http, config, open_consent, start};
use support::{McpClient, call_tool, click_in_chromium, mcp_client};
use tracing_subscriber::layer::SubscriberExt;

const LIST: &str = "const r = await tools.crm.contacts.list({}); return r.data";

/// One `executor serve` host over `store`, with its own catalog (its own
/// token cache and single-flight locks: another process, as far as tokens go).
async fn host<S: Store + 'static>(store: &Arc<S>, sources: &CatalogConfig, clock: Arc<ManualClock>) -> String {
    let vault = Vault { store: store.clone(), key: TokenKey::from_bytes(&[9u8; 32]).unwrap() };
    let catalog =
        Catalog::connect_with(sources, clock.clone(), OAuthBacking { vault: Some(vault), mcp: None }).await.unwrap();
    assert_eq!(catalog.namespaces()[0].error, None, "the spec loads without any owner's token");
    let config = HostConfig { clock, connections: catalog.connections(), ..HostConfig::default() };
    let host = serve::host(store.clone(), Arc::new(catalog), &["crm".to_owned()], config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    base
}

/// One host over a fresh embedded store holding alice's key, on its own
/// clock, with the authorization server and service it connects to.
struct OneHost {
    server: AuthServer,
    base: String,
    alice: String,
    clock: Arc<ManualClock>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn one_host() -> OneHost {
    let (server, base_url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let base = host(&store, &config(&base_url, dir.path()), clock.clone()).await;
    OneHost { server, base, alice, clock, _dirs: (dir, data) }
}

async fn client(base: &str, token: &str) -> McpClient {
    mcp_client(base, token, "model").await
}

/// `execute` that waits for a connection: (executionId, pauseId, connectUrl).
async fn connect_pause(client: &McpClient) -> (String, String, String) {
    let paused = call_tool(client, "execute", json!({ "code": LIST })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["kind"], "connect", "{paused}");
    assert_eq!(paused["interaction"]["tool"], "crm.contacts.list", "{paused}");
    let text = |k: &str| paused[k].as_str().unwrap().to_owned();
    (text("executionId"), text("pauseId"), paused["interaction"]["connectUrl"].as_str().unwrap().to_owned())
}

async fn api(base: &str, token: &str, method: reqwest::Method, path: &str) -> (u16, String) {
    let http = executor_http_client::builder().build().unwrap();
    let response = http.request(method, format!("{base}{path}")).bearer_auth(token).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Every span and log line of this test binary, from any thread.
fn captured() -> &'static Capture {
    static CAPTURE: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone())).unwrap();
        capture
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_connects_in_headless_chromium_and_the_call_runs_once_with_no_token_in_clear() {
    let capture = captured();
    let data = tempfile::tempdir().unwrap();
    let (server, texts) = {
        let (server, base_url) = start().await;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
        let alice = keys::create(&*store, "alice").await.unwrap();
        let bob = keys::create(&*store, "bob").await.unwrap();
        let base = host(&store, &config(&base_url, dir.path()), Arc::new(ManualClock::starting_now())).await;
        let agent = client(&base, &alice).await;

        let (id, pause, url) = connect_pause(&agent).await;
        assert!(url.starts_with(&format!("{base}/oauth/connect/{id}?token=")), "{url}");
        assert_eq!(AuthServer::count(&server.crm_calls), 0, "nothing is called before the owner connects");

        let (outcome, _) = click_in_chromium(url.clone(), "connect.png", "Allow").await;
        assert_eq!(outcome["before"], "Allow executor-web to read your contacts?", "{outcome}");
        assert_eq!(outcome["heading"], "Connected to crm.", "{outcome}");
        assert!(outcome["text"].as_str().unwrap().contains("The call was made and the code finished."), "{outcome}");
        assert_eq!(AuthServer::count(&server.crm_calls), 1, "the callback ran the call once");
        assert_eq!(*server.scopes.lock().unwrap(), ["contacts.read offline_access"], "the refresh scope is asked for");

        // The model's accept of the same pause returns that outcome; nothing runs again.
        let resumed =
            call_tool(&agent, "resume", json!({ "executionId": id, "pauseId": pause, "action": "accept" })).await;
        assert_eq!(resumed["status"], "completed", "{resumed}");
        assert_eq!(resumed["result"], json!([{"name": "Ada"}]));
        assert_eq!(AuthServer::count(&server.crm_calls), 1);
        // The link is spent: opening it again starts nothing.
        let http = executor_http_client::builder().build().unwrap();
        let again = http.get(&url).send().await.unwrap();
        assert_eq!(again.status().as_u16(), 409, "{}", again.text().await.unwrap());

        // Connected now: alice's next run calls straight through.
        let direct = call_tool(&agent, "execute", json!({ "code": LIST })).await;
        assert_eq!(direct["status"], "completed", "{direct}");
        assert_eq!(AuthServer::count(&server.crm_calls), 2);

        // Bob has no connection of his own: he is asked separately.
        let bob_agent = client(&base, &bob).await;
        let (_, _, bob_url) = connect_pause(&bob_agent).await;
        assert_ne!(bob_url, url);
        assert_eq!(AuthServer::count(&server.crm_calls), 2);

        let (status, listed) = api(&base, &alice, reqwest::Method::GET, "/api/connections").await;
        assert_eq!(status, 200, "{listed}");
        let listed: Value = serde_json::from_str(&listed).unwrap();
        assert_eq!(listed["connections"].as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed["connections"][0]["source"], "crm");
        assert_eq!(listed["connections"][0]["scopes"], json!(["contacts.read", "offline_access"]));
        let (_, bobs) = api(&base, &bob, reqwest::Method::GET, "/api/connections").await;
        assert_eq!(serde_json::from_str::<Value>(&bobs).unwrap(), json!({"connections": []}));
        let texts = [listed.to_string(), resumed.to_string(), direct.to_string(), outcome.to_string()];
        (server, texts)
    };

    let secrets = server.secrets();
    assert_eq!(secrets.len(), 2, "one access and one refresh token were issued");
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(data.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap_or_default());
    }
    let stored = String::from_utf8_lossy(&stored);
    let log = capture.0.lock().unwrap().clone();
    assert!(log.contains("OAuth connection stored"), "the log was captured: {log}");
    for secret in &secrets {
        assert!(!stored.contains(secret.as_str()), "{secret} is in a stored item in clear");
        assert!(!log.contains(secret.as_str()), "{secret} is in the log");
        for text in &texts {
            assert!(!text.contains(secret.as_str()), "{secret} is in an answer: {text}");
        }
    }
}

/// Connect alice through `base` (by HTTP) and check the call ran.
async fn connected_alice(base: &str, alice: &str, server: &AuthServer) {
    let agent = client(base, alice).await;
    let (_, _, url) = connect_pause(&agent).await;
    let page = allow_by_http(&url).await.1;
    assert!(page.contains("Connected to crm."), "{page}");
    assert_eq!(AuthServer::count(&server.crm_calls), 1);
}

/// Two hosts on one store: 20 executions at once after the access token
/// expired make one refresh request, in one host and across both; no spent
/// refresh token is ever sent again. The issuing server, for its token texts.
async fn refresh_race<S: Store + 'static>(store: Arc<S>) -> AuthServer {
    let (server, base_url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let alice = keys::create(&*store, "alice").await.unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let sources = config(&base_url, dir.path());
    let first = host(&store, &sources, clock.clone()).await;
    let second = host(&store, &sources, clock.clone()).await;
    connected_alice(&first, &alice, &server).await;

    // 20 executions at once after the access token expired: one refresh.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS + 1));
    let agent = client(&first, &alice).await;
    let runs = (0..20).map(|_| call_tool(&agent, "execute", json!({ "code": LIST })));
    for run in futures_util::future::join_all(runs).await {
        assert_eq!(run["status"], "completed", "{run}");
    }
    assert_eq!(AuthServer::count(&server.refreshes), 1, "one refresh within a process");
    assert_eq!(AuthServer::count(&server.crm_calls), 21);

    // Expired again; two hosts (two processes' worth of caches and locks) race on one store.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS + 1));
    let other = client(&second, &alice).await;
    let runs = (0..20).map(|i| call_tool(if i % 2 == 0 { &agent } else { &other }, "execute", json!({ "code": LIST })));
    for run in futures_util::future::join_all(runs).await {
        assert_eq!(run["status"], "completed", "{run}");
    }
    assert_eq!(AuthServer::count(&server.refreshes), 2, "one more refresh across both hosts");
    assert_eq!(AuthServer::count(&server.replays), 0, "no spent refresh token was sent again");
    assert_eq!(server.revoked_families(), 0, "the family was never revoked");
    assert_eq!(AuthServer::count(&server.crm_calls), 41);
    assert_eq!(server.secrets().len(), 6, "three access and three refresh tokens were issued");
    server
}

fn assert_no_token_in(server: &AuthServer, stored: &str) {
    assert!(stored.contains("CONN#crm") || stored.contains("connection"), "the items were read: {stored:.300}");
    for secret in server.secrets() {
        assert!(!stored.contains(&secret), "{secret} is in a stored item in clear");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_races_on_the_embedded_store() {
    let (store, dir) = executor_tests::embedded_store();
    let server = refresh_race(Arc::new(store)).await;
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap_or_default());
    }
    assert_no_token_in(&server, &String::from_utf8_lossy(&stored));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_races_on_dynamodb() {
    let (store, client) = executor_tests::dynamo_store().await;
    let table = store.table().to_owned();
    let server = refresh_race(Arc::new(store)).await;
    let items = client.scan().table_name(&table).send().await.unwrap();
    // Attribute values as text, binary bodies decoded.
    let stored: Vec<String> = items
        .items()
        .iter()
        .flat_map(|item| item.values())
        .map(|value| match value.as_b() {
            Ok(bytes) => String::from_utf8_lossy(bytes.as_ref()).into_owned(),
            Err(_) => format!("{value:?}"),
        })
        .collect();
    assert_no_token_in(&server, &stored.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_refresh_token_or_a_disconnect_asks_to_connect_again() {
    let OneHost { server, base, alice, clock, _dirs } = one_host().await;
    connected_alice(&base, &alice, &server).await;
    let agent = client(&base, &alice).await;

    // The provider revoked the app: the refresh is refused, the connection dropped.
    server.revoke_all();
    clock.advance(Duration::from_secs(LIFETIME_SECONDS + 1));
    let code = "const r = await tools.crm.contacts.list({}); return r";
    let failed = call_tool(&agent, "execute", json!({ "code": code })).await;
    assert_eq!(failed["result"]["ok"], false, "{failed}");
    assert_eq!(failed["result"]["error"]["code"], "auth_error", "{failed}");
    assert!(failed["result"]["error"]["message"].as_str().unwrap().contains("connect"), "{failed}");
    let (_, listed) = api(&base, &alice, reqwest::Method::GET, "/api/connections").await;
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap(), json!({"connections": []}));
    let (_, _, url) = connect_pause(&agent).await;

    // Connected again, then disconnected through the API: asked once more.
    assert!(allow_by_http(&url).await.1.contains("Connected to crm."));
    let (status, _) = api(&base, &alice, reqwest::Method::DELETE, "/api/connections/crm").await;
    assert_eq!(status, 204);
    let (status, body) = api(&base, &alice, reqwest::Method::DELETE, "/api/connections/crm").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("connection_not_found"), "{body}");
    connect_pause(&agent).await;
    // A tool the source does not have is unknown, not a reason to connect.
    let typo = call_tool(&agent, "execute", json!({ "code": "return await tools.crm.contacts.lst({})" })).await;
    assert_eq!(typo["result"]["error"]["code"], "unknown_tool", "{typo}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_browser_mode_the_approval_page_links_to_the_connection() {
    let OneHost { server, base, alice, _dirs, .. } = one_host().await;
    let agent = mcp_client(&base, &alice, "browser").await;
    let paused = call_tool(&agent, "execute", json!({ "code": LIST })).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");
    let id = paused["executionId"].as_str().unwrap();

    let http = executor_http_client::builder().build().unwrap();
    let page = http.get(paused["approvalUrl"].as_str().unwrap()).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Connect crm"), "{page}");
    let marker = format!("href=\"/oauth/connect/{id}?token=");
    let start = page.find(&marker).unwrap_or_else(|| panic!("no connect link in {page}")) + "href=\"".len();
    let link = page[start..].split('"').next().unwrap();
    assert_eq!(AuthServer::count(&server.crm_calls), 0);

    assert!(allow_by_http(&format!("{base}{link}")).await.1.contains("Connected to crm."));
    assert_eq!(AuthServer::count(&server.crm_calls), 1);
    let resumed = call_tool(&agent, "resume", json!({ "executionId": id })).await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"], json!([{"name": "Ada"}]));
    assert_eq!(AuthServer::count(&server.crm_calls), 1);
}

/// A callback's (status, page) refused with `status`, saying `why`.
fn assert_refused(answer: &(u16, String), status: u16, why: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert!(answer.1.contains("Not connected") && answer.1.contains(why), "{}", answer.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_connect_state_stores_nothing_and_the_owner_keeps_their_account() {
    let OneHost { server, base, alice, _dirs, .. } = one_host().await;
    let agent = client(&base, &alice).await;
    let (_, _, url) = connect_pause(&agent).await;

    // The link opened twice: two states, of which only the newer counts.
    let (older, newer) = (open_consent(&url).await, open_consent(&url).await);
    assert_ne!(older.state(), newer.state());
    let owners = newer.allow().await;
    assert_eq!(owners.0, 200, "{}", owners.1);
    assert!(owners.1.contains("The call was made and the code finished."), "{}", owners.1);
    let account = server.crm_tokens.lock().unwrap().clone();
    assert_eq!(account.len(), 1);
    assert!(account[0].starts_with("at-1-"), "the owner's account (the first consent) made the call: {account:?}");

    // Whoever holds the older state consents as another account: refused before the code is redeemed.
    let exchanges = AuthServer::count(&server.code_exchanges);
    assert_refused(&older.allow().await, 400, "replaced by opening the connect link again");
    // The used one, its consent answered again (a new code): refused too.
    assert_refused(&newer.allow().await, 400, "already used");
    assert_eq!(AuthServer::count(&server.consents), 3, "the provider issued codes for two more accounts");
    assert_eq!(AuthServer::count(&server.code_exchanges), exchanges, "no code of theirs was redeemed");
    assert_eq!(server.secrets().len(), 2, "no tokens were issued but the owner's");

    // The owner's next run calls as the owner's account.
    let next = call_tool(&agent, "execute", json!({ "code": LIST })).await;
    assert_eq!(next["status"], "completed", "{next}");
    assert_eq!(*server.crm_tokens.lock().unwrap(), [account[0].clone(), account[0].clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_whose_pause_was_declined_or_expired_stores_nothing() {
    let OneHost { server, base, alice, clock, _dirs } = one_host().await;
    let agent = client(&base, &alice).await;

    // Declined while the owner was at the consent page.
    let (id, pause, url) = connect_pause(&agent).await;
    let consent = open_consent(&url).await;
    let declined =
        call_tool(&agent, "resume", json!({ "executionId": id, "pauseId": pause, "action": "decline" })).await;
    assert_ne!(declined["status"], "waiting_for_interaction", "{declined}");
    // The model's decision spent every link of the pause, this one too.
    assert_refused(&consent.allow().await, 404, "no longer waits for it (it was decided");

    // Expired while the owner was at the consent page (the state itself is still young).
    let (_, _, url) = connect_pause(&agent).await;
    let consent = open_consent(&url).await;
    clock.advance(Duration::from_secs(11 * 60));
    assert_refused(&consent.allow().await, 410, "expired");

    assert_eq!(AuthServer::count(&server.code_exchanges), 0, "no code was redeemed");
    assert_eq!(AuthServer::count(&server.crm_calls), 0);
    let (_, listed) = api(&base, &alice, reqwest::Method::GET, "/api/connections").await;
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap(), json!({"connections": []}));
    connect_pause(&agent).await;
}
