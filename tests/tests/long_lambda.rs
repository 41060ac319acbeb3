//! A long execution on the Lambda path: the MCP and approval functions'
//! handler behind the local stand-in for API Gateway, DynamoDB via
//! moto_server, a real upstream whose reads take 1.5 s, and the rmcp client.
//! With a 2 s response budget the MCP function answers `running`, stops the
//! run at its next safe point and hands it on; the continuation runs in the
//! approval function's handler.
//!
//! On AWS the MCP function starts the continuation with an asynchronous
//! invocation (`InvocationType: Event`) of the approval function, whose event
//! is `executor_lambda_shell::continuation_event`. moto does not run Lambda
//! functions, so here the continuation starts the way the Lambda runtime
//! would start it: the approval function's handler is called, in a task of
//! its own, with that same event payload.

mod api_gateway;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ExecutionId;
use executor_lambda_shell::{Routes, continuation_event, request_from_event};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{EventBridgeScheduler, SchedulerTarget};
use executor_service::{ContinuationError, Continuations, Host, HostConfig};
use executor_tests::faults::{Upstream, query_value};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Mutex, oneshot};

const SIX_READS: &str = "const seen = [];
for (let n = 1; n <= 6; n++) {
  const r = await tools.ledger.entries.listEntries({ n, holdMs: 1500 });
  seen.push(r.ok ? n : r.error.code);
}
return seen;";

/// `resume` calls at most while following one execution (each waits up to the budget).
const MAX_POLLS: usize = 60;

/// What the approval function's handler answered to each continuation event.
type Answers = Arc<Mutex<Vec<(u16, String)>>>;

/// Starts a continuation as the Lambda runtime would after an asynchronous
/// invocation: the approval function's handler, called with the event.
struct InvokeApprovalFunction {
    approval: Arc<std::sync::OnceLock<Host>>,
    answers: Answers,
}

impl std::fmt::Debug for InvokeApprovalFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InvokeApprovalFunction")
    }
}

#[async_trait]
impl Continuations for InvokeApprovalFunction {
    async fn start(&self, id: &ExecutionId) -> Result<(), ContinuationError> {
        let host = self.approval.get().expect("the approval function is up").clone();
        let request = request_from_event(continuation_event(id)).expect("the event is an API Gateway request");
        let answers = self.answers.clone();
        // An asynchronous invocation: accepted now, run on its own.
        tokio::spawn(async move {
            let response = executor_lambda_shell::handle(&host, Routes::Approvals, request).await;
            let body = match response.body() {
                lambda_http::Body::Text(text) => text.clone(),
                other => format!("{other:?}"),
            };
            answers.lock().await.push((response.status().as_u16(), body));
        });
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_execution_is_handed_to_the_approval_function_and_each_read_is_made_once() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    let config = CatalogConfig::load(&upstream.write_config(dir.path(), Duration::from_secs(30))).unwrap();
    let catalog = Arc::new(Catalog::connect(&config).await.expect("the catalog connects"));
    let namespaces = vec!["ledger".to_owned()];
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store);
    let token = executor_cli::keys::create(&*store, "alice").await.unwrap();
    let group = format!("executor-long-{}", std::process::id());
    executor_tests::scheduler_client().create_schedule_group().name(&group).send().await.unwrap();
    let target = SchedulerTarget {
        group,
        target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
        role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
    };
    let scheduler = Arc::new(EventBridgeScheduler::new(executor_tests::scheduler_client(), target));

    // As the functions are configured: API Gateway routes by host; the MCP
    // function hands long runs to the approval function.
    let base = HostConfig { allowed_hosts: None, response_budget: Duration::from_secs(2), ..HostConfig::default() };
    let approval_slot = Arc::new(std::sync::OnceLock::new());
    let answers = Answers::default();
    let continuations = InvokeApprovalFunction { approval: approval_slot.clone(), answers: answers.clone() };
    let function = |config: HostConfig| {
        let sandbox = Sandbox::new(Limits { wall_clock: config.max_execution, ..Limits::default() });
        Host::new(store.clone(), catalog.clone(), &namespaces, sandbox, scheduler.clone(), config)
    };
    let approval = function(base.clone());
    assert!(approval_slot.set(approval.clone()).is_ok(), "set once");
    let mcp = function(HostConfig { continuations: Some(Arc::new(continuations)), ..base });
    let (stop, stopped) = oneshot::channel::<()>();
    let (url, done) = api_gateway::start(api_gateway::Functions { mcp, approval }, async move {
        let _ = stopped.await;
    })
    .await;

    let transport = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(token.clone());
    let http = executor_http_client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("long", "1"));
    let client = info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.unwrap();

    let (started, _) = call(&client, "execute", json!({ "code": SIX_READS })).await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["executionId"].as_str().expect("an executionId").to_owned();
    let mut done_answer = None;
    for _ in 0..MAX_POLLS {
        let (answer, _) = call(&client, "resume", json!({ "executionId": id })).await;
        if answer["status"] != "running" {
            done_answer = Some(answer);
            break;
        }
    }
    let done_answer = done_answer.unwrap_or_else(|| panic!("{id} still running after {MAX_POLLS} resumes"));
    assert_eq!(done_answer["status"], "completed", "{done_answer}");
    assert_eq!(done_answer["result"], json!([1, 2, 3, 4, 5, 6]));

    let mut reads: BTreeMap<u64, usize> = BTreeMap::new();
    for read in upstream.reads() {
        let n = query_value(&read.query, "n").and_then(|n| n.parse().ok()).expect("every read carries n");
        *reads.entry(n).or_default() += 1;
    }
    assert_eq!(reads, (1..=6).map(|n| (n, 1)).collect(), "each read reached the upstream once");
    // The handler answers (to nobody) just after it stored the outcome.
    for _ in 0..200 {
        if !answers.lock().await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answers = answers.lock().await.clone();
    assert_eq!(answers.len(), 1, "the run was handed to the approval function once: {answers:?}");
    assert_eq!(answers[0].0, 200, "{answers:?}");
    assert!(answers[0].1.contains("completed"), "{answers:?}");

    // The same as an MCP task (the TypeScript SDK's client): handed to the
    // approval function at once, and followed with tasks/get and tasks/result.
    let code = SIX_READS.replace("n = 1; n <= 6", "n = 11; n <= 16");
    let out = executor_tests::mcp_client::tasks(&format!("{url}/mcp"), &token, &["stream"], &code).await;
    let messages = out["messages"].as_array().expect("the stream's messages");
    let statuses: Vec<&str> = messages.iter().filter_map(|m| m["task"]["status"].as_str()).collect();
    assert_eq!((statuses.first(), statuses.last()), (Some(&"working"), Some(&"completed")), "{out}");
    let result = &messages.last().unwrap()["result"]["structuredContent"];
    assert_eq!(result["result"], json!([11, 12, 13, 14, 15, 16]), "{out}");
    let task_reads =
        upstream.reads().iter().filter(|read| query_value(&read.query, "n").is_some_and(|n| n.len() == 2)).count();
    assert_eq!(task_reads, 6, "each of the task's reads reached the upstream once");

    client.cancel().await.unwrap();
    stop.send(()).unwrap();
    done.await.unwrap();
}

async fn call(
    client: &RunningService<RoleClient, InitializeRequestParams>,
    tool: &'static str,
    arguments: Value,
) -> (Value, bool) {
    let arguments: JsonObject = arguments.as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    (result.structured_content.expect("structured content"), result.is_error == Some(true))
}
