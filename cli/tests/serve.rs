//! `executor serve`, the real binary: first start makes a key and says how to
//! connect; the key works; Ctrl-C stops it cleanly; a restart keeps the key.
//! For teams: it serves other machines at its public URL, and keys are
//! created and revoked while it runs. Authorization servers of OAuth-protected
//! MCP sources read its client metadata document.

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use executor_tests::raw_mcp;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

struct Server {
    child: Child,
    url: String,
    /// The greeting's lines after the first, up to the token.
    greeting: Vec<String>,
    token: Option<String>,
    /// Everything the server wrote on stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Its stderr once it holds `text`: a line logged while a request is
    /// answered may reach the pipe's reader after the answer. At most 10 s.
    fn logs_with(&self, text: &str) -> String {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let logs = self.stderr.lock().unwrap().clone();
            if logs.contains(text) || std::time::Instant::now() >= until {
                return logs;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A test that fails leaves no server behind.
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `executor serve ARGS` on `data_dir` and read the greeting up to the
/// listening line and, on a first start, the token. `Err`: it did not start,
/// with what it wrote on stderr.
fn launch(data_dir: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .arg("serve")
        .args(args)
        .args(["--data-dir", data_dir])
        .env_remove("EXECUTOR_PUBLIC_URL")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start executor serve");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let collected = stderr.clone();
    // Drained as it comes, so the server never blocks on a full pipe.
    let drained = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let Some(Ok(first)) = lines.next() else {
        child.wait().unwrap();
        // All of what it said before exiting, not what the drain had read so far.
        drained.join().unwrap();
        return Err(stderr.lock().unwrap().clone());
    };
    let url = first.strip_prefix("Executor is listening on ").expect(&first).to_owned();
    let (mut greeting, mut token) = (Vec::new(), None);
    for line in lines.by_ref().take(8) {
        let line = line.unwrap();
        if let Some(t) = line.trim().strip_prefix("exk_") {
            token = Some(format!("exk_{t}"));
            break;
        }
        let done = line.contains("executor keys create");
        greeting.push(line);
        if done {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    Ok(Server { child, url, greeting, token, stderr })
}

fn start(data_dir: &str) -> Server {
    launch(data_dir, &["--addr", "127.0.0.1:0"], &[]).unwrap_or_else(|stderr| panic!("serve did not start: {stderr}"))
}

fn interrupt(mut server: Server) {
    let status = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "Ctrl-C is a clean exit: {exit}");
}

fn executor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_executor")).args(args).env_remove("EXECUTOR_PUBLIC_URL").output().unwrap()
}

fn http() -> reqwest::Client {
    // The machine's own addresses only: no proxy from the environment.
    executor_http_client::builder().no_proxy().build().unwrap()
}

/// A raw `initialize` (protocol 2025-06-18) at `url` with `token`, and its status.
async fn initialize(url: &str, token: &str) -> u16 {
    let response = raw_mcp::post(&http(), url, token, &raw_mcp::initialize("t")).send().await.unwrap();
    response.status().as_u16()
}

#[tokio::test]
async fn first_start_prints_a_working_key_and_restarts_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = start(data);
    let token = server.token.clone().expect("a first start prints a token");
    let health = http().get(server.url.replace("/mcp", "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(initialize(&server.url, &token).await, 200);
    // Logs go to a pipe here: plain text, no terminal colour codes.
    let logs = server.logs_with("session created");
    assert!(logs.contains("session created"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "colour codes in piped logs: {logs:?}");
    interrupt(server);

    let again = start(data);
    assert!(again.token.is_none(), "keys exist: no new key on restart");
    assert_eq!(initialize(&again.url, &token).await, 200, "the first key still works");
    interrupt(again);
}

#[tokio::test]
async fn it_serves_its_oauth_client_metadata_document_at_its_own_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path().to_str().unwrap());
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let response = http().get(format!("{base}/oauth/client-metadata.json")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let document: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    // What an authorization server checks: the id is the document's URL; owners come back to this server.
    assert_eq!(document["client_id"], format!("{base}/oauth/client-metadata.json"));
    assert_eq!(document["redirect_uris"], json!([format!("{base}/oauth/callback")]));
    assert_eq!(document["token_endpoint_auth_method"], "none");
    interrupt(server);
}

/// An IPv4 address of this machine other than loopback, from the kernel's
/// routing table: each local address is a `|-- a.b.c.d` line followed by
/// `/32 host LOCAL` in `/proc/net/fib_trie`.
fn non_loopback_address() -> Ipv4Addr {
    let table = std::fs::read_to_string("/proc/net/fib_trie")
        .expect("reading /proc/net/fib_trie (Linux) to find this machine's own addresses");
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|pair| pair[1] == "/32 host LOCAL")
        .filter_map(|pair| pair[0].strip_prefix("|-- ")?.parse::<Ipv4Addr>().ok())
        .find(|ip| !ip.is_loopback())
        .expect(
            "this machine has no IPv4 address besides loopback; this test needs one (an interface other than lo) \
             to reach the server the way another machine would",
        )
}

#[tokio::test]
async fn on_every_interface_it_serves_other_machines_at_its_public_url() {
    let ip = non_loopback_address();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // The public URL names the port, so pick a free one first; another process
    // may take it in between, hence a few tries.
    let (server, base) = (0..3)
        .find_map(|_| {
            let port = std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap().local_addr().unwrap().port();
            let base = format!("http://{ip}:{port}");
            let args = ["--addr", &format!("0.0.0.0:{port}"), "--public-url", &base];
            launch(data, &args, &[]).ok().map(|server| (server, base))
        })
        .expect("serve started on a free port");
    assert_eq!(server.url, format!("{base}/mcp"), "the URL to give clients is the public one");
    let token = server.token.clone().unwrap();

    let health = http().get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let transport = StreamableHttpClientTransportConfig::with_uri(server.url.clone()).auth_header(token.clone());
    let client = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("teammate", "1"))
        .with_protocol_version(ProtocolVersion::V_2025_06_18)
        .serve(StreamableHttpClientTransport::with_client(http(), transport))
        .await
        .expect("an MCP client initializes through the machine's own address");
    assert_eq!(client.peer_info().unwrap().server_info.as_ref().unwrap().name, "executor");
    let tools = client.list_tools(None).await.unwrap().tools;
    assert_eq!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["execute", "resume"]);
    client.cancel().await.unwrap();

    // Other names are still refused (DNS-rebinding protection stays on), for
    // every message: those answered before rmcp (MCP tasks) too, with a key or without.
    let port = base.rsplit(':').next().unwrap();
    let messages = [
        (Some(&token), json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
        (Some(&token), json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "t1"}})),
        (None, json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})),
    ];
    for (key, message) in messages {
        let mut rebound = http()
            .post(&server.url)
            .header("host", format!("attacker.example:{port}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(key) = key {
            rebound = rebound.header("authorization", format!("Bearer {key}"));
        }
        let rebound = rebound.body(message.to_string()).send().await.unwrap();
        assert_eq!(rebound.status(), 403, "{message}");
        let refusal: serde_json::Value = rebound.json().await.unwrap();
        let text = refusal["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("attacker.example") && text.contains("--public-url"), "says what to do: {refusal}");
    }
    interrupt(server);
}

#[tokio::test]
async fn on_every_interface_without_a_public_url_it_gives_a_loopback_url_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let server = launch(dir.path().to_str().unwrap(), &["--addr", "0.0.0.0:0"], &[]).unwrap();
    let port = server.url.strip_prefix("http://127.0.0.1:").and_then(|rest| rest.strip_suffix("/mcp"));
    assert!(port.is_some_and(|p| p != "0"), "{}", server.url);
    assert!(
        server.greeting[0].contains("every interface") && server.greeting[0].contains("--public-url"),
        "{:?}",
        server.greeting
    );
    assert_eq!(initialize(&server.url, server.token.as_deref().unwrap()).await, 200);
    interrupt(server);
}

