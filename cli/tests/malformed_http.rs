//! 10,000 generated malformed requests over real HTTP to `executor serve`
//! (in this process, on 127.0.0.1): wrong JSON-RPC, wrong headers, paths and
//! queries, with and without a valid API key, and bytes that are not HTTP at
//! all. No answer may be a server error and none may hang; the server still
//! answers `/healthz` and a valid `execute` afterwards.

mod fuzzing;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use executor_cli::serve::{self, ConnectionLimits};
use fuzzing::{EXECUTION, LINK, Raw, TOKEN};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

const REQUESTS: usize = 10_000;
const CONCURRENCY: usize = 16;
/// Each request's whole exchange; past it the request counts as a hang.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A request to send, and whether it is HTTP the host should see.
#[derive(Debug)]
enum Sent {
    Http(Raw),
    /// Bytes hyper must refuse (or close on) itself.
    Garbage(Vec<u8>),
}

/// Bytes that break HTTP/1.1 framing, each complete (the server never waits
/// for more): bad request lines, header syntax, lengths and chunking.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let line = "[ -~]{0,60}";
    prop_oneof![
        prop::collection::vec(any::<u8>(), 1..200).prop_map(|mut b| {
            b.extend_from_slice(b"\r\n\r\n");
            b
        }),
        line.prop_map(|l| format!("{l}\r\n\r\n").into_bytes()),
        line.prop_map(|l| format!("GET /mcp HTTP/1.1\r\n{l}\r\n\r\n").into_bytes()),
        Just(b"GET /healthz\r\n\r\n".to_vec()),
        Just(b"GET /healthz HTTP/9.9\r\nhost: 127.0.0.1\r\n\r\n".to_vec()),
        Just(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()),
        Just(b"POST /mcp HTTP/1.1\r\ncontent-length: -1\r\n\r\n".to_vec()),
        Just(b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc".to_vec()),
        Just(b"POST /mcp HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n".to_vec()),
        Just(b"POST /mcp HTTP/1.1\r\ntransfer-encoding: gzip, chunked, x\r\n\r\n".to_vec()),
        Just(b"GET http://elsewhere.example/mcp HTTP/1.1\r\nhost: elsewhere.example\r\n\r\n".to_vec()),
        Just(b"GET /mcp HTTP/1.1\r\nx-bad\xff: \x01\r\n\r\n".to_vec()),
        (1usize..200_000).prop_map(|n| format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(n)).into_bytes()),
        (1usize..2_000).prop_map(|n| {
            let headers: String = (0..n).map(|i| format!("x-{i}: {i}\r\n")).collect();
            format!("GET /healthz HTTP/1.1\r\n{headers}\r\n").into_bytes()
        }),
    ]
}

fn requests() -> Vec<Sent> {
    let strategy = prop_oneof![
        6 => fuzzing::mcp_request().prop_map(Sent::Http),
        2 => fuzzing::approval_request().prop_map(Sent::Http),
        2 => garbage().prop_map(Sent::Garbage),
    ];
    let mut runner = TestRunner::deterministic();
    (0..REQUESTS).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
}

#[derive(Default)]
struct Tally {
    by_status: std::collections::BTreeMap<u16, usize>,
    /// Closed without an answer (only allowed for garbage).
    unanswered: usize,
    hangs: usize,
    wrong: Vec<String>,
}

/// Send `bytes` on a new connection and read one answer: until it is
/// complete (a valid request may keep the connection open) or the server
/// closes the connection. `None`: neither happened within the client timeout.
async fn exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // The server may answer and close before reading all of it.
        let _ = stream.write_all(bytes).await;
        let mut answer = Vec::new();
        let mut buffer = [0u8; 8192];
        // A reset after the answer is a close too.
        while let Ok(n @ 1..) = stream.read(&mut buffer).await {
            answer.extend_from_slice(&buffer[..n]);
            if complete(&answer) {
                break;
            }
        }
        answer
    };
    tokio::time::timeout(CLIENT_TIMEOUT, attempt).await.ok()
}

/// The start of a request, for a failure message.
fn shown(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(&bytes[..bytes.len().min(300)]))
}

