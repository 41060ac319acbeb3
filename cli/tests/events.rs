//! Lifecycle events against `executor serve` (its host and HTTP server, in
//! this process so that the test owns the clock), with a real webhook
//! receiver on loopback, a real upstream and the rmcp client: one approved
//! execution's `Execution Paused`, `Execution Decided` and `Execution
//! Completed` arrive in order, once each; an event that could not be
//! delivered while the receiver was down arrives once it is back, retried by
//! a later request after the clock moved past the retry interval.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ManualClock;
use executor_service::{EVENT_RETRY_INTERVAL, Host, HostConfig};
use executor_store::EmbeddedStore;
use executor_tests::faults::Upstream;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const WRITE: &str = "const w = await tools.ledger.entries.addEntry({ body: { note: 'events' } });
return w.ok;";

/// How long a test waits for a delivery under way (it ends far sooner).
const SETTLE: Duration = Duration::from_secs(20);

/// A webhook receiver: records each event it accepts; while down, it drops
/// every connection without answering, as a crashed receiver behind its port.
struct Receiver {
    url: String,
    up: AtomicBool,
    attempts: AtomicUsize,
    events: Mutex<Vec<Value>>,
}

impl Receiver {
    async fn start() -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/executor", listener.local_addr().unwrap());
        let receiver =
            Arc::new(Self { url, up: AtomicBool::new(true), attempts: AtomicUsize::new(0), events: Mutex::default() });
        let serving = receiver.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serving.clone().answer(stream));
            }
        });
        receiver
    }

    async fn answer(self: Arc<Self>, mut stream: tokio::net::TcpStream) {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if !self.up.load(Ordering::SeqCst) {
            return;
        }
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        let body = loop {
            let Ok(n @ 1..) = stream.read(&mut chunk).await else { return };
            buffer.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut request = httparse::Request::new(&mut headers);
            let Ok(httparse::Status::Complete(end)) = request.parse(&buffer) else { continue };
            assert_eq!((request.method, request.path), (Some("POST"), Some("/hooks/executor")));
            let length = request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok())
                .expect("a content-length");
            if buffer.len() >= end + length {
                break buffer[end..end + length].to_vec();
            }
        };
        self.events.lock().unwrap().push(serde_json::from_slice(&body).expect("the event is JSON"));
        let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n").await;
    }

    fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }
}

/// `executor serve`'s host on loopback with a manual clock and the webhook.
struct Rig {
    host: Host,
    url: String,
    token: String,
    clock: Arc<ManualClock>,
    upstream: Upstream,
    receiver: Arc<Receiver>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Upstream::start().await;
        let receiver = Receiver::start().await;
        let sources = CatalogConfig::load(&upstream.write_config(dir.path(), Duration::from_secs(30))).unwrap();
        let catalog = Arc::new(Catalog::connect(&sources).await.expect("the catalog connects"));
        let clock = Arc::new(ManualClock::starting_now());
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("data")).unwrap().with_clock(clock.clone()));
        let token = executor_cli::keys::create(&*store, "alice").await.unwrap();

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = HostConfig { clock: clock.clone(), ..HostConfig::default() };
        // As `executor serve` reads EXECUTOR_EVENT_WEBHOOK and sets its links' base.
        config = config.with_env(|name| (name == "EXECUTOR_EVENT_WEBHOOK").then(|| receiver.url.clone())).unwrap();
        config.local_url = Some(executor_cli::serve::local_url(addr));
        let config = config.connect_events().await.unwrap();
        let host = executor_cli::serve::host(store, catalog, &["ledger".to_owned()], config).await.unwrap();
        tokio::spawn(executor_cli::serve::serve(listener, host.clone(), std::future::pending()));
        Self { host, url: format!("http://{addr}"), token, clock, upstream, receiver, _dir: dir }
    }

    async fn client(&self) -> Client {
        let transport =
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.url)).auth_header(self.token.clone());
        let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("events", "1"));
        info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.expect("an MCP session")
    }

    /// Any request: each gives the outbox its chance to retry.
    async fn poke(&self) {
        let http = executor_http_client::builder().no_proxy().build().unwrap();
        let health = http.get(format!("{}/healthz", self.url)).send().await.unwrap();
        assert_eq!(health.status(), 200);
    }
}

