//! The 2026-07-28 MCP tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663) against `executor serve` over a real socket, with a raw JSON-RPC
//! client (released SDKs do not drive the new tasks yet). The host answers
//! within a small response budget, so code that waits on a slow tool
//! outlives it and becomes a task; approvals are native (the client's own
//! elicitation), and the test tools count every upstream call.

#[path = "../../shared/sandbox/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_cli::{keys, serve};
use executor_core::{Clock, ManualClock};
use executor_service::{HostConfig, RequestStateKey};
use executor_store::EmbeddedStore;
use serde_json::{Value, json};
use support::TestTools;
use tokio::sync::oneshot;

const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const VERSION: &str = "2026-07-28";

/// Outlives the host's 300 ms response budget, then asks for approval.
const LONG_WRITE: &str =
    "await tools.slow.wait({ms: 1500}); const w = await tools.w.create({title: 'bug'}); return w.data.args";

struct Host {
    url: String,
    alice: String,
    bob: String,
    tools: Arc<TestTools>,
    clock: Arc<ManualClock>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Host {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let alice = keys::create(&*store, "alice").await.unwrap();
        let bob = keys::create(&*store, "bob").await.unwrap();
        let clock = Arc::new(ManualClock::starting_now());
        let config = HostConfig {
            request_state_key: RequestStateKey::new(vec![9u8; 32]),
            response_budget: Duration::from_millis(300),
            clock: clock.clone(),
            ..HostConfig::default()
        };
        let tools = TestTools::new();
        let namespaces = vec!["slow".to_owned(), "w".to_owned(), "r".to_owned()];
        let host = serve::host(store, tools.clone(), &namespaces, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp?elicitation_mode=native", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(async move {
            serve::serve(listener, host, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap()
        });
        Self { url, alice, bob, tools, clock, stop: Some(stop), done, _dir: dir }
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.done.await.unwrap();
    }

    /// The upstream calls of `path` made so far.
    fn calls_of(&self, path: &str) -> usize {
        self.tools.calls().iter().filter(|(called, _)| called == path).count()
    }
}

/// A raw 2026-07-28 client: per-request `_meta` with its capabilities, the
/// method and name headers.
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
    /// Whether its requests declare the tasks extension.
    tasks: bool,
}

impl Client {
    fn new(host: &Host, token: &str, tasks: bool) -> Self {
        let http = executor_http_client::builder().build().unwrap();
        Self { http, url: host.url.clone(), token: token.to_owned(), tasks }
    }