/// Whether `answer` holds a whole response: its head and `Content-Length` bytes.
fn complete(answer: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(end)) = head.parse(answer) else { return false };
    let length = head.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"));
    let length = length.and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok());
    length.is_some_and(|length| answer.len() - end >= length)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_malformed_requests_get_no_server_error_and_no_hang() {
    let dir = tempfile::tempdir().unwrap();
    let host = fuzzing::host(dir.path()).await;
    let (execution, link) = fuzzing::paused(&host).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        ..ConnectionLimits::default()
    };
    tokio::spawn(serve::serve_with_limits(listener, host, limits, std::future::pending()));

    let queue = Arc::new(Mutex::new(requests()));
    let tally = Arc::new(std::sync::Mutex::new(Tally::default()));
    let sent = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (queue, tally, sent) = (queue.clone(), tally.clone(), sent.clone());
            let (execution, link) = (execution.clone(), link.clone());
            tokio::spawn(async move {
                loop {
                    let Some(request) = queue.lock().await.pop() else { return };
                    let (bytes, http) = match request {
                        Sent::Http(mut raw) => {
                            raw.target = raw.target.replace(EXECUTION, &execution).replace(LINK, &link);
                            raw.headers.push(("connection".into(), "close".into()));
                            (raw.render(), Some(raw))
                        }
                        Sent::Garbage(bytes) => (bytes, None),
                    };
                    sent.fetch_add(1, Ordering::Relaxed);
                    let answer = exchange(addr, &bytes).await;
                    let mut tally = tally.lock().unwrap();
                    let Some(answer) = answer else {
                        tally.hangs += 1;
                        tally.wrong.push(format!("no answer in time to {}", shown(&bytes)));
                        continue;
                    };
                    let mut headers = [httparse::EMPTY_HEADER; 64];
                    let mut head = httparse::Response::new(&mut headers);
                    let Ok(httparse::Status::Complete(end)) = head.parse(&answer) else {
                        tally.unanswered += 1;
                        if let Some(raw) = &http {
                            tally.wrong.push(format!("no answer to {raw:?}"));
                        }
                        continue;
                    };
                    let status = head.code.unwrap_or_default();
                    *tally.by_status.entry(status).or_default() += 1;
                    let content_type = head
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-type"))
                        .and_then(|h| std::str::from_utf8(h.value).ok());
                    let path = http.as_ref().map_or("", |raw| raw.path());
                    if let Err(problem) = fuzzing::check_answer(path, status, content_type, &answer[end..]) {
                        tally.wrong.push(format!("{problem}\n  to {}", shown(&bytes)));
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let tally = Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap();
    println!(
        "{} requests: statuses {:?}, closed without an answer {}, hangs {}",
        sent.load(Ordering::Relaxed),
        tally.by_status,
        tally.unanswered,
        tally.hangs
    );
    assert_eq!(sent.load(Ordering::Relaxed), REQUESTS);
    assert!(
        tally.wrong.is_empty(),
        "{} wrong answers, e.g.:\n{}",
        tally.wrong.len(),
        tally.wrong[..5.min(tally.wrong.len())].join("\n")
    );
    assert_eq!(tally.hangs, 0, "requests without an answer within {CLIENT_TIMEOUT:?}");
    let server_errors: usize = tally.by_status.range(500..).map(|(_, n)| n).sum();
    assert_eq!(server_errors, 0, "{:?}", tally.by_status);
    // The generator's mix reached the host: answers of every kind.
    for status in [200, 400, 401, 404] {
        assert!(tally.by_status.contains_key(&status), "no {status} among {:?}", tally.by_status);
    }

    let http = executor_http_client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let health = http.get(format!("http://{addr}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "return 1 + 2"}}});
    let answer = http
        .post(format!("http://{addr}/mcp"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(answer["result"]["structuredContent"]["result"], 3, "{answer}");
}

/// Params of the wrong shape are JSON-RPC's "Invalid params" (-32602), for
/// the request's id, never a result.
#[tokio::test]
async fn params_of_the_wrong_shape_are_invalid_params() {
    let dir = tempfile::tempdir().unwrap();
    let host = fuzzing::host(dir.path()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    let http = executor_http_client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let cases = [
        (
            serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": 5}}),
            "expected a string",
        ),
        (
            serde_json::json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": ["execute"]}}),
            "Invalid params for tools/call",
        ),
        (serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}), "`params` is required"),
    ];
    for (request, mentions) in &cases {
        let answer = http
            .post(&url)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(request.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        let answer: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(answer["id"], request["id"], "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{request} got {answer}");
        assert!(answer.get("result").is_none(), "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(mentions), "{answer}");
    }
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"cursor": "0"}});
    let answer: serde_json::Value = http
        .post(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(list.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(answer["result"]["tools"].is_array(), "a string cursor is fine: {answer}");
}
