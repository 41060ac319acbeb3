//! The real `executor serve` under 100 concurrent memory-heavy executions: at
//! most `EXECUTOR_MAX_CONCURRENT_EXECUTIONS` run at once, the rest are answered
//! `busy`, and the process's peak memory stays under the documented bound
//! (docs/operations.md: base + cap × the sandbox's 64 MiB heap).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const CAP: usize = 4;
const REQUESTS: usize = 100;
/// What the process may add on top of its sandboxes: the runtime, the store,
/// the request buffers of 100 connections.
const BASE_BYTES: u64 = 256 << 20;
const SANDBOX_HEAP_BYTES: u64 = 64 << 20;

/// About 48 MB of live strings, then enough work to hold its slot a while.
const HEAVY: &str = "const parts = []; for (let i = 0; i < 48; i++) parts.push('x'.repeat(1 << 20) + i); \
                     let n = 0; for (let i = 0; i < 3e6; i++) n += i % 7; return parts.length + (n > 0 ? 0 : 1)";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_heavy_executions_stay_under_the_memory_bound_and_the_excess_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["keys", "create", "--owner", "load", "--data-dir"])
        .arg(&data)
        .output()
        .expect("run executor keys create");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let token = stdout.lines().map(str::trim).find(|l| l.starts_with("exk_")).expect("a token").to_owned();
    let addr = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(&data)
        .env("EXECUTOR_MAX_CONCURRENT_EXECUTIONS", CAP.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start executor serve");
    let http = executor_http_client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let base = format!("http://{addr}");
    let mut up = false;
    for _ in 0..400 {
        if http.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status() == 200) {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "executor serve did not answer /healthz");

    let execute = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": HEAVY}}});
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..REQUESTS {
        let (http, url, token, body) = (http.clone(), format!("{base}/mcp"), token.clone(), execute.clone());
        requests.spawn(async move {
            let response = http
                .post(url)
                .header("authorization", format!("Bearer {token}"))
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
                .expect("every request is answered");
            assert_eq!(response.status(), 200);
            let answer: Value = response.json().await.unwrap();
            answer["result"]["structuredContent"].clone()
        });
    }
    let (mut completed, mut busy, mut other) = (0, 0, Vec::new());
    for answer in requests.join_all().await {
        match (answer["status"].as_str(), answer["error"]["code"].as_str()) {
            (Some("completed"), _) => {
                assert_eq!(answer["result"], 48, "{answer}");
                completed += 1;
            }
            (Some("error"), Some("busy")) => {
                let message = answer["error"]["message"].as_str().unwrap();
                assert!(message.contains("retry"), "a busy answer says what to do: {message}");
                busy += 1;
            }
            _ => other.push(answer),
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    child.kill().unwrap();
    let _ = child.wait();

    let bound = BASE_BYTES + CAP as u64 * SANDBOX_HEAP_BYTES;
    println!(
        "{REQUESTS} requests, cap {CAP}: completed {completed}, busy {busy}; peak RSS {} MiB (bound {} MiB)",
        peak_kib / 1024,
        bound >> 20
    );
    assert!(other.is_empty(), "every answer is a result or busy: {other:#?}");
    assert_eq!(completed + busy, REQUESTS);
    assert!(completed >= CAP, "at least one round ran: completed {completed}");
    assert!(busy > 0, "the excess was answered busy");
    assert!(peak_kib * 1024 <= bound, "peak RSS {} KiB over the bound {} MiB", peak_kib, bound >> 20);
}
