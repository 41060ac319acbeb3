//! A toolkit's view over the real catalog (an OpenAPI service and an MCP
//! server on loopback, see `support`): only its tools, only stricter rules.

mod support;

use std::path::Path;

use executor_catalog::{Catalog, CatalogConfig, ToolkitView};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Policy, PolicyCall, Tools};
use serde_json::json;
use support::{Recorded, world};

const TOOLKITS: &str = r#"
[[toolkits]]
name = "items"
tools = ["shop.items.*"]
policy = { rules = [
  { pattern = "shop.items.getItem", action = "approve" },
  { pattern = "shop.items.createItem", action = "run" },
  { pattern = "shop.items.deleteItem", action = "block" },
] }
"#;

fn ctx() -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), 0)
}

async fn view(catalog: &std::sync::Arc<Catalog>) -> ToolkitView {
    let toolkits = CatalogConfig::from_toml_str(TOOLKITS, Path::new("executor.toml")).unwrap().toolkits;
    Catalog::toolkit_views(catalog, &toolkits).pop().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_toolkit_shows_only_its_tools() {
    let w = world("").await;
    let items = view(&w.catalog).await;
    assert_eq!(items.toolkit().map(|t| t.as_str()), Some("items"));
    assert_eq!(items.namespaces(), ["shop"]);

    // Search filters before paging: the total and the page count only its tools.
    let page = items.search(json!({"query": "", "limit": 2})).await.unwrap();
    assert_eq!(page["total"], 4, "{page}");
    let paths: Vec<&str> = page["items"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 2);
    assert!(paths.iter().all(|p| p.starts_with("shop.items.")), "{paths:?}");
    let other = items.search(json!({"query": "", "namespace": "docs"})).await.unwrap_err();
    assert_eq!(other.code, "invalid_arguments");
    assert!(other.message.contains("no namespace `docs`; namespaces: shop"), "{}", other.message);

    // Describe and call outside the toolkit: as if the tool did not exist.
    let described = items.describe(json!({"path": "shop.items.getItem"})).await.unwrap();
    assert!(described.as_str().unwrap().contains("getItem"));
    for path in ["shop.debug.echoAuth", "shop.items.listItemz"] {
        let hidden = items.describe(json!({"path": path})).await.unwrap_err();
        let called = items.call(path, json!({}), &ctx()).await.unwrap_err();
        for error in [hidden, called] {
            assert_eq!(error.code, "unknown_tool");
            assert_eq!(error.message, format!("no tool `{path}`; find tools with tools.search({{query}})"));
        }
    }
    assert_eq!(Recorded::count(&w.shop.recorded.gets), 0, "nothing outside the toolkit reached the upstream");
    let listed = items.call("shop.items.listItems", json!({}), &ctx()).await.unwrap();
    assert_eq!(listed[0]["name"], "lamp");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_toolkit_only_tightens_and_says_where_it_would_loosen() {
    let w = world("").await;
    let items = view(&w.catalog).await;
    let policy = |path: &str| items.policy(&PolicyCall::new(path, &json!({})));
    // Tighter: the read the source runs needs approval here; the write is blocked.
    assert_eq!(w.catalog.policy(&PolicyCall::new("shop.items.getItem", &json!({}))), Policy::run_by_default());
    let Policy::NeedsApproval { message, rule } = policy("shop.items.getItem") else { panic!() };
    assert!(message.contains("toolkit `items` rule `shop.items.getItem`"), "{message}");
    assert_eq!(rule, "toolkit:items:rule:shop.items.getItem");
    let Policy::Blocked { reason, .. } = policy("shop.items.deleteItem") else { panic!() };
    assert!(reason.contains("blocked by toolkit `items`"), "{reason}");
    // Looser: `run` on a write the source asks about changes nothing.
    assert_eq!(
        policy("shop.items.createItem"),
        w.catalog.policy(&PolicyCall::new("shop.items.createItem", &json!({})))
    );
    assert!(matches!(policy("shop.items.createItem"), Policy::NeedsApproval { .. }));
    assert_eq!(policy("shop.items.listItems"), Policy::run_by_default());

    let warnings = items.loosening(w.catalog.paths());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("toolkit `items` rule `shop.items.createItem` says `run`")
            && warnings[0].contains("looser than its source's `approve`")
            && warnings[0].contains("no effect"),
        "{}",
        warnings[0]
    );
}
