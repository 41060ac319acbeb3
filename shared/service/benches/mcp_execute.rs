//! What the MCP layer adds to an execution: a `tools/call` of `execute` with
//! trivial code through `Host::handle` (auth lookup, rmcp, result shaping)
//! next to the same code run by the sandbox alone; no sources are connected.
//! `cargo bench -p executor-service --bench mcp_execute`

use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use executor_catalog::Catalog;
use executor_core::{ApiKey, ExecutionId, Principal, Timestamp, TokenHash};
use executor_sandbox::{Limits, Outcome, Sandbox, Segment};
use executor_service::{Host, HostConfig};
use executor_store::{EmbeddedStore, KeyStore};

const TOKEN: &str = "exk_bench";

fn request() -> http::Request<Bytes> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"code":"return 1 + 2"}}}"#;
    http::Request::post("/mcp")
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(Bytes::from_static(body.as_bytes()))
        .unwrap()
}

fn mcp_execute(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let key = ApiKey {
        hash: TokenHash::of_token(TOKEN),
        owner: Principal::parse("bench").unwrap(),
        created_at: Timestamp::from_millis(0),
    };
    runtime.block_on(store.create_key(&key)).unwrap();
    let sandbox = Sandbox::new(Limits::default());
    let tools = Arc::new(runtime.block_on(Catalog::load(None)).unwrap());
    let scheduler = Arc::new(executor_store::InProcessScheduler::new());
    let host = Host::new(store, tools.clone(), &[], sandbox.clone(), scheduler, HostConfig::default());
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
    group.bench_function("tools/call execute: return 1 + 2", |b| {
        b.to_async(&runtime).iter(|| {
            let host = host.clone();
            async move {
                let response = host.handle(request()).await;
                assert_eq!(response.status(), 200);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, mcp_execute);
criterion_main!(benches);
