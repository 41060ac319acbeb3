//! The MCP bootstrap's telemetry, the real binary under a local mock of the
//! Lambda Runtime API with a local OTLP collector: the answer is handed back
//! first, the spans are exported before the next invocation is asked for, and
//! stdout has a JSON log line with the request id and the caller's trace id.

mod runtime_http;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// An API Gateway v2 event for `GET /healthz` with a `traceparent`.
fn event() -> String {
    format!(
        r#"{{"version":"2.0","routeKey":"$default","rawPath":"/healthz","rawQueryString":"","headers":{{"host":"abc.execute-api.eu-west-1.amazonaws.com","traceparent":"00-{TRACE}-00f067aa0ba902b7-01"}},"requestContext":{{"accountId":"1","apiId":"abc","domainName":"abc.execute-api.eu-west-1.amazonaws.com","domainPrefix":"abc","http":{{"method":"GET","path":"/healthz","protocol":"HTTP/1.1","sourceIp":"203.0.113.9","userAgent":"test"}},"requestId":"r","routeKey":"$default","stage":"$default","time":"29/Nov/2026:19:46:21 +0000","timeEpoch":0}},"isBase64Encoded":false}}"#
    )
}

/// What the mock Runtime API and the collector saw, in the order they saw it.
#[derive(Debug)]
enum Seen {
    Next,
    Answer(String),
    Export(Vec<u8>),
}

/// Serve one invocation, report every later request; a second `next` is held.
fn runtime_api(listener: TcpListener, seen: mpsc::Sender<Seen>) {
    let mut served = false;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let seen = seen.clone();
        let first = !served;
        served = true;
        std::thread::spawn(move || {
            while let Some((line, body)) = runtime_http::read_request(&mut stream) {
                if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                    let _ = seen.send(Seen::Next);
                    if !first {
                        return; // Held: the process is done for this test.
                    }
                    support::hand_over(&mut stream, "req-1", &event());
                } else {
                    let _ = seen.send(Seen::Answer(format!("{line} {}", String::from_utf8_lossy(&body))));
                    let _ = stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
                }
            }
        });
    }
}

/// An OTLP/HTTP collector: reports each export's body, answers 200.
fn collector(listener: TcpListener, seen: mpsc::Sender<Seen>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let seen = seen.clone();
        std::thread::spawn(move || {
            while let Some((line, body)) = runtime_http::read_request(&mut stream) {
                assert!(line.starts_with("POST /v1/traces"), "{line}");
                let _ = seen.send(Seen::Export(body));
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        });
    }
}

#[test]
fn the_answer_goes_first_then_the_spans_then_the_next_invocation() {
    let (tx, rx) = mpsc::channel();
    let api = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_addr = api.local_addr().unwrap().to_string();
    let otlp = TcpListener::bind("127.0.0.1:0").unwrap();
    let otlp_url = format!("http://{}", otlp.local_addr().unwrap());
    let to_api = tx.clone();
    std::thread::spawn(move || runtime_api(api, to_api));
    std::thread::spawn(move || collector(otlp, tx));
    let mut child = support::bootstrap(&api_addr)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp_url)
        // Long enough that the order below never depends on this machine's speed.
        .env("EXECUTOR_TELEMETRY_FLUSH_MS", "60000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the bootstrap");

    let mut order = Vec::new();
    loop {
        let seen = rx.recv_timeout(Duration::from_secs(60)).expect("the bootstrap goes on");
        let second_next = matches!(seen, Seen::Next) && order.iter().any(|s| matches!(s, Seen::Next));
        order.push(seen);
        if second_next {
            break;
        }
    }
    let _ = child.kill();
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let _ = child.wait();

    let kinds: Vec<&str> = order
        .iter()
        .map(|s| match s {
            Seen::Next => "next",
            Seen::Answer(_) => "answer",
            Seen::Export(_) => "export",
        })
        .collect();
    assert_eq!(kinds, ["next", "answer", "export", "next"], "{order:?}");
    let Seen::Answer(answer) = &order[1] else { unreachable!() };
    assert!(answer.contains("/invocation/req-1/response") && answer.contains("200"), "{answer}");
    // OTLP protobuf carries trace ids as their 16 raw bytes.
    let Seen::Export(spans) = &order[2] else { unreachable!() };
    let trace =
        (0..TRACE.len()).step_by(2).map(|i| u8::from_str_radix(&TRACE[i..i + 2], 16).unwrap()).collect::<Vec<_>>();
    assert!(spans.windows(16).any(|w| w == trace.as_slice()), "the request span is exported in the caller's trace");
    assert!(spans.windows(11).any(|w| w == b"mcp.request"));

    let handled = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|line| line["message"] == "request handled")
        .unwrap_or_else(|| panic!("a JSON log line for the request in {stdout}"));
    assert_eq!(handled["requestId"], "req-1");
    assert_eq!(handled["trace_id"], TRACE);
    assert_eq!(handled["status"], 200);
    assert_eq!(handled["coldStart"], true);
}
