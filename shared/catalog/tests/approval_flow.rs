//! Browser approvals end to end on the local host: an rmcp client in browser
//! mode pauses on a real upstream POST, a person (reqwest here, Chromium in
//! `tests/browser`) opens the link and decides, and the model's `resume`
//! returns what the page ran. The upstream counts its POSTs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use executor_cli::{keys, serve};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use executor_tests::faults::Faults;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use support::{McpClient, Recorded, World, call_tool, click_in_chromium, mcp_client, world};

const WRITE: &str =
    r#"const created = await tools.shop.items.createItem({ body: { name: "chair" } }); return created.data"#;

struct Local {
    world: World,
    base: String,
    alice: String,
    bob: String,
    client: McpClient,
    http: reqwest::Client,
    /// Counts the host's store calls (no fault is armed): what shows a `resume` waiting.
    store_calls: Faults,
    _data: tempfile::TempDir,
}

impl Local {
    async fn start(config: HostConfig) -> Self {
        let world = world("").await;
        let data = tempfile::tempdir().unwrap();
        let store_calls = Faults::new();
        let store = Arc::new(store_calls.wrap(EmbeddedStore::open(data.path()).unwrap()));
        let alice = keys::create(&*store, "alice").await.unwrap();
        let bob = keys::create(&*store, "bob").await.unwrap();
        let namespaces: Vec<String> = world.catalog.namespaces().into_iter().map(|n| n.namespace).collect();
        let host = serve::host(store, world.catalog.clone(), &namespaces, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));
        let client = mcp_client(&base, &alice, "browser").await;
        let http = executor_http_client::builder().build().unwrap();
        Self { world, base, alice, bob, client, http, store_calls, _data: data }
    }

    async fn call(&self, name: &'static str, arguments: Value) -> Value {
        call_tool(&self.client, name, arguments).await
    }

    /// `execute` that pauses: (executionId, approvalUrl).
    async fn pause(&self, code: &str) -> (String, String) {
        let paused = self.call("execute", json!({ "code": code })).await;
        assert_eq!(paused["status"], "user_approval_required", "{paused}");
        let url = paused["approvalUrl"].as_str().unwrap().to_owned();
        assert!(url.starts_with(&format!("{}/approvals/", self.base)), "{url}");
        (paused["executionId"].as_str().unwrap().to_owned(), url)
    }

    /// Once a `resume` begun after `reads` reads of an execution is waiting
    /// for the decision: it has read the execution again after a wait.
    async fn waiting_since(&self, reads: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.store_calls.calls_of("get_execution") < reads + 2 {
            assert!(tokio::time::Instant::now() < deadline, "the resume never waited for the decision");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn posts(&self) -> usize {
        Recorded::count(&self.world.shop.recorded.posts)
    }
}

/// What a browser gets for the link: status, the CSRF cookie, the HTML.
#[derive(Clone)]
struct Page {
    status: u16,
    cookie: Option<String>,
    html: String,
    headers: reqwest::header::HeaderMap,
}

async fn open(http: &reqwest::Client, url: &str) -> Page {
    let response = http.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let cookie =
        headers.get("set-cookie").and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).map(str::to_owned);
    Page { status, cookie, html: response.text().await.unwrap(), headers }
}

