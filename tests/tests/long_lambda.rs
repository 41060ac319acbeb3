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
use executor_core::ExecutionId;
use executor_lambda_shell::{Routes, continuation_event};
use executor_scheduler::{EventBridgeScheduler, SchedulerTarget};
use executor_service::{ContinuationError, Continuations, Host, HostConfig};
use executor_tests::faults::query_value;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

const SIX_READS: &str = "const seen = [];
for (let n = 1; n <= 6; n++) {
  const r = await tools.ledger.entries.listEntries({ n, holdMs: 1500 });
  seen.push(r.ok ? n : r.error.code);
}
return seen;";

/// `resume` calls at most while following one execution (each waits up to the budget).
const MAX_POLLS: usize = 60;

/// Starts a continuation as the Lambda runtime would after an asynchronous
/// invocation: the approval function's handler, called with the event; what
/// it answered goes to `answers`.
struct InvokeApprovalFunction {
    approval: Arc<std::sync::OnceLock<Host>>,
    answers: mpsc::UnboundedSender<Value>,
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
        let event = continuation_event(id);
        let answers = self.answers.clone();
        // An asynchronous invocation: accepted now, run on its own.
        tokio::spawn(async move {
            let answer = executor_lambda_shell::handle(&host, Routes::Approvals, event).await;
            let _ = answers.send(answer.expect("the approval function takes continuation events"));
        });
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_execution_is_handed_to_the_approval_function_and_each_read_is_made_once() {
    let ledger = api_gateway::Ledger::start().await;
    let (upstream, token) = (&ledger.upstream, &ledger.alice);
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
    let (answered, mut answers) = mpsc::unbounded_channel();
    let continuations = InvokeApprovalFunction { approval: approval_slot.clone(), answers: answered };
    let function = |config| ledger.function(scheduler.clone(), config);
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
    let answer = tokio::time::timeout(Duration::from_secs(30), answers.recv()).await.expect("the handler answers");
    assert_eq!(answer, Some(json!({"executionId": id, "status": "completed"})));
    assert!(answers.try_recv().is_err(), "the run was handed to the approval function once");

    // The same as an MCP task (the TypeScript SDK's client): handed to the
    // approval function at once, and followed with tasks/get and tasks/result.
    let code = SIX_READS.replace("n = 1; n <= 6", "n = 11; n <= 16");
    let out = executor_tests::mcp_client::tasks(&format!("{url}/mcp"), token, &["stream"], &code).await;
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
