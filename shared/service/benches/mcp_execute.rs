//! What the MCP layer adds to an execution: a `tools/call` of `execute` with
//! trivial code through `Host::handle` (auth lookup, rmcp, result shaping)
//! next to the same code run by the sandbox alone; no sources are connected.
//! The same call again under the Lambda functions' telemetry: without an OTLP
//! endpoint (JSON logs and EMF metrics, written to a sink that drops them),
//! and with spans exported over OTLP/HTTP to a loopback collector that
//! answers 200 to everything.
//! And the cost of handing a run on (a response budget of zero: the run is
//! stored as `running`, goes on in its own task and is settled in the store;
//! `resume`, asked until then, reads the outcome), next to the same code
//! answered at once.
//! `cargo bench -p executor-service --bench mcp_execute`

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use executor_catalog::Catalog;
use executor_core::{ApiKey, ExecutionId, Principal, Timestamp, TokenHash};
use executor_sandbox::{Limits, Outcome, Sandbox, Segment};
use executor_service::{Host, HostConfig};
use executor_store::{EmbeddedStore, KeyStore};
use executor_telemetry::{Builder, DEFAULT_LOG_FILTER, Lines};
use tokio::runtime::Runtime;
use tracing::Dispatch;

const TOKEN: &str = "exk_bench";

fn request() -> http::Request<Bytes> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"code":"return 1 + 2"}}}"#;
    post(Bytes::from_static(body.as_bytes()))
}

/// `resume` of execution `id`, without an action: it waits for the outcome.
fn resume(id: &str) -> http::Request<Bytes> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "resume", "arguments": { "executionId": id } },
    });
    post(Bytes::from(body.to_string()))
}

fn post(body: Bytes) -> http::Request<Bytes> {
    http::Request::post("/mcp")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body)
        .unwrap()
}

/// A runtime like the others (one worker), whose threads report to `dispatch`.
fn runtime_with(dispatch: Option<Dispatch>) -> Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(1).enable_all();
    if let Some(dispatch) = dispatch {
        builder.on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&dispatch)));
    }
    builder.build().unwrap()
}

/// An OTLP collector on loopback that accepts every export: its URL.
fn collector() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header).unwrap();
                        if header.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let answer =
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if stream.write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn mcp_execute(c: &mut Criterion) {
    let runtime = runtime_with(None);
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let key = ApiKey {
        hash: TokenHash::of_token(TOKEN),
        owner: Principal::parse("bench").unwrap(),
        created_at: Timestamp::from_millis(0),
        toolkit: None,
    };
    runtime.block_on(store.create_key(&key)).unwrap();
    let sandbox = Sandbox::new(Limits::default());
    let tools = Arc::new(runtime.block_on(Catalog::load(None)).unwrap());
    let scheduler = Arc::new(executor_scheduler::InProcessScheduler::new());
    let host_with =
        |config: HostConfig| Host::new(store.clone(), tools.clone(), &[], sandbox.clone(), scheduler.clone(), config);
    let host = host_with(HostConfig::default());
    let answer = runtime.block_on(host.handle(request()));
    assert_eq!(answer.status(), 200, "{:?}", answer.body());
    assert!(String::from_utf8_lossy(answer.body()).contains("\"result\":3"));

    let mut group = c.benchmark_group("mcp");
    group.bench_function("sandbox alone: return 1 + 2", |b| {
        b.to_async(&runtime).iter(|| {
            let (sandbox, tools) = (sandbox.clone(), tools.clone());
            async move {
                let segment =
                    Segment::start(ExecutionId::parse("bench").unwrap(), "return 1 + 2", Timestamp::from_millis(0), 1);
                let outcome = sandbox.run(segment, tools).await;
                assert!(matches!(outcome, Outcome::Completed { .. }));
            }
        })
    });
    let execute_on = |b: &mut criterion::Bencher, runtime: &Runtime, host: &Host| {
        b.to_async(runtime).iter(|| {
            let host = host.clone();
            async move {
                let response = host.handle(request()).await;
                assert_eq!(response.status(), 200);
            }
        })
    };
    let execute = |b: &mut criterion::Bencher, runtime: &Runtime| execute_on(b, runtime, &host);
    group.bench_function("tools/call execute: return 1 + 2", |b| execute(b, &runtime));

    // Quotas on, never reached: the hourly count (one conditional write before
    // the run), then also a running slot (taken in the same write, released after).
    let unreachable = 1_000_000_000;
    let mut hourly = HostConfig::default();
    hourly.quotas.defaults.executions_per_hour = Some(unreachable);
    let hourly = host_with(hourly);
    group.bench_function("tools/call execute, hourly quota", |b| execute_on(b, &runtime, &hourly));
    let mut both = HostConfig::default();
    both.quotas.defaults.executions_per_hour = Some(unreachable);
    both.quotas.defaults.concurrent_executions = Some(unreachable);
    let both = host_with(both);
    group.bench_function("tools/call execute, hourly and concurrent quotas", |b| execute_on(b, &runtime, &both));

    // Every run handed on: `running` at once, then `resume` for the outcome.
    let handing_on = host_with(HostConfig { response_budget: Duration::ZERO, ..HostConfig::default() });
    group.bench_function("tools/call execute handed on, then resume", |b| {
        b.to_async(&runtime).iter(|| {
            let host = handing_on.clone();
            async move {
                let answer: serde_json::Value = serde_json::from_slice(host.handle(request()).await.body()).unwrap();
                let running = &answer["result"]["structuredContent"];
                assert_eq!(running["status"], "running", "{answer}");
                // With a zero budget `resume` does not wait either: it is
                // asked until the run's own task has settled it.
                let id = running["executionId"].as_str().unwrap();
                for _ in 0..100_000 {
                    let outcome = host.handle(resume(id)).await;
                    if String::from_utf8_lossy(outcome.body()).contains("\"result\":3") {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
                panic!("{id} never completed");
            }
        })
    });

    // Lambda telemetry without an endpoint: log lines and EMF, nowhere to export.
    let dropped: Lines = Arc::new(|_: &str| {});
    let builder = || {
        Builder::new("mcp")
            .json_logs(DEFAULT_LOG_FILTER, dropped.clone())
            .unwrap()
            .emf_metrics("Executor", dropped.clone())
    };
    let (logs_only, _telemetry) = builder().build();
    let with_logs = runtime_with(Some(logs_only.clone()));
    group.bench_function("tools/call execute, telemetry without endpoint", |b| {
        tracing::dispatcher::with_default(&logs_only, || execute(b, &with_logs))
    });

    // And with every span exported over OTLP/HTTP to the loopback collector.
    // The exporter's HTTP requests run on a runtime of their own, alive to the end.
    let endpoint = collector();
    let export_runtime = runtime_with(None);
    let lookup = |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone());
    let provider =
        export_runtime.block_on(async { executor_telemetry::otlp_provider("bench", &lookup) }).unwrap().unwrap();
    let (with_spans, telemetry) = builder().spans(provider).build();
    let exporting = runtime_with(Some(with_spans.clone()));
    group.bench_function("tools/call execute, spans exported over OTLP", |b| {
        tracing::dispatcher::with_default(&with_spans, || execute(b, &exporting))
    });
    group.finish();
    export_runtime.block_on(telemetry.shutdown());
}

criterion_group!(benches, mcp_execute);
criterion_main!(benches);
