//! Sources that cannot be connected at start are retried with backoff, by
//! the injected clock (the tests move a `ManualClock`; nothing sleeps for the
//! backoff), and once one connects its tools are searched, described and
//! called without a restart. `GET /readyz` (a real host over a real socket)
//! says which source is unavailable, why, since when and until when; the
//! `SourcesUnavailable` metric counts them. Real upstreams on loopback: a
//! spec host that answers 503 until it is brought up, the shop behind it, an
//! MCP server on a port nothing listened on at start.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::{Clock, ExecutionId, ManualClock, Timestamp};
use executor_sandbox::{CallContext, Policy, PolicyCall, Readiness, SourceReadiness, Tools};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use serde_json::{Value, json};
use support::{Recorded, SHOP_SPEC, TOKEN, TOKEN_VAR, call_tool, mcp_client, set_secrets, start_docs_on, start_shop};

/// Serves the shop's document at `/openapi.yaml` once `up`; before, 503 with
/// a body that echoes the credentials it was sent (they must not reach the reason).
struct SpecHost {
    url: String,
    up: Arc<AtomicBool>,
    asked: Arc<AtomicUsize>,
}

impl SpecHost {
    async fn start() -> Self {
        let (up, asked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let (is_up, counter) = (up.clone(), asked.clone());
        let spec = move |headers: HeaderMap| {
            let (is_up, counter) = (is_up.clone(), counter.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                if is_up.load(Ordering::SeqCst) {
                    return SHOP_SPEC.into_response();
                }
                let sent = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("nothing");
                (StatusCode::SERVICE_UNAVAILABLE, format!("down for maintenance (you sent {sent})")).into_response()
            }
        };
        let url = support::serve(Router::new().route("/openapi.yaml", get(spec))).await;
        Self { url, up, asked }
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }

    fn bring_up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// The shop, whose document is at `spec`'s host and which takes the bearer token.
fn shop_config(dir: &std::path::Path, spec: &str, base_url: &str) -> CatalogConfig {
    let text = format!(
        r#"
        [outbound]
        allow_loopback = true
        timeout_ms = 5000

        [[sources]]
        namespace = "shop"
        kind = "openapi"
        spec = "{spec}/openapi.yaml"
        base_url = "{base_url}"
        auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}
        "#
    );
    let file = dir.join("executor.toml");
    std::fs::write(&file, text).unwrap();
    CatalogConfig::load(&file).unwrap()
}

fn ctx() -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), 0)
}

fn outage(readiness: &Readiness, namespace: &str) -> (String, Timestamp, Timestamp) {
    match &readiness.sources[namespace] {
        SourceReadiness::Unavailable { reason, since, next_retry_at } => (reason.clone(), *since, *next_retry_at),
        SourceReadiness::Connected => panic!("{namespace} is connected: {readiness:?}"),
    }
}

