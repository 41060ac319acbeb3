//! Telemetry end to end: the real host (`executor serve`'s, with the embedded
//! store and tools that need approval) under the Lambda functions' telemetry
//! set-up (JSON log lines, EMF metrics), its spans caught by OpenTelemetry's
//! in-memory exporter. Each test runs its own runtime whose threads report to
//! its own subscriber, so tests in this file do not see each other's spans.

#[path = "../../shared/sandbox/tests/support/mod.rs"]
mod support;

#[path = "../../shared/catalog/tests/support/mod.rs"]
mod catalog_support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use executor_cli::{keys, serve};
use executor_service::{Host, HostConfig};
use executor_store::EmbeddedStore;
use executor_telemetry::{Builder, Flushed, Lines, Telemetry};
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry::{KeyValue, Value as OtelValue};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use support::TestTools;

/// What a test's subscriber caught.
struct Caught {
    exporter: InMemorySpanExporter,
    lines: Arc<Mutex<Vec<String>>>,
    telemetry: Telemetry,
}

impl Caught {
    fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// Run `test` on a fresh multi-threaded runtime under the Lambda telemetry
/// set-up (our crates logged down to TRACE), spans to an in-memory exporter.
fn with_telemetry<F: Future<Output = ()>>(test: impl FnOnce(Arc<Caught>) -> F) -> Arc<Caught> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let to_lines: Lines = Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned()));
    let (dispatch, telemetry) = Builder::new("mcp")
        .json_logs("warn,executor=trace", to_lines.clone())
        .unwrap()
        .emf_metrics("Executor", to_lines)
        .spans(provider)
        .build();
    let caught = Arc::new(Caught { exporter, lines, telemetry });
    let on_workers = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            // For the thread's whole life: the runtime's threads are this test's.
            std::mem::forget(tracing::dispatcher::set_default(&on_workers));
        })
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(test(caught.clone())));
    caught
}

/// The host `executor serve` runs, on a fresh store with alice's key.
async fn start(dir: &std::path::Path) -> (Host, String) {
    let store = Arc::new(EmbeddedStore::open(dir).unwrap());
    let token = keys::create(&*store, "alice").await.unwrap();
    let namespaces = vec!["r".to_owned(), "w".to_owned()];
    let host = serve::host(store, TestTools::new(), &namespaces, HostConfig::default()).await.unwrap();
    (host, token)
}

fn post(uri: &str, headers: &[(&str, &str)], body: Value) -> http::Request<Bytes> {
    let mut request = http::Request::post(uri)
        .header("host", "127.0.0.1:8787")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Bytes::from(body.to_string())).unwrap()
}

fn json_body(response: &http::Response<Bytes>) -> Value {
    serde_json::from_slice(response.body()).unwrap_or_else(|_| panic!("{:?}", response.body()))
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    match attribute(span, key) {
        Some(value) => value.as_str().into_owned(),
        None => panic!("{} has no {key}: {:?}", span.name, span.attributes),
    }
}

/// The only span named `name` whose parent is `parent`.
fn child<'a>(spans: &'a [SpanData], parent: &SpanData, name: &str) -> &'a SpanData {
    let found: Vec<&SpanData> =
        spans.iter().filter(|s| s.name == name && s.parent_span_id == parent.span_context.span_id()).collect();
    assert_eq!(found.len(), 1, "one {name} under {}: {:?}", parent.name, names(spans));
    found[0]
}

fn children<'a>(spans: &'a [SpanData], parent: &SpanData) -> Vec<&'a str> {
    let mut names: Vec<&str> =
        spans.iter().filter(|s| s.parent_span_id == parent.span_context.span_id()).map(|s| s.name.as_ref()).collect();
    names.sort();
    names
}

fn names(spans: &[SpanData]) -> Vec<(String, String, String)> {
    spans
        .iter()
        .map(|s| (s.name.to_string(), s.span_context.span_id().to_string(), s.parent_span_id.to_string()))
        .collect()
}

