//! The MCP host end to end, with the rmcp client over real HTTP on 127.0.0.1,
//! against both deployments: `executor serve` (embedded store on disk) and the
//! Lambda functions' handler behind a local stand-in for API Gateway
//! (DynamoDB and EventBridge Scheduler via moto_server). Tools that need approval.

#[path = "../../shared/sandbox/tests/support/mod.rs"]
mod support;

mod api_gateway;
#[path = "mcp_host/direct_calls.rs"]
mod direct_calls;
#[path = "mcp_host/quotas.rs"]
mod quotas;
#[path = "mcp_host/toolkits.rs"]
mod toolkits;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use direct_calls::rmcp_and_the_direct_path_answer_tool_calls_alike;
use executor_cli::{keys, serve};
use executor_core::{Clock, ManualClock};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{EventBridgeScheduler, SchedulerTarget};
use executor_service::{Alarms, Host, HostConfig};
use executor_store::{DynamoStore, EmbeddedStore};
use executor_tests::raw_mcp;
use executor_tests::{Deployment, on_both_deployments};
use quotas::{a_pause_resume_loop_stops_at_the_resume_cap, ten_racing_executes_against_five_an_hour};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::TestTools;
use tokio::sync::oneshot;
use toolkits::{
    a_scoped_key_cannot_reach_past_its_toolkit, a_scoped_key_works_only_on_its_toolkit,
    a_toolkit_sees_only_its_tools_and_only_tightens, a_toolkits_executions_continue_in_its_view_in_every_mode,
};

/// What outlives a host: its data. A restart starts a new host on the same place.
enum Place {
    Local(tempfile::TempDir),
    Lambda { store: Arc<DynamoStore>, scheduler: SchedulerTarget },
}

impl Place {
    async fn new(deployment: Deployment) -> Self {
        match deployment {
            Deployment::Local => Place::Local(tempfile::tempdir().unwrap()),
            Deployment::Lambda => {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let (store, _client) = executor_tests::dynamo_store().await;
                let group = format!("executor-e2e-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
                executor_tests::scheduler_client().create_schedule_group().name(&group).send().await.unwrap();
                let scheduler = SchedulerTarget {
                    group,
                    target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
                    role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
                };
                Place::Lambda { store: Arc::new(store), scheduler }
            }
        }
    }
}

/// A running host; `stop` shuts it down and releases the store.
struct Running {
    url: String,
    token: String,
    /// Another owner's key.
    bob: String,
    /// Alice's key scoped to the first toolkit, when the host has toolkits.
    scoped: Option<String>,
    tools: Arc<TestTools>,
    /// The alarm handler, for tests that fire alarms themselves.
    alarms: Arc<Alarms>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn start(place: &Place, token: Option<String>) -> Self {
        Self::start_with(place, token, HostConfig::default()).await
    }

    async fn start_with(place: &Place, token: Option<String>, config: HostConfig) -> Self {
        Self::start_with_toolkits(place, token, config, &[]).await
    }

    /// A host that also serves `toolkits` over its test tools.
    async fn start_with_toolkits(
        place: &Place,
        token: Option<String>,
        mut config: HostConfig,
        toolkits: &[executor_core::Toolkit],
    ) -> Self {
        let tools = TestTools::new();
        let namespaces = vec!["r".to_owned(), "w".to_owned()];
        for toolkit in toolkits {
            let view = executor_catalog::ToolkitView::new(toolkit.clone(), tools.clone(), &namespaces);
            config.toolkits.push(executor_service::ToolkitEndpoint {
                name: toolkit.name.clone(),
                namespaces: view.namespaces().to_vec(),
                tools: Arc::new(view),
            });
        }
        let scope = toolkits.first().map(|t| t.name.as_str().to_owned());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        match place {
            Place::Local(dir) => {
                // A restart: the previous host's last connection tasks may still be
                // letting go of the file, as an exiting process would.
                let mut attempts = 0;
                let store = loop {
                    match EmbeddedStore::open(dir.path()) {
                        Ok(store) => break Arc::new(store),
                        Err(e) if attempts < 50 => {
                            attempts += 1;
                            assert!(e.to_string().contains("in use"), "{e}");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        Err(e) => panic!("{e}"),
                    }
                };
                let token = match token {
                    Some(token) => token,
                    None => keys::create(&*store, "alice").await.unwrap(),
                };
                let bob = keys::create(&*store, "bob").await.unwrap();
                let scoped = match &scope {
                    Some(toolkit) => Some(keys::create_scoped(&*store, "alice", Some(toolkit)).await.unwrap()),
                    None => None,
                };
                let host = serve::host(store, tools.clone(), &namespaces, config).await.unwrap();
                let alarms = host.alarms();
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}/mcp", listener.local_addr().unwrap());
                let done = tokio::spawn(async move { serve::serve(listener, host, shutdown).await.unwrap() });
                Self { url, token, bob, scoped, tools, alarms, stop: Some(stop), done }
            }
            Place::Lambda { store, scheduler } => {
                let token = match token {
                    Some(token) => token,
                    None => keys::create(&**store, "alice").await.unwrap(),
                };
                let bob = keys::create(&**store, "bob").await.unwrap();
                let scoped = match &scope {
                    Some(toolkit) => Some(keys::create_scoped(&**store, "alice", Some(toolkit)).await.unwrap()),
                    None => None,
                };
                // As the functions are configured: API Gateway routes by host.
                let config = HostConfig { allowed_hosts: None, ..config };
                let scheduler =
                    Arc::new(EventBridgeScheduler::new(executor_tests::scheduler_client(), scheduler.clone()));
                let function = || {
                    let sandbox = Sandbox::new(Limits::default());
                    Host::new(store.clone(), tools.clone(), &namespaces, sandbox, scheduler.clone(), config.clone())
                };
                let functions = api_gateway::Functions { mcp: function(), approval: function() };
                let alarms = functions.mcp.alarms();
                let (base, done) = api_gateway::start(functions, shutdown).await;
                Self { url: format!("{base}/mcp"), token, bob, scoped, tools, alarms, stop: Some(stop), done }
            }
        }
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.done.await.unwrap();
    }