async fn readyz(http: &reqwest::Client, base: &str) -> (u16, Value) {
    let response = http.get(format!("{base}/readyz")).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_down_at_start_connects_on_a_due_retry_and_its_tools_appear_without_a_restart() {
    set_secrets();
    let shop = start_shop("http://localhost/").await;
    let spec = SpecHost::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let started = clock.now();
    let config = shop_config(dir.path(), &spec.url, &shop.base_url);
    let catalog = Arc::new(Catalog::connect_with_clock(&config, clock.clone()).await.unwrap());

    // The host over a real socket, as `executor serve` runs it.
    let labels: Vec<String> = catalog.namespaces().iter().map(|n| catalog.label(&n.namespace)).collect();
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let key = keys::create(&*store, "alice").await.unwrap();
    let host_config = HostConfig { clock: clock.clone(), ..HostConfig::default() };
    let host = serve::host(store, catalog.clone(), &labels, host_config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    let http = executor_http_client::builder().build().unwrap();

    let (status, body) = readyz(&http, &base).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "degraded");
    let down = &body["sources"]["shop"];
    assert_eq!(down["state"], "unavailable", "{body}");
    let reason = down["reason"].as_str().unwrap();
    assert!(reason.starts_with("source `shop` (spec) failed: HTTP 503: down for maintenance"), "{reason}");
    assert!(!reason.contains(TOKEN) && !body.to_string().contains(TOKEN), "no secret in the reason: {reason}");
    assert_eq!(down["since"], started.to_rfc3339());
    assert_eq!(down["nextRetryAt"], started.plus(Duration::from_secs(2)).to_rfc3339(), "the first retry within 5 s");
    let liveness = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(liveness.status(), 200, "liveness is not readiness");
    let call = catalog.call("shop.items.listItems", json!({}), &ctx()).await.unwrap_err();
    assert_eq!(call.code, "source_unavailable");

    // Not due yet: nothing is asked.
    assert_eq!(catalog.heal().await, 1);
    assert_eq!(spec.asked(), 1, "no retry before it is due");
    // Due, and still down: the next wait doubles, the first failure stays `since`.
    clock.advance(Duration::from_secs(2));
    assert_eq!(catalog.heal().await, 1);
    assert_eq!(spec.asked(), 2);
    let (_, since, next) = outage(&catalog.readiness(), "shop");
    assert_eq!((since, next), (started, clock.now().plus(Duration::from_secs(4))));
    assert_eq!(catalog.next_retry_at(), Some(next));

    // Up, and due again: connected, with its tools, in the same process.
    spec.bring_up();
    clock.advance(Duration::from_secs(4));
    assert_eq!(catalog.heal().await, 0);
    assert_eq!(spec.asked(), 3);
    assert_eq!(catalog.next_retry_at(), None);
    let (status, body) = readyz(&http, &base).await;
    assert_eq!((status, &body), (200, &json!({"status": "ready", "sources": {"shop": {"state": "connected"}}})));
    let namespace = catalog.namespaces().remove(0);
    assert_eq!((namespace.error, namespace.tools > 3), (None, true), "{:?}", catalog.namespaces());
    assert_eq!(catalog.label("shop"), "shop");
    let found = catalog.search(json!({"query": "list items"})).await.unwrap();
    assert_eq!(found["items"][0]["path"], "shop.items.listItems", "{found}");
    assert_eq!(found.get("unavailable"), None, "{found}");
    let described = catalog.describe(json!("shop.items.listItems")).await.unwrap();
    assert!(described.as_str().unwrap().contains("listItems"), "{described}");
    assert!(matches!(
        catalog.policy(&PolicyCall::new("shop.items.createItem", &json!({"body": {"name": "x"}}))),
        Policy::NeedsApproval { .. }
    ));

    // The code runs it, through MCP, with the bearer token.
    let client = mcp_client(&base, &key, "model").await;
    let code = "const r = await tools.shop.items.listItems({}); return r.data.map(i => i.name);";
    let result = call_tool(&client, "execute", json!({"code": code})).await;
    assert_eq!((&result["status"], &result["result"]), (&json!("completed"), &json!(["lamp", "desk"])), "{result}");
    assert_eq!(Recorded::count(&shop.recorded.gets), 1);
    client.cancel().await.unwrap();
}

/// What a Lambda function has: no background task, only uses. A call before
/// the retry is due asks nothing; the first one after connects it. A call
/// planned while the source was down (its tool unknown, so its policy
/// unknown) is decided again before it is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_use_after_a_due_retry_connects_it_and_blind_plans_are_decided_again() {
    set_secrets();
    let shop = start_shop("http://localhost/").await;
    let spec = SpecHost::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Catalog::connect_with_clock(&shop_config(dir.path(), &spec.url, &shop.base_url), clock.clone()).await.unwrap();
    let read = catalog.call("shop.items.listItems", json!({}), &ctx()).await.unwrap_err();
    assert_eq!(read.code, "source_unavailable", "{read:?}");
    assert_eq!(spec.asked(), 1, "not due: the call asks nothing");

    // Planned while unavailable: unknown tools, which run to be told why.
    let create = json!({"body": {"name": "chair"}});
    assert_eq!(catalog.policy(&PolicyCall::new("shop.items.createItem", &create)), Policy::run_by_default());
    assert_eq!(catalog.policy(&PolicyCall::new("shop.items.listItems", &json!({}))), Policy::run_by_default());
    spec.bring_up();
    clock.advance(Duration::from_secs(2));
    // The read connects the source and runs: its policy says run.
    let listed = catalog.call("shop.items.listItems", json!({}), &ctx()).await.unwrap();
    assert_eq!(listed[0]["name"], "lamp", "{listed}");
    assert_eq!(spec.asked(), 2);
    // The write was planned without its policy: it is not made, the code is told to run again.
    let refused = catalog.call("shop.items.createItem", create.clone(), &ctx()).await.unwrap_err();
    assert_eq!(refused.code, "approval_required", "{refused:?}");
    assert!(refused.message.contains("run the code again to be asked"), "{}", refused.message);
    assert_eq!(Recorded::count(&shop.recorded.posts), 0, "nothing was sent");
    // Planned again now, it needs approval as any write; approved, it is made.
    assert!(matches!(catalog.policy(&PolicyCall::new("shop.items.createItem", &create)), Policy::NeedsApproval { .. }));
    let made = catalog.call("shop.items.createItem", create, &ctx()).await.unwrap();
    assert_eq!(made["name"], "chair");
    assert_eq!(Recorded::count(&shop.recorded.posts), 1);
}

