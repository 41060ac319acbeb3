//! Long executions against the real `executor serve` with a 2 s response
//! budget and a real upstream whose reads take 1.5 s each, through the rmcp
//! client: an execution answers `running`, goes on without the client, and
//! `resume` follows it to its outcome. Every read reaches the upstream once,
//! whatever happens: a cancellation, an approval in the middle, or `kill -9`
//! of the server during the run. The same holds for a client that runs
//! `execute` as an MCP task (protocol 2025-11-25): the official TypeScript
//! SDK's client (tests/mcp-client) follows it with `tasks/get`,
//! `tasks/result` and `tasks/cancel`.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use executor_core::{ExecutionId, HEARTBEAT_STALE, ManualClock, Principal, Timeouts};
use executor_sandbox::{Limits, Sandbox};
use executor_service::{ExecutionResult, Executions};
use executor_store::EmbeddedStore;
use executor_tests::cli::create_key;
use executor_tests::faults::{Upstream, query_value};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const OWNER: &str = "long";
/// Owns nothing here: another owner's task must not exist for it.
const STRANGER: &str = "stranger";
/// How long `execute` and `resume` wait before answering `running`.
const BUDGET_MS: &str = "2000";
/// `resume` calls a test makes at most while following one execution (each
/// waits up to the budget): far more than the runs here need.
const MAX_POLLS: usize = 60;