    async fn client(&self, version: ProtocolVersion) -> RunningService<RoleClient, InitializeRequestParams> {
        self.client_at(&self.url, &self.token, version).await
    }

    /// A client of the endpoint at `url` with `token`.
    async fn client_at(
        &self,
        url: &str,
        token: &str,
        version: ProtocolVersion,
    ) -> RunningService<RoleClient, InitializeRequestParams> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("e2e", "1"))
            .with_protocol_version(version.clone());
        let transport =
            StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config);
        connect(info, transport, version).await
    }
}

/// Connect as a client of `version`: `initialize` up to 2025-11-25, `server/discover`
/// (no handshake, per-request metadata) from 2026-07-28.
async fn connect<C: rmcp::ClientHandler>(
    client: C,
    transport: StreamableHttpClientTransport<reqwest::Client>,
    version: ProtocolVersion,
) -> RunningService<RoleClient, C> {
    let connected = if version >= ProtocolVersion::V_2026_07_28 {
        let lifecycle = rmcp::service::ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] };
        rmcp::service::ClientServiceExt::serve_with_lifecycle(client, transport, lifecycle).await
    } else {
        client.serve(transport).await
    };
    let client = connected.expect("the client connects");
    assert_eq!(client.peer_info().map(|info| info.protocol_version.clone()), Some(version), "negotiated");
    client
}

on_both_deployments!(
    handshake_tools_and_execute,
    pause_then_resume_from_another_session_and_after_a_restart,
    a_pause_outlives_its_session,
    twenty_resumes_from_twenty_new_sessions_make_one_call,
    only_whoever_was_asked_decides_a_native_pause,
    a_2026_07_28_client_is_served_without_a_session,
    native_mode_asks_the_clients_user_and_the_retry_resumes,
    native_always_allow_is_remembered_until_revoked,
    a_grant_made_before_a_restart_lets_its_call_run_at_once,
    sessions_keys_and_the_challenge_over_plain_http,
    the_smoke_script_passes,
    a_toolkit_sees_only_its_tools_and_only_tightens,
    a_toolkits_executions_continue_in_its_view_in_every_mode,
    a_scoped_key_works_only_on_its_toolkit,
    a_scoped_key_cannot_reach_past_its_toolkit,
    a_pause_over_a_batch_shows_every_call,
    ten_racing_executes_against_five_an_hour,
    a_pause_resume_loop_stops_at_the_resume_cap,
    twenty_racing_executes_with_one_idempotency_key_run_once,
    rmcp_and_the_direct_path_answer_tool_calls_alike,
);

/// One decision covers every call of a `Promise.all` batch, so every channel
/// shows each: the model's envelope (`interaction.calls`), the approval page
/// and the native elicitation.
async fn a_pause_over_a_batch_shows_every_call(deployment: Deployment) {
    use rmcp::model::ElicitationAction;
    let place = Place::new(deployment).await;
    let host = Running::start_with(&place, None, native()).await;
    let code = "const [a, b] = await Promise.all([tools.w.create({title: 'first'}), tools.w.close({id: 'second'})]); \
                return [a.ok, b.ok]";

    let model = host.client(ProtocolVersion::V_2025_06_18).await;
    let (paused, _) = call(&model, "execute", json!({"code": code})).await;
    let interaction = &paused["interaction"];
    assert_eq!(interaction["tool"], "w.create", "the first, for older clients: {paused}");
    assert_eq!(
        interaction["calls"],
        json!([
            {"tool": "w.create", "args": {"title": "first"}, "message": "w.create wants to write"},
            {"tool": "w.close", "args": {"id": "second"}, "message": "w.close wants to write"},
        ]),
        "{paused}"
    );
    let message = interaction["message"].as_str().unwrap();
    assert!(message.contains("w.create wants to write") && message.contains("w.close wants to write"), "{message}");
    model.cancel().await.unwrap();

    let browser = host
        .client_at(&format!("{}?elicitation_mode=browser", host.url), &host.token, ProtocolVersion::V_2025_06_18)
        .await;
    let (paused, _) = call(&browser, "execute", json!({"code": code})).await;
    let link = paused["approvalUrl"].as_str().unwrap();
    let page = executor_http_client::builder().build().unwrap().get(link).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("these 2 calls together"), "{page}");
    assert!(page.contains("tools.w.create") && page.contains("tools.w.close"), "{page}");
    browser.cancel().await.unwrap();

    let (native, asked) = approver(&host, &host.token, ElicitationAction::Accept).await;
    let done = native
        .call_tool(CallToolRequestParams::new("execute").with_arguments(args(json!({"code": code}))))
        .await
        .unwrap();
    assert_eq!(done.structured_content.unwrap()["result"], json!([true, true]));
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "one answer for the batch: {asked:?}");
    assert!(asked[0].contains("2 calls") && asked[0].contains("Tool: tools.w.create"), "{asked:?}");
    assert!(asked[0].contains("Tool: tools.w.close"), "{asked:?}");
    assert_eq!(host.tools.calls().len(), 2, "both ran once, after the one answer");
    native.cancel().await.unwrap();
    host.stop().await;
}