type Client = RunningService<RoleClient, InitializeRequestParams>;

async fn call(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let arguments: JsonObject = arguments.as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    result.structured_content.expect("structured content")
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["detail-type"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_approved_execution_sends_paused_decided_and_completed_in_order_once_each() {
    let rig = Rig::start().await;
    let client = rig.client().await;
    let paused = call(&client, "execute", json!({ "code": WRITE })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let id = paused["executionId"].as_str().unwrap().to_owned();
    let pause_id = paused["pauseId"].as_str().unwrap().to_owned();
    let done = call(&client, "resume", json!({ "executionId": id, "pauseId": pause_id, "action": "accept" })).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(rig.upstream.posts().len(), 1);

    rig.host.settle_events(SETTLE).await;
    // A later sweep finds nothing left to send: nothing arrives twice.
    rig.clock.advance(EVENT_RETRY_INTERVAL + Duration::from_secs(1));
    rig.poke().await;
    rig.host.settle_events(SETTLE).await;

    let events = rig.receiver.events();
    assert_eq!(types(&events), ["Execution Paused", "Execution Decided", "Execution Completed"], "{events:#?}");
    let ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|i| !i.is_empty()) && ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");
    for event in &events {
        assert_eq!(event["source"], "executor", "{event}");
        assert_eq!(event["detail"]["executionId"], id, "{event}");
        assert_eq!(event["detail"]["owner"], "alice", "{event}");
    }
    let (pause, decided, completed) = (&events[0]["detail"], &events[1]["detail"], &events[2]["detail"]);
    assert_eq!(pause["tool"], "ledger.entries.addEntry");
    assert_eq!(pause["expiresAt"], paused["expiresAt"]);
    assert!(pause["message"].as_str().unwrap().contains("events"), "the approval text: {pause}");
    assert_eq!(pause.get("approvalUrl"), None, "model mode opens no link");
    assert_eq!(decided["decision"], "accept");
    assert_eq!(completed["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_while_the_receiver_is_down_is_delivered_once_it_is_back() {
    let rig = Rig::start().await;
    rig.receiver.up.store(false, Ordering::SeqCst);
    let transport = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp?elicitation_mode=browser", rig.url))
        .auth_header(rig.token.clone());
    let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("events", "1"));
    let client = info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.unwrap();
    let paused = call(&client, "execute", json!({ "code": WRITE })).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");

    // Tried at once, and failed: the event stays in the outbox.
    rig.host.settle_events(SETTLE).await;
    assert!(rig.receiver.attempts.load(Ordering::SeqCst) >= 1, "the pause woke a delivery");
    assert_eq!(rig.receiver.events(), Vec::<Value>::new());

    // Back, but before the retry interval a request does not retry.
    rig.receiver.up.store(true, Ordering::SeqCst);
    let attempts = rig.receiver.attempts.load(Ordering::SeqCst);
    rig.poke().await;
    rig.host.settle_events(SETTLE).await;
    assert_eq!(rig.receiver.attempts.load(Ordering::SeqCst), attempts, "not due yet");

    // Past it, the next request delivers it.
    rig.clock.advance(EVENT_RETRY_INTERVAL + Duration::from_secs(1));
    rig.poke().await;
    rig.host.settle_events(SETTLE).await;
    let events = rig.receiver.events();
    assert_eq!(types(&events), ["Execution Paused"], "{events:#?}");
    let detail = &events[0]["detail"];
    assert_eq!(detail["executionId"], paused["executionId"]);
    assert_eq!(detail["approvalUrl"], paused["approvalUrl"], "the link the person needs");
    assert!(detail["approvalUrl"].as_str().unwrap().starts_with(&rig.url), "links point at this server: {detail}");

    // Delivered and deleted: later requests send nothing again.
    rig.clock.advance(EVENT_RETRY_INTERVAL + Duration::from_secs(1));
    rig.poke().await;
    rig.host.settle_events(SETTLE).await;
    assert_eq!(rig.receiver.events().len(), 1);
}
