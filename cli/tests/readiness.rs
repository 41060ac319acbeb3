//! `executor serve`, the real binary, with a source whose spec host answers
//! 503 at start: `/healthz` is live, `/readyz` is 503 naming the source and
//! why; once the host serves the spec, the background retry connects it
//! (the first retry is within 5 s), `/readyz` answers 200 and the code runs
//! the source's tool, all in the same process.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SPEC: &str = r#"{"openapi": "3.1.0", "info": {"title": "shop", "version": "1"}, "paths": {"/items": {"get":
  {"tags": ["items"], "operationId": "listItems", "summary": "List items", "responses": {"200": {"description": "ok"}}}}}}"#;

/// The shop: `/openapi.json` once `up` (503 before), `/items` always; one request a connection.
async fn shop(up: Arc<AtomicBool>) -> String {
    let addr = executor_tests::stand_in::json_stand_in(move |path| match path {
        "/openapi.json" if up.load(Ordering::SeqCst) => ("200 OK", SPEC.to_owned()),
        "/openapi.json" => ("503 Service Unavailable", r#"{"message": "deploying"}"#.to_owned()),
        "/items" => ("200 OK", r#"[{"name": "lamp"}]"#.to_owned()),
        _ => ("404 Not Found", "{}".to_owned()),
    })
    .await;
    format!("http://{addr}")
}

/// The server, killed when the test ends however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `executor serve` with `config`: the server, its base URL, the key it
/// printed, and what it writes on stderr.
fn serve(data: &std::path::Path, config: &std::path::Path) -> (Server, String, String, Arc<Mutex<String>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(config)
        .env_remove("EXECUTOR_PUBLIC_URL")
        .env_remove("EXECUTOR_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let (mut pipe, collected) = (child.stderr.take().unwrap(), stderr.clone());
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let server = Server(child);
    let first = lines.next().expect("the listening line").unwrap();
    let url = first.strip_prefix("Executor is listening on ").expect(&first).trim_end_matches("/mcp").to_owned();
    let token = lines
        .by_ref()
        .take(12)
        .map(Result::unwrap)
        .find_map(|line| line.trim().strip_prefix("exk_").map(|t| format!("exk_{t}")))
        .expect("a first start prints its key");
    std::thread::spawn(move || lines.for_each(drop));
    (server, url, token, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_down_at_start_connects_in_the_background_without_a_restart() {
    let up = Arc::new(AtomicBool::new(false));
    let base = shop(up.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("executor.toml");
    let sources = format!(
        "[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"shop\"\nkind = \"openapi\"\n\
         spec = \"{base}/openapi.json\"\nbase_url = \"{base}\"\n"
    );
    std::fs::write(&config, sources).unwrap();
    let data = dir.path().join("data");
    let (_server, url, token, stderr) = serve(&data, &config);
    let http = executor_http_client::builder().no_proxy().build().unwrap();
    let readyz = || async {
        let response = http.get(format!("{url}/readyz")).send().await.unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    };

    assert_eq!(http.get(format!("{url}/healthz")).send().await.unwrap().status(), 200);
    let (status, body) = readyz().await;
    assert_eq!((status, &body["status"]), (503, &json!("degraded")), "{body}");
    let shop = &body["sources"]["shop"];
    assert_eq!(shop["state"], "unavailable", "{body}");
    assert!(shop["reason"].as_str().unwrap().contains("HTTP 503"), "{body}");
    assert!(shop["nextRetryAt"].is_string() && shop["since"].is_string(), "{body}");

    up.store(true, Ordering::SeqCst);
    // The background task's retries, on the system clock: 2 s after start, then 4 s later, ...
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = readyz().await;
        if status == 200 {
            assert_eq!(body, json!({"status": "ready", "sources": {"shop": {"state": "connected"}}}));
            break;
        }
        assert!(Instant::now() < deadline, "not ready: {body}; logs: {}", stderr.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let code = "const r = await tools.shop.items.listItems({}); return r.ok ? r.data : r.error;";
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}}});
    let answer: Value = http
        .post(format!("{url}/mcp"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(call.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let result = &answer["result"]["structuredContent"];
    assert_eq!((&result["status"], &result["result"]), (&json!("completed"), &json!([{"name": "lamp"}])), "{answer}");
    assert!(stderr.lock().unwrap().contains("source connected after a retry"), "{}", stderr.lock().unwrap());
}
