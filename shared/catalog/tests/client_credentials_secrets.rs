//! No OAuth token text reaches a result, an error, a log line, a span or a
//! stored item, even from an upstream that echoes it. Alone in its binary:
//! the log is captured by a subscriber of this test's thread, which other
//! tests running at the same time would get in the way of.

#[path = "support/capture.rs"]
mod capture;
mod support;

use capture::Capture;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use executor_catalog::Catalog;
use executor_cli::{keys, serve};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::oauth::{CLIENT_SECRET, SECRET_VAR, config, set_secrets, start};
use tracing_subscriber::layer::SubscriberExt;

/// Every file under `dir`, as text (the embedded store keeps items as JSON).
fn stored(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

// On one thread, so the captured log sees the host's tasks too.
#[test]
fn tokens_never_reach_results_errors_logs_or_stored_items() {
    set_secrets();
    let capture = Capture::default();
    let _logs = tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (fixture, texts) = runtime.block_on(async {
        let (fixture, base) = start().await;
        let dir = tempfile::tempdir().unwrap();
        let catalog = Arc::new(Catalog::connect(&config(&base, SECRET_VAR, dir.path())).await.unwrap());
        let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
        let key = keys::create(&*store, "alice").await.unwrap();
        let host = serve::host(store, catalog, &["vault".to_owned()], HostConfig::default()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        let client = info
            .serve(StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config))
            .await
            .unwrap();
        let call = |name: &'static str, arguments: Value| {
            let client = &client;
            async move {
                let params = CallToolRequestParams::new(name).with_arguments(arguments.as_object().unwrap().clone());
                serde_json::to_string(&client.call_tool(params).await.unwrap()).unwrap()
            }
        };
        let code = r#"
            const me = await tools.vault.debug.whoami({});
            const leak = await tools.vault.debug.leak({});
            const added = await tools.vault.items.addItem({ body: { name: "spare key" } });
            return { me: me.data, leak: leak.error, added: added.data };
        "#;
        let paused = call("execute", json!({ "code": code })).await;
        assert!(paused.contains("waiting_for_interaction"), "{paused}");
        let id = serde_json::from_str::<Value>(&paused).unwrap()["structuredContent"]["executionId"].clone();
        let done = call("resume", json!({ "executionId": id, "action": "accept" })).await;
        client.cancel().await.unwrap();
        (fixture, vec![("the paused result", paused), ("the completed result", done)])
    });
    let [(_, paused), (_, done)] = &texts[..] else { unreachable!() };
    let done: Value = serde_json::from_str(done).unwrap();
    assert_eq!(
        done["structuredContent"]["result"],
        json!({
            "me": {"token": "[redacted]"},
            "leak": {"code": "http_403", "message": "HTTP 403: token [redacted] may not read this"},
            "added": {"name": "spare key"},
        }),
        "the upstream echoed the token, in a result and in an error"
    );
    assert_eq!(fixture.added.load(Ordering::SeqCst), 1);
    let stored = stored(data.path());
    assert!(stored.contains("token [redacted] may not read this"), "the journal was stored and read here");
    let logs = capture.0.lock().unwrap().clone();
    assert!(logs.contains("OAuth access token issued"), "the log was captured:\n{logs}");
    let issued = fixture.issued();
    assert_eq!(issued.len(), 1);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("executor+ci:{}", "cs-4e8a%2Fb1%2Bc9%3Dd2"));
    for secret in issued.iter().map(String::as_str).chain([CLIENT_SECRET, basic.as_str()]) {
        for (what, text) in [("stored items", &stored), ("logs and spans", &logs), ("the paused result", paused)] {
            assert!(!text.contains(secret), "{secret} in {what}");
        }
        assert!(!done.to_string().contains(secret), "{secret} in the completed result");
    }
}
