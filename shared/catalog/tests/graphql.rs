//! GraphQL sources against a real GraphQL engine on loopback (graphql-core,
//! see `support/graphql.rs`): the schema by introspection with the source's
//! auth or from a file, query tools that run, errors that carry the
//! service's message, a mutation that waits for approval through the MCP
//! endpoint and then runs once, and `select`s that try to smuggle other
//! root fields past a block rule, a toolkit or a grant, refused before
//! anything is sent.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::{ExecutionId, GrantedBy, Principal, SystemClock};
use executor_sandbox::{Allowance, CallContext, Policy, PolicyCall, Tools};
use executor_service::{Grants, HostConfig};
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::TOKEN;
use support::graphql::{GraphqlServer, tracker};

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

/// `select`s for `createIssue` that close its selection early to reach
/// `deleteAll` (or a second `createIssue`), each in another way GraphQL
/// reads text: comments ended by `\r`, a BOM, escapes, block strings,
/// aliases, fragments, directives, further operations, extra braces.
const SMUGGLED: [&str; 14] = [
    "{ id #\r } deleteAll again: createIssue(title: \"y\") { id #\n }",
    "{ id #\r\n } deleteAll",
    "id #\r } deleteAll again: createIssue(title: \"y\") { id #\n",
    "\u{feff}{ id } deleteAll",
    "{ headline(prefix: \"\\u007d\") } deleteAll",
    "{ headline(prefix: \"\"\" \\\"\"\" } \"\"\") } deleteAll",
    "{ id } again: deleteAll",
    "{ id } ...F } fragment F on Mutation { deleteAll ",
    "{ id ...F } } fragment F on Mutation { deleteAll ",
    "{ id } ... on Mutation { deleteAll }",
    "{ id } deleteAll @include(if: true)",
    "{ id } } mutation X { deleteAll } ",
    "{ id } } subscription { deleteAll ",
    "{ id } } } { deleteAll",
];

/// The service's counters: documents posted, and what `createIssue`, `deleteAll` and `secret` did.
async fn stats(server: &GraphqlServer) -> Value {
    server.get("/stats", TOKEN).await
}

