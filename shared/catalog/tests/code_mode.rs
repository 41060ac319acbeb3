//! End to end: agent code in the sandbox reaches the catalog's real upstreams
//! through `Executions` with the embedded store; a write pauses, is approved,
//! and reaches the upstream exactly once.

mod support;

use std::sync::Arc;

use executor_core::SystemClock;
use executor_core::{ApprovalAction, ElicitationMode, Principal, Timeouts};
use executor_sandbox::{Limits, Sandbox, Tools};
use executor_service::{ExecutionResult, Executions};
use executor_store::EmbeddedStore;
use serde_json::json;
use support::{Recorded, world};

/// An orchestrator over `store`. Tests share one store between
/// orchestrators: a finished run's task may hold it a moment longer, and the
/// embedded store opens once per process.
fn executions(store: &Arc<EmbeddedStore>) -> Executions {
    let clock = Arc::new(SystemClock);
    Executions::new(store.clone(), Sandbox::with_clock(Limits::default(), clock.clone()), Timeouts::default(), clock)
}

#[tokio::test(flavor = "multi_thread")]
async fn code_searches_describes_and_reads_to_completion() {
    let w = world("").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let code = r#"
        const found = await tools.search({ query: "list items", namespace: "shop" });
        const path = found.items[0].path;
        const types = await tools.describe.tool({ path });
        const listed = await tools.shop.items.listItems({ q: "lamp" });
        const docs = await tools.docs.search_docs({ query: "start" });
        return {
            path,
            declaresInput: types.includes("type Input"),
            names: listed.data.map(i => i.name),
            status: listed.http.status,
            docs: docs.data.hits.length,
            mcpHasNoHttp: !("http" in docs),
        };
    "#;
    let tools: Arc<dyn Tools> = w.catalog.clone();
    let result = executions(&store)
        .execute(&Principal::parse("alice").unwrap(), None, ElicitationMode::Model, code.into(), tools)
        .await;
    match result.unwrap() {
        ExecutionResult::Completed { result, .. } => assert_eq!(
            result,
            json!({
                "path": "shop.items.listItems",
                "declaresInput": true,
                "names": ["lamp", "desk"],
                "status": 200,
                "docs": 1,
                "mcpHasNoHttp": true
            })
        ),
        other => panic!("expected completion, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_pauses_and_once_approved_reaches_the_upstream_once() {
    let w = world("").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = Principal::parse("alice").unwrap();
    let code = r#"
        const before = await tools.shop.items.listItems({});
        const created = await tools.shop.items.createItem({ body: { name: "chair" } });
        return { before: before.data.length, beforeStatus: before.http.status, created: created.data, status: created.http.status };
    "#;
    let tools: Arc<dyn Tools> = w.catalog.clone();
    let paused =
        executions(&store).execute(&alice, None, ElicitationMode::Model, code.into(), tools.clone()).await.unwrap();
    let ExecutionResult::Paused { execution_id, pending, .. } = paused else { panic!("expected a pause: {paused:?}") };
    assert_eq!(pending[0].path, "shop.items.createItem");
    let message = &pending[0].message;
    assert!(message.starts_with("tools.shop.items.createItem (POST /items) needs approval: it may change data\n"));
    assert!(
        message.contains(&format!("\nEffect: POST {}/items\n", w.shop.base_url.trim_end_matches('/'))),
        "{message}"
    );
    assert_eq!(Recorded::count(&w.shop.recorded.posts), 0, "nothing is written before the approval");

    // Another orchestrator over the same store, as another process would be.
    let resumed = executions(&store)
        .resume(&alice, &execution_id, Some(ApprovalAction::Accept), None, tools.clone())
        .await
        .unwrap();
    match resumed {
        ExecutionResult::Completed { result, .. } => {
            // The GET's status came from the journal in the replay, exactly as the first run saw it.
            let expected =
                json!({"before": 2, "beforeStatus": 200, "created": {"id": 3, "name": "chair"}, "status": 201});
            assert_eq!(result, expected);
        }
        other => panic!("expected completion, got {other:?}"),
    }
    assert_eq!(Recorded::count(&w.shop.recorded.posts), 1);
    // The GET before the pause was journaled: the replay did not repeat it.
    assert_eq!(Recorded::count(&w.shop.recorded.gets), 1);
    assert_eq!(*w.shop.recorded.idempotency_keys.lock().unwrap(), [format!("{execution_id}:1")]);

    let again = executions(&store).resume(&alice, &execution_id, Some(ApprovalAction::Accept), None, tools).await;
    assert_eq!(again.unwrap_err().code(), "execution_already_settled");
    assert_eq!(Recorded::count(&w.shop.recorded.posts), 1);
}