fn args(value: Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

async fn call(
    client: &RunningService<RoleClient, InitializeRequestParams>,
    tool: &'static str,
    arguments: Value,
) -> (Value, bool) {
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments))).await.unwrap();
    (result.structured_content.expect("structured content"), result.is_error == Some(true))
}

const WRITE: &str = "console.log('start'); const w = await tools.w.create({title: 'bug'}); return w.data.args";

async fn handshake_tools_and_execute(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let client = host.client(ProtocolVersion::V_2025_06_18).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "executor");

    let tools = client.list_tools(None).await.unwrap().tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["execute", "resume"]);
    let description = tools[0].description.as_deref().unwrap();
    assert!(
        description.contains("Connected namespaces: r, w") && description.contains("tools.search"),
        "{description}"
    );
    // The limits the host's sandbox runs with (the defaults here), and that calls are awaited.
    for shown in ["at most 1 MiB, 10 s of JavaScript CPU time", "5 min wall clock", "Every tool call must be awaited"] {
        assert!(description.contains(shown), "{shown} in {description}");
    }

    let (value, is_error) = call(&client, "execute", json!({"code": "console.log('hi', 2); return 1 + 2"})).await;
    assert!(!is_error);
    assert_eq!(value, json!({"status": "completed", "result": 3, "logs": ["hi 2"]}));

    let (value, is_error) = call(&client, "execute", json!({"code": "const a = 1;\nreturn a +;"})).await;
    assert!(is_error);
    assert_eq!(value["status"], "error");
    assert_eq!(value["error"]["code"], "syntax_error");
    assert!(value["error"]["message"].as_str().unwrap().contains("line 2, column 11"), "{value}");
    client.cancel().await.unwrap();
    host.stop().await;
}