/// Everything a span says, as text: name, attributes, event names and attributes, link attributes.
fn said(span: &SpanData) -> String {
    let kvs = |kvs: &[KeyValue]| kvs.iter().map(|kv| format!("{}={} ", kv.key, kv.value)).collect::<String>();
    let mut text = format!("{} {}", span.name, kvs(&span.attributes));
    for event in span.events.iter() {
        text += &format!("{} {}", event.name, kvs(&event.attributes));
    }
    for link in span.links.iter() {
        text += &kvs(&link.attributes);
    }
    text
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SECRETS: [&str; 4] = ["SECRET-ARG-read", "SECRET-ARG-title", "sk-SECRET-KEY", "SECRET-LOG"];
const CODE: &str = "console.log('SECRET-LOG'); \
    const r = await tools.r.read({ key: 'SECRET-ARG-read' }); \
    const w = await tools.w.create({ title: 'SECRET-ARG-title', token: 'sk-SECRET-KEY' }); \
    return [r.ok, w.data.args.title.length]";

/// execute -> pause -> approve on the approval page -> complete: the span
/// tree of both requests, the link from the resume to the pause, the metrics,
/// and no argument value, code, token or secret in any span or log line.
#[test]
fn a_paused_then_approved_execution_is_one_story_in_spans_logs_and_metrics() {
    let seen = Arc::new(Mutex::new(HashMap::<&str, String>::new()));
    let record = seen.clone();
    let caught = with_telemetry(|caught| async move {
        let dir = tempfile::tempdir().unwrap();
        let (host, token) = start(dir.path()).await;
        let bearer = format!("Bearer {token}");
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let first = format!("00-{TRACE}-00f067aa0ba902b7-01");
        let answer =
            host.handle(post("/mcp", &[("authorization", &bearer), ("traceparent", &first)], initialize)).await;
        assert_eq!(answer.status(), 200);
        let session = answer.headers()["mcp-session-id"].to_str().unwrap().to_owned();

        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": CODE}}});
        let second = format!("00-{TRACE}-00f067aa0ba902b8-01");
        let headers = [
            ("authorization", bearer.as_str()),
            ("traceparent", second.as_str()),
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-06-18"),
        ];
        let answer = host.handle(post("/mcp?elicitation_mode=browser", &headers, call)).await;
        let paused = json_body(&answer)["result"]["structuredContent"].clone();
        assert_eq!(paused["status"], "user_approval_required", "{paused}");
        let url = paused["approvalUrl"].as_str().unwrap();
        let path_and_query = &url[url.find("/approvals/").unwrap()..];
        let approval_token = path_and_query.split("token=").nth(1).unwrap().to_owned();
        let execution = paused["executionId"].as_str().unwrap().to_owned();

        let page = http::Request::get(path_and_query).header("host", "127.0.0.1:8787").body(Bytes::new()).unwrap();
        let page = host.handle(page).await;
        assert_eq!(page.status(), 200);
        let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
        let csrf = cookie.strip_prefix("executor_csrf=").unwrap().to_owned();
        let form = format!("token={approval_token}&decision=accept&csrf={csrf}");
        let decide = http::Request::post(format!("/approvals/{execution}"))
            .header("host", "127.0.0.1:8787")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", &cookie)
            .body(Bytes::from(form))
            .unwrap();
        let decided = host.handle(decide).await;
        assert_eq!(decided.status(), 200);
        assert!(String::from_utf8_lossy(decided.body()).contains("Approved"));
        assert_eq!(caught.telemetry.flush().await, Flushed::Done);

        let mut record = record.lock().unwrap();
        record.insert("session", session);
        record.insert("execution", execution);
        record.insert("bearer", token);
        record.insert("approval token", approval_token);
        record.insert("csrf", csrf);
    });
    let seen = seen.lock().unwrap();
    let spans = caught.spans();

    // The execute request continues the caller's trace, as a child of its span.
    let requests: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "mcp.request" && s.span_context.trace_id() == TraceId::from_hex(TRACE).unwrap())
        .collect();
    assert_eq!(requests.len(), 2, "{:?}", names(&spans));
    let execute = requests.iter().find(|s| text(s, "mcp.method.name") == "tools/call").unwrap();
    assert_eq!(execute.parent_span_id, SpanId::from_hex("00f067aa0ba902b8").unwrap());
    assert!(execute.parent_span_is_remote);
    for (key, expected) in [
        ("gen_ai.tool.name", "execute"),
        ("mcp.protocol.version", "2025-06-18"),
        ("mcp.session.id", seen["session"].as_str()),
        ("executor.owner.hash", "2bd806c97f0e"),
        ("executor.elicitation_mode", "browser"),
        ("executor.execution.id", seen["execution"].as_str()),
        ("http.request.method", "POST"),
        ("trace_id", TRACE),
    ] {
        assert_eq!(text(execute, key), expected, "{key}");
    }
    assert_eq!(attribute(execute, "http.response.status_code"), Some(&OtelValue::I64(200)));
    assert_eq!(
        children(&spans, execute),
        // The key was verified by the session's first request: remembered, not read again.
        ["execution.pause", "execution.run", "store.get_session"],
        "{:?}",
        names(&spans)
    );

    // The first segment: the read ran, the write waits for approval; the pause is stored.
    let run = child(&spans, execute, "execution.run");
    assert_eq!(text(run, "executor.execution.outcome"), "paused");
    assert_eq!(attribute(run, "executor.steps.called"), Some(&OtelValue::I64(1)));
    assert_eq!(attribute(run, "executor.steps.pending"), Some(&OtelValue::I64(1)));
    let calls: Vec<(String, String, String)> = spans
        .iter()
        .filter(|s| s.name == "tool.call" && s.parent_span_id == run.span_context.span_id())
        .map(|s| (text(s, "executor.tool.path"), text(s, "executor.tool.namespace"), text(s, "executor.tool.outcome")))
        .collect();
    let expected = [("r.read", "r", "ok"), ("w.create", "w", "approval_required")];
    assert_eq!(calls, expected.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned())));
    assert_eq!(
        children(&spans, run),
        ["tool.call", "tool.call"],
        "no grant is read by the run: the pause's own write checks that none lets the call run"
    );
    let pause = child(&spans, execute, "execution.pause");
    assert_eq!(text(pause, "executor.pending.paths"), "w.create");
    assert_eq!(children(&spans, pause), ["store.create_execution"]);

    // The approval: its own trace, its resume linked to the pause.
    let decision = spans
        .iter()
        .find(|s| s.name == "approval.request" && text(s, "http.request.method") == "POST")
        .expect("the approval request's span");
    assert_eq!(text(decision, "http.route"), "/approvals/{executionId}");
    assert_eq!(text(decision, "executor.execution.id"), seen["execution"]);
    assert_eq!(decision.parent_span_id, SpanId::INVALID, "a request without traceparent starts a trace");
    let resume = child(&spans, decision, "execution.resume");
    assert_eq!(text(resume, "executor.approval.action"), "accept");
    assert_eq!(text(resume, "executor.execution.outcome"), "completed");
    let links: Vec<_> = resume.links.iter().collect();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].span_context.trace_id(), pause.span_context.trace_id());
    assert_eq!(links[0].span_context.span_id(), pause.span_context.span_id());
    assert_eq!(links[0].attributes, [KeyValue::new("executor.link", "paused_by")]);
    assert_eq!(
        children(&spans, resume),
        ["execution.replay", "store.update_execution", "store.update_execution"],
        "claimed, replayed (no new call needs approval: no grants read), settled"
    );
    let replay = child(&spans, resume, "execution.replay");
    assert_eq!(text(replay, "executor.execution.outcome"), "completed");
    for (key, n) in [("executor.steps.journaled", 1), ("executor.steps.replayed", 1), ("executor.steps.called", 1)] {
        assert_eq!(attribute(replay, key), Some(&OtelValue::I64(n)), "{key}");
    }
    let approved = child(&spans, replay, "tool.call");
    assert_eq!(
        (text(approved, "executor.tool.path"), text(approved, "executor.tool.outcome")),
        ("w.create".into(), "ok".into())
    );
    assert!(attribute(approved, "executor.tool.duration_ms").is_some());

    // Logs: one JSON object per line; the pause's line carries the trace and the execution.
    let lines = caught.lines();
    let logs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let paused = logs.iter().find(|l| l["message"] == "execution paused").expect("a line for the pause");
    assert_eq!(paused["trace_id"], TRACE);
    assert_eq!(paused["executor.execution.id"], seen["execution"].as_str());
    assert_eq!(paused["level"], "INFO");
    assert!(logs.iter().any(|l| l["message"] == "approval decided" && l["action"] == "accept"));

    // Metrics: one EMF document for what happened.
    let emf = logs.iter().find(|l| l.get("_aws").is_some()).expect("an EMF line");
    for (metric, n) in [
        ("SessionsCreated", 1),
        ("ExecutionsStarted", 1),
        ("ExecutionsPaused", 1),
        ("ApprovalsAccepted", 1),
        ("ReplaySteps", 1),
        ("ExecutionsCompleted", 1),
    ] {
        assert_eq!(emf[metric], n, "{metric}: {emf}");
    }
    assert_eq!(emf["Service"], "mcp");

    // Nothing secret anywhere: arguments, console output, code, tokens.
    let code_fragment = "w.data.args.title.length";
    let forbidden: Vec<&str> = SECRETS
        .iter()
        .copied()
        .chain([code_fragment, &seen["bearer"], &seen["approval token"], &seen["csrf"]])
        .collect();
    for span in &spans {
        let said = said(span);
        for secret in &forbidden {
            assert!(!said.contains(secret), "{secret:?} in span {said}");
        }
    }
    for line in &lines {
        for secret in &forbidden {
            assert!(!line.contains(secret), "{secret:?} in log line {line}");
        }
    }
}

