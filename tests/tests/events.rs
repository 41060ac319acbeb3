//! Lifecycle events on the DynamoDB path: the MCP and approval functions'
//! handler behind the local stand-in for API Gateway, DynamoDB, EventBridge
//! and SQS via moto_server, a real upstream whose source authenticates with a
//! bearer secret, and the rmcp client. A pause puts `Execution Paused` on the
//! bus; a rule with an SQS target receives it (and the events that follow the
//! approval), with the execution id and the approval link, and no event
//! carries the source's secret. Alone in its binary: it sets the variable
//! the source's secret is read from.

mod api_gateway;

use std::sync::Arc;
use std::time::Duration;

use executor_catalog::{Catalog, CatalogConfig};
use executor_events::EventBus;
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{EventBridgeScheduler, SchedulerTarget};
use executor_service::{Host, HostConfig};
use executor_tests::faults::Upstream;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The source's credential: it must reach the upstream and never an event.
const SECRET: &str = "ledger-bearer-s3cr3t-7f1c9a";
const SECRET_VARIABLE: &str = "EVENTS_TEST_LEDGER_TOKEN";
/// Where approval links point (API Gateway's custom domain, on AWS).
const PUBLIC_URL: &str = "https://executor.example.test";
/// SQS receives (each waits up to a second) before the test gives up.
const MAX_RECEIVES: usize = 60;

#[test]
fn a_pause_puts_execution_paused_on_the_bus_and_a_rule_delivers_it_without_secrets() {
    // SAFETY: this binary has one test and sets the variable before any other thread starts.
    unsafe { std::env::set_var(SECRET_VARIABLE, SECRET) };
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(run());
}

async fn run() {
    let aws = executor_tests::moto_sdk_config("us-east-1");
    let (events, sqs) = (aws_sdk_eventbridge::Client::new(&aws), aws_sdk_sqs::Client::new(&aws));
    let name = format!("executor-events-{}", std::process::id());
    events.create_event_bus().name(&name).send().await.unwrap();
    let queue_url = sqs.create_queue().queue_name(&name).send().await.unwrap().queue_url.unwrap();
    let queue_arn = format!("arn:aws:sqs:us-east-1:123456789012:{name}");
    let pattern = json!({ "source": ["executor"] }).to_string();
    events.put_rule().name(&name).event_bus_name(&name).event_pattern(pattern).send().await.unwrap();
    let target = aws_sdk_eventbridge::types::Target::builder().id("queue").arn(&queue_arn).build().unwrap();
    events.put_targets().rule(&name).event_bus_name(&name).targets(target).send().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str(&format!("auth = {{ type = \"bearer\", token = \"env:{SECRET_VARIABLE}\" }}\n"));
    std::fs::write(&config, toml).unwrap();
    let catalog =
        Arc::new(Catalog::connect(&CatalogConfig::load(&config).unwrap()).await.expect("the catalog connects"));
    let namespaces = vec!["ledger".to_owned()];
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store);
    let token = executor_cli::keys::create(&*store, "alice").await.unwrap();
    let group = format!("executor-events-{}", std::process::id());
    executor_tests::scheduler_client().create_schedule_group().name(&group).send().await.unwrap();
    let target = SchedulerTarget {
        group,
        target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
        role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
    };
    let scheduler = Arc::new(EventBridgeScheduler::new(executor_tests::scheduler_client(), target));

    // As the functions are configured with EXECUTOR_EVENT_BUS and their public URL.
    let config = HostConfig { allowed_hosts: None, ..HostConfig::default() }.with_public_url(PUBLIC_URL).unwrap();
    let config = HostConfig { event_sink: Some(Arc::new(EventBus::new(events.clone(), name.clone()))), ..config };
    let function = || {
        Host::new(
            store.clone(),
            catalog.clone(),
            &namespaces,
            Sandbox::new(Limits::default()),
            scheduler.clone(),
            config.clone(),
        )
    };
    let functions = api_gateway::Functions { mcp: function(), approval: function() };
    let (url, _done) = api_gateway::start(functions, std::future::pending()).await;

    let transport = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp?elicitation_mode=browser"))
        .auth_header(token.clone());
    let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("events", "1"));
    let client = info.serve(StreamableHttpClientTransport::with_client(http.clone(), transport)).await.unwrap();
    let code = "const w = await tools.ledger.entries.addEntry({ body: { note: 'via the bus' } });\nreturn w.ok;";
    let arguments: JsonObject = json!({ "code": code }).as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new("execute").with_arguments(arguments)).await.unwrap();
    let paused = result.structured_content.expect("structured content");
    assert_eq!(paused["status"], "user_approval_required", "{paused}");
    let id = paused["executionId"].as_str().unwrap().to_owned();
    let link = paused["approvalUrl"].as_str().unwrap().to_owned();
    assert!(link.starts_with(PUBLIC_URL), "{link}");

    let received = receive_until(&sqs, &queue_url, "Execution Paused").await;
    let event = received.last().unwrap();
    assert_eq!(event["source"], "executor", "{event}");
    assert_eq!(event["detail"]["executionId"], id, "{event}");
    assert_eq!(event["detail"]["approvalUrl"], link, "{event}");
    assert_eq!(event["detail"]["tool"], "ledger.entries.addEntry", "{event}");

    // The owner approves through the approval function's API: the call runs
    // with the source's secret, and the decision and outcome follow on the bus.
    let approved = http
        .post(format!("{url}/api/executions/{id}/resume"))
        .bearer_auth(&token)
        .json(&json!({ "action": "accept" }))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200, "{}", approved.text().await.unwrap_or_default());
    assert_eq!(upstream.posts().len(), 1, "one approval, one POST");
    let mut all = received.clone();
    all.extend(receive_until(&sqs, &queue_url, "Execution Completed").await);
    // At least once: two functions may both send an event before either
    // deletes it; consumers drop repeats by execution id and type (docs/events.md).
    let mut types: Vec<&str> = Vec::new();
    for event in &all {
        let kind = event["detail-type"].as_str().unwrap();
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    assert_eq!(types, ["Execution Paused", "Execution Decided", "Execution Completed"], "{all:#?}");
    for event in &all {
        assert_eq!(event["detail"]["executionId"], id, "{event}");
        assert!(!event.to_string().contains(SECRET), "an event carries the source's secret: {event}");
    }
    client.cancel().await.unwrap();
}

/// Messages from the queue (each an EventBridge event) until one of `detail_type` arrives.
async fn receive_until(sqs: &aws_sdk_sqs::Client, queue_url: &str, detail_type: &str) -> Vec<Value> {
    let mut received = Vec::new();
    for _ in 0..MAX_RECEIVES {
        let out = sqs.receive_message().queue_url(queue_url).max_number_of_messages(10).wait_time_seconds(1).send();
        for message in out.await.unwrap().messages() {
            let event: Value = serde_json::from_str(message.body().unwrap()).expect("an EventBridge event");
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(message.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
            let done = event["detail-type"] == detail_type;
            received.push(event);
            if done {
                return received;
            }
        }
    }
    panic!("no {detail_type} event reached the queue; received {received:#?}");
}
