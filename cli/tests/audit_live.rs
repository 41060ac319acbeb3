//! A real execution's history, read back from the command line while the
//! `executor serve` that ran it holds the store: code that reads, then
//! writes (a pause the model approves through `resume`), then completes.
//! `executor executions list`, `executions show ID` and `audit export` reach
//! the server through its admin socket and show each step, as it happened.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use executor_tests::cli::create_key;
use executor_tests::faults::Upstream;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const CODE: &str = "const r = await tools.ledger.entries.listEntries({ n: 1 });
const w = await tools.ledger.entries.addEntry({ body: { note: 'audit' } });
return [r.ok, w.ok];";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `executor serve` on `data` with the sources of `config`, once it listens
/// (its admin socket too): the server and its MCP URL.
fn serve(data: &std::path::Path, config: &std::path::Path) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data)
        .arg("--config")
        .arg(config)
        .env_remove("EXECUTOR_PUBLIC_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a greeting").unwrap();
    let url = first.strip_prefix("Executor is listening on ").unwrap_or_else(|| panic!("{first}")).to_owned();
    std::thread::spawn(move || lines.for_each(drop));
    (Server(child), url)
}

fn executor(data: &std::path::Path, args: &[&str]) -> String {
    let out: Output =
        Command::new(env!("CARGO_BIN_EXE_executor")).args(args).arg("--data-dir").arg(data).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, InitializeRequestParams>;

async fn call(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let arguments: JsonObject = arguments.as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    result.structured_content.expect("structured content")
}

/// The type of each line of `executions show` after the record (its second word).
fn entry_types(shown: &str) -> Vec<String> {
    let history = shown.split("\n\n").nth(1).unwrap_or_default();
    history.lines().map(|l| l.split_whitespace().nth(1).unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_execution_is_shown_while_the_server_that_ran_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Arc::new(Upstream::start().await);
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let data = dir.path().join("data");
    let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, "ana");
    let (server, url) = serve(&data, &config);
    let transport = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("audit", "1"));
    let client = info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.unwrap();

    let paused = call(&client, "execute", json!({ "code": CODE })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let id = paused["executionId"].as_str().unwrap().to_owned();
    let listed = executor(&data, &["executions", "list"]);
    let row = listed.lines().nth(1).unwrap_or_else(|| panic!("{listed}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        (cells[0], cells[1], cells[2], cells[5]),
        (id.as_str(), "ana", "paused", "tools.ledger.entries.addEntry")
    );
    let shown = executor(&data, &["executions", "show", &id]);
    assert_eq!(entry_types(&shown), ["created", "called", "paused"], "{shown}");
    assert!(shown.contains("\nwaiting on  tools.ledger.entries.addEntry, for a decision until "), "{shown}");

    let pause_id = paused["pauseId"].as_str().unwrap();
    let done = call(&client, "resume", json!({ "executionId": id, "pauseId": pause_id, "action": "accept" })).await;
    assert_eq!(done["status"], "completed", "{done}");

    let shown = executor(&data, &["executions", "show", &id]);
    assert!(shown.contains("\nstatus      completed\n"), "{shown}");
    assert_eq!(entry_types(&shown), ["created", "called", "paused", "decided", "called", "settled"], "{shown}");
    let lines: Vec<&str> = shown.split("\n\n").nth(1).unwrap().lines().collect();
    assert!(lines[1].contains(" tool=ledger.entries.listEntries ") && lines[1].contains(" outcome=ok"), "{shown}");
    assert!(lines[2].contains(" tool=ledger.entries.addEntry ") && lines[2].contains("audit"), "{shown}");
    assert!(lines[3].contains("  decided  decision=accept channel=model"), "{shown}");
    assert!(lines[4].contains(" tool=ledger.entries.addEntry ") && lines[4].contains(" outcome=ok"), "{shown}");
    assert!(lines[5].ends_with("  settled  status=completed"), "{shown}");

    let export = executor(&data, &["audit", "export", "--since", "1h"]);
    let exported: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let types: Vec<&str> = exported.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["created", "called", "paused", "decided", "called", "settled"], "{export}");
    assert!(exported.iter().all(|e| e["executionId"] == id.as_str() && e["owner"] == "ana"), "{export}");
    drop(client);
    drop(server);
}
