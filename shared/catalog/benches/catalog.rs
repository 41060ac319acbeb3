//! A generated 5,000-operation OpenAPI document: load, first search (index
//! built), warm search, describe (see docs/benchmarks.md).
//! `cargo bench -p executor-catalog --bench catalog`

use std::path::Path;
use std::sync::atomic::Ordering;

#[path = "support/counting.rs"]
mod counting;

use counting::{LIVE, PEAK, mib};
use criterion::{Criterion, criterion_group, criterion_main};
use executor_catalog::{Catalog, CatalogConfig};
use executor_sandbox::Tools;
use serde_json::{Map, Value, json};

const RESOURCES: usize = 1_000;
/// Five operations per resource: list, create, get, update, delete.
const OPERATIONS: usize = RESOURCES * 5;

/// Like a large real API: tags, path and query parameters, a JSON body, and
/// `$ref`s to shared and self-referencing schemas.
fn spec() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for i in 0..RESOURCES {
        let tag = format!("resource{i}");
        let schema = format!("#/components/schemas/Resource{i}");
        let item = json!({"$ref": schema});
        let ok = |s: Value| json!({"200": {"description": "ok", "content": {"application/json": {"schema": s}}}});
        let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}});
        paths.insert(
            format!("/v1/resource{i}"),
            json!({
                "get": {"tags": [tag], "operationId": format!("listResource{i}"), "summary": format!("List resource {i} entries"),
                        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}, {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
                        "responses": ok(json!({"type": "array", "items": item}))},
                "post": {"tags": [tag], "operationId": format!("createResource{i}"), "summary": format!("Create a resource {i} entry"),
                         "requestBody": {"required": true, "content": {"application/json": {"schema": item}}},
                         "responses": ok(item.clone())},
            }),
        );
        paths.insert(
            format!("/v1/resource{i}/{{id}}"),
            json!({
                "parameters": [id],
                "get": {"tags": [tag], "operationId": format!("getResource{i}"), "summary": format!("Get one resource {i} entry"), "responses": ok(item.clone())},
                "put": {"tags": [tag], "operationId": format!("updateResource{i}"), "summary": format!("Replace a resource {i} entry"),
                        "requestBody": {"content": {"application/json": {"schema": item}}}, "responses": ok(item.clone())},
                "delete": {"tags": [tag], "operationId": format!("deleteResource{i}"), "summary": format!("Delete a resource {i} entry"), "responses": {"204": {"description": "gone"}}},
            }),
        );
        schemas.insert(
            format!("Resource{i}"),
            json!({"type": "object", "required": ["id", "name"], "properties": {
                "id": {"type": "string"}, "name": {"type": "string", "description": "Display name"},
                "state": {"enum": ["active", "archived"]}, "owner": {"$ref": "#/components/schemas/User"},
                "children": {"type": "array", "items": {"$ref": schema}}}}),
        );
    }
    schemas.insert("User".into(), json!({"type": "object", "properties": {"login": {"type": "string"}}}));
    json!({"openapi": "3.0.3", "info": {"title": "generated", "version": "1"}, "paths": paths, "components": {"schemas": schemas}})
}

fn config(dir: &Path) -> CatalogConfig {
    let spec = serde_json::to_string(&spec()).unwrap();
    eprintln!("generated spec: {OPERATIONS} operations, {} bytes of JSON", spec.len());
    std::fs::write(dir.join("big.json"), &spec).unwrap();
    let toml = "[[sources]]\nnamespace = \"big\"\nkind = \"openapi\"\nspec = \"big.json\"\nbase_url = \"https://big.example.invalid\"\n";
    CatalogConfig::from_toml_str(toml, &dir.join("executor.toml")).unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let catalog = rt.block_on(Catalog::connect(&config)).unwrap();
    rt.block_on(catalog.search(json!("warm up the index"))).unwrap();
    let (kept, peak) = (LIVE.load(Ordering::Relaxed) - before, PEAK.load(Ordering::Relaxed) - before);
    eprintln!("heap kept by the loaded, indexed catalog: {}; peak while loading: {}", mib(kept), mib(peak));
    assert_eq!(catalog.namespaces()[0].tools, OPERATIONS, "{:?}", catalog.namespaces()[0].error);
    let query = json!({"query": "delete resource 742 entry"});

    let mut group = c.benchmark_group("catalog_5000_operations");
    group.sample_size(10);
    group.bench_function("load (read, parse, build tools)", |b| {
        b.to_async(&rt).iter(|| async { Catalog::connect(&config).await.unwrap() })
    });
    group.bench_function("load and first search (index built)", |b| {
        b.to_async(&rt).iter(|| async {
            let catalog = Catalog::connect(&config).await.unwrap();
            catalog.search(query.clone()).await.unwrap()
        })
    });
    group.finish();

    let found = rt.block_on(catalog.search(query.clone())).unwrap();
    assert_eq!(found["items"][0]["path"], "big.resource742.deleteResource742", "{found}");
    c.bench_function("catalog_5000_operations/search (warm)", |b| {
        b.to_async(&rt).iter(|| async { catalog.search(query.clone()).await.unwrap() })
    });
    let path = json!({"path": "big.resource742.createResource742"});
    c.bench_function("catalog_5000_operations/describe", |b| {
        b.to_async(&rt).iter(|| async { catalog.describe(path.clone()).await.unwrap() })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
