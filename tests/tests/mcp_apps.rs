//! MCP Apps passthrough (`io.modelcontextprotocol/ui`, SEP-1865) end to end:
//! upstream MCP servers built with the official TypeScript SDK
//! (`tests/mcp-client/ui-server.mjs`: a tool linked to a `ui://` view, the
//! view with `_meta.ui`, a plain `file://` resource), `executor serve`'s host
//! over a real socket, and rmcp's client (plus raw 2026-07-28 requests).
//!
//! Three sources: `weather` (its views `ui://weather/view.html`, linked by
//! `forecast` and `refresh`, and `ui://weather/radar.html`, linked by
//! `radar`), and `shared` and `copy`, two servers that both name
//! `ui://shared/...`, which are therefore served by neither. Two toolkits:
//! `forecasts` (only `weather.forecast`) and `copies` (only `copy.*`).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_service::{HostConfig, ToolkitEndpoint};
use executor_store::EmbeddedStore;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

type Client = RunningService<RoleClient, InitializeRequestParams>;

const EXTENSION: &str = "io.modelcontextprotocol/ui";
const VIEW: &str = "ui://weather/view.html";
const RADAR: &str = "ui://weather/radar.html";
const SHARED_VIEW: &str = "ui://shared/view.html";
const MIME: &str = "text/html;profile=mcp-app";
const KEY: &str = "apps-key-5e1d";
const SETTLE: Duration = Duration::from_secs(30);

/// The TypeScript SDK's servers on one port; what they were asked to read.
struct Upstream {
    base: String,
    reads: Arc<Mutex<Vec<String>>>,
    _child: tokio::process::Child,
}

async fn upstream() -> Upstream {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-client");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript MCP SDK is missing: run `npm ci --prefix tests/mcp-client` (scripts/test does)"
    );
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("ui-server.mjs"))
        .arg(KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("Node.js runs the TypeScript MCP server");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(SETTLE, stdout.next_line()).await.expect("the server starts").unwrap();
    let started: Value = serde_json::from_str(&line.expect("the server prints its address")).unwrap();
    let reads = Arc::new(Mutex::new(Vec::new()));
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let seen = reads.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            match line.strip_prefix("read ") {
                Some(uri) => seen.lock().unwrap().push(uri.to_owned()),
                None => eprintln!("ui-server: {line}"),
            }
        }
    });
    Upstream { base: started["base"].as_str().unwrap().to_owned(), reads, _child: child }
}

struct Gateway {
    base: String,
    alice: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn gateway(upstream: &Upstream) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let source = |namespace: &str, server: &str| {
        format!(
            "[[sources]]\nnamespace = \"{namespace}\"\nkind = \"mcp\"\nurl = \"{}/{server}/mcp\"\n\
             headers = {{ \"X-Api-Key\" = \"{KEY}\" }}\n\n",
            upstream.base
        )
    };
    let config = format!(
        "[outbound]\nallow_loopback = true\ntimeout_ms = 10000\n\n{}{}{}\
         [[toolkits]]\nname = \"forecasts\"\ntools = [\"weather.forecast\"]\n\n\
         [[toolkits]]\nname = \"copies\"\ntools = [\"copy.*\"]\n",
        source("weather", "weather"),
        source("shared", "shared"),
        source("copy", "shared"),
    );
    let file = dir.path().join("executor.toml");
    std::fs::write(&file, config).unwrap();
    let sources = CatalogConfig::load(&file).unwrap();
    let catalog = Arc::new(Catalog::connect(&sources).await.unwrap());
    let namespaces: Vec<String> = catalog.namespaces().into_iter().map(|n| n.namespace).collect();
    assert!(catalog.namespaces().iter().all(|n| n.error.is_none()), "{:?}", catalog.namespaces());
    let mut config = HostConfig::default();
    for view in Catalog::toolkit_views(&catalog, &sources.toolkits) {
        let (name, namespaces) = (view.name().clone(), view.namespaces().to_vec());
        config.toolkits.push(ToolkitEndpoint { name, namespaces, tools: Arc::new(view) });
    }
    let store = Arc::new(EmbeddedStore::open(&dir.path().join("data")).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let host = serve::host(store, catalog, &namespaces, config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    let http = executor_http_client::builder().no_proxy().timeout(SETTLE).build().unwrap();
    Gateway { base, alice, http, _dir: dir }
}

impl Gateway {
    /// rmcp's client of the endpoint at `path`, in a session of its own (protocol 2025-06-18).
    async fn client(&self, path: &str) -> Client {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}{path}", self.base))
            .auth_header(self.alice.clone());
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("apps", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        info.serve(transport).await.expect("the client connects")
    }

    /// A raw stateless 2026-07-28 request to `/mcp`, with its headers: the HTTP status and the answer.
    async fn stateless(&self, method: &str, params: Value, name: Option<&str>) -> (u16, Value) {
        let mut params = params;
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {"mimeTypes": [MIME]}}}});
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
        let mut request = self
            .http
            .post(format!("{}/mcp", self.base))
            .bearer_auth(&self.alice)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let response = request.body(body.to_string()).send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }
}

