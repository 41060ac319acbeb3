//! The catalog index (`executor catalog build`) against the documents it was
//! built from: on generated documents of several shapes, a catalog loaded
//! from the index and one that parsed the document list the same tools,
//! describe them alike, rank searches alike, decide approval alike, and send
//! the same requests to a real upstream on loopback. An index whose document
//! changed, or that does not match the sources file, is refused.

mod support;

use std::path::Path;

use axum::response::IntoResponse;
use executor_catalog::{Catalog, CatalogConfig, CatalogError, IndexError, index};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, PolicyCall, Tools};
use executor_tests::big_spec;
use serde_json::{Value, json};
use support::recording::{Seen, start_replying};

fn sources(base: &str, index: Option<&str>) -> String {
    let index = index.map_or(String::new(), |file| format!("index = \"{file}\"\n"));
    format!(
        "{index}[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"big\"\nkind = \"openapi\"\n\
         spec = \"big.json\"\nbase_url = \"{base}/api\"\n\n[[sources]]\nnamespace = \"small\"\nkind = \"openapi\"\n\
         spec = \"small.json\"\nbase_url = \"{base}\"\npolicy.rules = [{{ pattern = \"small.*.delete*\", action = \"block\" }}]\n"
    )
}

/// The sources file `name` in `dir` with `text`, loaded.
fn config(dir: &Path, name: &str, text: &str) -> CatalogConfig {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    CatalogConfig::load(&file).unwrap()
}

/// Everything a tool gives the code, compared between the two catalogs.
async fn observe(catalog: &Catalog, seen: impl Fn() -> Vec<Seen>) -> Vec<Value> {
    let ctx = CallContext::new(ExecutionId::parse("exec-1").unwrap(), 1);
    let mut out = vec![json!(catalog.namespaces())];
    for path in catalog.paths().map(str::to_owned).collect::<Vec<_>>() {
        let described = catalog.describe(json!(path)).await;
        // What the tool takes, as its own refusal of an unknown argument says.
        let probe = catalog.call(&path, json!({"__probe": 1}), &ctx).await.unwrap_err().message;
        let takes = probe.split("this tool takes: ").nth(1).unwrap_or("");
        let mut args = serde_json::Map::new();
        for argument in takes.split(", ").filter(|a| !a.is_empty() && *a != "no arguments") {
            let value = match argument {
                "limit" => json!(3),
                "labels" => json!(["x", "y z"]),
                "body" => json!({"note": "ü", "n": 1}),
                other => json!(format!("{other} value")),
            };
            args.insert(argument.to_owned(), value);
        }
        let args = Value::Object(args);
        let policy = format!("{:?}", catalog.policy(&PolicyCall::new(&path, &args)));
        let before = seen().len();
        let called = catalog.call(&path, args.clone(), &ctx).await;
        let sent: Vec<Value> = seen()[before..]
            .iter()
            .map(|s| json!([s.method, s.target(), s.header("x-trace"), String::from_utf8_lossy(&s.body)]))
            .collect();
        assert_eq!(sent.len(), 1, "{path} with {args} reached the upstream once: {called:?}");
        assert!(called.is_ok() && described.as_ref().is_ok_and(|ts| ts.to_string().contains("type Input")));
        out.push(json!({"path": path, "described": format!("{described:?}"), "policy": policy,
                        "called": format!("{called:?}"), "sent": sent}));
    }
    for query in ["", "account", "list customer", "delete invoice entry", "updateShared", "big.", "small.get"] {
        for namespace in [None, Some("small")] {
            let request = json!({"query": query, "namespace": namespace, "limit": 100});
            out.push(json!({"query": query, "found": format!("{:?}", catalog.search(request).await)}));
        }
    }
    out
}

