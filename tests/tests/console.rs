//! The approver's console over real HTTP on 127.0.0.1, against both
//! deployments: `executor serve` (embedded store, one port) and the Lambda
//! functions behind the local stand-in for API Gateway (DynamoDB and
//! EventBridge Scheduler via moto_server). Pauses come from the rmcp client's
//! `execute`; the source is a local upstream that records every request;
//! sign-in links are made by the code `executor console link` runs. Time is
//! a manual clock. Cookies are sent by hand, as a browser would, and read
//! with the `cookie` crate.
//!
//! Tested as an attacker would: a used or expired link, another owner's
//! session, a form without (or with another session's) CSRF token, a
//! signed-out cookie.

mod api_gateway;

use std::sync::Arc;
use std::time::Duration;

use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{console, keys, serve};
use executor_core::{Clock, ManualClock, csrf_of_session};
use executor_service::HostConfig;
use executor_store::{ConsoleStore, EmbeddedStore};
use executor_tests::faults::Upstream;
use executor_tests::{Deployment, on_both_deployments};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const SETTLE: Duration = Duration::from_secs(120);
const WRITE: &str = r#"return await tools.ledger.entries.addEntry({ body: { note: "from the console test" } });"#;
const TOOL: &str = "tools.ledger.entries.addEntry";
/// How `execute` says a call waits for approval.
const PAUSED: &str = "waiting_for_interaction";

on_both_deployments!(
    a_link_signs_in_once_and_the_owner_decides_revokes_and_signs_out,
    a_used_or_expired_link_signs_nobody_in,
    another_owners_console_shows_and_reaches_none_of_it,
    a_form_without_this_sessions_csrf_token_changes_nothing,
    a_session_ends_when_it_expires,
    the_approval_page_names_who_asks_and_links_to_the_console,
);

/// Alice signs in with a link, sees her pause and who asked, approves it
/// with "Always allow" (one upstream call), revokes the grant, and her next
/// call pauses again; signing out ends the session in the store.
async fn a_link_signs_in_once_and_the_owner_decides_revokes_and_signs_out(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let signed_out = rig.get("/console", None).await;
    assert_eq!(signed_out.status, 200);
    assert!(signed_out.body.contains("Sign in to the console"), "{}", signed_out.body);

    let client = rig.client(&rig.alice).await;
    let id = rig.pause(&client).await;
    let session = rig.sign_in("alice").await;
    let front = rig.get("/console", Some(&session)).await;
    assert_eq!(front.status, 200);
    for expected in ["Signed in as <b>alice</b>", "Waiting for you (1)", TOOL, "Asked by <b>alice, with key "] {
        assert!(front.body.contains(expected), "{expected:?} missing: {}", front.body);
    }
    assert!(front.body.contains(&format!("action=\"/console/executions/{id}\"")), "{}", front.body);

    let decided = rig.post(&format!("/console/executions/{id}"), &session, "decision=accept_always").await;
    assert_eq!((decided.status, decided.location.as_deref()), (303, Some("/console?notice=always")));
    assert_eq!(rig.upstream.posts().len(), 1, "one approval, one upstream call");
    let history = rig.api_get(&rig.alice, &format!("/api/executions/{id}/history")).await;
    let decision = history["entries"].as_array().unwrap().iter().find(|e| e["type"] == "decided").cloned();
    let decision = decision.unwrap_or_else(|| panic!("no decision in {history}"));
    assert_eq!((decision["channel"].as_str(), decision["decidedBy"].as_str()), (Some("browser"), Some("alice")));

    let grants = rig.api_get(&rig.alice, "/api/grants").await;
    let grant = grants["grants"][0]["id"].as_str().expect("the grant Always allow made").to_owned();
    let front = rig.get("/console?notice=always", Some(&session)).await;
    assert!(front.body.contains("Waiting for you (0)"), "{}", front.body);
    assert!(front.body.contains(&format!("action=\"/console/grants/{grant}/revoke\"")), "{}", front.body);
    let ran = rig.execute(&client).await;
    assert_eq!(ran["status"], "completed", "the grant lets the next call run: {ran}");
    assert_eq!(rig.upstream.posts().len(), 2);

    let revoked = rig.post(&format!("/console/grants/{grant}/revoke"), &session, "").await;
    assert_eq!((revoked.status, revoked.location.as_deref()), (303, Some("/console?notice=revoked")));
    assert_eq!(rig.api_get(&rig.alice, "/api/grants").await["grants"], json!([]));
    let paused = rig.execute(&client).await;
    assert_eq!(paused["status"], PAUSED, "revoked: the next call asks again: {paused}");
    assert_eq!(rig.upstream.posts().len(), 2);

    let out = rig.post("/console/logout", &session, "").await;
    assert_eq!((out.status, out.location.as_deref()), (303, Some("/console")));
    let cleared = out.cookies.iter().find(|c| c.name() == "executor_console").expect("the cookie is cleared");
    assert_eq!((cleared.value(), cleared.max_age()), ("", Some(cookie::time::Duration::ZERO)));
    let after = rig.get("/console", Some(&session)).await;
    assert!(after.body.contains("Sign in to the console"), "the old cookie signs nobody in: {}", after.body);
    let refused = rig
        .post(&format!("/console/executions/{}", paused["executionId"].as_str().unwrap()), &session, "decision=accept")
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(rig.upstream.posts().len(), 2);
}