async fn pause_then_resume_from_another_session_and_after_a_restart(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let first = host.client(ProtocolVersion::V_2025_06_18).await;

    // Accepted from a second session of the same owner.
    let (paused, _) = call(&first, "execute", json!({"code": WRITE})).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(
        paused["interaction"],
        json!({"kind": "approval", "message": "w.create wants to write", "tool": "w.create", "args": {"title": "bug"},
            "calls": [{"tool": "w.create", "args": {"title": "bug"}, "message": "w.create wants to write"}]})
    );
    assert!(paused["expiresAt"].as_str().unwrap().ends_with('Z'));
    assert!(host.tools.calls().is_empty(), "nothing ran before the approval");
    let second = host.client(ProtocolVersion::V_2025_11_25).await;
    let id = paused["executionId"].clone();
    let (done, is_error) = call(&second, "resume", json!({"executionId": id, "action": "accept"})).await;
    assert!(!is_error, "{done}");
    assert_eq!(done, json!({"status": "completed", "result": {"title": "bug"}, "logs": ["start"]}));
    assert_eq!(host.tools.calls().len(), 1);
    let (again, is_error) = call(&first, "resume", json!({"executionId": id, "action": "accept"})).await;
    assert!(is_error);
    assert_eq!(again["error"]["code"], "execution_already_settled");
    let (stands, is_error) = call(&first, "resume", json!({"executionId": id})).await;
    assert!(!is_error, "without an action, resume reports where it stands");
    assert_eq!(stands["status"], "completed");
    assert_eq!(host.tools.calls().len(), 1);

    // Declined: the code's catch sees it.
    let code = "try { await tools.w.drop({}) } catch (e) { return e.name }";
    let (paused, _) = call(&first, "execute", json!({"code": code})).await;
    let (declined, _) =
        call(&first, "resume", json!({"executionId": paused["executionId"], "action": "decline"})).await;
    assert_eq!(declined["result"], "ApprovalDeclinedError");

    // Paused, then the host restarts: the pause is in the store, not in memory.
    let (paused, _) = call(&first, "execute", json!({"code": WRITE})).await;
    let token = host.token.clone();
    host.stop().await;

    let restarted = Running::start(&place, Some(token)).await;
    let client = restarted.client(ProtocolVersion::V_2025_06_18).await;
    // Without an action nothing is decided: the model must ask the user first.
    let (asked, _) = call(&client, "resume", json!({"executionId": paused["executionId"]})).await;
    assert_eq!(asked["status"], "waiting_for_interaction", "{asked}");
    assert!(restarted.tools.calls().is_empty(), "no call without a decision");
    let (done, is_error) =
        call(&client, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
    assert!(!is_error, "{done}");
    assert_eq!(done["result"], json!({"title": "bug"}));
    assert_eq!(restarted.tools.calls().len(), 1, "exactly one upstream call for the approval");
    client.cancel().await.unwrap();
    restarted.stop().await;
    drop((first, second));
}

async fn a_2026_07_28_client_is_served_without_a_session(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let client = host.client(ProtocolVersion::V_2026_07_28).await;
    let (value, is_error) = call(&client, "execute", json!({"code": "return [1, 2].map(x => x * 10)"})).await;
    assert!(!is_error, "{value}");
    assert_eq!(value["result"], json!([10, 20]));
    let (paused, _) = call(&client, "execute", json!({"code": WRITE})).await;
    let (done, _) = call(&client, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
    assert_eq!(done["result"], json!({"title": "bug"}));
    client.cancel().await.unwrap();
    host.stop().await;
}

/// A 2026-07-28 client with an elicitation UI that answers every approval with `answer`.
#[derive(Clone)]
struct Approver {
    answer: rmcp::model::ElicitationAction,
    /// The form the user fills in, e.g. `{"remember": "always"}`.
    content: Option<Value>,
    asked: Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Approver {
    fn get_info(&self) -> InitializeRequestParams {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        InitializeRequestParams::new(capabilities, Implementation::new("native", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        let result = rmcp::model::ElicitResult::new(self.answer.clone());
        Ok(match &self.content {
            Some(content) => result.with_content(content.clone()),
            None => result,
        })
    }
}

type Asked = Arc<std::sync::Mutex<Vec<String>>>;

/// A native-mode 2026-07-28 client of `host` with `token`, answering `answer`.
async fn approver(
    host: &Running,
    token: &str,
    answer: rmcp::model::ElicitationAction,
) -> (RunningService<RoleClient, Approver>, Asked) {
    approver_filling(host, token, answer, None).await
}

/// Like [`approver`], with the form filled in with `content`.
async fn approver_filling(
    host: &Running,
    token: &str,
    answer: rmcp::model::ElicitationAction,
    content: Option<Value>,
) -> (RunningService<RoleClient, Approver>, Asked) {
    let approver = Approver { answer, content, asked: Arc::default() };
    let asked = approver.asked.clone();
    let url = format!("{}?elicitation_mode=native", host.url);
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_owned());
    let transport =
        StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config);
    (connect(approver, transport, ProtocolVersion::V_2026_07_28).await, asked)
}

fn native() -> HostConfig {
    HostConfig { request_state_key: executor_service::RequestStateKey::new(vec![9u8; 32]), ..HostConfig::default() }
}

/// Native mode: the pause is an input-required result; the client asks its
/// user (an elicitation) and retries with the answer and the sealed state; the
/// retry, here on a restarted host with the same key, resumes the execution.
async fn native_mode_asks_the_clients_user_and_the_retry_resumes(deployment: Deployment) {
    use rmcp::model::ElicitationAction;
    let place = Place::new(deployment).await;
    let host = Running::start_with(&place, None, native()).await;
    // Drive the rounds by hand: the input-required result and its state.
    let (client, _) = approver(&host, &host.token, ElicitationAction::Accept).await;
    let first = client
        .call_tool_once(CallToolRequestParams::new("execute").with_arguments(args(json!({"code": WRITE}))))
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::InputRequired(required) = first else { panic!("{first:?}") };
    let state = required.request_state.clone().expect("a sealed request state");
    assert!(required.input_requests.as_ref().unwrap().contains_key("approval"));
    assert!(host.tools.calls().is_empty(), "nothing ran before the approval");
    let token = host.token.clone();
    host.stop().await;

    // The retry reaches another host (a restart with the same key).
    let restarted = Running::start_with(&place, Some(token), native()).await;
    let (client, _) = approver(&restarted, &restarted.token, ElicitationAction::Accept).await;
    let answer = rmcp::model::InputResponses::from([("approval".to_owned(), json!({"action": "accept"}))]);
    let retry = CallToolRequestParams::new("execute")
        .with_arguments(args(json!({"code": WRITE})))
        .with_input_responses(answer.clone())
        .with_request_state(state.clone());
    let done = client.call_tool(retry.clone()).await.unwrap();
    assert_eq!(done.structured_content.unwrap()["result"], json!({"title": "bug"}));
    assert_eq!(restarted.tools.calls().len(), 1);
    // The same state again decides nothing more.
    let again = client.call_tool(retry).await.unwrap();
    assert_eq!(again.structured_content.unwrap()["error"]["code"], "execution_already_settled");
    assert_eq!(restarted.tools.calls().len(), 1);
    // Another owner cannot use the state.
    let (bob, _) = approver(&restarted, &restarted.bob, ElicitationAction::Accept).await;
    let forged = CallToolRequestParams::new("execute")
        .with_arguments(args(json!({"code": WRITE})))
        .with_input_responses(answer)
        .with_request_state(state);
    let refused = bob.call_tool(forged).await.unwrap();
    assert_eq!(refused.structured_content.unwrap()["error"]["code"], "invalid_arguments");

    // The client's own loop: the user answers in the client's UI.
    for (answer, expected) in
        [(ElicitationAction::Accept, json!("created")), (ElicitationAction::Decline, json!("declined"))]
    {
        let (client, asked) = approver(&restarted, &restarted.token, answer).await;
        let code = "try { await tools.w.create({title: 'x'}); return 'created' } catch (e) { return 'declined' }";
        let result = client
            .call_tool(CallToolRequestParams::new("execute").with_arguments(args(json!({"code": code}))))
            .await
            .unwrap();
        assert_eq!(result.structured_content.unwrap()["result"], expected);
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert!(asked[0].contains("Tool: tools.w.create") && asked[0].contains("w.create wants to write"), "{asked:?}");
    }
    assert_eq!(restarted.tools.calls().len(), 2, "the accepted one ran, the declined one did not");

    // A 2026-07-28 client that cannot answer an elicitation is served in model mode.
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("plain", "1"))
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let url = format!("{}?elicitation_mode=native", restarted.url);
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(restarted.token.clone());
    let transport =
        StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config);
    let plain = connect(info, transport, ProtocolVersion::V_2026_07_28).await;
    let (paused, _) = call(&plain, "execute", json!({"code": WRITE})).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    restarted.stop().await;
}

/// Native mode: "always allow" in the client's form stores a grant. Later
/// calls of the tool run without asking, for that owner only, until the grant
/// is revoked through `DELETE /api/grants/{id}`.
async fn native_always_allow_is_remembered_until_revoked(deployment: Deployment) {
    use rmcp::model::ElicitationAction;
    let place = Place::new(deployment).await;
    let host = Running::start_with(&place, None, native()).await;
    let code = "await tools.w.create({title: 'x'}); return 'created'";
    let execute = || CallToolRequestParams::new("execute").with_arguments(args(json!({"code": code})));
    let always = Some(json!({"remember": "always"}));
    let (alice, asked) = approver_filling(&host, &host.token, ElicitationAction::Accept, always).await;
    for run in 1..=2 {
        let done = alice.call_tool(execute()).await.unwrap().structured_content.unwrap();
        assert_eq!(done["result"], "created", "{done}");
        assert_eq!(host.tools.calls().len(), run);
        assert_eq!(asked.lock().unwrap().len(), 1, "asked once, then remembered");
    }
    // Another owner is still asked.
    let (bob, bob_asked) = approver(&host, &host.bob, ElicitationAction::Accept).await;
    assert_eq!(bob.call_tool(execute()).await.unwrap().structured_content.unwrap()["result"], "created");
    assert_eq!(bob_asked.lock().unwrap().len(), 1);

    let http = executor_http_client::builder().build().unwrap();
    let grants = host.url.replace("/mcp", "/api/grants");
    let listed: Value = http.get(&grants).bearer_auth(&host.token).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["grants"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        (&listed["grants"][0]["tool"], &listed["grants"][0]["grantedBy"]),
        (&json!("w.create"), &json!("client"))
    );
    let id = listed["grants"][0]["id"].as_str().unwrap();
    let revoked = http.delete(format!("{grants}/{id}")).bearer_auth(&host.token).send().await.unwrap();
    assert_eq!(revoked.status(), 204);

    // Revoked: asked again.
    assert_eq!(alice.call_tool(execute()).await.unwrap().structured_content.unwrap()["result"], "created");
    assert_eq!(asked.lock().unwrap().len(), 2);
    host.stop().await;
}

/// A grant holds at once in a host that never saw it made (restarted since;
/// on Lambda, every function beside the one that stored it): the pause it
/// would store finds the grant in its write, nothing is stored, and the
/// call runs by the grant, once. Revoked, the call asks again.
async fn a_grant_made_before_a_restart_lets_its_call_run_at_once(deployment: Deployment) {
    use rmcp::model::ElicitationAction;
    let place = Place::new(deployment).await;
    let host = Running::start_with(&place, None, native()).await;
    let code = "await tools.w.create({title: 'x'}); return 'created'";
    let execute = || CallToolRequestParams::new("execute").with_arguments(args(json!({"code": code})));
    let always = Some(json!({"remember": "always"}));
    let (alice, asked) = approver_filling(&host, &host.token, ElicitationAction::Accept, always).await;
    assert_eq!(alice.call_tool(execute()).await.unwrap().structured_content.unwrap()["result"], "created");
    assert_eq!(asked.lock().unwrap().len(), 1);
    let token = host.token.clone();
    drop(alice);
    host.stop().await;

    let host = Running::start_with(&place, Some(token), native()).await;
    let (alice, asked) = approver(&host, &host.token, ElicitationAction::Accept).await;
    for run in 1..=2 {
        let done = alice.call_tool(execute()).await.unwrap().structured_content.unwrap();
        assert_eq!(done["result"], "created", "{done}");
        assert_eq!(asked.lock().unwrap().len(), 0, "run {run}: not asked, the grant holds");
        assert_eq!(host.tools.calls().len(), run, "run {run}: its call made once");
    }
    let http = executor_http_client::builder().build().unwrap();
    let grants = host.url.replace("/mcp", "/api/grants");
    let listed: Value = http.get(&grants).bearer_auth(&host.token).send().await.unwrap().json().await.unwrap();
    let id = listed["grants"][0]["id"].as_str().unwrap();
    let revoked = http.delete(format!("{grants}/{id}")).bearer_auth(&host.token).send().await.unwrap();
    assert_eq!(revoked.status(), 204);
    assert_eq!(alice.call_tool(execute()).await.unwrap().structured_content.unwrap()["result"], "created");
    assert_eq!(asked.lock().unwrap().len(), 1, "revoked: asked again");
    host.stop().await;
}

async fn sessions_keys_and_the_challenge_over_plain_http(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let http = executor_http_client::builder().build().unwrap();
    let post = |token: Option<&str>, session: Option<&str>, body: Value| {
        let mut request = http
            .post(&host.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    // 401 with the RFC 9728 pointer, and the metadata it points at.
    let denied = post(None, None, list.clone()).await.unwrap();
    assert_eq!(denied.status(), 401);
    let challenge = denied.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Bearer resource_metadata=\"http://127.0.0.1:"), "{challenge}");
    let body: Value = denied.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32001);
    assert_eq!(post(Some("exk_wrong"), None, list.clone()).await.unwrap().status(), 401);
    let metadata_url = challenge.split('"').nth(1).unwrap();
    let metadata: Value = http.get(metadata_url).send().await.unwrap().json().await.unwrap();
    assert_eq!(metadata["resource"], host.url);

    // A session: created by initialize, 404 for another owner, gone after DELETE.
    let started = post(Some(&host.token), None, initialize).await.unwrap();
    assert_eq!(started.status(), 200);
    let session = started.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(post(Some(&host.token), Some(&session), list.clone()).await.unwrap().status(), 200);
    // Bob gets exactly what a session that never existed gets.
    for (token, session) in [(&host.bob, session.as_str()), (&host.token, "0123abcd")] {
        let foreign = post(Some(token), Some(session), list.clone()).await.unwrap();
        assert_eq!(foreign.status(), 404);
        let body: Value = foreign.json().await.unwrap();
        assert_eq!(body["error"]["message"], "Session not found");
    }

    let deleted = http
        .delete(&host.url)
        .header("authorization", format!("Bearer {}", host.token))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(post(Some(&host.token), Some(&session), list.clone()).await.unwrap().status(), 404);

    // No streams, CORS preflight, body cap, health.
    let get = http.get(&host.url).header("authorization", format!("Bearer {}", host.token)).send().await.unwrap();
    assert_eq!(get.status(), 405);
    let preflight = http.request(reqwest::Method::OPTIONS, &host.url).send().await.unwrap();
    assert_eq!(preflight.status(), 204);
    assert!(preflight.headers()["access-control-expose-headers"].to_str().unwrap().contains("Mcp-Session-Id"));
    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "x".repeat(2 << 20)}}});
    assert_eq!(post(Some(&host.token), None, huge).await.unwrap().status(), 413);
    let bad = http
        .post(&host.url)
        .header("authorization", format!("Bearer {}", host.token))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let health = http.get(host.url.replace("/mcp", "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    host.stop().await;
}

/// Short timeouts on a manual clock: session 1 min, paused lease 3 min (cap
/// 4 min), approval window 10 min; activity written on every request. Tests
/// move the clock and fire alarms themselves: nothing waits for time to pass.
fn manual(clock: &Arc<ManualClock>) -> HostConfig {
    let mut config = HostConfig { activity_interval: std::time::Duration::ZERO, ..HostConfig::default() };
    config.timeouts.session_timeout = std::time::Duration::from_secs(60);
    config.timeouts.paused_lease = std::time::Duration::from_secs(180);
    config.clock = clock.clone();
    config
}

const MIN: std::time::Duration = std::time::Duration::from_secs(60);

struct Raw {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Raw {
    fn new(host: &Running) -> Self {
        Self {
            http: executor_http_client::builder().build().unwrap(),
            url: host.url.clone(),
            token: host.token.clone(),
        }
    }

    async fn post(&self, session: Option<&str>, body: Value) -> reqwest::Response {
        raw_mcp::post_in(&self.http, &self.url, &self.token, session, &body).send().await.unwrap()
    }

    async fn initialize(&self) -> String {
        let response = self.post(None, raw_mcp::initialize("raw")).await;
        response.headers()["mcp-session-id"].to_str().unwrap().to_owned()
    }

    async fn status(&self, session: &str) -> u16 {
        self.post(Some(session), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await.status().as_u16()
    }

    /// `execute` in `session`; the structured content.
    async fn execute(&self, session: Option<&str>, code: &str) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}});
        let answer: Value = self.post(session, body).await.json().await.unwrap();
        answer["result"]["structuredContent"].clone()
    }

    async fn delete(&self, session: &str) -> u16 {
        let deleted = self
            .http
            .delete(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap();
        deleted.status().as_u16()
    }
}