/// `execute` of `code`: its `result`, which must have completed.
async fn execute(client: &Client, code: &str) -> Value {
    let arguments = json!({ "code": code }).as_object().unwrap().clone();
    let params = CallToolRequestParams::new("execute").with_arguments(arguments);
    let result = tokio::time::timeout(SETTLE, client.call_tool(params)).await.expect("the host answers in time");
    let outcome = result.unwrap().structured_content.expect("structured content");
    assert_eq!(outcome["status"], "completed", "{outcome}");
    outcome["result"].clone()
}

async fn listed(client: &Client) -> Vec<Value> {
    let listed = client.list_resources(None).await.expect("resources/list answers");
    listed.resources.iter().map(|r| serde_json::to_value(r).unwrap()).collect()
}

/// `resources/read` of `uri`: the contents, or the JSON-RPC error's text.
async fn read(client: &Client, uri: &str) -> Result<Vec<ResourceContents>, String> {
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await;
    read.map(|result| result.contents).map_err(|e| e.to_string())
}

fn declares_apps(client: &Client) -> (bool, bool) {
    let capabilities = &client.peer_info().expect("initialized").capabilities;
    let extension = capabilities.extensions.as_ref().is_some_and(|e| e.contains_key(EXTENSION));
    (extension, capabilities.resources.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_ui_resources_pass_through_the_gateway() {
    let upstream = upstream().await;
    let gateway = gateway(&upstream).await;
    let client = gateway.client("/mcp").await;
    assert_eq!(declares_apps(&client), (true, true), "initialize declares the extension and resources");

    // describe shows each tool's link; a search item carries `_meta.ui` as the server sent it.
    let forecast = execute(&client, "return await tools.describe.tool({path: 'weather.forecast'})").await;
    let forecast = forecast.as_str().expect("describe answers TypeScript declarations");
    assert!(forecast.contains(&format!("\n@ui {VIEW} (visibility: model, app) */")), "{forecast}");
    assert!(forecast.contains("The forecast for a city"), "{forecast}");
    let refresh = execute(&client, "return await tools.describe.tool({path: 'weather.refresh'})").await;
    assert!(refresh.to_string().contains(&format!("@ui {VIEW} (visibility: app)")), "{refresh}");
    let found = execute(&client, "return await tools.search({query: 'forecast', namespace: 'weather'})").await;
    let item = &found["items"][0];
    assert_eq!(item["path"], "weather.forecast", "{found}");
    assert_eq!(item["ui"], json!({"resourceUri": VIEW, "visibility": ["model", "app"]}), "{found}");

    // resources/list: the ui:// views with their listings' `_meta.ui`; no file://, nothing ambiguous.
    let resources = listed(&client).await;
    let uris: Vec<&str> = resources.iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, [RADAR, VIEW], "{resources:?}");
    assert_eq!(resources[1]["mimeType"], MIME);
    assert_eq!(resources[1]["name"], "weather_forecast");
    assert_eq!(resources[1]["_meta"]["ui"]["prefersBorder"], true, "{resources:?}");

    // resources/read: the upstream's HTML, with the contents' `_meta.ui`, read with the source's key.
    let contents = read(&client, VIEW).await.expect("the view is read");
    let [ResourceContents::TextResourceContents { uri, mime_type, text, meta }] = contents.as_slice() else {
        panic!("one text content: {contents:?}")
    };
    assert_eq!((uri.as_str(), mime_type.as_deref()), (VIEW, Some(MIME)));
    assert!(text.starts_with("<!DOCTYPE html>") && text.contains("weather forecast"), "{text}");
    let meta = serde_json::to_value(meta).unwrap();
    assert_eq!(meta["ui"]["csp"]["connectDomains"], json!(["https://api.weather.example"]), "{meta}");
    assert_eq!(upstream.reads.lock().unwrap().as_slice(), [VIEW], "one read reached the upstream");

    // The radar view, another tool's, is read the same way.
    let radar = read(&client, RADAR).await.expect("the radar view is read");
    assert!(serde_json::to_string(&radar).unwrap().contains("weather radar"), "{radar:?}");
    assert_eq!(upstream.reads.lock().unwrap().as_slice(), [VIEW, RADAR]);

    // Anything else is an error, and nothing else is read upstream.
    for (uri, says) in [
        ("file:///readme.txt", "only the ui:// resources"),
        ("ui://nobody/view.html", "no UI resource ui://nobody/view.html"),
        (SHARED_VIEW, "named by more than one upstream MCP server (shared, copy)"),
        ("ui://shared/radar.html", "named by more than one upstream MCP server (shared, copy)"),
    ] {
        let refused = read(&client, uri).await.expect_err(uri);
        assert!(refused.contains(says), "{uri}: {refused}");
    }
    assert_eq!(upstream.reads.lock().unwrap().len(), 2, "refused reads reach no upstream");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolkit_passes_on_only_the_views_of_its_tools() {
    let upstream = upstream().await;
    let gateway = gateway(&upstream).await;

    // `weather.forecast`'s view is the toolkit's; the radar's tool is outside it.
    let forecasts = gateway.client("/mcp/toolkits/forecasts").await;
    assert_eq!(declares_apps(&forecasts), (true, true));
    let resources = listed(&forecasts).await;
    assert_eq!(resources.iter().map(|r| r["uri"].clone()).collect::<Vec<_>>(), [VIEW]);
    assert!(read(&forecasts, VIEW).await.is_ok());
    let hidden = read(&forecasts, RADAR).await.expect_err("a view of a tool outside the toolkit");
    assert!(hidden.contains("no UI resource ui://weather/radar.html"), "{hidden}");
    forecasts.cancel().await.unwrap();
    assert_eq!(upstream.reads.lock().unwrap().as_slice(), [VIEW], "only the toolkit's own view was read");

    // `copy`'s tools link only the ambiguous views, `weather`'s are outside the toolkit: it has no UI
    // resource, so it declares none and answers `resources/*` as a server without them (rmcp: no such method).
    let copies = gateway.client("/mcp/toolkits/copies").await;
    assert_eq!(declares_apps(&copies), (false, false), "no UI resource here, nothing declared");
    assert!(copies.list_resources(None).await.is_err());
    assert!(read(&copies, VIEW).await.is_err(), "outside the toolkit");
    copies.cancel().await.unwrap();
    assert_eq!(upstream.reads.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_client_discovers_the_extension_and_reads_without_a_session() {
    let upstream = upstream().await;
    let gateway = gateway(&upstream).await;
    let (status, discovered) = gateway.stateless("server/discover", json!({}), None).await;
    assert_eq!(status, 200, "{discovered}");
    let capabilities = &discovered["result"]["capabilities"];
    assert_eq!(capabilities["extensions"][EXTENSION], json!({}), "{discovered}");
    assert!(capabilities["extensions"].get("io.modelcontextprotocol/tasks").is_some(), "{discovered}");
    assert!(capabilities["resources"].is_object(), "{discovered}");

    let (status, read) = gateway.stateless("resources/read", json!({"uri": VIEW}), Some(VIEW)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["result"]["resultType"], "complete", "{read}");
    assert_eq!(read["result"]["contents"][0]["_meta"]["ui"]["prefersBorder"], true, "{read}");
    let (status, listed) = gateway.stateless("resources/list", json!({}), None).await;
    assert_eq!((status, &listed["result"]["resources"][1]["uri"]), (200, &json!(VIEW)), "{listed}");

    // The URI must be named in Mcp-Name too; a read of another is refused before anything is read.
    let (status, refused) = gateway.stateless("resources/read", json!({"uri": VIEW}), Some("ui://x")).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!(-32020)), "{refused}");
    let (status, missing) =
        gateway.stateless("resources/read", json!({"uri": "file:///readme.txt"}), Some("file:///readme.txt")).await;
    assert_eq!((status, &missing["error"]["code"]), (200, &json!(-32602)), "{missing}");
    assert_eq!(missing["error"]["data"]["uri"], "file:///readme.txt", "{missing}");
    assert_eq!(upstream.reads.lock().unwrap().as_slice(), [VIEW]);
}
