//! The console in a real browser (Debian's Chromium, driven by
//! `tests/browser/console.mjs`), against the real `executor serve` binary.
//!
//! - A console link from `executor console link`, run while the server holds
//!   the data dir (through its admin socket), signs Ana in; she sees her
//!   pending approval, presses "Always allow" (one upstream call), revokes
//!   the grant it made, and her next call pauses again.
//! - With the test's own OpenID provider (panva's `oidc-provider`, a real
//!   OIDC server on loopback) as `EXECUTOR_OIDC_ISSUER`, the console signs her
//!   in by the authorization code flow with PKCE and names her.
//!
//! Screenshots at a desktop and a phone width go to `target/browser/console/`
//! and their paths are printed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use executor_tests::cli::create_key;
use executor_tests::faults::Upstream;
use executor_tests::oidc_provider::OidcProvider;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const WRITE: &str = "return await tools.ledger.entries.addEntry({ body: { note: 'from the browser' } });";
const CLIENT_ID: &str = "executor-console";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `executor serve` on `data` at `addr` with `env`, once it listens: the server.
fn serve(data: &Path, config: &Path, addr: &str, env: &[(&str, &str)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", addr])
        .arg("--data-dir")
        .arg(data)
        .arg("--config")
        .arg(config)
        .env_remove("EXECUTOR_PUBLIC_URL")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a greeting").unwrap();
    assert!(first.starts_with("Executor is listening on "), "{first}");
    std::thread::spawn(move || lines.for_each(drop));
    Server(child)
}

/// A free loopback port for the server: the provider must know the
/// server's callback before the server starts.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn executor(data: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_executor")).args(args).arg("--data-dir").arg(data).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, InitializeRequestParams>;

async fn client(base: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token.to_owned());
    let http = executor_http_client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("console", "1"));
    info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.unwrap()
}

async fn execute(client: &Client) -> Value {
    let arguments: JsonObject = json!({ "code": WRITE }).as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new("execute").with_arguments(arguments)).await.unwrap();
    result.structured_content.expect("structured content")
}

/// Run `console.mjs` with `args`: what it printed, and its screenshots (each checked to be a picture).
async fn chromium(args: Vec<String>) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let browser = root.join("tests/browser");
    assert!(
        browser.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: run ./scripts/test, which installs it (npm ci in tests/browser)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(Path::new(&chromium).exists(), "Chromium is missing at {chromium}: run ./scripts/test, which installs it");
    let script = browser.join("console.mjs");
    let run = tokio::task::spawn_blocking(move || Command::new("node").arg(script).args(args).output());
    let output = run.await.unwrap().expect("node runs (Node.js is needed for the browser test)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    for shot in seen["screenshots"].as_array().expect("screenshots") {
        let shot = PathBuf::from(shot.as_str().unwrap());
        assert!(std::fs::metadata(&shot).unwrap().len() > 1000, "a screenshot at {}", shot.display());
        println!("screenshot: {}", shot.display());
    }
    assert_eq!(seen["dialogs"], json!([]), "the console opens no dialogs");
    seen
}

fn screenshots() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser/console");
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}

async fn grants(base: &str, token: &str) -> Value {
    let http = executor_http_client::builder().no_proxy().build().unwrap();
    let response = http.get(format!("{base}/api/grants")).bearer_auth(token).send().await.unwrap();
    response.json::<Value>().await.unwrap()["grants"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_link_signs_in_and_the_owner_approves_and_revokes_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Arc::new(Upstream::start().await);
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let data = dir.path().join("data");
    let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, "ana");
    let addr = free_addr();
    let base = format!("http://{addr}");
    let _server = serve(&data, &config, &addr, &[]);
    let client = client(&base, &token).await;
    let paused = execute(&client).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");

    // While the server holds the data dir: through its admin socket.
    let printed = executor(&data, &["console", "link", "--owner", "ana", "--url", &base]);
    let link = printed.lines().next().unwrap().to_owned();
    assert!(link.starts_with(&format!("{base}/console/signin?token=")), "{printed}");
    let seen = chromium(vec!["link".into(), link, screenshots()]).await;

    let console = seen["console"].as_str().unwrap();
    for expected in
        ["Signed in as ana", "Waiting for you (1)", "tools.ledger.entries.addEntry", "Asked by ana, with key"]
    {
        assert!(console.contains(expected), "{expected:?} not on the console: {console}");
    }
    assert!(seen["afterApproval"].as_str().unwrap().contains("Waiting for you (0)"), "{seen}");
    assert_eq!(upstream.posts().len(), 1, "one approval, one upstream call");
    assert!(seen["afterRevoke"].as_str().unwrap().contains("Revoked."), "{seen}");
    assert_eq!(grants(&base, &token).await, json!([]));
    let again = execute(&client).await;
    assert_eq!(again["status"], "waiting_for_interaction", "revoked: the next call pauses again: {again}");
    assert_eq!(upstream.posts().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_signs_in_with_the_oidc_issuer_by_the_code_flow_with_pkce() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Arc::new(Upstream::start().await);
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let data = dir.path().join("data");
    create_key(env!("CARGO_BIN_EXE_executor"), &data, "ana");
    let addr = free_addr();
    let base = format!("http://{addr}");
    let provider = OidcProvider::start(CLIENT_ID, &format!("{base}/console/oidc/callback"));
    let env = [
        ("EXECUTOR_OIDC_ISSUER", provider.issuer.as_str()),
        ("EXECUTOR_OIDC_AUDIENCE", "executor"),
        ("EXECUTOR_CONSOLE_CLIENT_ID", CLIENT_ID),
    ];
    let _server = serve(&data, &config, &addr, &env);
    let seen = chromium(vec!["oidc".into(), format!("{base}/console"), screenshots(), "ana.oidc".into()]).await;
    let sign_in = seen["signIn"].as_str().unwrap();
    assert!(sign_in.contains(&format!("Sign in with {}", provider.issuer)), "{sign_in}");
    let console = seen["console"].as_str().unwrap_or_default();
    assert!(console.contains("Signed in as ana.oidc"), "{console}\nprovider log: {}", provider.log());
    assert!(console.contains("Signed in."), "{console}");
}
