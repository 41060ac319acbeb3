//! `executor serve` serves each connection on one of a few one-worker
//! threads, so connections share threads. A run that spins must hold its
//! thread only for its first moments: the connections beside it on the same
//! thread are answered while it is still going.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_catalog::Catalog;
use executor_cli::serve;
use executor_core::{ApiKey, Principal, TokenHash};
use executor_service::HostConfig;
use executor_store::{EmbeddedStore, KeyStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "exk_busy0000000000000000000000000000000000000000000000000000000000";
/// Far longer than a neighbour's answer takes even on a loaded machine, and
/// what each spinner costs the test run in CPU.
const SPIN: Duration = Duration::from_secs(8);
const WAIT: Duration = Duration::from_secs(30);

fn execute(code: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}},
    })
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Read until the answer to one request is whole (its length is known from its head).
async fn answer(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(WAIT, stream.read(&mut buffer)).await.expect("an answer in time").unwrap();
        assert!(n > 0, "closed before answering: {}", String::from_utf8_lossy(&bytes));
        bytes.extend_from_slice(&buffer[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut head = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(end)) = head.parse(&bytes) {
            let length = head.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"));
            let length: usize = std::str::from_utf8(length.expect("a length").value).unwrap().parse().unwrap();
            if bytes.len() - end >= length {
                return String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_run_does_not_hold_the_connections_on_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let owner = Principal::parse("spinner").unwrap();
    let key = ApiKey { hash: TokenHash::of_token(TOKEN), owner, created_at: SystemTime::now().into(), toolkit: None };
    store.create_key(&key).await.unwrap();
    let catalog = Arc::new(Catalog::load(None).await.unwrap());
    let host_config = HostConfig { max_execution: SPIN, ..HostConfig::default() };
    let host = serve::host(store, catalog, &[], host_config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    // Accepted in the order they connect, each on the thread with the fewest:
    // spinner `i` on thread `i`, then neighbour `i` on thread `i` beside it.
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut spinners = Vec::new();
    for _ in 0..threads {
        spinners.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut neighbours = Vec::new();
    for _ in 0..threads {
        neighbours.push(TcpStream::connect(addr).await.unwrap());
    }

    // Written before any neighbour's request, so each thread reads its
    // spinner's first: the loop is running when the neighbour's request comes.
    for spinner in &mut spinners {
        spinner.write_all(&execute("while (true) {}")).await.unwrap();
    }

    for neighbour in &mut neighbours {
        for _ in 0..5 {
            neighbour.write_all(&execute("return 1 + 2")).await.unwrap();
            let answer = answer(neighbour).await;
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(answer.contains(r#"\"result\":3"#) || answer.contains(r#""result":3"#), "{answer}");
        }
    }
    for spinner in &spinners {
        let mut byte = [0u8; 1];
        assert!(
            matches!(spinner.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a spinner answered before its neighbours were served: it held their thread for its whole run"
        );
    }
}