/// A link works once; a second use, or a use after ten minutes, sets no
/// session cookie and shows the console to nobody.
async fn a_used_or_expired_link_signs_nobody_in(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let link = rig.link("alice").await;
    let first = rig.use_link(&link).await;
    assert_eq!(first.status, 303);
    let cookie = first.cookies.iter().find(|c| c.name() == "executor_console").expect("a session cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(cookie.same_site(), Some(cookie::SameSite::Strict));
    assert_eq!(cookie.path(), Some("/console"));
    assert_eq!(cookie.secure(), None, "plain http: not Secure (https sets it)");
    assert_eq!(cookie.max_age(), Some(cookie::time::Duration::hours(8)));

    let again = rig.use_link(&link).await;
    assert_eq!(again.status, 403, "{}", again.body);
    assert!(again.cookies.iter().all(|c| c.name() != "executor_console"), "{:?}", again.cookies);

    let late = rig.link("alice").await;
    rig.clock.advance(Duration::from_secs(10 * 60));
    let expired = rig.use_link(&late).await;
    assert_eq!(expired.status, 403, "{}", expired.body);
    assert!(expired.cookies.iter().all(|c| c.name() != "executor_console"));
    assert!(expired.body.contains("signs nobody in"), "{}", expired.body);

    let forged = rig.use_link(&format!("{}/console/signin?token={}", rig.base, "0".repeat(64))).await;
    assert_eq!(forged.status, 403);
}

/// Bob's console lists none of Alice's pauses or grants, and his forms
/// reach none of them: her execution and her grant are "not found" to him.
async fn another_owners_console_shows_and_reaches_none_of_it(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client(&rig.alice).await;
    let (id, paused) = (rig.pause(&client).await, rig.pause(&client).await);
    let alice = rig.sign_in("alice").await;
    rig.post(&format!("/console/executions/{id}"), &alice, "decision=accept_always").await;
    let grant = rig.api_get(&rig.alice, "/api/grants").await["grants"][0]["id"].as_str().unwrap().to_owned();

    let bob = rig.sign_in("bob").await;
    let front = rig.get("/console", Some(&bob)).await;
    assert!(
        front.body.contains("Signed in as <b>bob</b>") && front.body.contains("Waiting for you (0)"),
        "{}",
        front.body
    );
    for hidden in [TOOL, id.as_str(), paused.as_str(), grant.as_str(), "alice"] {
        assert!(!front.body.contains(hidden), "bob sees {hidden:?}: {}", front.body);
    }
    assert_eq!(rig.get(&format!("/console/executions/{paused}"), Some(&bob)).await.status, 404);
    let decided = rig.post(&format!("/console/executions/{paused}"), &bob, "decision=accept").await;
    assert_eq!(decided.status, 404);
    assert_eq!(rig.post(&format!("/console/grants/{grant}/revoke"), &bob, "").await.status, 404);
    assert_eq!(rig.upstream.posts().len(), 1, "only Alice's own approval called the upstream");
    assert_eq!(rig.api_get(&rig.alice, "/api/grants").await["grants"].as_array().unwrap().len(), 1);
}

/// A decision without the CSRF token, with a wrong one, or with another
/// session's, is refused and calls nothing.
async fn a_form_without_this_sessions_csrf_token_changes_nothing(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client(&rig.alice).await;
    let id = rig.pause(&client).await;
    let alice = rig.sign_in("alice").await;
    let bob = rig.sign_in("bob").await;
    let path = format!("/console/executions/{id}");
    for csrf in [None, Some("0".repeat(32)), Some(csrf_of_session(&bob))] {
        let refused = rig.post_with(&path, &alice, csrf.as_deref(), "decision=accept").await;
        assert_eq!(refused.status, 403, "{csrf:?}: {}", refused.body);
        assert!(refused.body.contains("could not be verified"), "{}", refused.body);
    }
    assert_eq!(rig.upstream.posts().len(), 0);
    let front = rig.get("/console", Some(&alice)).await;
    assert!(front.body.contains("Waiting for you (1)"), "still waiting: {}", front.body);
    // The sign-in form is a double submit too: a token without its cookie signs nobody in.
    let link = rig.link("alice").await;
    let token = link.split("token=").nth(1).unwrap();
    let blind = rig.form("/console/signin", None, &format!("token={token}&csrf={}", "a".repeat(32))).await;
    assert_eq!(blind.status, 403);
    assert!(blind.cookies.iter().all(|c| c.name() != "executor_console"));
}

/// Eight hours after sign-in the cookie signs nobody in.
async fn a_session_ends_when_it_expires(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let session = rig.sign_in("alice").await;
    assert!(rig.get("/console", Some(&session)).await.body.contains("Signed in as"));
    rig.clock.advance(Duration::from_secs(8 * 3600 - 1));
    assert!(rig.get("/console", Some(&session)).await.body.contains("Signed in as"));
    rig.clock.advance(Duration::from_secs(1));
    let expired = rig.get("/console", Some(&session)).await;
    assert!(expired.body.contains("Sign in to the console"), "{}", expired.body);
}

/// A browser-mode pause's link: the page names the owner and the key the
/// code came with, and links to the console.
async fn the_approval_page_names_who_asks_and_links_to_the_console(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client_in(&rig.alice, "browser").await;
    let paused = rig.execute(&client).await;
    let link = paused["approvalUrl"].as_str().unwrap_or_else(|| panic!("browser mode gives a link: {paused}"));
    let page = rig.http.get(link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    let key_id = executor_core::key_id(&executor_core::TokenHash::of_token(&rig.alice)).to_owned();
    assert!(html.contains(&format!("Asked by <b>alice, with key {key_id}</b>")), "{html}");
    assert!(html.contains("<a href=\"/console\">Open the console</a>"), "{html}");
}

// ---------------------------------------------------------------- the rig

struct Rig {
    base: String,
    alice: String,
    clock: Arc<ManualClock>,
    upstream: Upstream,
    /// Where `executor console link` stores its links.
    links: Arc<dyn ConsoleStore>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// An answer of the console: its status, where it redirects, its cookies and page.
struct Answer {
    status: u16,
    location: Option<String>,
    cookies: Vec<cookie::Cookie<'static>>,
    body: String,
}

type Client = RunningService<RoleClient, InitializeRequestParams>;

impl Rig {
    async fn start(deployment: Deployment) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Upstream::start().await;
        let sources = CatalogConfig::load(&upstream.write_config(dir.path(), SETTLE)).unwrap();
        let catalog = Arc::new(Catalog::connect(&sources).await.expect("the catalog connects"));
        let clock = Arc::new(ManualClock::starting_now());
        let config = HostConfig { clock: clock.clone(), ..HostConfig::default() };
        let (base, links, alice) = match deployment {
            Deployment::Local => start_local(dir.path(), catalog, &clock, config).await,
            Deployment::Lambda => start_lambda(catalog, &clock, config).await,
        };
        let http = executor_http_client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(SETTLE)
            .build()
            .unwrap();
        Self { base, alice, clock, upstream, links, http, _dir: dir }
    }

    /// A console link for `owner`, as `executor console link` prints it.
    async fn link(&self, owner: &str) -> String {
        let command = console::Command::ConsoleLink { owner: owner.into(), url: self.base.clone() };
        match console::run(&*self.links, command, self.clock.now()).await.expect("a link") {
            console::Reply::ConsoleLinked { link, .. } => link,
            other => panic!("{other:?}"),
        }
    }

    /// Open `link` and press "Sign in", as a browser does.
    async fn use_link(&self, link: &str) -> Answer {
        let page = self.http.get(link).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let cookies = set_cookies(page.headers());
        let form = cookies.iter().find(|c| c.name() == "executor_console_csrf").expect("the form's CSRF cookie");
        let token = link.split("token=").nth(1).unwrap_or_default();
        let cookie = format!("executor_console_csrf={}", form.value());
        self.form("/console/signin", Some(&cookie), &format!("token={token}&csrf={}", form.value())).await
    }

    /// Sign `owner` in with a fresh link: the session cookie's value.
    async fn sign_in(&self, owner: &str) -> String {
        let answer = self.use_link(&self.link(owner).await).await;
        assert_eq!((answer.status, answer.location.as_deref()), (303, Some("/console?notice=signed-in")));
        let cookie = answer.cookies.iter().find(|c| c.name() == "executor_console").expect("the session cookie");
        cookie.value().to_owned()
    }

    async fn get(&self, path: &str, session: Option<&str>) -> Answer {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(session) = session {
            request = request.header("cookie", format!("executor_console={session}"));
        }
        answer(request.send().await.unwrap()).await
    }

    /// POST `fields` with the session's CSRF token.
    async fn post(&self, path: &str, session: &str, fields: &str) -> Answer {
        self.post_with(path, session, Some(&csrf_of_session(session)), fields).await
    }

    async fn post_with(&self, path: &str, session: &str, csrf: Option<&str>, fields: &str) -> Answer {
        let mut body = fields.to_owned();
        if let Some(csrf) = csrf {
            body = if body.is_empty() { format!("csrf={csrf}") } else { format!("{body}&csrf={csrf}") };
        }
        self.form(path, Some(&format!("executor_console={session}")), &body).await
    }

    async fn form(&self, path: &str, cookie: Option<&str>, body: &str) -> Answer {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned());
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        answer(request.send().await.unwrap()).await
    }

    async fn api_get(&self, key: &str, path: &str) -> Value {
        let response = self.http.get(format!("{}{path}", self.base)).bearer_auth(key).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    /// An MCP client of the owner of `key`, in model mode.
    async fn client(&self, key: &str) -> Client {
        self.client_in(key, "model").await
    }

    async fn client_in(&self, key: &str, mode: &str) -> Client {
        let url = format!("{}/mcp?elicitation_mode={mode}", self.base);
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("console", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        info.serve(transport).await.expect("the client connects")
    }

    async fn execute(&self, client: &Client) -> Value {
        let params =
            CallToolRequestParams::new("execute").with_arguments(json!({"code": WRITE}).as_object().unwrap().clone());
        let result = tokio::time::timeout(SETTLE, client.call_tool(params)).await.expect("the host answers");
        result.unwrap().structured_content.expect("structured content")
    }

    /// Run the write until it pauses: its execution id.
    async fn pause(&self, client: &Client) -> String {
        let paused = self.execute(client).await;
        assert_eq!(paused["status"], PAUSED, "{paused}");
        paused["executionId"].as_str().unwrap().to_owned()
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let location = response.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
    let cookies = set_cookies(response.headers());
    Answer { status, location, cookies, body: response.text().await.unwrap() }
}

fn set_cookies(headers: &reqwest::header::HeaderMap) -> Vec<cookie::Cookie<'static>> {
    headers
        .get_all("set-cookie")
        .iter()
        .map(|v| cookie::Cookie::parse(v.to_str().unwrap().to_owned()).expect("a Set-Cookie the crate parses"))
        .collect()
}

/// A deployment's base URL, its store (for links) and alice's key.
type Started = (String, Arc<dyn ConsoleStore>, String);

async fn start_local(
    dir: &std::path::Path,
    catalog: Arc<Catalog>,
    clock: &Arc<ManualClock>,
    config: HostConfig,
) -> Started {
    let store = Arc::new(EmbeddedStore::open(&dir.join("data")).unwrap().with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HostConfig { local_url: Some(serve::local_url(addr)), ..config };
    let host = serve::host(store.clone(), catalog, &["ledger".to_owned()], config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    (format!("http://{addr}"), store, alice)
}

async fn start_lambda(catalog: Arc<Catalog>, clock: &Arc<ManualClock>, config: HostConfig) -> Started {
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store.with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let (base, _hosts) =
        api_gateway::start_deployment(store.clone(), catalog, &["ledger".to_owned()], clock.clone(), config).await;
    (base, store, alice)
}
