//! Requests per second of `executor serve`'s host on loopback: 16 concurrent
//! clients, 300 `tools/call execute` (`return 1 + 2`) each, stateless, the
//! embedded store on disk. Bounded: it stops after 4,800 requests.
//! `cargo bench -p executor-cli --bench serve_load`

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_catalog::Catalog;
use executor_cli::{keys, serve};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;

const CLIENTS: usize = 16;
const REQUESTS: usize = 300;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let token = keys::create(&*store, "bench").await.unwrap();
        let catalog = Arc::new(Catalog::load(None).await.unwrap());
        let host = serve::host(store, catalog, &[], HostConfig::default()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));

        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"code":"return 1 + 2"}}}"#;
        let started = Instant::now();
        let clients = (0..CLIENTS).map(|_| {
            let (url, token) = (url.clone(), token.clone());
            tokio::spawn(async move {
                let http = executor_http_client::builder().build().unwrap();
                let mut latencies = Vec::with_capacity(REQUESTS);
                for _ in 0..REQUESTS {
                    let sent = Instant::now();
                    let response = http
                        .post(&url)
                        .header("authorization", format!("Bearer {token}"))
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        });
        let mut latencies: Vec<Duration> = Vec::new();
        for client in clients.collect::<Vec<_>>() {
            latencies.extend(client.await.unwrap());
        }
        let elapsed = started.elapsed();
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
        println!(
            "executor serve, {CLIENTS} clients x {REQUESTS} execute calls: {:.0} requests/s; latency p50 {:?}, p99 {:?}, max {:?}",
            latencies.len() as f64 / elapsed.as_secs_f64(),
            at(0.5),
            at(0.99),
            latencies[latencies.len() - 1]
        );
    });
}