/// Six reads of 1.5 s each, in sequence: 9 s, over four budgets.
const SIX_READS: &str = "const seen = [];
for (let n = 1; n <= 6; n++) {
  const r = await tools.ledger.entries.listEntries({ n, holdMs: 1500 });
  seen.push(r.ok ? n : r.error.code);
}
return seen;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_execution_answers_running_and_completes_through_resume_with_each_read_made_once() {
    let rig = Rig::start().await;
    let client = rig.client("").await;

    let (started, _) = call(&client, "execute", json!({ "code": SIX_READS })).await;
    assert_eq!(started["status"], "running", "{started}");
    assert!(started["pollAfterMs"].as_u64().is_some(), "{started}");
    let id = started["executionId"].as_str().expect("an executionId").to_owned();

    let (done, polls) = follow(&client, &id, json!({ "executionId": id })).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!([1, 2, 3, 4, 5, 6]));
    assert!(polls >= 1, "the outcome came through resume");
    assert_eq!(reads_by_n(&rig.upstream), (1..=6).map(|n| (n, 1)).collect(), "each read reached the upstream once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_running_execution_before_its_next_call() {
    let rig = Rig::start().await;
    let client = rig.client("").await;

    let (started, _) = call(&client, "execute", json!({ "code": SIX_READS })).await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["executionId"].as_str().unwrap().to_owned();

    let (cancelled, _) = follow(&client, &id, json!({ "executionId": id, "action": "cancel" })).await;
    assert_eq!(cancelled["status"], "error", "{cancelled}");
    assert_eq!(cancelled["error"]["code"], "cancelled", "{cancelled}");
    // It stopped where it was: the reads made stand, once each, and no more came.
    let reads = reads_by_n(&rig.upstream);
    assert!(reads.len() < 6, "the run stopped before its last read: {reads:?}");
    assert!(reads.values().all(|times| *times == 1), "{reads:?}");
    let (again, _) = call(&client, "resume", json!({ "executionId": id })).await;
    assert_eq!(again["error"]["code"], "cancelled", "a settled execution stays settled: {again}");
    assert_eq!(reads_by_n(&rig.upstream), reads, "nothing ran after the cancellation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_in_the_middle_of_a_long_run_completes_with_one_post() {
    let rig = Rig::start().await;
    let client = rig.client("?elicitation_mode=browser").await;
    let code = "const a = await tools.ledger.entries.listEntries({ n: 1, holdMs: 1500 });
const b = await tools.ledger.entries.listEntries({ n: 2, holdMs: 1500 });
const w = await tools.ledger.entries.addEntry({ body: { note: 'mid-run' } });
const c = await tools.ledger.entries.listEntries({ n: 3, holdMs: 1500 });
const d = await tools.ledger.entries.listEntries({ n: 4, holdMs: 1500 });
return [a.ok, b.ok, w.ok, c.ok, d.ok];";

    let (started, _) = call(&client, "execute", json!({ "code": code })).await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["executionId"].as_str().unwrap().to_owned();
    let (paused, _) = follow(&client, &id, json!({ "executionId": id })).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");

    rig.approve(paused["approvalUrl"].as_str().unwrap()).await;
    let (done, _) = follow(&client, &id, json!({ "executionId": id })).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!([true, true, true, true, true]));
    assert_eq!(rig.upstream.posts().len(), 1, "one approval, one POST");
    assert_eq!(reads_by_n(&rig.upstream), (1..=4).map(|n| (n, 1)).collect(), "replayed reads were not made again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_handed_on_run_leaves_it_interrupted_and_never_rerun() {
    let mut rig = Rig::start().await;
    let client = rig.client("").await;
    let (started, _) = call(&client, "execute", json!({ "code": SIX_READS })).await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["executionId"].as_str().unwrap().to_owned();

    // Killed while a read is in flight: its outcome is lost with the process.
    tokio::time::timeout(Duration::from_secs(30), rig.upstream.wait_in_flight())
        .await
        .expect("the handed-on run makes its next read");
    rig.kill();
    drop(client);
    let before = reads_by_n(&rig.upstream);

    // Restarted on the same data: the execution is still known, and nothing runs it again.
    rig.spawn();
    rig.wait_healthy().await;
    let client = rig.client("").await;
    let (after_restart, _) = call(&client, "resume", json!({ "executionId": id })).await;
    assert!(
        after_restart["status"] == "running" || after_restart["error"]["code"] == "interrupted",
        "the restarted server knows the execution: {after_restart}"
    );
    rig.kill();
    assert_eq!(reads_by_n(&rig.upstream), before, "the restarted server made no read of the killed run");
    assert!(before.values().all(|times| *times == 1), "{before:?}");

    // Read once its heartbeat is stale (a clock moved past it, never a sleep):
    // interrupted, stored so, and never re-run.
    let store = Arc::new(EmbeddedStore::open(&rig.data).unwrap());
    let later = ManualClock::starting_now();
    later.advance(HEARTBEAT_STALE + Duration::from_secs(1));
    let executions = Executions::new(store, Sandbox::new(Limits::default()), Timeouts::default(), Arc::new(later));
    let owner = Principal::parse(OWNER).unwrap();
    let id = ExecutionId::parse(&id).unwrap();
    match executions.view(&owner, &id).await {
        Ok(ExecutionResult::Failed { error, .. }) => assert_eq!(error.code, "interrupted", "{error:?}"),
        other => panic!("the killed run should read as interrupted, not {other:?}"),
    }
    assert_eq!(reads_by_n(&rig.upstream), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_client_follows_a_long_execution_to_the_same_result_through_tasks_get_and_result() {
    let rig = Rig::start().await;
    let out = rig.tasks("", &rig.token, &["stream"], SIX_READS).await;
    assert_eq!(out["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}), "{out}");
    assert_eq!(out["execution"]["taskSupport"], "optional", "{out}");

    let messages = out["messages"].as_array().expect("the stream's messages");
    let kinds: Vec<&str> = messages.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"taskCreated"), "{out}");
    assert_eq!(kinds.last(), Some(&"result"), "{out}");
    let id = messages[0]["task"]["taskId"].as_str().unwrap().to_owned();
    let statuses: Vec<&str> = messages.iter().filter_map(|m| m["task"]["status"].as_str()).collect();
    assert_eq!(statuses.first(), Some(&"working"), "it answered before the run ended: {out}");
    assert_eq!(statuses.last(), Some(&"completed"), "{out}");
    let streamed = &messages.last().unwrap()["result"]["structuredContent"];
    assert_eq!(streamed["result"], json!([1, 2, 3, 4, 5, 6]), "{out}");

    // From another connection: the same task and result; the task is the owner's.
    let got = rig.tasks("", &rig.token, &["get", &id], "").await;
    assert_eq!(got["answer"]["status"], "completed", "{got}");
    let result = rig.tasks("", &rig.token, &["result", &id], "").await;
    assert_eq!(&result["answer"]["structuredContent"], streamed, "{result}");
    assert_eq!(result["answer"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id, "{result}");
    // `resume` sees the same execution.
    let (resumed, _) = call(&rig.client("").await, "resume", json!({ "executionId": id })).await;
    assert_eq!(&resumed, streamed);
    assert_eq!(reads_by_n(&rig.upstream), (1..=6).map(|n| (n, 1)).collect(), "each read reached the upstream once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_task_is_input_required_and_its_approval_works_as_in_the_connection_s_mode() {
    let rig = Rig::start().await;
    let code = "const a = await tools.ledger.entries.listEntries({ n: 1, holdMs: 10 });
const w = await tools.ledger.entries.addEntry({ body: { note: 'as a task' } });
return [a.ok, w.ok];";
    let out = rig.tasks("?elicitation_mode=browser", &rig.token, &["stream"], code).await;
    let messages = out["messages"].as_array().expect("the stream's messages");
    let statuses: Vec<&str> = messages.iter().filter_map(|m| m["task"]["status"].as_str()).collect();
    assert_eq!(statuses.last(), Some(&"input_required"), "{out}");
    let paused = &messages.last().unwrap()["result"]["structuredContent"];
    assert_eq!(paused["status"], "user_approval_required", "tasks/result says what to do: {out}");
    let id = paused["executionId"].as_str().unwrap().to_owned();
    assert!(rig.upstream.posts().is_empty(), "nothing written before the approval");

    rig.approve(paused["approvalUrl"].as_str().expect("browser mode: a link")).await;
    let result = follow_task(&rig, &id).await;
    assert_eq!(result["structuredContent"]["result"], json!([true, true]), "{result}");
    assert_eq!(rig.upstream.posts().len(), 1, "one approval, one POST");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_stops_a_task_and_another_owner_cannot_see_or_cancel_it() {
    let rig = Rig::start().await;
    // Twenty reads of 1.5 s: still running while the checks below are made.
    let code = SIX_READS.replace("n <= 6", "n <= 20");
    let started = rig.tasks("", &rig.token, &["start"], &code).await;
    assert_eq!(started["answer"]["task"]["status"], "working", "{started}");
    let id = started["answer"]["task"]["taskId"].as_str().unwrap().to_owned();

    for command in ["get", "result", "cancel"] {
        let foreign = rig.tasks("", &rig.stranger, &[command, &id], "").await;
        let error = foreign["answer"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(&format!("no task {id} exists for you")), "{command}: {foreign}");
    }
    let unknown = rig.tasks("", &rig.token, &["get", "not-a-task-of-anyone"], "").await;
    assert!(unknown["answer"]["error"].as_str().is_some_and(|e| e.contains("no task")), "{unknown}");
    assert_eq!(rig.tasks("", &rig.token, &["get", &id], "").await["answer"]["status"], "working");

    let cancel = rig.tasks("", &rig.token, &["cancel", &id], "").await;
    assert!(cancel["answer"]["statusMessage"].as_str().is_some_and(|m| m.contains("cancellation")), "{cancel}");
    let mut status = String::new();
    for _ in 0..MAX_POLLS {
        status = rig.tasks("", &rig.token, &["get", &id], "").await["answer"]["status"].as_str().unwrap().to_owned();
        if status != "working" {
            break;
        }
    }
    assert_eq!(status, "cancelled");
    let reads = reads_by_n(&rig.upstream);
    assert!(reads.len() < 20, "the run stopped before its last read: {reads:?}");
    assert!(reads.values().all(|times| *times == 1), "{reads:?}");
    let again = rig.tasks("", &rig.token, &["cancel", &id], "").await;
    assert!(again["answer"]["error"].as_str().is_some_and(|e| e.contains("already ended")), "{again}");
}

/// `tasks/result` until the task's execution no longer answers `running`.
async fn follow_task(rig: &Rig, id: &str) -> Value {
    for _ in 0..MAX_POLLS {
        let out = rig.tasks("", &rig.token, &["result", id], "").await;
        let answer = &out["answer"];
        if answer["structuredContent"]["status"] != "running" {
            return answer.clone();
        }
    }
    panic!("task {id} was still running after {MAX_POLLS} results");
}

/// How often each read (`n`) reached the upstream.
fn reads_by_n(upstream: &Upstream) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    for read in upstream.reads() {
        let n = query_value(&read.query, "n").and_then(|n| n.parse().ok()).expect("every read carries n");
        *seen.entry(n).or_default() += 1;
    }
    seen
}

/// `resume` with `arguments` until the execution no longer answers `running`:
/// its final answer and how many calls that took.
async fn follow(client: &Client, id: &str, arguments: Value) -> (Value, usize) {
    for polls in 1..=MAX_POLLS {
        let (answer, _) = call(client, "resume", arguments.clone()).await;
        if answer["status"] != "running" {
            return (answer, polls);
        }
        assert_eq!(answer["executionId"], id, "{answer}");
    }
    panic!("{id} was still running after {MAX_POLLS} resumes");
}

type Client = RunningService<RoleClient, InitializeRequestParams>;

async fn call(client: &Client, tool: &'static str, arguments: Value) -> (Value, bool) {
    let arguments: JsonObject = arguments.as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    (result.structured_content.expect("structured content"), result.is_error == Some(true))
}

/// `executor serve` (the real binary, with a 2 s budget) and the upstream it reads.
struct Rig {
    upstream: Arc<Upstream>,
    addr: SocketAddr,
    data: PathBuf,
    config: PathBuf,
    token: String,
    /// A key of another owner.
    stranger: String,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Arc::new(Upstream::start().await);
        let config = upstream.write_config(dir.path(), Duration::from_secs(30));
        let data = dir.path().join("data");
        let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, OWNER);
        let stranger = create_key(env!("CARGO_BIN_EXE_executor"), &data, STRANGER);
        let addr = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port");
        let mut rig = Self { upstream, addr, data, config, token, stranger, child: None, _dir: dir };
        rig.spawn();
        rig.wait_healthy().await;
        rig
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_executor"))
            .args(["serve", "--addr", &self.addr.to_string()])
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--config")
            .arg(&self.config)
            .env("EXECUTOR_RESPONSE_BUDGET_MS", BUDGET_MS)
            .env_remove("EXECUTOR_PUBLIC_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start executor serve");
        self.child = Some(child);
    }

    async fn wait_healthy(&self) {
        let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let health = format!("http://{}/healthz", self.addr);
        for _ in 0..400 {
            if http.get(&health).send().await.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("executor serve did not come up on {}", self.addr);
    }

    /// SIGKILL, and wait until the process is gone.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL the server");
            child.wait().expect("reap the server");
        }
    }

    async fn client(&self, query: &str) -> Client {
        let url = format!("http://{}/mcp{query}", self.addr);
        let transport = StreamableHttpClientTransportConfig::with_uri(url).auth_header(self.token.clone());
        let http = executor_http_client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("long", "1"));
        info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.expect("an MCP session")
    }

    /// The TypeScript SDK's client (`executor_tests::mcp_client`) on
    /// `/mcp{query}` with `token`.
    async fn tasks(&self, query: &str, token: &str, args: &[&str], stdin: &str) -> Value {
        executor_tests::mcp_client::tasks(&format!("http://{}/mcp{query}", self.addr), token, args, stdin).await
    }

    /// Approve on the approval page, as the person at the link does: one POST.
    async fn approve(&self, approval_url: &str) {
        let http = executor_http_client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let page = http.get(approval_url).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
        let csrf = cookie.strip_prefix("executor_csrf=").unwrap().to_owned();
        let token = approval_url.split("token=").nth(1).unwrap();
        let action = approval_url.split('?').next().unwrap();
        let decided = http
            .post(action)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", cookie)
            .body(format!("token={token}&decision=accept&csrf={csrf}"))
            .send()
            .await
            .unwrap();
        assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap_or_default());
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill();
    }
}