/// A `traceparent` (and its `tracestate`) on a request makes the request
/// span a child of the caller's span, in the caller's trace.
#[test]
fn a_traceparent_is_the_parent_of_the_request_span() {
    let caught = with_telemetry(|_| async {
        let dir = tempfile::tempdir().unwrap();
        let (host, token) = start(dir.path()).await;
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let headers = [
            ("authorization", format!("Bearer {token}")),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned()),
            ("tracestate", "vendor=opaque".to_owned()),
            ("mcp-protocol-version", "2025-06-18".to_owned()),
        ];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let answer = host.handle(post("/mcp", &headers, list)).await;
        assert_eq!(answer.status(), 200, "{:?}", answer.body());
    });
    let spans = caught.spans();
    let request = spans.iter().find(|s| s.name == "mcp.request").expect("the request span");
    assert_eq!(request.span_context.trace_id(), TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap());
    assert_eq!(request.parent_span_id, SpanId::from_hex("b7ad6b7169203331").unwrap());
    assert!(request.parent_span_is_remote);
    assert_eq!(request.span_context.trace_state().get("vendor"), Some("opaque"));
    assert_eq!(text(request, "mcp.method.name"), "tools/list");
    let store = spans.iter().find(|s| s.name == "store.find_key").expect("the key lookup's span");
    assert_eq!(store.parent_span_id, request.span_context.span_id());
    assert_eq!(text(store, "executor.backend"), "redb");
    assert_eq!(text(store, "executor.store.outcome"), "ok");
}

