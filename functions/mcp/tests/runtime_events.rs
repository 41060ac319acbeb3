//! The real MCP bootstrap under a local mock of the Lambda Runtime API, fed
//! raw events as Lambda hands them over: the `Host` and `X-Forwarded-Proto`
//! values a client sends through API Gateway, however odd, are answered
//! (never a function error or a 5xx) and never become the links' origin;
//! a continuation event, which only the approval function takes, is a
//! function error that names the fix.

mod runtime_http;
mod support;

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use executor_tests::lambda::http_event;
use serde_json::{Value, json};

const DOMAIN: &str = "abc.execute-api.eu-west-1.amazonaws.com";

/// An API Gateway v2 event for `method path` with the client's `headers`.
fn event(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Value {
    http_event(Some(DOMAIN), method, path, "", headers, body.map(|body| (body.to_owned(), false)))
}

/// Hand out `events` in turn as invocations `req-0`, `req-1`, ...; report each
/// answer (request line, body); a `next` past the last is held.
fn runtime_api(listener: TcpListener, events: Vec<Value>, seen: mpsc::Sender<(String, String)>) {
    let events = Arc::new(Mutex::new(events.into_iter().enumerate().collect::<VecDeque<_>>()));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let (events, seen) = (events.clone(), seen.clone());
        std::thread::spawn(move || {
            while let Some((line, body)) = runtime_http::read_request(&mut stream) {
                if !line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                    let _ = seen.send((line, String::from_utf8_lossy(&body).into_owned()));
                    let _ = stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
                    continue;
                }
                let Some((n, event)) = events.lock().unwrap().pop_front() else { return };
                support::hand_over(&mut stream, &format!("req-{n}"), &event.to_string());
            }
        });
    }
}

#[test]
fn client_origin_headers_are_answered_and_a_continuation_is_refused() {
    let events = vec![
        event("GET", "/healthz", &[("host", "a b"), ("x-forwarded-proto", "1")], None),
        event("GET", "/healthz", &[("x-forwarded-proto", "http\u{0}")], None),
        event(
            "GET",
            "/.well-known/oauth-protected-resource",
            &[("host", "evil.example"), ("x-forwarded-proto", "a b")],
            None,
        ),
        event("POST", "/mcp", &[("host", "bücher.example"), ("x-forwarded-proto", "https,http")], Some("{}")),
        json!({"executorContinuation": {"executionId": "abc123"}}),
    ];
    let count = events.len();
    let (tx, rx) = mpsc::channel();
    let api = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_addr = api.local_addr().unwrap().to_string();
    std::thread::spawn(move || runtime_api(api, events, tx));
    let mut child =
        support::bootstrap(&api_addr).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start the bootstrap");
    let answers: Vec<(String, String)> =
        (0..count).map(|_| rx.recv_timeout(Duration::from_secs(60)).expect("the bootstrap answers")).collect();
    let _ = child.kill();
    let _ = child.wait();

    let answer = |n: usize| {
        let (line, body) = &answers[n];
        assert!(line.starts_with(&format!("POST /2018-06-01/runtime/invocation/req-{n}/response")), "{line} {body}");
        serde_json::from_str::<Value>(body).unwrap()
    };
    assert_eq!(answer(0)["statusCode"], 200);
    assert_eq!(answer(1)["statusCode"], 200);
    let metadata: Value = serde_json::from_str(answer(2)["body"].as_str().unwrap()).unwrap();
    assert_eq!(metadata["resource"], format!("https://{DOMAIN}/mcp"));
    let refused = answer(3);
    assert_eq!(refused["statusCode"], 401, "{refused}");
    let challenge = refused["headers"]["www-authenticate"].as_str().unwrap();
    assert!(challenge.contains(&format!("\"https://{DOMAIN}/.well-known/")), "{challenge}");
    let (line, body) = &answers[4];
    assert!(line.starts_with("POST /2018-06-01/runtime/invocation/req-4/error"), "{line} {body}");
    assert!(body.contains("only the approval function runs them"), "{body}");
}
