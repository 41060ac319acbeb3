//! `executor serve`, the real binary: first start makes a key and says how to
//! connect; the key works; Ctrl-C stops it cleanly; a restart keeps the key.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::json;

struct Server {
    child: Child,
    url: String,
    token: Option<String>,
}

/// Start on a free port and read the greeting up to the listening line and,
/// on a first start, the token.
fn start(data_dir: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start executor serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.strip_prefix("Executor is listening on ").expect(&first).to_owned();
    let mut token = None;
    for line in lines.by_ref().take(6) {
        let line = line.unwrap();
        if let Some(t) = line.trim().strip_prefix("exk_") {
            token = Some(format!("exk_{t}"));
            break;
        }
        if line.contains("executor keys create") {
            break;
        }
    }
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Server { child, url, token }
}

fn interrupt(mut server: Server) {
    let status = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "Ctrl-C is a clean exit: {exit}");
}

#[tokio::test]
async fn first_start_prints_a_working_key_and_restarts_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = start(data);
    let token = server.token.clone().expect("a first start prints a token");
    let http = executor_http_client::builder().build().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |url: &str, token: &str| {
        http.post(url)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize.to_string())
            .send()
    };
    let health = http.get(server.url.replace("/mcp", "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let answer = post(&server.url, &token).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.headers().contains_key("mcp-session-id"));
    interrupt(server);

    let again = start(data);
    assert!(again.token.is_none(), "keys exist: no new key on restart");
    assert_eq!(post(&again.url, &token).await.unwrap().status(), 200, "the first key still works");
    interrupt(again);
}
