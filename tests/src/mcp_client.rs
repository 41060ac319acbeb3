//! The official TypeScript MCP SDK's client (`tests/mcp-client/tasks.mjs`),
//! for the tests that need a 2025-11-25 client: MCP tasks. rmcp speaks a
//! later version of tasks, so it cannot stand in.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// Run the client against the MCP endpoint `url` with `token`: `args` is its
/// command (`stream`, `start`, `get ID`, `result ID`, `cancel ID`), `stdin`
/// the code for `stream` and `start`. What it printed, as JSON.
pub async fn tasks(url: &str, token: &str, args: &[&str], stdin: &str) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-client");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript MCP SDK is missing: run `npm ci --prefix tests/mcp-client` (scripts/test does)"
    );
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("tasks.mjs"))
        .arg(url)
        .arg(token)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("Node.js runs the TypeScript MCP client");
    let mut input = child.stdin.take().expect("a piped stdin");
    input.write_all(stdin.as_bytes()).await.expect("the client reads its code");
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the client ends by itself")
        .expect("the client's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{args:?}: {}{stdout}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {stdout}"))
}