/// The value of the form's hidden `name` field.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} field in {html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// Submit the page's form with `decision`, as the browser would.
async fn submit(http: &reqwest::Client, url: &str, page: &Page, decision: &str) -> (u16, String) {
    let action = url.split('?').next().unwrap();
    let form = format!("token={}&csrf={}&decision={decision}", hidden(&page.html, "token"), hidden(&page.html, "csrf"));
    let response = http
        .post(action)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", page.cookie.clone().unwrap_or_default())
        .body(form)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn quick_wait() -> HostConfig {
    HostConfig { approval_wait: Duration::from_secs(3), ..HostConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_in_the_browser_while_the_model_waits() {
    let local = Local::start(HostConfig { approval_wait: Duration::from_secs(20), ..HostConfig::default() }).await;
    let (id, url) = local.pause(WRITE).await;
    assert_eq!(local.posts(), 0, "nothing is written before the approval");

    let page = open(&local.http, &url).await;
    assert_eq!(page.status, 200, "{}", page.html);
    for expected in ["<code>tools.shop.items.createItem</code>", "&quot;chair&quot;", "Approve", "Decline", "Time left"]
    {
        assert!(page.html.contains(expected), "missing {expected:?}: {}", page.html);
    }
    assert_eq!(page.headers["cache-control"], "no-store");
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(page.cookie.as_deref().unwrap().starts_with("executor_csrf="));

    // The model is already waiting when the person decides.
    let reads = local.store_calls.calls_of("get_execution");
    let waiting = local.call("resume", json!({ "executionId": id }));
    let decide = async {
        local.waiting_since(reads).await;
        submit(&local.http, &url, &page, "accept").await
    };
    let (resumed, (status, html)) = tokio::join!(waiting, decide);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Approved") && html.contains("chair"), "{html}");
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"], json!({"id": 3, "name": "chair"}));
    assert_eq!(local.posts(), 1);

    // The used link: "already decided" to reload or to submit again; nothing runs twice.
    let reopened = open(&local.http, &url).await;
    assert_eq!(reopened.status, 409, "{}", reopened.html);
    assert!(reopened.html.contains("Already decided"), "{}", reopened.html);
    let (status, html) = submit(&local.http, &url, &page, "accept").await;
    assert_eq!(status, 409, "{html}");
    assert!(html.contains("Already decided"), "{html}");
    // A later resume reads the stored outcome.
    let again = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(again["result"], json!({"id": 3, "name": "chair"}), "{again}");
    assert_eq!(local.posts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declined_in_the_browser() {
    let local = Local::start(quick_wait()).await;
    let (id, url) = local.pause(WRITE).await;
    let page = open(&local.http, &url).await;
    let (status, html) = submit(&local.http, &url, &page, "decline").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Declined"), "{html}");
    let resumed = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(resumed["status"], "error", "{resumed}");
    assert_eq!(resumed["error"]["code"], "approval_declined");
    assert_eq!(local.posts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn still_waiting_hands_out_a_fresh_link_and_the_window_expires() {
    let clock = Arc::new(executor_core::ManualClock::starting_now());
    let config =
        HostConfig { approval_wait: Duration::from_millis(600), clock: clock.clone(), ..HostConfig::default() };
    let local = Local::start(config).await;
    let (id, first) = local.pause(WRITE).await;

    // The model cannot decide a browser pause: its accept is ignored, and it waits.
    let waited = local.call("resume", json!({ "executionId": id, "action": "accept" })).await;
    assert_eq!(waited["status"], "user_approval_required", "{waited}");
    assert_eq!(local.posts(), 0, "resume made no call");
    let second = waited["approvalUrl"].as_str().unwrap();
    assert_ne!(second, first, "each answer carries its own link");
    for url in [first.as_str(), second] {
        assert_eq!(open(&local.http, url).await.status, 200, "both links are open until one decides");
    }

    clock.advance(HostConfig::default().timeouts.approval_window + Duration::from_secs(1));
    let expired = open(&local.http, &first).await;
    assert_eq!(expired.status, 410, "{}", expired.html);
    assert!(expired.html.contains("This approval expired"), "{}", expired.html);
    let late = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(late["error"]["code"], "execution_expired", "{late}");
    assert_eq!(local.posts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_approvals_of_one_pause_make_one_upstream_call() {
    let local = Local::start(quick_wait()).await;
    let (_id, url) = local.pause(WRITE).await;
    let page = open(&local.http, &url).await;
    let mut submits = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (http, url, page) = (local.http.clone(), url.clone(), page.clone());
        submits.spawn(async move { submit(&http, &url, &page, "accept").await });
    }
    let answers = submits.join_all().await;
    let approved = answers.iter().filter(|(status, html)| *status == 200 && html.contains("Approved")).count();
    let refused = answers.iter().filter(|(status, html)| *status == 409 && html.contains("Already decided")).count();
    assert_eq!((approved, refused), (1, 15), "{:?}", answers.iter().map(|(s, _)| s).collect::<Vec<_>>());
    assert_eq!(local.posts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_code_and_arguments_render_inert() {
    let local = Local::start(quick_wait()).await;
    let attack = "</script><img src=x onerror=alert(1)>";
    let code = format!(
        "// {attack}\nconst created = await tools.shop.items.createItem({{ body: {{ name: {attack:?} }} }});\nreturn 1"
    );
    let (_id, url) = local.pause(&code).await;
    let page = open(&local.http, &url).await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(!page.html.contains("<img"), "markup from the code reached the page: {}", page.html);
    assert!(!page.html.contains("</script>"), "{}", page.html);
    assert!(page.html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{}", page.html);
    // The line with the pending call is highlighted; the attack line is just text.
    assert!(page.html.contains("<span class=\"line hl\"><span class=\"ln\">2</span>const created"), "{}", page.html);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_without_its_cookie_decides_nothing() {
    let local = Local::start(quick_wait()).await;
    let (id, url) = local.pause(WRITE).await;
    let mut page = open(&local.http, &url).await;
    page.cookie = Some("executor_csrf=00000000000000000000000000000000".into());
    let (status, html) = submit(&local.http, &url, &page, "accept").await;
    assert_eq!(status, 403, "{html}");
    assert_eq!(open(&local.http, &url).await.status, 200, "the link still works");
    let view = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(view["status"], "user_approval_required");
    assert_eq!(local.posts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_for_programmatic_approvers() {
    let local = Local::start(quick_wait()).await;
    let (id, _url) = local.pause(WRITE).await;
    let api = |token: &str, method: reqwest::Method, path: String, body: Option<Value>| {
        let mut request = local
            .http
            .request(method, format!("{}{path}", local.base))
            .header("authorization", format!("Bearer {token}"));
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let cache = response.headers().get("cache-control").map(|v| v.to_str().unwrap().to_owned());
            let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
            (status, body, cache)
        }
    };
    let view = format!("/api/executions/{id}");
    let resume = format!("/api/executions/{id}/resume");

    let (status, body, cache) = api(&local.alice, reqwest::Method::GET, view.clone(), None).await;
    assert_eq!((status, cache.as_deref()), (200, Some("no-store")), "{body}");
    assert_eq!(body["status"], "waiting_for_interaction");
    assert_eq!(body["interaction"]["tool"], "shop.items.createItem");
    assert_eq!(body["interaction"]["args"], json!({"body": {"name": "chair"}}));

    // Another owner, or no key: nothing is revealed.
    let (status, body, _) = api(&local.bob, reqwest::Method::GET, view.clone(), None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("execution_not_found")));
    let (status, _, _) =
        api(&local.bob, reqwest::Method::POST, resume.clone(), Some(json!({"action": "accept"}))).await;
    assert_eq!(status, 404);
    // A wrong key: the API's error shape (not JSON-RPC), with the challenge.
    let denied = local.http.get(format!("{}{view}", local.base)).bearer_auth("exk_wrong").send().await.unwrap();
    assert_eq!(denied.status(), 401);
    let challenge = denied.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Bearer resource_metadata=\""), "{challenge}");
    let body: Value = serde_json::from_str(&denied.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("the API key is not valid"), "{body}");
    assert!(body.get("jsonrpc").is_none(), "{body}");
    let (status, body, _) =
        api(&local.alice, reqwest::Method::POST, resume.clone(), Some(json!({"action": "maybe"}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_arguments")));

    let (status, body, _) =
        api(&local.alice, reqwest::Method::POST, resume.clone(), Some(json!({"action": "accept"}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], json!({"id": 3, "name": "chair"}));
    let (status, body, _) = api(&local.alice, reqwest::Method::POST, resume, Some(json!({"action": "accept"}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("execution_already_settled")));
    let (status, body, _) = api(&local.alice, reqwest::Method::GET, view, None).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("completed")));
    assert_eq!(local.posts(), 1);
}

/// The real thing: Debian's Chromium opens the link on a phone-sized screen and
/// the Approve button is clicked (`tests/browser/approve.mjs`, playwright-core).
/// The item's name is markup, which must stay text: no dialog may open. It also
/// holds a right-to-left override, which must show as a visible escape (the
/// screenshot `target/browser/approval-pending.png` shows the page as seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_by_a_click_in_headless_chromium() {
    let local = Local::start(quick_wait()).await;
    let attack = "<img src=x onerror=alert(1)>invoice\u{202E}fdp.exe";
    let code =
        format!("const c = await tools.shop.items.createItem({{ body: {{ name: {attack:?} }} }}); return c.data");
    let (id, url) = local.pause(&code).await;
    let (outcome, screenshot) = click_in_chromium(url, "approval.png", "Approve").await;
    assert_eq!(outcome["before"], "Approve this tool call?", "{outcome}");
    let pending = outcome["pending"].as_str().unwrap();
    assert!(pending.contains("invoice\\u{202E}fdp.exe"), "the override is shown as an escape: {pending}");
    assert!(!pending.contains('\u{202E}'), "no raw override reaches the page: {pending}");
    assert_eq!(outcome["heading"], "Approved", "{outcome}");
    assert!(outcome["text"].as_str().unwrap().contains("The call was made and the code finished."), "{outcome}");
    assert_eq!(outcome["dialogs"], json!([]), "markup ran in the page");
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 1000, "a screenshot at {}", screenshot.display());

    let resumed = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(resumed["result"], json!({"id": 3, "name": attack}), "{resumed}");
    assert_eq!(local.posts(), 1);
}

/// `GET /api/grants` or `DELETE /api/grants/{id}` as the owner of `token`: (status, body or null).
async fn grants_api(local: &Local, token: &str, method: reqwest::Method, id: Option<&str>) -> (u16, Value) {
    let path = id.map_or("/api/grants".to_owned(), |id| format!("/api/grants/{id}"));
    let response = local.http.request(method, format!("{}{path}", local.base)).bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}

/// "Always allow" clicked in headless Chromium: the same code then runs
/// without pausing, one upstream POST per run; another owner still pauses;
/// after a revoke through the API the code pauses again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allowed_by_a_click_in_headless_chromium() {
    let local = Local::start(quick_wait()).await;
    let (id, url) = local.pause(WRITE).await;
    let (outcome, _) = click_in_chromium(url, "always-allow.png", "Always allow tools.shop.items.createItem").await;
    assert!(outcome["pending"].as_str().unwrap().contains("Always allow tools.shop.items.createItem"), "{outcome}");
    assert_eq!(outcome["heading"], "Approved", "{outcome}");
    let resumed = local.call("resume", json!({ "executionId": id })).await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(local.posts(), 1);

    // The same code runs straight through now, one POST per run.
    for run in 2..=3 {
        let again = local.call("execute", json!({ "code": WRITE })).await;
        assert_eq!(again["status"], "completed", "{again}");
        assert_eq!(local.posts(), run);
    }

    // The grant is alice's: bob's code still pauses, and bob sees no grant of hers.
    let bob = mcp_client(&local.base, &local.bob, "browser").await;
    let paused = call_tool(&bob, "execute", json!({ "code": WRITE })).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");
    let (status, listed) = grants_api(&local, &local.bob, reqwest::Method::GET, None).await;
    assert_eq!((status, listed), (200, json!({"grants": []})));

    let (status, listed) = grants_api(&local, &local.alice, reqwest::Method::GET, None).await;
    assert_eq!(status, 200, "{listed}");
    let grants = listed["grants"].as_array().unwrap();
    assert_eq!(grants.len(), 1, "{listed}");
    assert_eq!(grants[0]["tool"], "shop.items.createItem");
    assert_eq!(grants[0]["grantedBy"], "approval_page");
    let grant = grants[0]["id"].as_str().unwrap();

    // Another owner's grant is not found, and stays.
    let (status, body) = grants_api(&local, &local.bob, reqwest::Method::DELETE, Some(grant)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("grant_not_found")), "{body}");
    assert_eq!(local.call("execute", json!({ "code": WRITE })).await["status"], "completed");
    assert_eq!(local.posts(), 4);

    // Revoked: the next run asks again.
    let (status, body) = grants_api(&local, &local.alice, reqwest::Method::DELETE, Some(grant)).await;
    assert_eq!((status, body), (204, Value::Null));
    local.pause(WRITE).await;
    assert_eq!(local.posts(), 4);
    let (status, body) = grants_api(&local, &local.alice, reqwest::Method::DELETE, Some(grant)).await;
    assert_eq!(status, 404, "{body}");
}

/// The model cannot create a grant: whatever it sends to `resume`, the call
/// runs once at most and the next run pauses again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_mode_resume_never_creates_a_grant() {
    let local = Local::start(quick_wait()).await;
    let model = mcp_client(&local.base, &local.alice, "model").await;
    let shapes = [
        json!({"action": "accept", "remember": "always"}),
        json!({"action": "accept", "remember": true}),
        json!({"action": "accept_always"}),
        json!({"action": "always"}),
        json!({"action": "accept", "content": {"remember": "always"}}),
        json!({"action": "accept", "content": {"persist": "always"}}),
        json!({"action": "accept", "content": {"decision": "accept_always"}}),
        json!({"action": "accept", "_meta": {"persist": "always"}}),
        json!({"action": "accept", "persist": "always", "grant": true}),
        json!({"action": "accept", "remember": "always", "pauseId": "0"}),
        json!({"remember": "always"}),
    ];
    let mut posts = 0;
    for shape in shapes {
        let paused = call_tool(&model, "execute", json!({ "code": WRITE })).await;
        assert_eq!(paused["status"], "waiting_for_interaction", "{shape}: {paused}");
        let mut arguments = shape.clone();
        arguments["executionId"] = paused["executionId"].clone();
        // The same hints in the request's own `_meta`, as some clients send them.
        let mut params = CallToolRequestParams::new("resume").with_arguments(arguments.as_object().unwrap().clone());
        params.meta = Some(serde_json::from_value(json!({"persist": "always", "remember": "always"})).unwrap());
        let resumed = model.call_tool(params).await.unwrap().structured_content.unwrap();
        if resumed["status"] == "completed" {
            posts += 1;
        }
        assert_eq!(local.posts(), posts, "{shape}: {resumed}");
        let (status, listed) = grants_api(&local, &local.alice, reqwest::Method::GET, None).await;
        assert_eq!((status, &listed), (200, &json!({"grants": []})), "{shape}");
    }
    assert!(posts > 0, "some shapes are plain accepts and run once");
    let still = call_tool(&model, "execute", json!({ "code": WRITE })).await;
    assert_eq!(still["status"], "waiting_for_interaction", "{still}");
}

/// The owner's JSON API can remember an accept; a decline cannot be remembered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_remembers_an_accept_when_asked() {
    let local = Local::start(quick_wait()).await;
    let (id, _url) = local.pause(WRITE).await;
    let resume = |body: Value| {
        let request = local
            .http
            .post(format!("{}/api/executions/{id}/resume", local.base))
            .bearer_auth(&local.alice)
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), serde_json::from_str::<Value>(&response.text().await.unwrap()).unwrap())
        }
    };
    for bad in [json!({"action": "decline", "remember": "always"}), json!({"action": "accept", "remember": "forever"})]
    {
        let (status, body) = resume(bad.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_arguments")), "{bad}: {body}");
    }
    let (status, body) = resume(json!({"action": "accept", "remember": "always"})).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("completed")), "{body}");
    let (_, listed) = grants_api(&local, &local.alice, reqwest::Method::GET, None).await;
    assert_eq!(listed["grants"][0]["grantedBy"], "owner_api", "{listed}");
    assert_eq!(local.call("execute", json!({ "code": WRITE })).await["status"], "completed");
    assert_eq!(local.posts(), 2);
}
