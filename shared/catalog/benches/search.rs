//! Search at scale and big published documents at start (docs/benchmarks.md,
//! "Catalog: search at 10,000 tools"). The documents are GitHub's and
//! Directus' as their npm packages publish them (`executor_tests::api_documents`).
//! `cargo bench -p executor-catalog --bench search`

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

#[path = "support/counting.rs"]
mod counting;

use counting::{LIVE, PEAK, mib};
use criterion::{Criterion, criterion_group, criterion_main};
use executor_catalog::{Catalog, CatalogConfig};
use executor_sandbox::Tools;
use executor_tests::api_documents::{DIRECTUS, GITHUB, Published};
use serde_json::json;

/// GitHub's 1,223 operations under eight namespaces and Directus' 136 under
/// two: 10,056 tools of real text.
const COPIES: [(&Published, usize); 2] = [(&GITHUB, 8), (&DIRECTUS, 2)];

/// A sources file naming each of `documents` (document, namespace), with `index` when given.
fn config(dir: &Path, documents: &[(&Published, String)], index: Option<&Path>) -> CatalogConfig {
    let mut toml = index.map(|index| format!("index = {index:?}\n")).unwrap_or_default();
    for (document, namespace) in documents {
        toml.push_str(&format!(
            "[[sources]]\nnamespace = \"{namespace}\"\nkind = \"openapi\"\nspec = {:?}\nbase_url = \
             \"https://{namespace}.example.invalid\"\n",
            document.path()
        ));
    }
    CatalogConfig::from_toml_str(&toml, &dir.join("executor.toml")).unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let connect = |config: &CatalogConfig| rt.block_on(Catalog::connect(config)).unwrap();

    // Starting on GitHub's document: parsed, then from `executor catalog build`'s index, beside Directus' (small).
    let mut group = c.benchmark_group("start");
    group.sample_size(10);
    for (document, name) in [(&GITHUB, "github"), (&DIRECTUS, "directus")] {
        let parsed = config(dir.path(), &[(document, name.to_owned())], None);
        let index = dir.path().join(format!("{name}.index"));
        executor_catalog::index::build(&parsed, &index).unwrap();
        let indexed = config(dir.path(), &[(document, name.to_owned())], Some(&index));
        group.bench_function(format!("{name}, parsed"), |b| b.iter(|| connect(&parsed)));
        group.bench_function(format!("{name}, from the index"), |b| b.iter(|| connect(&indexed)));
    }
    group.finish();

    let documents: Vec<(&Published, String)> = COPIES
        .iter()
        .flat_map(|(document, copies)| {
            let name = if document.package == GITHUB.package { "github" } else { "directus" };
            (1..=*copies).map(move |n| (*document, format!("{name}{n}")))
        })
        .collect();
    let catalog = connect(&config(dir.path(), &documents, None));
    let tools: usize = catalog.namespaces().iter().map(|n| n.tools).sum();
    let before = LIVE.load(Ordering::Relaxed);
    let started = Instant::now();
    rt.block_on(catalog.search(json!("build the index"))).unwrap();
    eprintln!(
        "{tools} tools: the search index built in {:?}, {} kept",
        started.elapsed(),
        mib(LIVE.load(Ordering::Relaxed) - before)
    );
    let mut group = c.benchmark_group(format!("search, {tools} tools"));
    for query in ["open a pull request", "who am I logged in as", "list the records in a collection", "delete"] {
        let request = json!({"query": query, "limit": 20});
        let live = LIVE.load(Ordering::Relaxed);
        PEAK.store(live, Ordering::Relaxed);
        let found = rt.block_on(catalog.search(request.clone())).unwrap();
        eprintln!(
            "{query:?}: {} found, first {}; {} allocated at most while searching, {} kept after",
            found["total"],
            found["items"][0]["path"],
            mib(PEAK.load(Ordering::Relaxed) - live),
            mib(LIVE.load(Ordering::Relaxed).saturating_sub(live))
        );
        group.bench_function(query, |b| {
            b.to_async(&rt).iter(|| async { catalog.search(request.clone()).await.unwrap() })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