    fn meta(&self) -> Value {
        let mut capabilities = json!({"elicitation": {"form": {}}});
        if self.tasks {
            capabilities["extensions"] = json!({ EXTENSION: {} });
        }
        json!({"io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities})
    }

    /// `method` with `params` (and this client's `_meta`), `Mcp-Name: name`:
    /// the HTTP status and the JSON-RPC answer.
    async fn send(&self, method: &str, mut params: Value, name: Option<&str>) -> (u16, Value) {
        params["_meta"] = self.meta();
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let response = request.body(body.to_string()).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    async fn execute(&self, code: &str) -> Value {
        let (status, answer) =
            self.send("tools/call", json!({"name": "execute", "arguments": {"code": code}}), Some("execute")).await;
        assert_eq!(status, 200, "{answer}");
        answer["result"].clone()
    }

    /// A `tasks/*` request naming `task` in its body and its `Mcp-Name`.
    async fn task(&self, method: &str, task: &str, mut params: Value) -> (u16, Value) {
        params["taskId"] = task.into();
        self.send(method, params, Some(task)).await
    }

    /// `tasks/get`, which must succeed: its result.
    async fn get(&self, task: &str) -> Value {
        let (status, answer) = self.task("tasks/get", task, json!({})).await;
        assert_eq!(status, 200, "{answer}");
        assert!(answer.get("error").is_none(), "{answer}");
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        answer["result"].clone()
    }

    /// Poll `tasks/get` until its status is `status`; at most 20 s.
    async fn until(&self, task: &str, status: &str) -> Value {
        let started = Instant::now();
        loop {
            let got = self.get(task).await;
            if got["status"] == status {
                return got;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "still {got} after 20 s, not {status}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// A long execute becomes a task; its pause is `input_required` with the
/// approval's elicitation; `tasks/update` decides it (one upstream call, a
/// replay changes nothing), and `tasks/get` carries the result. Another
/// owner, a missing capability and a wrong `Mcp-Name` are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_execute_is_a_task_whose_pause_is_answered_with_tasks_update() {
    let host = Host::start().await;
    let alice = Client::new(&host, &host.alice, true);

    let created = alice.execute(LONG_WRITE).await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let task = created["taskId"].as_str().expect("a taskId").to_owned();
    let now = host.clock.now().to_rfc3339();
    assert_eq!((created["createdAt"].as_str(), created["lastUpdatedAt"].as_str()), (Some(&*now), Some(&*now)));
    assert!(created["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{created}");
    assert!(created["pollIntervalMs"].as_u64().is_some(), "{created}");

    let paused = alice.until(&task, "input_required").await;
    let requests = paused["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "one approval: {paused}");
    let (pause, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["mode"], "form", "{request}");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(message.contains("Tool: tools.w.create") && message.contains("w.create wants to write"), "{message}");
    assert_eq!(host.calls_of("w.create"), 0, "nothing written before the answer");

    // Another owner's poll, a poll without the capability, a wrong Mcp-Name.
    let (_, foreign) = Client::new(&host, &host.bob, true).task("tasks/get", &task, json!({})).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let (_, undeclared) = Client::new(&host, &host.alice, false).task("tasks/get", &task, json!({})).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    assert_eq!(undeclared["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION], json!({}));
    let (status, misnamed) = alice.send("tasks/get", json!({"taskId": task}), Some("another-task")).await;
    assert_eq!((status, &misnamed["error"]["code"]), (400, &json!(-32020)), "{misnamed}");
    // Bob cannot answer Alice's pause either.
    let answer = json!({"inputResponses": { pause.clone(): {"action": "accept", "content": {"remember": "once"}} }});
    let (_, foreign) = Client::new(&host, &host.bob, true).task("tasks/update", &task, answer.clone()).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert_eq!(host.calls_of("w.create"), 0);

    let (status, ack) = alice.task("tasks/update", &task, answer.clone()).await;
    assert_eq!((status, &ack["result"]), (200, &json!({"resultType": "complete"})), "{ack}");
    let done = alice.until(&task, "completed").await;
    assert_eq!(done["result"]["structuredContent"]["result"], json!({"title": "bug"}), "{done}");
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(host.calls_of("w.create"), 1, "one answer, one call");

    // The same answer again: acknowledged, nothing decided, no call.
    let (_, again) = alice.task("tasks/update", &task, answer).await;
    assert_eq!(again["result"], json!({"resultType": "complete"}), "{again}");
    assert_eq!(alice.get(&task).await["status"], "completed");
    assert_eq!(host.calls_of("w.create"), 1, "still one call");
    host.stop().await;
}

/// `tasks/cancel` stops a running task at its next step: no further call.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_cancel_stops_a_running_task() {
    let host = Host::start().await;
    let alice = Client::new(&host, &host.alice, true);
    let code = "for (let i = 0; i < 2000; i++) { await tools.slow.tick({ms: 20}); } return 'all'";
    let created = alice.execute(code).await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();

    let (status, ack) = alice.task("tasks/cancel", &task, json!({})).await;
    assert_eq!((status, &ack["result"]), (200, &json!({"resultType": "complete"})), "{ack}");
    let cancelled = alice.until(&task, "cancelled").await;
    assert!(cancelled.get("result").is_none(), "{cancelled}");
    let made = host.calls_of("slow.tick");
    assert!(made < 2000, "stopped early: {made} calls");
    // Settled: it makes no further call, and a second cancel is acknowledged.
    let (_, again) = alice.task("tasks/cancel", &task, json!({})).await;
    assert_eq!(again["result"], json!({"resultType": "complete"}), "{again}");
    assert_eq!(alice.get(&task).await["status"], "cancelled");
    assert_eq!(host.calls_of("slow.tick"), made, "no call after the cancellation");
    host.stop().await;
}

/// Only a request that declares the extension gets a task; `server/discover`
/// names the extension; the 2025-11-25 form is not taken for the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_extension_is_discovered_and_never_forced_on_a_client() {
    let host = Host::start().await;
    let alice = Client::new(&host, &host.alice, true);
    let (status, discovered) = alice.send("server/discover", json!({}), None).await;
    assert_eq!(status, 200, "{discovered}");
    assert_eq!(discovered["result"]["capabilities"]["extensions"][EXTENSION], json!({}), "{discovered}");

    let plain = Client::new(&host, &host.alice, false);
    let running = plain.execute("await tools.slow.wait({ms: 1000}); return 1").await;
    assert_eq!(running["structuredContent"]["status"], "running", "no task without the capability: {running}");
    assert!(running.get("taskId").is_none(), "{running}");
    // A task id that names nothing is not found.
    let id = running["structuredContent"]["executionId"].as_str().unwrap();
    let missing = "0".repeat(id.len());
    let (_, unknown) = alice.task("tasks/get", &missing, json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // The running execution read as a task by the client that declares the extension.
    let followed = alice.until(id, "completed").await;
    assert_eq!(followed["result"]["structuredContent"]["result"], 1, "{followed}");
    host.stop().await;
}
