//! A generated GraphQL schema of 5,000 root fields loads within the heap
//! budgets of the 5,000-operation OpenAPI document (docs/benchmarks.md):
//! at most 32 MiB kept by the loaded, indexed catalog and 64 MiB at the peak
//! while loading. Memory is counted by a counting global allocator (live
//! heap bytes), as in `benches/catalog.rs`; nothing is timed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use executor_catalog::{Catalog, CatalogConfig};
use executor_sandbox::Tools;
use serde_json::{Value, json};

const RESOURCES: usize = 1_000;
/// Two queries and three mutations per resource.
const FIELDS: usize = RESOURCES * 5;
const KEPT_BUDGET: usize = 32 * 1024 * 1024;
const PEAK_BUDGET: usize = 64 * 1024 * 1024;

fn type_ref(text: &str) -> Value {
    if let Some(inner) = text.strip_suffix('!') {
        return json!({"kind": "NON_NULL", "name": null, "ofType": type_ref(inner)});
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return json!({"kind": "LIST", "name": null, "ofType": type_ref(inner)});
    }
    let kind = match text {
        "ID" | "String" | "Int" | "Boolean" => "SCALAR",
        "State" => "ENUM",
        t if t.ends_with("Input") => "INPUT_OBJECT",
        _ => "OBJECT",
    };
    json!({"kind": kind, "name": text, "ofType": null})
}

fn field(name: String, description: String, ty: &str, args: &[(&str, String)]) -> Value {
    let args: Vec<Value> = args
        .iter()
        .map(|(n, t)| json!({"name": n, "description": null, "type": type_ref(t), "defaultValue": null}))
        .collect();
    json!({"name": name, "description": description, "args": args, "type": type_ref(ty)})
}

/// Like a large real API: per resource an object type, an input type, list
/// and get queries, create, update and delete mutations.
fn introspection() -> Value {
    let mut query = Vec::new();
    let mut mutation = Vec::new();
    let mut types = Vec::new();
    for i in 0..RESOURCES {
        let (object, input) = (format!("Resource{i}"), format!("Resource{i}Input"));
        query.push(field(
            format!("resources{i}"),
            format!("List resource {i} entries"),
            &format!("[{object}!]!"),
            &[("first", "Int".into()), ("after", "String".into())],
        ));
        query.push(field(
            format!("resource{i}"),
            format!("Get one resource {i} entry"),
            &object,
            &[("id", "ID!".into())],
        ));
        mutation.push(field(
            format!("createResource{i}"),
            format!("Create a resource {i} entry"),
            &format!("{object}!"),
            &[("input", format!("{input}!"))],
        ));
        mutation.push(field(
            format!("updateResource{i}"),
            format!("Replace a resource {i} entry"),
            &object,
            &[("id", "ID!".into()), ("input", format!("{input}!"))],
        ));
        mutation.push(field(
            format!("deleteResource{i}"),
            format!("Delete a resource {i} entry"),
            "Boolean!",
            &[("id", "ID!".into())],
        ));
        types.push(json!({"kind": "OBJECT", "name": object, "description": format!("Resource {i}"), "fields": [
            field("id".into(), "The id".into(), "ID!", &[]),
            field("name".into(), "Display name".into(), "String!", &[]),
            field("state".into(), "Lifecycle".into(), "State", &[]),
            field("owner".into(), "Who owns it".into(), "User", &[]),
            field("children".into(), "Nested entries".into(), &format!("[{object}!]"), &[]),
        ]}));
        types.push(json!({"kind": "INPUT_OBJECT", "name": input, "inputFields": [
            {"name": "name", "type": type_ref("String!"), "defaultValue": null},
            {"name": "state", "type": type_ref("State"), "defaultValue": null},
        ]}));
    }
    types.push(json!({"kind": "OBJECT", "name": "Query", "fields": query}));
    types.push(json!({"kind": "OBJECT", "name": "Mutation", "fields": mutation}));
    types.push(
        json!({"kind": "OBJECT", "name": "User", "fields": [field("login".into(), String::new(), "String!", &[])]}),
    );
    types.push(json!({"kind": "ENUM", "name": "State", "enumValues": [{"name": "ACTIVE"}, {"name": "ARCHIVED"}]}));
    for scalar in ["ID", "String", "Int", "Boolean"] {
        types.push(json!({"kind": "SCALAR", "name": scalar}));
    }
    json!({"data": {"__schema": {"queryType": {"name": "Query"}, "mutationType": {"name": "Mutation"}, "types": types}}})
}

#[tokio::test]
async fn a_5000_field_schema_loads_within_the_big_openapi_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let text = introspection().to_string();
    std::fs::write(dir.path().join("big.json"), &text).unwrap();
    eprintln!("generated schema: {FIELDS} root fields, {} bytes of JSON", text.len());
    drop(text);
    let toml = "[[sources]]\nnamespace = \"big\"\nkind = \"graphql\"\nurl = \"https://big.example.invalid/graphql\"\nschema = \"big.json\"\n";
    let config = CatalogConfig::from_toml_str(toml, &dir.path().join("executor.toml")).unwrap();

    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let catalog = Catalog::connect(&config).await.unwrap();
    let found = catalog.search(json!("delete resource 742 entry")).await.unwrap();
    let (kept, peak) = (LIVE.load(Ordering::SeqCst) - before, PEAK.load(Ordering::SeqCst) - before);
    eprintln!("heap kept by the loaded, indexed catalog: {} bytes; peak while loading: {} bytes", kept, peak);

    assert_eq!(catalog.namespaces()[0].tools, FIELDS, "{:?}", catalog.namespaces()[0].error);
    assert_eq!(found["items"][0]["path"], "big.mutation.deleteResource742", "{found}");
    let types = catalog.describe(json!("big.mutation.updateResource742")).await.unwrap();
    assert!(types.as_str().unwrap().contains("type Resource742Input = { name: string; state?: State };"), "{types}");
    assert!(kept <= KEPT_BUDGET, "kept {kept} bytes, over the {KEPT_BUDGET}-byte budget");
    assert!(peak <= PEAK_BUDGET, "peaked at {peak} bytes, over the {PEAK_BUDGET}-byte budget");
}

/// Counts live heap bytes and their peak. This binary holds one test, so
/// nothing else allocates while it measures.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            let live = LIVE.fetch_add(new_size, Ordering::SeqCst) + new_size;
            PEAK.fetch_max(live, Ordering::SeqCst);
            LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