/// The alarm of `session` as it fires at `now`.
async fn fire(host: &Running, session: &str, now: executor_core::Timestamp) -> executor_core::AlarmDecision {
    let id = executor_core::SessionId::parse(session).unwrap();
    host.alarms.fire(&id, None, now).await.unwrap()
}

/// A pause belongs to its owner, not to its session: closed by the client,
/// destroyed by its alarm, or across a restart, the owner resumes it from a new
/// session or a stateless request, and the approval makes exactly one call.
async fn a_pause_outlives_its_session(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let raw = Raw::new(&host);
    let resumed = |client: RunningService<RoleClient, InitializeRequestParams>, paused: Value| async move {
        let (done, is_error) =
            call(&client, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
        assert!(!is_error, "{done}");
        assert_eq!(done["result"], json!({"title": "bug"}));
        client.cancel().await.unwrap();
    };

    // Closed by the client (DELETE /mcp), resumed from a new session.
    let session = raw.initialize().await;
    let paused = raw.execute(Some(&session), WRITE).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(raw.delete(&session).await, 204);
    assert_eq!(raw.status(&session).await, 404, "the session is gone");
    resumed(host.client(ProtocolVersion::V_2025_11_25).await, paused).await;
    assert_eq!(host.tools.calls().len(), 1);

    // Closed, resumed by a stateless 2026-07-28 request.
    let session = raw.initialize().await;
    let paused = raw.execute(Some(&session), WRITE).await;
    assert_eq!(raw.delete(&session).await, 204);
    resumed(host.client(ProtocolVersion::V_2026_07_28).await, paused).await;
    assert_eq!(host.tools.calls().len(), 2);

    // Destroyed by its alarm, idle past every allowance.
    let session = raw.initialize().await;
    let paused = raw.execute(Some(&session), WRITE).await;
    let late = executor_core::SystemClock.now().plus(std::time::Duration::from_secs(3 * 3600));
    assert_eq!(fire(&host, &session, late).await, executor_core::AlarmDecision::Destroy);
    assert_eq!(raw.status(&session).await, 404);
    resumed(host.client(ProtocolVersion::V_2025_06_18).await, paused).await;
    assert_eq!(host.tools.calls().len(), 3);

    // Closed, then the host restarts: resumed on the new host.
    let session = raw.initialize().await;
    let paused = raw.execute(Some(&session), WRITE).await;
    assert_eq!(raw.delete(&session).await, 204);
    let token = host.token.clone();
    host.stop().await;
    let restarted = Running::start(&place, Some(token)).await;
    resumed(restarted.client(ProtocolVersion::V_2025_06_18).await, paused).await;
    assert_eq!(restarted.tools.calls().len(), 1, "one call for the approval after the restart");
    restarted.stop().await;
}

/// The pausing session closes; twenty new sessions race to accept: one call.
async fn twenty_resumes_from_twenty_new_sessions_make_one_call(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let raw = Raw::new(&host);
    let session = raw.initialize().await;
    let paused = raw.execute(Some(&session), WRITE).await;
    assert_eq!(raw.delete(&session).await, 204);
    let mut clients = Vec::new();
    for _ in 0..20 {
        clients.push(host.client(ProtocolVersion::V_2025_06_18).await);
    }
    let id = paused["executionId"].clone();
    let races = clients.iter().map(|client| call(client, "resume", json!({"executionId": id, "action": "accept"})));
    let outcomes = futures_util::future::join_all(races).await;
    let completed = outcomes.iter().filter(|(v, _)| v["status"] == "completed").count();
    let settled = outcomes.iter().filter(|(v, _)| v["error"]["code"] == "execution_already_settled").count();
    assert_eq!((completed, settled), (1, 19), "{outcomes:?}");
    assert_eq!(host.tools.calls().len(), 1, "exactly one upstream call");
    for client in clients {
        client.cancel().await.unwrap();
    }
    host.stop().await;
}

/// A client that retries `execute` with its `idempotencyKey` (twenty at
/// once, from twenty sessions) runs the code once; a repeat after it ended
/// answers its outcome; the key with other code is refused.
async fn twenty_racing_executes_with_one_idempotency_key_run_once(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let mut clients = Vec::new();
    for _ in 0..20 {
        clients.push(host.client(ProtocolVersion::V_2025_06_18).await);
    }
    let code = "const r = await tools.r.list({n: 1}); return r.data.args.n;";
    let execute = json!({"code": code, "idempotencyKey": "6c1f2a9e-retry"});
    let races = clients.iter().map(|client| call(client, "execute", execute.clone()));
    let outcomes = futures_util::future::join_all(races).await;
    assert!(outcomes.iter().all(|(value, is_error)| !is_error && value["status"] != "error"), "{outcomes:?}");
    let (again, _) = call(&clients[0], "execute", execute.clone()).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["result"], 1);
    assert_eq!(host.tools.calls().len(), 1, "twenty executes and a repeat, one run: {outcomes:?}");
    let (other, is_error) =
        call(&clients[0], "execute", json!({"code": "return 2", "idempotencyKey": "6c1f2a9e-retry"})).await;
    assert!(is_error, "{other}");
    assert_eq!(other["error"]["code"], "invalid_arguments", "{other}");
    let (long, is_error) =
        call(&clients[0], "execute", json!({"code": "return 3", "idempotencyKey": "k".repeat(129)})).await;
    assert!(is_error && long["error"]["code"] == "invalid_arguments", "{long}");
    for client in clients {
        client.cancel().await.unwrap();
    }
    host.stop().await;
}