#[tokio::test]
async fn the_index_serves_what_the_documents_do() {
    let upstream = start_replying(|seen| axum::Json(json!({"echo": seen.target()})).into_response());
    for seed in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.json"), big_spec::openapi_json(400_000, seed)).unwrap();
        std::fs::write(dir.path().join("small.json"), big_spec::openapi_json(1, seed + 100)).unwrap();
        let parsed_config = config(dir.path(), "parsed.toml", &sources(&upstream.base, None));
        let built = index::build(&parsed_config, &dir.path().join("catalog.index")).unwrap();
        let tools: usize = built.indexed.iter().map(|(_, n)| n).sum();
        assert!(tools > 50, "{built:?}");
        let indexed_config = config(dir.path(), "indexed.toml", &sources(&upstream.base, Some("catalog.index")));
        assert_eq!(indexed_config.index, Some(dir.path().join("catalog.index")));

        let parsed = Catalog::connect(&parsed_config).await.unwrap();
        let indexed = Catalog::connect(&indexed_config).await.unwrap();
        assert_eq!(parsed.paths().count(), tools);
        let from_parsed = observe(&parsed, || upstream.seen()).await;
        let from_index = observe(&indexed, || upstream.seen()).await;
        assert_eq!(from_parsed.len(), from_index.len());
        for (a, b) in from_parsed.iter().zip(&from_index) {
            assert_eq!(a, b, "seed {seed}");
        }
    }
}

#[tokio::test]
async fn a_stale_or_foreign_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.json"), big_spec::openapi_json(20_000, 7)).unwrap();
    std::fs::write(dir.path().join("small.json"), big_spec::openapi_json(1, 8)).unwrap();
    let base = "http://127.0.0.1:9";
    let config_with_index = |text: &str| config(dir.path(), "executor.toml", text);
    let built = config_with_index(&sources(base, None));
    index::build(&built, &dir.path().join("catalog.index")).unwrap();
    let indexed = config_with_index(&sources(base, Some("catalog.index")));
    Catalog::connect(&indexed).await.unwrap();

    let refused = |result: Result<Catalog, CatalogError>| match result {
        Err(CatalogError::Index(error)) => error,
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("the index was accepted"),
    };
    // The document changed by one byte.
    let spec = dir.path().join("small.json");
    let mut text = std::fs::read_to_string(&spec).unwrap();
    text.push(' ');
    std::fs::write(&spec, &text).unwrap();
    let error = refused(Catalog::connect(&indexed).await);
    let message = error.to_string();
    assert!(matches!(error, IndexError::Stale { .. }), "{message}");
    assert!(message.contains("small.json") && message.contains("changed since the index was built"), "{message}");
    assert!(message.contains("executor catalog build --config"), "{message}");
    text.pop();
    std::fs::write(&spec, &text).unwrap();
    Catalog::connect(&indexed).await.unwrap();

    // A source the index does not hold, or one it holds that the file no longer names.
    let renamed = sources(base, Some("catalog.index")).replace("\"small\"", "\"other\"");
    let message = refused(Catalog::connect(&config_with_index(&renamed)).await).to_string();
    assert!(message.contains("stale: it holds source `small`"), "{message}");
    let one = sources(base, Some("catalog.index"));
    let one = &one[..one.rfind("[[sources]]").unwrap()];
    let message = refused(Catalog::connect(&config_with_index(one)).await).to_string();
    assert!(message.contains("it holds source `small`"), "{message}");
    let added = format!(
        "{}\n[[sources]]\nnamespace = \"more\"\nkind = \"openapi\"\nspec = \"small.json\"\nbase_url = \"{base}\"\n",
        sources(base, Some("catalog.index"))
    );
    let message = refused(Catalog::connect(&config_with_index(&added)).await).to_string();
    assert!(message.contains("it has no source `more`"), "{message}");

    // Not an index at all, and no file.
    std::fs::write(dir.path().join("catalog.index"), "{}").unwrap();
    let error = refused(Catalog::connect(&indexed).await);
    assert!(matches!(error, IndexError::Format { .. }), "{error}");
    std::fs::remove_file(dir.path().join("catalog.index")).unwrap();
    let error = refused(Catalog::connect(&indexed).await);
    assert!(matches!(error, IndexError::Read { .. }) && error.to_string().contains("build it with"), "{error}");
}
