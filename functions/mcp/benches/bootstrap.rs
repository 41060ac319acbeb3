//! The MCP bootstrap's cold start: from process start to its first answered
//! request, under a local mock of the Lambda Runtime API; and its size.
//! `cargo bench -p executor-mcp-function --bench bootstrap` times the bench
//! profile's binary; `BOOTSTRAP=<path>` times another, e.g. the deployed
//! `--profile lambda` build.

#[path = "../tests/runtime_http/mod.rs"]
mod runtime_http;

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RUNS: usize = 20;

/// An API Gateway v2 event for `GET /healthz`.
const EVENT: &str = r#"{"version":"2.0","routeKey":"$default","rawPath":"/healthz","rawQueryString":"","headers":{"host":"abc.execute-api.eu-west-1.amazonaws.com"},"requestContext":{"accountId":"1","apiId":"abc","domainName":"abc.execute-api.eu-west-1.amazonaws.com","domainPrefix":"abc","http":{"method":"GET","path":"/healthz","protocol":"HTTP/1.1","sourceIp":"203.0.113.9","userAgent":"bench"},"requestId":"r","routeKey":"$default","stage":"$default","time":"29/Nov/2026:19:46:21 +0000","timeEpoch":0},"isBase64Encoded":false}"#;

/// Serve `next` once with the event, report the answer, then hold further `next`s.
fn mock_runtime(listener: TcpListener, answered: mpsc::Sender<(Instant, String)>) {
    let mut served = false;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        while let Some((line, body)) = runtime_http::read_request(&mut stream) {
            if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                if served {
                    return; // The bench is done with this process.
                }
                served = true;
                let deadline =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 60_000;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: req-1\r\n\
                     Lambda-Runtime-Deadline-Ms: {deadline}\r\n\
                     Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:eu-west-1:1:function:executor-mcp\r\n\
                     Content-Length: {}\r\n\r\n",
                    EVENT.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(EVENT.as_bytes());
            } else {
                let _ = answered.send((Instant::now(), format!("{line} {}", String::from_utf8_lossy(&body))));
                let _ = stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
            }
        }
    }
}

fn main() {
    // The deployed build (`--profile lambda`) when named, else the bench profile's.
    let bootstrap = std::env::var("BOOTSTRAP").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcp-function").to_owned());
    let bootstrap = bootstrap.as_str();
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let api = listener.local_addr().unwrap().to_string();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || mock_runtime(listener, tx));
        let started = Instant::now();
        let mut child = Command::new(bootstrap)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", &api)
            .env("AWS_LAMBDA_FUNCTION_NAME", "executor-mcp")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
            .env("AWS_REGION", "eu-west-1")
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("EXECUTOR_TABLE", "executor")
            .env("EXECUTOR_SCHEDULE_GROUP", "executor")
            .env("EXECUTOR_ALARM_TARGET_ARN", "arn:aws:lambda:eu-west-1:1:function:executor-alarm")
            .env("EXECUTOR_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/executor-scheduler")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the bootstrap");
        let (at, answer) = rx.recv_timeout(Duration::from_secs(10)).expect("the bootstrap answers");
        assert!(answer.contains("/invocation/req-1/response") && answer.contains("200"), "{answer}");
        times.push(at - started);
        let _ = child.kill();
        let _ = child.wait();
    }
    times.sort();
    println!(
        "bootstrap start to first answer over {RUNS} runs: median {:?}, min {:?}, max {:?}",
        times[RUNS / 2],
        times[0],
        times[RUNS - 1]
    );
    let size = std::fs::metadata(bootstrap).unwrap().len();
    let zipped = Command::new("python3")
        .args(["-c", "import sys, zipfile, io\nb = io.BytesIO()\nz = zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED)\nz.write(sys.argv[1], 'bootstrap')\nz.close()\nprint(len(b.getvalue()))", bootstrap])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("bootstrap size: {size} bytes, zipped {zipped} bytes ({bootstrap})");
}