/// Only whoever was asked decides: `resume` cannot decide a native pause, an
/// answer decides only the pause it was asked about (a replay of a decided
/// one is refused), and code that pauses twice needs two answers.
async fn only_whoever_was_asked_decides_a_native_pause(deployment: Deployment) {
    use rmcp::model::{CallToolResponse, ElicitationAction, InputResponses};
    let place = Place::new(deployment).await;
    let host = Running::start_with(&place, None, native()).await;
    let (client, _) = approver(&host, &host.token, ElicitationAction::Accept).await;
    let twice = "await tools.w.one({}); await tools.w.two({}); return 'both'";
    let ask = CallToolRequestParams::new("execute").with_arguments(args(json!({"code": twice})));
    let answer = InputResponses::from([("approval".to_owned(), json!({"action": "accept"}))]);
    let retry = |state: &str| ask.clone().with_input_responses(answer.clone()).with_request_state(state.to_owned());
    let input_required = |response: CallToolResponse| match response {
        CallToolResponse::InputRequired(required) => required.request_state.expect("a request state"),
        other => panic!("{other:?}"),
    };
    let result = |response: CallToolResponse| match response {
        CallToolResponse::Complete(result) => result.structured_content.expect("structured content"),
        other => panic!("{other:?}"),
    };

    let first_state = input_required(client.call_tool_once(ask.clone()).await.unwrap());
    assert!(host.tools.calls().is_empty());
    // The first answer: the first call runs, then the code asks again.
    let second_state = input_required(client.call_tool_once(retry(&first_state)).await.unwrap());
    assert_eq!(host.tools.calls().len(), 1, "one answer, one call");
    assert_ne!(first_state, second_state);
    // The execution id, as the upstream saw it in the idempotency key.
    let key = host.tools.calls.lock().unwrap()[0].2.clone();
    let id = key.split(':').next().unwrap().to_owned();

    // Whoever holds the id cannot decide the pause with `resume`.
    let model = host.client(ProtocolVersion::V_2026_07_28).await;
    let (refused, _) = call(&model, "resume", json!({"executionId": id, "action": "accept"})).await;
    assert_eq!(refused["status"], "waiting_for_interaction", "{refused}");
    assert_eq!(refused["decidedBy"], "client");
    // A retried first answer (its response was lost) does not approve the second call.
    let replayed = result(client.call_tool_once(retry(&first_state)).await.unwrap());
    assert_eq!(replayed["error"]["code"], "execution_already_settled", "{replayed}");
    assert_eq!(host.tools.calls().len(), 1, "neither made a call");

    // The second answer decides the second pause.
    let done = result(client.call_tool_once(retry(&second_state)).await.unwrap());
    assert_eq!(done["result"], "both", "{done}");
    assert_eq!(host.tools.calls().len(), 2);
    model.cancel().await.unwrap();
    host.stop().await;
}