#[test]
fn a_public_url_that_is_not_one_is_refused_with_what_it_must_be() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let from_env = launch(data, &["--addr", "127.0.0.1:0"], &[("EXECUTOR_PUBLIC_URL", "notaurl")]).err().unwrap();
    assert!(
        from_env.contains("EXECUTOR_PUBLIC_URL must be an http:// or https:// URL with a host")
            && from_env.contains("not \"notaurl\""),
        "{from_env}"
    );
    let from_flag = launch(data, &["--addr", "127.0.0.1:0", "--public-url", "ftp://x"], &[]).err().unwrap();
    assert!(
        from_flag.contains("--public-url must be an http:// or https:// URL") && from_flag.contains("\"ftp://x\""),
        "{from_flag}"
    );
}

#[tokio::test]
async fn keys_are_created_and_revoked_while_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = start(data);
    let socket = dir.path().join("admin.sock");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&socket).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "only the server's user may use the admin socket");

    let created = executor(&["keys", "create", "--owner", "bob", "--data-dir", data]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let stdout = String::from_utf8(created.stdout).unwrap();
    let bob = stdout.split_whitespace().find(|w| w.starts_with("exk_")).expect("a token").to_owned();
    assert_eq!(initialize(&server.url, &bob).await, 200, "the new key works at once");

    let refused = executor(&["keys", "create", "--owner", "a b", "--data-dir", data]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(stderr.contains("invalid --owner") && stderr.contains("\"a b\""), "{stderr}");

    let listed = String::from_utf8(executor(&["keys", "list", "--data-dir", data]).stdout).unwrap();
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("OWNER") && lines[0].ends_with("LAST USED"), "{listed}");
    assert_eq!(lines.len(), 3, "a header, the first start's key and bob's: {listed}");
    let bob_id = lines[2].split_whitespace().next().unwrap();
    assert!(lines[2].contains("bob"), "{listed}");

    let revoked = executor(&["keys", "revoke", &bob_id[..8], "--data-dir", data]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let stdout = String::from_utf8(revoked.stdout).unwrap();
    assert!(stdout.trim().starts_with(&format!("Revoked key {bob_id} of bob (scope all, created ")), "{stdout}");
    assert_eq!(initialize(&server.url, &bob).await, 401, "the revoked key is refused on its next request");
    assert_eq!(initialize(&server.url, server.token.as_deref().unwrap()).await, 200, "other keys still work");

    interrupt(server);
    assert!(!socket.exists(), "the socket goes with the server");
    let listed = executor(&["keys", "list", "--data-dir", data]);
    assert!(listed.status.success(), "without a server the command opens the store itself");
    assert!(!String::from_utf8(listed.stdout).unwrap().contains("bob"));
}

/// The LAST USED column of `keys list` for the key of `owner`.
fn last_used(data: &str, owner: &str) -> String {
    let listed = executor(&["keys", "list", "--data-dir", data]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed = String::from_utf8(listed.stdout).unwrap();
    let line =
        listed.lines().find(|l| l.split_whitespace().nth(1) == Some(owner)).unwrap_or_else(|| panic!("{listed}"));
    line.split_whitespace().last().unwrap().to_owned()
}

#[tokio::test]
async fn keys_list_shows_when_each_key_last_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = start(data);
    let first = server.token.clone().unwrap();
    let owner = executor(&["keys", "list", "--data-dir", data]);
    let owner = String::from_utf8(owner.stdout).unwrap();
    let owner = owner.lines().nth(1).and_then(|l| l.split_whitespace().nth(1)).unwrap().to_owned();
    assert!(executor(&["keys", "create", "--owner", "bob", "--data-dir", data]).status.success());
    assert_eq!(last_used(data, &owner), "never");

    let before = std::time::SystemTime::now();
    assert_eq!(initialize(&server.url, &first).await, 200);
    assert_eq!(initialize(&server.url, &first).await, 200);
    let used = last_used(data, &owner);
    // An RFC 3339 time of this minute (the listing is the server's, through its admin socket).
    let stamp = executor_core::Timestamp::from(before).to_rfc3339();
    assert_eq!(used.len(), stamp.len(), "{used}");
    assert!(used.as_str() >= &stamp[..16], "used {used}, request at {stamp}");
    assert_eq!(last_used(data, "bob"), "never", "an unused key stays never used");

    interrupt(server);
    assert_eq!(last_used(data, &owner), used, "kept in the store");
}

#[tokio::test]
async fn an_unavailable_source_is_a_warning_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A spec URL where nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("executor.toml");
    let sources = format!(
        "[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"down\"\nkind = \"openapi\"\n\
         spec = \"http://127.0.0.1:{port}/openapi.json\"\nbase_url = \"http://127.0.0.1:{port}\"\n"
    );
    std::fs::write(&config, sources).unwrap();
    let args = ["--addr", "127.0.0.1:0", "--config", config.to_str().unwrap()];
    let server = launch(data.to_str().unwrap(), &args, &[]).unwrap_or_else(|e| panic!("serve did not start: {e}"));
    let health = http().get(server.url.replace("/mcp", "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "it serves");
    let stderr = server.stderr.lock().unwrap().clone();
    let line = stderr.lines().find(|l| l.contains("source down")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.starts_with(
            "executor: warning: source down is unavailable, serving without its tools until it connects (retried in \
             the background): "
        ),
        "{line}"
    );
    // Not ready while it is unavailable, and `executor health` says why.
    let health = executor(&["health", "--url", &server.url]);
    assert_eq!(health.status.code(), Some(1), "{health:?}");
    let stderr = String::from_utf8_lossy(&health.stderr);
    assert!(stderr.contains("answered 503: source down is unavailable: "), "{stderr}");
    interrupt(server);
}
