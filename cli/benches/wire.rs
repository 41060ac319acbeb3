//! Requests per second and latency of MCP hosts on loopback: `tools/call` of
//! `execute` with `return 1 + 2`, stateless, each connection sending its
//! requests one after another. With no target it measures this host
//! in-process (the embedded store on disk, the API key checked on every
//! request). Given targets, it measures each of them, interleaved round by
//! round so that a noisy machine slows them alike (`scripts/bench-vs-reference`
//! runs it against `executor serve` and the reference). Bounded by time.
//!
//! `cargo bench -p executor-cli --bench wire -- [--connections N] [--seconds S] [--rounds R] [NAME=URL[,TOKEN]]...`
//!
//! Prints one JSON line per target:
//! `{"name", "connections", "requests", "requestsPerSecond", "p50Us", "p99Us"}`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_catalog::Catalog;
use executor_cli::{keys, serve};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;

const BODY: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"code":"return 1 + 2"}}}"#;

struct Target {
    name: String,
    url: String,
    token: Option<String>,
    latencies: Vec<Duration>,
    busy: Duration,
}

impl Target {
    fn new(name: &str, url: &str, token: Option<String>) -> Self {
        Self { name: name.to_owned(), url: url.to_owned(), token, latencies: Vec::new(), busy: Duration::ZERO }
    }
}

struct Options {
    connections: usize,
    seconds: f64,
    rounds: usize,
    targets: Vec<Target>,
}

fn options() -> Options {
    let mut options = Options { connections: 1, seconds: 3.0, rounds: 3, targets: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match arg.as_str() {
            "--connections" => options.connections = value("--connections").parse().expect("--connections N"),
            "--seconds" => options.seconds = value("--seconds").parse().expect("--seconds S"),
            "--rounds" => options.rounds = value("--rounds").parse().expect("--rounds R"),
            // What `cargo bench` passes to every bench binary.
            "--bench" => {}
            target => {
                let (name, rest) = target.split_once('=').expect("a target is NAME=URL[,TOKEN]");
                let (url, token) = match rest.split_once(',') {
                    Some((url, token)) => (url, Some(token.to_owned())),
                    None => (rest, None),
                };
                options.targets.push(Target::new(name, url, token));
            }
        }
    }
    options
}

/// Serve this host on a loopback port: a target for it, with a key.
async fn in_process(dir: &std::path::Path) -> Target {
    let store = Arc::new(EmbeddedStore::open(dir).unwrap());
    let token = keys::create(&*store, "bench").await.unwrap();
    let catalog = Arc::new(Catalog::load(None).await.unwrap());
    let host = serve::host(store, catalog, &[], HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    Target::new("executor (in-process)", &url, Some(token))
}

/// One round against one target: every connection sends requests back to back
/// until the time is up. Each connection is its own client, so its requests
/// reuse one kept-alive connection.
async fn round(target: &mut Target, connections: usize, duration: Duration) {
    let started = Instant::now();
    let clients = (0..connections).map(|_| {
        let (url, token) = (target.url.clone(), target.token.clone());
        tokio::spawn(async move {
            let http = executor_http_client::builder().build().unwrap();
            let mut latencies = Vec::new();
            while started.elapsed() < duration {
                let sent = Instant::now();
                let mut request = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(BODY);
                if let Some(token) = &token {
                    request = request.header("authorization", format!("Bearer {token}"));
                }
                let response = request.send().await.unwrap();
                let status = response.status();
                let body = response.bytes().await.unwrap();
                let text = String::from_utf8_lossy(&body);
                assert!(status == 200 && text.contains("completed"), "{url} answered {status}: {text}");
                latencies.push(sent.elapsed());
            }
            latencies
        })
    });
    for client in clients.collect::<Vec<_>>() {
        target.latencies.extend(client.await.unwrap());
    }
    target.busy += started.elapsed();
}

fn main() {
    let mut options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        if options.targets.is_empty() {
            options.targets.push(in_process(dir.path()).await);
        }
        // A short warm-up per target, not counted.
        for target in &mut options.targets {
            round(target, options.connections, Duration::from_millis(500)).await;
            target.latencies.clear();
            target.busy = Duration::ZERO;
        }
        let per_round = Duration::from_secs_f64(options.seconds);
        for _ in 0..options.rounds {
            for target in &mut options.targets {
                round(target, options.connections, per_round).await;
            }
        }
    });
    for target in &mut options.targets {
        target.latencies.sort();
        let at = |q: f64| target.latencies[((target.latencies.len() as f64 - 1.0) * q) as usize];
        let figures = serde_json::json!({
            "name": target.name,
            "connections": options.connections,
            "requests": target.latencies.len(),
            "requestsPerSecond": (target.latencies.len() as f64 / target.busy.as_secs_f64()).round(),
            "p50Us": at(0.5).as_micros(),
            "p99Us": at(0.99).as_micros(),
        });
        println!("{figures}");
    }
}