/// `executor serve`'s background task retries on the clock's schedule and
/// stops once every source is connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_task_retries_when_due_until_connected() {
    set_secrets();
    let shop = start_shop("http://localhost/").await;
    let spec = SpecHost::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let config = shop_config(dir.path(), &spec.url, &shop.base_url);
    let catalog = Arc::new(Catalog::connect_with_clock(&config, clock.clone()).await.unwrap());
    let healing = catalog.heal_in_background();
    let mut rounds = healing.rounds();
    spec.bring_up();
    // The clock has not moved: a whole round begun after the source came up
    // passes, and nothing is retried.
    let seen = *rounds.borrow_and_update();
    let passed = rounds.wait_for(|made| *made >= seen + 2);
    tokio::time::timeout(Duration::from_secs(20), passed).await.expect("a round of retries").unwrap();
    assert_eq!(spec.asked(), 1);
    assert!(!catalog.readiness().is_ready());
    clock.advance(Duration::from_secs(2));
    // The next round is due: it connects, and the retries end.
    let connected = rounds.wait_for(|_| catalog.readiness().is_ready());
    let _ = tokio::time::timeout(Duration::from_secs(20), connected).await.expect("a round after the clock moved");
    assert!(catalog.readiness().is_ready(), "not connected: {:?}", catalog.readiness());
    let ended = async { while rounds.changed().await.is_ok() {} };
    tokio::time::timeout(Duration::from_secs(20), ended).await.expect("the retries end once all is connected");
    assert_eq!(spec.asked(), 2);
    let listed = catalog.call("shop.items.listItems", json!({}), &ctx()).await.unwrap();
    assert_eq!(listed[1]["name"], "desk");
}

/// An MCP server that is not listening at start: the reason names where it
/// was looked for; once it listens there, its tools are listed and called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_mcp_server_is_named_by_host_and_connects_once_it_listens() {
    set_secrets();
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("executor.toml");
    let text =
        format!("[outbound]\nallow_loopback = true\n\n{}", support::docs_source(&format!("http://{address}/mcp")));
    std::fs::write(&file, text).unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let catalog = Catalog::connect_with_clock(&CatalogConfig::load(&file).unwrap(), clock.clone()).await.unwrap();
    let (reason, _, _) = outage(&catalog.readiness(), "docs");
    assert!(reason.starts_with("source `docs` (mcp) failed: "), "{reason}");
    assert!(reason.contains(&format!("to {address}")), "names the host and port: {reason}");
    let found = catalog.search(json!({"query": "documentation"})).await.unwrap();
    assert_eq!(found["unavailable"][0]["namespace"], "docs", "{found}");

    let docs = start_docs_on(tokio::net::TcpListener::bind(address).await.unwrap()).await;
    clock.advance(Duration::from_secs(2));
    // A search uses every source: the due one is retried first, and its tools are found.
    let found = catalog.search(json!({"query": "search documentation"})).await.unwrap();
    assert_eq!(found["items"][0]["path"], "docs.search_docs", "{found}");
    assert_eq!(found.get("unavailable"), None, "{found}");
    let hits = catalog.call("docs.search_docs", json!({"query": "start"}), &ctx()).await.unwrap();
    assert!(hits.to_string().contains("Getting started"), "{hits}");
    assert_eq!(Recorded::count(&docs.recorded.calls), 1);
    assert!(catalog.readiness().is_ready());
}

/// The metric written for CloudWatch (EMF, as in Lambda): how many sources
/// are unavailable, every flush while any is, and once more at zero.
#[tokio::test(flavor = "current_thread")]
async fn the_metric_counts_unavailable_sources() {
    set_secrets();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let (dispatch, telemetry) = executor_telemetry::Builder::new("mcp")
        .emf_metrics("Executor", Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned())))
        .build();
    let _installed = tracing::dispatcher::set_default(&dispatch);
    let taken =
        || -> Vec<Value> { lines.lock().unwrap().drain(..).map(|line| serde_json::from_str(&line).unwrap()).collect() };
    let shop = start_shop("http://localhost/").await;
    let spec = SpecHost::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Catalog::connect_with_clock(&shop_config(dir.path(), &spec.url, &shop.base_url), clock.clone()).await.unwrap();
    telemetry.flush().await;
    let written = taken();
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0]["SourcesUnavailable"], 1);
    assert_eq!(written[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], "SourcesUnavailable");
    telemetry.flush().await;
    assert_eq!(taken()[0]["SourcesUnavailable"], 1, "written again while it lasts");
    spec.bring_up();
    clock.advance(Duration::from_secs(2));
    assert_eq!(catalog.heal().await, 0);
    telemetry.flush().await;
    assert_eq!(taken()[0]["SourcesUnavailable"], 0, "the recovery is written");
    telemetry.flush().await;
    assert_eq!(taken(), Vec::<Value>::new(), "then nothing");
}
