//! Stopping the real `executor serve` with SIGTERM (`docker stop`, systemd,
//! Kubernetes), as Ctrl-C does: during a long `execute` (its read held 4 s by
//! the upstream) the server stops accepting connections, the `execute`
//! completes with its result, and the process exits 0. A second signal stops
//! it at once, without waiting for the request in flight.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_tests::cli::create_key;
use executor_tests::faults::Upstream;
use executor_tests::raw_mcp;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};

/// A read the upstream holds this long: the window the signal lands in.
const HOLD_MS: u64 = 4000;

struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `executor serve` reading `upstream`, once it has printed that it listens.
    fn start(upstream: &Upstream) -> (Self, String) {
        let dir = tempfile::tempdir().unwrap();
        let config = upstream.write_config(dir.path(), Duration::from_secs(30));
        let data = dir.path().join("data");
        let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, "stopper");
        let addr = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port");
        let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
            .args(["serve", "--addr", &addr.to_string()])
            .arg("--data-dir")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .env_remove("EXECUTOR_PUBLIC_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start executor serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut pipe, collected) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        // The first line comes once it listens, with its signal handlers in place.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(first.starts_with("Executor is listening on "), "{first} {}", stderr.lock().unwrap());
        std::thread::spawn(move || lines.for_each(drop));
        (Self { child, addr, stderr, _dir: dir }, token)
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_child(&self.child);
        kill_process(pid, signal).expect("signal the server");
    }

    /// The exit status, waited for at most 60 s (far more than the stop needs).
    async fn exit(&mut self) -> ExitStatus {
        for _ in 0..600 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the server did not exit within 60 s of the signal: {}", self.stderr.lock().unwrap());
    }
}

/// A stateless `execute` of code whose one read the upstream holds for `HOLD_MS`.
async fn long_execute(addr: SocketAddr, token: String) -> (u16, Value) {
    let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
    let code = format!(
        "const r = await tools.ledger.entries.listEntries({{ n: 1, holdMs: {HOLD_MS} }}); return {{ read: r.ok }};"
    );
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}}});
    let url = format!("http://{addr}/mcp");
    let response = raw_mcp::post_in(&http, &url, &token, None, &call).send().await.expect("an answer to execute");
    let status = response.status().as_u16();
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, body["result"]["structuredContent"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_long_execute_lets_it_complete_and_exits_0() {
    let upstream = Upstream::start().await;
    let (mut server, token) = Server::start(&upstream);
    let execute = tokio::spawn(long_execute(server.addr, token));
    tokio::time::timeout(Duration::from_secs(30), upstream.wait_in_flight())
        .await
        .expect("the execute's read reaches the upstream");

    server.signal(Signal::TERM);
    // It stops accepting at once, while the read is still held: new
    // connections are refused (within a bound far under the hold's 4 s).
    let mut refused = false;
    for _ in 0..30 {
        if TcpStream::connect_timeout(&server.addr, Duration::from_millis(200)).is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "still accepting connections after SIGTERM: {}", server.stderr.lock().unwrap());

    let (status, result) = execute.await.unwrap();
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["status"], "completed", "the execute in flight finishes: {result}");
    assert_eq!(result["result"], json!({"read": true}), "{result}");
    let exit = server.exit().await;
    let stderr = server.stderr.lock().unwrap().clone();
    assert_eq!(exit.code(), Some(0), "a clean exit: {stderr}");
    assert!(stderr.contains("executor: SIGTERM: shutting down"), "{stderr}");
    assert!(stderr.contains("executor: stopped"), "{stderr}");
    assert_eq!(upstream.reads().len(), 1, "the read was made once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once() {
    let upstream = Upstream::start().await;
    let (mut server, token) = Server::start(&upstream);
    let execute = tokio::spawn(long_execute(server.addr, token));
    tokio::time::timeout(Duration::from_secs(30), upstream.wait_in_flight())
        .await
        .expect("the execute's read reaches the upstream");

    server.signal(Signal::TERM);
    // Once the first is heard (it says so), the second ends the wait.
    for _ in 0..100 {
        if server.stderr.lock().unwrap().contains("shutting down") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.signal(Signal::INT);
    let exit = server.exit().await;
    let stderr = server.stderr.lock().unwrap().clone();
    assert_eq!(exit.code(), Some(1), "cut short is not a clean stop: {stderr}");
    assert!(stderr.contains("SIGINT again: stopped without waiting for the requests in flight"), "{stderr}");
    // The execute in flight lost its server: no answer, or not a completed one.
    let outcome = execute.await;
    assert!(outcome.is_err() || outcome.as_ref().is_ok_and(|(_, r)| r["status"] != "completed"), "{outcome:?}");
}