#[test]
fn a_tool_call_carries_its_span_to_the_upstream() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream_saw = seen.clone();
    let caught = with_telemetry(|_| async move {
        let world = catalog_support::world("").await;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let token = keys::create(&*store, "alice").await.unwrap();
        let host =
            serve::host(store, world.catalog.clone(), &["shop".to_owned()], HostConfig::default()).await.unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "execute",
            "arguments": {"code": "return (await tools.shop.items.getItem({id: 1})).data"}}});
        let bearer = format!("Bearer {token}");
        let headers = [("authorization", bearer.as_str()), ("mcp-protocol-version", "2025-06-18")];
        let answer = host.handle(post("/mcp", &headers, call)).await;
        assert_eq!(json_body(&answer)["result"]["structuredContent"]["result"]["name"], "lamp", "{answer:?}");
        *upstream_saw.lock().unwrap() = world.shop.recorded.traceparents.lock().unwrap().clone();
    });
    let spans = caught.spans();
    let tool = spans.iter().find(|s| s.name == "tool.call").expect("the tool call's span");
    let expected = format!("00-{}-{}-01", tool.span_context.trace_id(), tool.span_context.span_id());
    assert_eq!(*seen.lock().unwrap(), [expected], "the upstream joins the trace under the tool call");
}
