//! A pause made by `executor serve` in one time zone is resumed by another
//! `executor serve`, on the same data, in another zone (the real binary, `TZ`
//! set per process, a real upstream): the replay sees the same local times,
//! so it completes and the approved call carries what the code computed
//! before the pause, in UTC.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use executor_tests::cli::create_key;
use executor_tests::faults::Upstream;
use executor_tests::raw_mcp;
use serde_json::{Value, json};

/// Local time, read before the pause, reaches the paused call's arguments.
const CODE: &str = "const d = new Date(Date.UTC(2026, 0, 1, 22, 30)); \
    const when = [d.getHours(), d.getDate(), d.getTimezoneOffset(), d.toString(), String(new Date('2026-01-01T10:00'))]; \
    const r = await tools.ledger.entries.addEntry({ body: { when } }); return r.ok";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_made_in_one_time_zone_resumes_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let data = dir.path().join("data");
    let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, "tz");
    let addr = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap();

    let mut west = start(addr, &data, &config, "UTC+5").await;
    let paused = execute(addr, &token, "execute", json!({ "code": CODE })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    stop(&mut west);

    let mut east = start(addr, &data, &config, "JST-9").await;
    let id = paused["executionId"].clone();
    let done = execute(addr, &token, "resume", json!({ "executionId": id, "action": "accept" })).await;
    stop(&mut east);
    assert_eq!(done["status"], "completed", "the replay diverged in another zone: {done}");
    let posts = upstream.posts();
    assert_eq!(posts.len(), 1, "one approval, one call");
    assert_eq!(
        posts[0].body["when"],
        json!([22, 1, 0, "Thu Jan 01 2026 22:30:00 GMT+0000", "Thu Jan 01 2026 10:00:00 GMT+0000"]),
        "local times are UTC's on every host"
    );
}

/// `executor serve` in time zone `tz`, once it answers.
async fn start(addr: SocketAddr, data: &Path, config: &Path, tz: &str) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", &addr.to_string()])
        .arg("--data-dir")
        .arg(data)
        .arg("--config")
        .arg(config)
        .env("TZ", tz)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start executor serve");
    let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    for _ in 0..400 {
        if http.get(format!("http://{addr}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop(&mut child);
    panic!("executor serve did not come up on {addr}");
}

fn stop(child: &mut Child) {
    child.kill().expect("stop the server");
    child.wait().expect("reap the server");
}

/// One `tools/call` in a new session: its structured content.
async fn execute(addr: SocketAddr, token: &str, tool: &str, arguments: Value) -> Value {
    let http = executor_http_client::builder().build().unwrap();
    let url = format!("http://{addr}/mcp");
    let post = |body: Value, session: Option<&str>| raw_mcp::post_in(&http, &url, token, session, &body).send();
    let started = post(raw_mcp::initialize("tz"), None).await.unwrap();
    let session = started.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let answer: Value = post(call, Some(&session)).await.unwrap().json().await.unwrap();
    answer["result"]["structuredContent"].clone()
}