/// Each of `selects` given to `tool` through `tools` is refused as invalid arguments.
async fn refused(tools: &dyn Tools, tool: &str, args: Value, selects: &[&str]) {
    for (step, select) in selects.iter().enumerate() {
        let mut args = args.clone();
        args["select"] = json!(select);
        let error = tools.call_with_status(tool, args, &ctx(step as u32)).await.unwrap_err();
        assert_eq!(error.code, "invalid_arguments", "{select:?}: {}", error.message);
        assert!(error.message.starts_with("`select` "), "{select:?}: {}", error.message);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn query_tools_run_with_the_default_or_a_chosen_selection() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let namespace = &catalog.namespaces()[0];
    assert_eq!(
        (namespace.kind, namespace.tools, &namespace.error),
        ("graphql", 6, &None),
        "introspected with the token"
    );

    let found = catalog.search(json!("one issue by id")).await.unwrap();
    assert_eq!(
        found["items"][0],
        json!({
            "path": "tracker.query.issue",
            "description": "One issue by id",
            "namespace": "tracker",
            "kind": "read",
            "approval": "run",
        })
    );
    let types = catalog.describe(json!("tracker.query.issue")).await.unwrap();
    let types = types.as_str().unwrap();
    assert!(types.contains("GraphQL query issue: Issue"), "{types}");
    assert!(types.contains("type Input = { id: string; /** The GraphQL selection set to return instead of the default `{ id title state }`"), "{types}");
    assert!(types.contains("type Output = Issue;") && types.contains(r#"type State = "OPEN" | "CLOSED";"#), "{types}");

    let issue = catalog.call("tracker.query.issue", json!({"id": "1"}), &ctx(0)).await.unwrap();
    assert_eq!(issue, json!({"id": "1", "title": "Lamp flickers", "state": "OPEN"}));
    let chosen =
        catalog.call("tracker.query.issue", json!({"id": "1", "select": "title author { login }"}), &ctx(1)).await;
    assert_eq!(chosen.unwrap(), json!({"title": "Lamp flickers", "author": {"login": "ada"}}));
    // Strings with braces and `#`, block strings, escapes, aliases, fragments and directives inside, comments.
    let select = "# what the triage needs\r{ headline(prefix: \"} # {\") short: headline(prefix: \"\"\"\\\"\"\" \"\"\") \
                  ... on Issue { now: state } author @include(if: true) { login } # the reporter\n }";
    let rich = catalog.call("tracker.query.issue", json!({"id": "1", "select": select}), &ctx(1)).await.unwrap();
    assert_eq!(
        rich,
        json!({"headline": "} # {Lamp flickers", "short": "\"\"\" Lamp flickers", "now": "OPEN", "author": {"login": "ada"}})
    );
    let closed = catalog.call("tracker.query.issues", json!({"state": "CLOSED"}), &ctx(2)).await.unwrap();
    assert_eq!(closed, json!([]));
    assert_eq!(
        catalog.policy(&PolicyCall::new("tracker.query.issues", &json!({}))),
        Policy::run_by_default(),
        "queries are reads"
    );

    // The service's own messages: a resolver's error, and a document it refuses.
    let broken = catalog.call("tracker.query.broken", json!({}), &ctx(3)).await.unwrap_err();
    assert_eq!((broken.code.as_str(), broken.message.as_str()), ("graphql_error", "the tracker is read-only today"));
    let unknown = catalog.call("tracker.query.issue", json!({"id": "1", "select": "{ id colour }"}), &ctx(4)).await;
    let unknown = unknown.unwrap_err();
    assert_eq!(unknown.code, "graphql_error");
    assert!(unknown.message.contains("Cannot query field 'colour' on type 'Issue'"), "{}", unknown.message);
    // Refused before sending: a second operation smuggled into `select`, a missing argument.
    let smuggled = json!({"id": "1", "select": "{ id } } mutation { createIssue(title: \"x\") { id } "});
    let refused = catalog.call("tracker.query.issue", smuggled, &ctx(5)).await.unwrap_err();
    assert_eq!(refused.code, "invalid_arguments");
    assert!(refused.message.contains("one selection set"), "{}", refused.message);
    let missing = catalog.call("tracker.query.issue", json!({}), &ctx(6)).await.unwrap_err();
    assert_eq!(missing.message, "missing required argument `id`; this tool takes: id, select?");
    assert_eq!(server.mutations().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_schema_can_come_from_a_file() {
    let server = GraphqlServer::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let schema = server.get("/schema.json", TOKEN).await;
    std::fs::write(dir.path().join("tracker.json"), schema.to_string()).unwrap();
    let (catalog, _config_dir) =
        tracker(&server, &format!("schema = {:?}", dir.path().join("tracker.json").display().to_string())).await;
    let namespace = &catalog.namespaces()[0];
    assert_eq!((namespace.tools, &namespace.error), (6, &None));
    let issues = catalog.call("tracker.query.issues", json!({}), &ctx(0)).await.unwrap();
    assert_eq!(issues[0]["title"], "Lamp flickers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_waits_for_approval_then_runs_once_through_the_mcp_endpoint() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let token = keys::create(&*store, "alice").await.unwrap();
    let host = serve::host(store, catalog.clone(), &["tracker".to_owned()], HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
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
            client.call_tool(params).await.unwrap().structured_content.unwrap()
        }
    };
    let code = r#"
        const before = await tools.tracker.query.issues({});
        const created = await tools.tracker.mutation.createIssue({ title: "Chair wobbles" });
        return { before: before.data.length, created: created.data };
    "#;
    let paused = call("execute", json!({ "code": code })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], "tracker.mutation.createIssue");
    let message = paused["interaction"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("tools.tracker.mutation.createIssue (GraphQL mutation `createIssue`) needs approval"),
        "{message}"
    );
    assert!(message.contains(&format!("Effect: GraphQL mutation `createIssue` at {}", server.url())), "{message}");
    assert_eq!(server.mutations().await, 0, "nothing is written before the approval");

    let accepted = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(accepted["status"], "completed", "{accepted}");
    assert_eq!(
        accepted["result"],
        json!({"before": 1, "created": {"id": "2", "title": "Chair wobbles", "state": "OPEN"}})
    );
    let again = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(again["error"]["code"], "execution_already_settled");
    assert_eq!(server.mutations().await, 1, "one approval, one mutation");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_would_run_what_a_smuggled_select_makes() {
    // The document the select `SMUGGLED[0]` made before it was parsed: graphql-core runs all three fields.
    let server = GraphqlServer::start(TOKEN);
    let document = format!("mutation($title: String!) {{ createIssue(title: $title)\n{}\n}}", SMUGGLED[0]);
    let answer = server.post(&document, json!({"title": "x"}), TOKEN).await;
    assert_eq!(answer["data"]["deleteAll"], 2, "{answer}");
    let stats = stats(&server).await;
    assert_eq!((stats["mutations"].as_u64(), stats["deletes"].as_u64()), (Some(2), Some(1)), "{stats}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blocked_mutation_never_runs_through_an_allowed_ones_select() {
    let server = GraphqlServer::start(TOKEN);
    let rules = r#"policy = { rules = [
            { pattern = "tracker.mutation.deleteAll", action = "block" },
            { pattern = "tracker.mutation.createIssue", action = "run" },
        ] }"#;
    let (catalog, _dir) = tracker(&server, rules).await;
    let Policy::Blocked { reason, .. } = catalog.policy(&PolicyCall::new("tracker.mutation.deleteAll", &json!({})))
    else {
        panic!()
    };
    assert!(reason.contains("blocked by"), "{reason}");
    assert_eq!(
        catalog.policy(&PolicyCall::new("tracker.mutation.createIssue", &json!({"title": "x", "select": SMUGGLED[0]}))),
        Policy::run_by("source:tracker:rule:tracker.mutation.createIssue")
    );
    let before = stats(&server).await;

    refused(&*catalog, "tracker.mutation.createIssue", json!({"title": "x"}), &SMUGGLED).await;
    assert_eq!(stats(&server).await, before, "nothing was sent");

    let plain = json!({"title": "Chair wobbles", "select": "{ id # the new id\r title }"});
    let created = catalog.call("tracker.mutation.createIssue", plain, &ctx(99)).await.unwrap();
    assert_eq!(created, json!({"id": "2", "title": "Chair wobbles"}));
    let after = stats(&server).await;
    assert_eq!((after["mutations"].as_u64(), after["deletes"].as_u64()), (Some(1), Some(0)), "{after}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_toolkit_holding_only_create_issue_cannot_delete_all() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let toolkits = r#"
        [[toolkits]]
        name = "filing"
        tools = ["tracker.mutation.createIssue"]
        policy = { rules = [{ pattern = "tracker.mutation.createIssue", action = "approve" }] }
    "#;
    let toolkits = CatalogConfig::from_toml_str(toolkits, Path::new("executor.toml")).unwrap().toolkits;
    let filing = Catalog::toolkit_views(&catalog, &toolkits).pop().unwrap();
    let hidden = filing.call_with_status("tracker.mutation.deleteAll", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(hidden.code, "unknown_tool");
    let before = stats(&server).await;

    refused(&filing, "tracker.mutation.createIssue", json!({"title": "x"}), &SMUGGLED).await;
    assert_eq!(stats(&server).await, before, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_always_allow_grant_for_create_issue_does_not_run_delete_all() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let grants = Grants::new(store, Arc::new(SystemClock), Duration::from_secs(3600));
    let alice = Principal::key_owner("alice").unwrap();
    grants.remember(&alice, None, ["tracker.mutation.createIssue"], GrantedBy::ApprovalPage).await.unwrap();
    let granted = grants.tools_for(&alice, None, catalog.clone());
    granted.prepare_approvals().await;
    let args = json!({"title": "x", "select": SMUGGLED[0]});
    let by_grant = matches!(
        granted.policy(&PolicyCall::new("tracker.mutation.createIssue", &args)),
        Policy::Run { by: Allowance::Grant(_) }
    );
    assert!(by_grant, "granted");
    assert!(matches!(
        granted.policy(&PolicyCall::new("tracker.mutation.deleteAll", &json!({}))),
        Policy::NeedsApproval { .. }
    ));
    let before = stats(&server).await;

    refused(&*granted, "tracker.mutation.createIssue", json!({"title": "x"}), &SMUGGLED).await;
    assert_eq!(stats(&server).await, before, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_query_tool_does_not_send_a_blocked_query_field() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) =
        tracker(&server, r#"policy = { rules = [{ pattern = "tracker.query.secret", action = "block" }] }"#).await;
    assert!(matches!(catalog.policy(&PolicyCall::new("tracker.query.secret", &json!({}))), Policy::Blocked { .. }));
    let before = stats(&server).await;

    let selects = [
        "{ id #\r } secret",
        "{ id #\r\n } again: secret",
        "\u{feff}{ id } secret",
        "{ id } ... on Query { secret }",
        "{ id ...F } } fragment F on Query { secret ",
        "{ id } } { secret",
        "{ id } } query Other { secret ",
        "{ id } } mutation { deleteAll ",
    ];
    refused(&*catalog, "tracker.query.issue", json!({"id": "1"}), &selects).await;
    assert_eq!(stats(&server).await, before, "nothing was sent");
    assert_eq!(before["secrets"], 0);
}
