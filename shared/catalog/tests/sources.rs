//! The catalog against real upstreams on loopback: an OpenAPI service and an
//! MCP server (see `support`).

mod support;

use std::path::Path;

use executor_catalog::{Catalog, CatalogConfig, REDACTED};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Policy, PolicyCall, Tools};
use serde_json::{Value, json};
use support::{MCP_KEY, Recorded, TOKEN, world};

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

async fn search(catalog: &Catalog, request: Value) -> Vec<String> {
    let found = catalog.search(request).await.unwrap();
    found["items"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn openapi_operations_become_named_tools_with_mapped_parameters_and_auth() {
    let w = world("").await;
    let namespaces = w.catalog.namespaces();
    assert_eq!(namespaces.len(), 2);
    assert_eq!((namespaces[0].namespace.as_str(), namespaces[0].tools, &namespaces[0].error), ("shop", 7, &None));
    assert_eq!((namespaces[1].namespace.as_str(), namespaces[1].tools, &namespaces[1].error), ("docs", 3, &None));

    let all = search(&w.catalog, json!({"query": "", "namespace": "shop", "limit": 100})).await;
    assert_eq!(
        all,
        [
            "shop.debug.big",
            "shop.debug.echoAuth",
            "shop.debug.elsewhere",
            "shop.items.createItem",
            "shop.items.deleteItem",
            "shop.items.getItem",
            "shop.items.listItems",
        ]
    );

    let listed = w
        .catalog
        .call("shop.items.listItems", json!({"q": "lamp & co", "tag": ["a", "b"], "X-Request-Tag": "t-1"}), &ctx(0))
        .await
        .unwrap();
    assert_eq!(listed[0]["name"], "lamp");
    assert_eq!(*w.shop.recorded.queries.lock().unwrap(), ["q=lamp+%26+co&tag=a&tag=b"]);
    assert_eq!(*w.shop.recorded.header_params.lock().unwrap(), ["t-1"]);

    let created = w.catalog.call("shop.items.createItem", json!({"body": {"name": "chair"}}), &ctx(1)).await.unwrap();
    assert_eq!(created, json!({"id": 3, "name": "chair"}));
    assert_eq!(*w.shop.recorded.bodies.lock().unwrap(), [json!({"name": "chair"})]);
    // Writes carry the idempotency key of the call; reads do not.
    assert_eq!(*w.shop.recorded.idempotency_keys.lock().unwrap(), ["exec-1:1"]);

    let got = w.catalog.call_with_status("shop.items.getItem", json!({"id": 1}), &ctx(2)).await.unwrap();
    assert_eq!((got.data["name"].as_str(), got.http_status), (Some("lamp"), Some(200)));
    let missing = w.catalog.call("shop.items.getItem", json!({"id": 9}), &ctx(3)).await.unwrap_err();
    assert_eq!((missing.code.as_str(), missing.message.as_str()), ("http_404", "HTTP 404: no item 9"));
    let deleted = w.catalog.call("shop.items.deleteItem", json!({"id": 2}), &ctx(4)).await.unwrap();
    assert_eq!(deleted, Value::Null);

    let bad = w.catalog.call("shop.items.getItem", json!({}), &ctx(5)).await.unwrap_err();
    assert_eq!(bad.code, "invalid_arguments");
    assert!(bad.message.contains("missing required argument `id` (path parameter)"), "{}", bad.message);

    // Every request carried the bearer token resolved from the environment.
    let auth = w.shop.recorded.authorization.lock().unwrap().clone();
    assert_eq!(auth.len(), 5);
    assert!(auth.iter().all(|a| *a == format!("Bearer {TOKEN}")), "{auth:?}");
    assert_eq!(
        (Recorded::count(&w.shop.recorded.gets), Recorded::count(&w.shop.recorded.posts)),
        (3, 1),
        "the invalid call reached nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_tools_are_listed_called_and_their_hints_feed_the_policy() {
    let w = world("").await;
    let docs = search(&w.catalog, json!({"query": "", "namespace": "docs"})).await;
    assert_eq!(docs, ["docs.delete_doc", "docs.leaky", "docs.search_docs"]);

    assert_eq!(w.catalog.policy(&PolicyCall::new("docs.search_docs", &json!({}))), Policy::run_by_default());
    assert!(matches!(w.catalog.policy(&PolicyCall::new("docs.delete_doc", &json!({}))), Policy::NeedsApproval { .. }));

    let found = w.catalog.call("docs.search_docs", json!({"query": "start"}), &ctx(0)).await.unwrap();
    assert_eq!(found, json!({"hits": [{"title": "Getting started", "query": "start"}]}));
    let deleted = w.catalog.call("docs.delete_doc", json!({"id": "p1"}), &ctx(1)).await.unwrap();
    assert_eq!(deleted, json!("deleted"));
    assert_eq!(Recorded::count(&w.docs.recorded.deletes), 1);
    // The configured API key header reached the MCP server.
    assert!(w.docs.recorded.authorization.lock().unwrap().iter().all(|k| k == MCP_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_defaults_and_rules() {
    let w = world(
        r#"policy = { rules = [
            { pattern = "shop.items.*", action = "approve" },
            { pattern = "shop.items.getItem", action = "run" },
            { pattern = "shop.items.delete*", action = "block" },
        ] }"#,
    )
    .await;
    let policy = |path: &str| w.catalog.policy(&PolicyCall::new(path, &json!({})));
    // Each decision names the rule that made it, as the audit trail records it.
    assert_eq!(policy("shop.items.getItem"), Policy::run_by("source:shop:rule:shop.items.getItem"));
    assert_eq!(policy("shop.debug.big"), Policy::run_by_default(), "no rule: a GET reads");
    let asked = |path: &str, args: Value| match w.catalog.policy(&PolicyCall::new(path, &args)) {
        Policy::NeedsApproval { message, rule } => (message, rule),
        other => panic!("{path} needs approval, not {other:?}"),
    };
    let message = |path: &str, args: Value| asked(path, args).0;
    // What the person is shown: why, what the tool does, the effect, the arguments.
    let (listed, rule) = asked("shop.items.listItems", json!({}));
    assert_eq!(rule, "source:shop:rule:shop.items.*");
    assert_eq!(asked("docs.delete_doc", json!({})).1, "default", "no rule: a write asks by default");
    assert!(
        listed.starts_with("tools.shop.items.listItems (GET /items) needs approval: policy rule `shop.items.*`\n"),
        "{listed}"
    );
    assert!(listed.contains(&format!("\nEffect: GET {}/items\n", w.shop.base_url.trim_end_matches('/'))), "{listed}");
    assert_eq!(
        policy("shop.items.deleteItem"),
        Policy::Blocked {
            reason: "tools.shop.items.deleteItem (DELETE /items/{id}) is blocked by policy rule `shop.items.delete*`"
                .into(),
            rule: "source:shop:rule:shop.items.delete*".into(),
        }
    );
    let deleting = message("docs.delete_doc", json!({"id": "d1", "token": "tok-1"}));
    assert!(
        deleting.starts_with("tools.docs.delete_doc (MCP tool `delete_doc`) needs approval: it may change data\n"),
        "{deleting}"
    );
    assert!(deleting.contains("\"id\": \"d1\"") && deleting.contains("\"token\": \"[redacted]\""), "{deleting}");
    assert!(!deleting.contains("tok-1"), "{deleting}");
    assert!(deleting.contains("\nWhat it does: Delete a documentation page\n"), "{deleting}");
    assert!(deleting.contains("\nEffect: calls the MCP tool `delete_doc` (destructiveHint: true)\n"), "{deleting}");
}

#[tokio::test(flavor = "multi_thread")]
async fn search_ranks_and_describe_writes_typescript() {
    let w = world("").await;
    let ranked = search(&w.catalog, json!({"query": "list items"})).await;
    assert_eq!(ranked[0], "shop.items.listItems");
    // Both tools that delete come first, in whichever order their texts rank them.
    let mut ranked = search(&w.catalog, json!({"query": "delete"})).await;
    ranked[..2].sort();
    assert_eq!(ranked[..2], ["docs.delete_doc", "shop.items.deleteItem"]);
    let page = w.catalog.search(json!({"query": "item", "limit": 2, "offset": 1})).await.unwrap();
    assert_eq!((page["items"].as_array().unwrap().len(), page["total"].as_u64()), (2, Some(4)));
    assert_eq!(page["items"][0]["namespace"], "shop");
    assert_eq!(search(&w.catalog, json!("search documentation")).await[0], "docs.search_docs");
    let unknown = w.catalog.search(json!({"query": "x", "namespace": "nope"})).await.unwrap_err();
    assert!(unknown.message.contains("namespaces: shop, docs"), "{}", unknown.message);
    // A query is a few words: one of a whole document would cost the host its ranking, word by word.
    let long = "list the items ".repeat(200);
    let refused = w.catalog.search(json!({"query": long})).await.unwrap_err();
    assert_eq!(refused.code, "invalid_arguments");
    assert!(refused.message.contains("3000 bytes, over the 2048-byte limit"), "{}", refused.message);
    assert_eq!(search(&w.catalog, json!({"query": &long[..2040]})).await[0], "shop.items.listItems");

    let described = w.catalog.describe(json!({"path": "shop.items.listItems"})).await.unwrap();
    let described = described.as_str().unwrap();
    assert_eq!(
        described,
        "// tools.shop.items.listItems(input: Input): Promise<{ ok: true; data: Output; http: { status: number } } | { ok: false; error: { code: string; message: string } }>\n\
         /** List items in the shop\nGET /items */\n\
         type Input = { /** Text to look for */ q?: string; tag?: string[]; \"X-Request-Tag\"?: string };\n\
         type Output = Item[];\n\
         type Item = { id: number; name: string; status?: \"new\" | \"sold\"; parent?: Item; tags?: string[] | null };\n"
    );
    let mcp = w.catalog.describe(json!("tools.docs.search_docs")).await.unwrap();
    assert!(mcp.as_str().unwrap().contains("type Input = { query: string };"), "{mcp}");
    let missing = w.catalog.describe(json!({"path": "shop.items.listItem"})).await.unwrap_err();
    assert!(missing.message.contains("did you mean `shop.items.listItems`?"), "{}", missing.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_leave_in_errors_or_results() {
    let w = world("").await;
    let echoed = w.catalog.call("shop.debug.echoAuth", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(echoed.code, "http_401");
    assert_eq!(echoed.message, format!("HTTP 401: bad credentials: Bearer {REDACTED}"));
    let leaky = w.catalog.call("docs.leaky", json!({"id": "x"}), &ctx(1)).await.unwrap_err();
    assert_eq!((leaky.code.as_str(), leaky.message.as_str()), ("tool_error", "denied for key [redacted]"));
    for text in [&echoed.message, &leaky.message] {
        assert!(!text.contains(TOKEN) && !text.contains(MCP_KEY));
    }
    let namespaces = format!("{:?}", w.catalog.namespaces());
    assert!(!namespaces.contains(TOKEN) && !namespaces.contains(MCP_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn outbound_limits_hold() {
    let w = world("").await;
    let big = w.catalog.call("shop.debug.big", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(big.code, "response_too_large");
    // Redirected to another origin (localhost instead of 127.0.0.1): not followed.
    let moved = w.catalog.call("shop.debug.elsewhere", json!({}), &ctx(1)).await.unwrap_err();
    assert_eq!(moved.code, "http_307");
    assert!(
        moved.message.contains("redirects to another origin, or more than 5, are not followed"),
        "{}",
        moved.message
    );
}

async fn connect(dir: &Path, body: &str) -> Catalog {
    support::set_secrets();
    std::fs::write(dir.join("shop.yaml"), support::SHOP_SPEC).unwrap();
    let config = CatalogConfig::from_toml_str(body, &dir.join("executor.toml")).unwrap();
    Catalog::connect(&config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_destinations_and_failing_sources_say_why() {
    let shop = support::start_shop("http://localhost/").await;
    let dir = tempfile::tempdir().unwrap();
    let source = |namespace: &str, base_url: &str| {
        format!(
            "[[sources]]\nnamespace = \"{namespace}\"\nkind = \"openapi\"\nspec = \"shop.yaml\"\nbase_url = \"{base_url}\"\n"
        )
    };
    let strict = [
        source("metadata", "http://169.254.169.254/latest"),
        source("zero", "http://0.0.0.0:80/"),
        source("linklocal", "http://[fe80::1]/"),
        source("local", &shop.base_url),
        source("named", &shop.base_url.replace("127.0.0.1", "localhost")),
        source("nofile", "https://shop.example.invalid/api").replace("shop.yaml", "missing.yaml"),
        "[[sources]]\nnamespace = \"deadmcp\"\nkind = \"mcp\"\nurl = \"http://169.254.169.254/mcp\"\n".into(),
    ]
    .concat();
    let catalog = connect(dir.path(), &strict).await;
    let errors: Vec<(String, String)> =
        catalog.namespaces().into_iter().map(|n| (n.namespace, n.error.unwrap_or_default())).collect();
    let expected = [
        (
            "metadata",
            "source `metadata` (base_url) failed: refused to connect to 169.254.169.254 (169.254.169.254): the cloud metadata endpoint",
        ),
        ("zero", "the unspecified address"),
        ("linklocal", "a link-local address"),
        ("local", "loopback (set `allow_loopback = true` under [outbound]"),
        // A name is checked after resolution, when the spec is fetched or a call is made.
        ("named", ""),
        ("nofile", "source `nofile` (spec) failed: cannot read"),
        ("deadmcp", "source `deadmcp` (mcp) failed: refused to connect to 169.254.169.254"),
    ];
    for ((namespace, error), (want_namespace, want)) in errors.iter().zip(expected) {
        assert_eq!(namespace, want_namespace);
        assert!(error.contains(want), "{namespace}: {error}");
    }
    let named = catalog.call("named.items.listItems", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(named.code, "destination_refused");
    assert!(named.message.contains("refused to connect to localhost"), "{}", named.message);
    let unavailable = catalog.call("metadata.items.listItems", json!({}), &ctx(1)).await.unwrap_err();
    assert_eq!(unavailable.code, "source_unavailable");
    assert!(unavailable.message.contains("namespace `metadata` is unavailable"), "{}", unavailable.message);
    let search = catalog.search(json!({"query": "x", "namespace": "nofile"})).await.unwrap_err();
    assert_eq!(search.code, "source_unavailable");
    assert_eq!(Recorded::count(&shop.recorded.gets), 0, "nothing reached the loopback service");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_fetched_by_url_uses_the_source_credentials() {
    let shop = support::start_shop("http://localhost/").await;
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "[outbound]\nallow_loopback = true\n[[sources]]\nnamespace = \"remote\"\nkind = \"openapi\"\nspec = \"{base}/openapi.yaml\"\n\
         base_url = \"{base}\"\nauth = {{ type = \"bearer\", token = \"env:{var}\" }}\n\
         [[sources]]\nnamespace = \"anonymous\"\nkind = \"openapi\"\nspec = \"{base}/openapi.yaml\"\nbase_url = \"{base}\"\n",
        base = shop.base_url,
        var = support::TOKEN_VAR,
    );
    let catalog = connect(dir.path(), &body).await;
    let namespaces = catalog.namespaces();
    assert_eq!((namespaces[0].tools, &namespaces[0].error), (7, &None));
    let refused = namespaces[1].error.as_deref().unwrap();
    assert!(refused.contains("source `anonymous` (spec) failed: HTTP 401: token required"), "{refused}");
}