/// Sessions end when idle, busy ones live, paused work holds a lease on its
/// session, and outlives it until its own approval window closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_end_busy_ones_live_and_paused_work_outlives_its_session() {
    let clock = Arc::new(ManualClock::starting_now());
    let place = Place::new(Deployment::Local).await;
    let host = Running::start_with(&place, None, manual(&clock)).await;
    let raw = Raw::new(&host);
    let (idle, busy, waiting) = (raw.initialize().await, raw.initialize().await, raw.initialize().await);
    let paused = raw.execute(Some(&waiting), WRITE).await;
    assert_eq!(paused["status"], "waiting_for_interaction");

    use executor_core::AlarmDecision::*;
    clock.advance(MIN / 2);
    assert_eq!(raw.status(&busy).await, 200);
    clock.advance(MIN);
    assert_eq!(raw.status(&busy).await, 200, "a busy session is never destroyed");
    assert!(matches!(fire(&host, &busy, clock.now()).await, Reschedule { .. }));
    assert_eq!(fire(&host, &idle, clock.now()).await, Destroy, "idle past the timeout");
    assert_eq!(raw.status(&idle).await, 404);
    assert!(matches!(fire(&host, &waiting, clock.now()).await, ExtendPausedLease { .. }), "paused work: a lease");
    assert_eq!(raw.status(&waiting).await, 200);
    clock.advance(5 * MIN);
    assert_eq!(fire(&host, &waiting, clock.now()).await, Destroy, "idle past timeout and lease");
    assert_eq!(raw.status(&waiting).await, 404);
    // The session is gone; the pause is not: its window (10 min) is still open.
    let (stands, _) = {
        let client = host.client(ProtocolVersion::V_2025_06_18).await;
        call(&client, "resume", json!({"executionId": paused["executionId"]})).await
    };
    assert_eq!(stands["status"], "waiting_for_interaction", "{stands}");
    // Past its approval window it expires, and the error says why.
    clock.advance(4 * MIN);
    let client = host.client(ProtocolVersion::V_2025_06_18).await;
    let (late, is_error) =
        call(&client, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
    assert!(is_error);
    assert_eq!(late["error"]["code"], "execution_expired");
    let message = late["error"]["message"].as_str().unwrap();
    assert!(message.contains("approval window") && message.contains("not made"), "{message}");
    assert!(host.tools.calls().is_empty());
    client.cancel().await.unwrap();
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_armed_alarm_survives_a_restart() {
    let clock = Arc::new(ManualClock::starting_now());
    let place = Place::new(Deployment::Local).await;
    let host = Running::start_with(&place, None, manual(&clock)).await;
    let raw = Raw::new(&host);
    let session = raw.initialize().await;
    let token = host.token.clone();
    host.stop().await;

    // Restarted after the alarm's time: the re-armed timer fires at once.
    clock.advance(2 * MIN);
    let restarted = Running::start_with(&place, Some(token), manual(&clock)).await;
    let raw = Raw::new(&restarted);
    let mut status = raw.status(&session).await;
    for _ in 0..100 {
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        status = raw.status(&session).await;
    }
    assert_eq!(status, 404, "the alarm armed before the restart fired after it");
    restarted.stop().await;
}

/// `scripts/smoke` (what docs/deploy.md ends with) against this deployment:
/// every check passes; a declined pause makes no call, an accepted one makes it.
async fn the_smoke_script_passes(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let base = host.url.trim_end_matches("/mcp").to_owned();
    let smoke = |extra: &'static [&'static str]| {
        let (base, token) = (base.clone(), host.token.clone());
        tokio::task::spawn_blocking(move || {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/smoke");
            let output = std::process::Command::new("python3")
                .arg(script)
                .args([base.as_str(), token.as_str(), "--pause-code", WRITE])
                .args(extra)
                .env_remove("http_proxy")
                .env_remove("HTTP_PROXY")
                .output()
                .expect("python3 runs scripts/smoke");
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
            stdout
        })
    };
    let declined = smoke(&[]).await.unwrap();
    for check in ["health", "handshake", "execute", "stateless", "pause"] {
        assert!(declined.contains(&format!("ok   {check}: ")), "{check}: {declined}");
    }
    assert!(declined.contains("w.create paused, decline through the JSON API: error"), "{declined}");
    assert!(declined.ends_with("5 passed, 0 failed\n"), "{declined}");
    assert_eq!(host.tools.calls().len(), 0, "a declined call is not made");

    let accepted = smoke(&["--accept"]).await.unwrap();
    assert!(accepted.contains("w.create paused, accept through the JSON API: completed"), "{accepted}");
    assert_eq!(host.tools.calls().len(), 1, "the accepted call is made once");

    // A wrong token fails the checks that need one, and says so.
    let refused = tokio::task::spawn_blocking(move || {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/smoke");
        std::process::Command::new("python3").arg(script).args([base.as_str(), "exk_wrong"]).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success(), "{stdout}");
    assert!(stdout.contains("ok   health") && stdout.contains("FAIL handshake: initialize: HTTP 401"), "{stdout}");
    host.stop().await;
}
