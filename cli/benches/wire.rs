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
//! `{"name", "connections", "requests", "requestsPerSecond", "p50Us", "p90Us", "p99Us"}`.

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
/// until the time is up, each on its own thread over one kept-alive socket.
/// The client is a few system calls per request (like `wrk`), so what is
/// measured is the host, not an HTTP client library's own overhead, which
/// would be added alike to every target and shrink their ratio.
async fn round(target: &mut Target, connections: usize, duration: Duration) {
    let started = Instant::now();
    let request = Arc::new(request_bytes(&target.url, target.token.as_deref()));
    let address = authority(&target.url).to_owned();
    let clients = (0..connections).map(|_| {
        let (request, address, url) = (request.clone(), address.clone(), target.url.clone());
        tokio::task::spawn_blocking(move || {
            let mut connection = Connection::open(&address);
            let mut latencies = Vec::new();
            while started.elapsed() < duration {
                let sent = Instant::now();
                let (status, body) = connection.exchange(&request);
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

/// `host:port` of an `http://host:port/path` URL.
fn authority(url: &str) -> &str {
    let rest = url.strip_prefix("http://").expect("targets are http:// URLs");
    rest.split('/').next().unwrap_or(rest)
}

/// The whole request, written once and sent as is every time.
fn request_bytes(url: &str, token: Option<&str>) -> Vec<u8> {
    let host = authority(url);
    let path = &url["http://".len() + host.len()..];
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\n{auth}content-length: {}\r\n\r\n{BODY}",
        BODY.len()
    )
    .into_bytes()
}

/// One kept-alive HTTP/1.1 connection, reading responses framed by
/// `content-length` or chunked (the reference answers with an SSE stream).
struct Connection {
    socket: std::net::TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    fn open(address: &str) -> Self {
        let socket = std::net::TcpStream::connect(address).unwrap_or_else(|e| panic!("connecting to {address}: {e}"));
        socket.set_nodelay(true).unwrap();
        Self { socket, buffer: Vec::with_capacity(16 << 10) }
    }

    fn exchange(&mut self, request: &[u8]) -> (u16, Vec<u8>) {
        use std::io::Write;
        self.socket.write_all(request).unwrap();
        self.buffer.clear();
        let head_end = loop {
            if let Some(at) = find(&self.buffer, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill();
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).to_ascii_lowercase();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("an HTTP status line");
        let header = |name: &str| {
            head.lines().find_map(|line| line.strip_prefix(name).and_then(|v| v.strip_prefix(':')).map(str::trim))
        };
        let body = if let Some(length) = header("content-length") {
            let end = head_end + length.parse::<usize>().expect("a content-length");
            while self.buffer.len() < end {
                self.fill();
            }
            self.buffer[head_end..end].to_vec()
        } else {
            assert_eq!(header("transfer-encoding"), Some("chunked"), "a response without a length: {head}");
            self.chunked(head_end)
        };
        (status, body)
    }

    /// The body of a chunked response whose chunks start at `at`.
    fn chunked(&mut self, mut at: usize) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(end) = find(&self.buffer[at..], b"\r\n") {
                    break at + end;
                }
                self.fill();
            };
            let size_text = std::str::from_utf8(&self.buffer[at..line_end]).unwrap();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).expect("a chunk size");
            let data_end = line_end + 2 + size + 2;
            while self.buffer.len() < data_end {
                self.fill();
            }
            body.extend_from_slice(&self.buffer[line_end + 2..data_end - 2]);
            at = data_end;
            if size == 0 {
                return body;
            }
        }
    }

    fn fill(&mut self) {
        use std::io::Read;
        let mut chunk = [0u8; 16 << 10];
        let read = self.socket.read(&mut chunk).unwrap();
        assert!(read > 0, "the server closed the connection");
        self.buffer.extend_from_slice(&chunk[..read]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
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
            "p90Us": at(0.9).as_micros(),
            "p99Us": at(0.99).as_micros(),
        });
        println!("{figures}");
    }
}
