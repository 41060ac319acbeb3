//! Fuzz targets, run by proptest on stable Rust: generated inputs (random
//! bytes and structured-but-wrong documents) for every parser that takes
//! outside input. No input may panic, and each target checks what its answer
//! must be.
//!
//! In `cargo test` each target runs `PROPTEST_CASES` cases (default 64) and
//! `corpus_replays` replays every saved input under `tests/fuzz-corpus/`.
//! `scripts/fuzz SECONDS` runs each target for that long
//! (`EXECUTOR_FUZZ_SECONDS`); a failing input, shrunk, is saved to
//! `tests/fuzz-corpus/<target>/` so that it is replayed from then on.

mod fuzzing;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use executor_catalog::CatalogConfig;
use executor_catalog::openapi::load;
use executor_core::Execution;
use executor_service::Host;
use fuzzing::{EXECUTION, LINK, Raw};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::{Value, json};

const TARGETS: [&str; 5] = ["mcp_request", "openapi_spec", "toml_config", "approval_routes", "execution_record"];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus").join(target)
}

/// Run `check` on inputs from `strategy`: `PROPTEST_CASES` cases, repeated
/// with new seeds until `EXECUTOR_FUZZ_SECONDS` have passed when it is set.
/// A failure saves the shrunk input to the corpus and fails the test.
fn fuzz<S: Strategy<Value = Vec<u8>>>(target: &str, strategy: S, check: impl Fn(&[u8]) -> Result<(), String>) {
    let seconds = std::env::var("EXECUTOR_FUZZ_SECONDS").ok().map(|s| {
        s.parse::<u64>()
            .unwrap_or_else(|_| panic!("EXECUTOR_FUZZ_SECONDS must be a whole number of seconds, not {s:?}"))
    });
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let config = Config { failure_persistence: None, ..Config::default() };
    let (mut rounds, started) = (0u64, Instant::now());
    loop {
        rounds += 1;
        let mut runner = TestRunner::new(config.clone());
        match runner.run(&strategy, |input| check(&input).map_err(TestCaseError::fail)) {
            Ok(()) => {}
            Err(TestError::Fail(reason, input)) => {
                let saved = save(target, &input);
                panic!(
                    "{target}: {reason}\nthe input is saved as {} and replayed by `corpus_replays`",
                    saved.display()
                );
            }
            Err(TestError::Abort(reason)) => panic!("{target}: the generator gave up: {reason}"),
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    println!(
        "fuzz {target}: {} cases in {:.1} s, no failure",
        rounds * u64::from(config.cases),
        started.elapsed().as_secs_f64()
    );
}

fn save(target: &str, input: &[u8]) -> PathBuf {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    let name =
        format!("failure-{}", &executor_core::TokenHash::of_token(&String::from_utf8_lossy(input)).as_str()[..16]);
    let path = dir.join(name);
    std::fs::write(&path, input).unwrap();
    path
}

/// One runtime and host for all inputs of a target: what `executor serve`
/// would run them against.
struct Served {
    runtime: tokio::runtime::Runtime,
    host: Host,
    _dir: tempfile::TempDir,
}

impl Served {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let host = runtime.block_on(fuzzing::host(dir.path()));
        Self { runtime, host, _dir: dir }
    }

    /// Answer the raw request in `input` as the server would, placeholders
    /// replaced by a fresh paused execution, and check the answer.
    fn check(&self, input: &[u8]) -> Result<(), String> {
        self.runtime.block_on(async {
            let mut input = input.to_vec();
            let text = String::from_utf8_lossy(&input);
            if text.contains(EXECUTION) || text.contains(LINK) {
                let (id, link) = fuzzing::paused(&self.host).await;
                let replaced = text.replace(EXECUTION, &id).replace(LINK, &link);
                input = replaced.into_bytes();
            }
            let request = fuzzing::parse(&input)?;
            let path = request.uri().path().to_owned();
            let response = self.host.handle(request).await;
            let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            fuzzing::check_answer(&path, response.status().as_u16(), content_type, response.body())?;
            let html = content_type.is_some_and(|t| t.starts_with("text/html"));
            let json = content_type.is_some_and(|t| t.starts_with("application/json"));
            match path {
                p if p.starts_with("/approvals/") && !html => {
                    Err(format!("the approval page answered {content_type:?}"))
                }
                p if p.starts_with("/api/executions/") && !json => {
                    Err(format!("the approval API answered {content_type:?}"))
                }
                _ => Ok(()),
            }
        })
    }
}

fn raw_bytes(strategy: impl Strategy<Value = Raw>) -> impl Strategy<Value = Vec<u8>> {
    strategy.prop_map(|raw| raw.render())
}

/// (1) The MCP routes through `Host::handle`: never a server error, always
/// JSON-RPC on `/mcp`.
#[test]
fn mcp_request() {
    let served = Served::new();
    fuzz("mcp_request", raw_bytes(fuzzing::mcp_request()), |input| served.check(input));
}

/// (4) The approval page's query, cookie and form, and the approval API's
/// JSON, about a real paused execution or none.
#[test]
fn approval_routes() {
    let served = Served::new();
    fuzz("approval_routes", raw_bytes(fuzzing::approval_request()), |input| served.check(input));
}

fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer", "format": "int64"})),
        Just(json!({"$ref": "#/components/schemas/A"})),
        Just(json!({"$ref": "#/components/schemas/missing"})),
        Just(json!({"$ref": "https://elsewhere.example/s.json"})),
        Just(json!({"type": ["string", "null"], "enum": ["a", 1, null]})),
        Just(json!(true)),
        Just(json!({})),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map("[a-z$]{0,6}", inner.clone(), 0..4)
                .prop_map(|p| json!({"type": "object", "properties": p, "required": ["a", 1]})),
            inner.clone().prop_map(|i| json!({"type": "array", "items": i})),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| json!({"oneOf": v})),
            prop::collection::vec(inner, 0..3).prop_map(|v| json!({"allOf": v, "additionalProperties": v})),
        ]
    })
}

fn operation() -> impl Strategy<Value = Value> {
    let parameter = (
        "[a-zA-Z_.\\[\\]{} -]{0,8}",
        prop_oneof![Just("path"), Just("query"), Just("header"), Just("cookie"), Just("body"), Just("")],
        any::<bool>(),
        schema(),
    )
        .prop_map(|(name, location, required, schema)| {
            json!({"name": name, "in": location, "required": required, "schema": schema})
        });
    let parameters = prop_oneof![
        prop::collection::vec(parameter, 0..4).prop_map(Value::from),
        Just(json!([{"$ref": "#/components/parameters/P"}])),
        Just(json!("not a list")),
    ];
    (prop::option::of("\\PC{0,10}"), prop::option::of("\\PC{0,8}"), parameters, prop::option::of(schema()), schema())
        .prop_map(|(id, tag, parameters, body, response)| {
            let mut operation = json!({"parameters": parameters,
                "responses": {"200": {"content": {"application/json": {"schema": response}}}}});
            if let Some(id) = id {
                operation["operationId"] = json!(id);
            }
            if let Some(tag) = tag {
                operation["tags"] = json!([tag]);
            }
            if let Some(body) = body {
                operation["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": body}}});
            }
            operation
        })
}

/// OpenAPI documents: valid-looking ones with every part sometimes wrong
/// (versions, paths, parameters, `$ref`s that loop or lead nowhere), as JSON
/// or as YAML (a `---` line first: JSON is YAML), and arbitrary text.
fn spec() -> impl Strategy<Value = Vec<u8>> {
    let version = prop_oneof![
        Just(json!({"openapi": "3.0.3"})),
        Just(json!({"openapi": "3.1.0"})),
        Just(json!({"swagger": "2.0"})),
        Just(json!({"openapi": 3})),
        Just(json!({})),
    ];
    let method = prop_oneof![Just("get"), Just("post"), Just("delete"), Just("patch"), Just("trace"), Just("x")];
    let paths = prop::collection::vec(("/[a-z{}/._-]{0,16}", method, operation()), 0..5).prop_map(|items| {
        let mut paths = serde_json::Map::new();
        for (path, method, operation) in items {
            paths.entry(path).or_insert_with(|| json!({}))[method] = operation;
        }
        paths.insert("/ref".into(), json!({"$ref": "#/components/pathItems/loop"}));
        Value::Object(paths)
    });
    let components = schema().prop_map(|a| {
        json!({"schemas": {"A": a, "Loop": {"$ref": "#/components/schemas/Loop"}},
               "parameters": {"P": {"$ref": "#/components/parameters/P"}},
               "pathItems": {"loop": {"$ref": "#/components/pathItems/loop"}}})
    });
    let document = (version, paths, components, any::<bool>()).prop_map(|(mut doc, paths, components, yaml)| {
        doc["paths"] = paths;
        doc["components"] = components;
        let text = doc.to_string();
        if yaml { format!("---\n{text}").into_bytes() } else { text.into_bytes() }
    });
    prop_oneof![
        6 => document,
        1 => "\\PC{0,200}".prop_map(String::into_bytes),
        1 => "(openapi: 3.0.0\npaths:\n  /[a-z]{1,4}:\n    (get|post): *[{}\\[\\]:&*!|>a-z0-9 \n-]{0,60})"
            .prop_map(String::into_bytes),
    ]
}

/// (2) OpenAPI loading: a document becomes tools or a `SpecError`, never a
/// panic; each tool's TypeScript declaration renders and names the tool.
#[test]
fn openapi_spec() {
    fuzz("openapi_spec", spec(), check_spec);
}

fn check_spec(input: &[u8]) -> Result<(), String> {
    let Ok(tools) = load("shop", &String::from_utf8_lossy(input)) else { return Ok(()) };
    for tool in tools {
        // A document's tools carry their schemas: only an index file can fail to read.
        let typescript = tool.typescript().map_err(|e| e.to_string())?;
        if !typescript.contains(&format!("tools.{}", tool.path)) {
            return Err(format!("the declaration of {} does not name it: {typescript}", tool.path));
        }
    }
    Ok(())
}

/// Sources files: every field of the format, with values of the right and
/// the wrong kinds, and arbitrary text.
fn config() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        "\"[a-z:/._ -]{0,16}\"",
        Just("\"env:TOKEN\"".to_owned()),
        Just("\"arn:aws:secretsmanager:eu-west-1:123456789012:secret:x\"".to_owned()),
        Just("\"http://127.0.0.1:9/x\"".to_owned()),
        "-?[0-9]{1,20}",
        Just("true".to_owned()),
        Just("[]".to_owned()),
        Just("{ type = \"bearer\", token = \"env:T\" }".to_owned()),
        Just("{ type = \"api_key\", name = \"k\", in = \"query\", value = \"env:K\" }".to_owned()),
        Just("{ default = \"approve\", rules = [{ pattern = \"a.*\", action = \"run\" }] }".to_owned()),
        Just("[{ pattern = \"\", action = \"block\" }]".to_owned()),
    ];
    let key = prop_oneof![
        Just("namespace"),
        Just("kind"),
        Just("spec"),
        Just("url"),
        Just("base_url"),
        Just("auth"),
        Just("headers"),
        Just("policy"),
        Just("rules"),
        Just("allow_loopback"),
        Just("timeout_ms"),
        Just("max_response_bytes"),
        Just("unknown"),
    ];
    let table = prop_oneof![Just("[[sources]]"), Just("[outbound]"), Just("[sources.policy]"), Just("[x]")];
    let section = (table, prop::collection::vec((key, value), 0..6)).prop_map(|(table, fields)| {
        let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
        format!("{table}\n{}\n", fields.join("\n"))
    });
    prop_oneof![
        6 => prop::collection::vec(section, 0..4).prop_map(|s| s.concat().into_bytes()),
        1 => "\\PC{0,120}".prop_map(String::into_bytes),
    ]
}

/// (3) The TOML sources file: a `CatalogConfig` or a `ConfigError` whose
/// message names the file, never a panic.
#[test]
fn toml_config() {
    fuzz("toml_config", config(), check_config);
}

fn check_config(input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    match CatalogConfig::from_toml_str(&text, Path::new("/fuzz/executor.toml")) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("/fuzz/executor.toml") => Ok(()),
        Err(e) => Err(format!("the error does not name the file: {e}")),
    }
}

/// A stored execution as the stores write it (`serde_json` of `Execution`).
const STORED: &str = include_str!("fuzz-corpus/execution_record/paused");

/// Stored execution records: a real one with one value replaced at a random
/// place (wrong types, unknown states, huge numbers), cut short, or bytes.
fn record() -> impl Strategy<Value = Vec<u8>> {
    let stored: Value = serde_json::from_str(STORED).unwrap();
    let pointers = pointers(&stored);
    let replaced = (
        prop::sample::select(pointers),
        prop_oneof![
            Just(json!(null)),
            Just(json!("paused")),
            Just(json!(u64::MAX)),
            Just(json!(-1)),
            Just(json!(1e300)),
            Just(json!([])),
            Just(json!({})),
            "\\PC{0,12}".prop_map(Value::from),
        ],
    )
        .prop_map(move |(pointer, value)| {
            let mut record = stored.clone();
            if let Some(slot) = record.pointer_mut(&pointer) {
                *slot = value;
            }
            record.to_string().into_bytes()
        });
    prop_oneof![
        4 => replaced,
        1 => (0..STORED.len()).prop_map(|n| STORED.as_bytes()[..n].to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn pointers(value: &Value) -> Vec<String> {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        _ => Vec::new(),
    };
    let mut all = vec![String::new()];
    for (key, child) in children {
        all.extend(pointers(child).into_iter().map(|rest| format!("/{key}{rest}")));
    }
    all
}

/// (5) Decoding a stored execution (what both stores do with the bytes they
/// read): an `Execution` or an error, never a panic; what decodes encodes
/// back to the same execution.
#[test]
fn execution_record() {
    fuzz("execution_record", record(), check_record);
}

fn check_record(input: &[u8]) -> Result<(), String> {
    let Ok(execution) = serde_json::from_slice::<Execution>(input) else { return Ok(()) };
    let again: Execution = serde_json::to_vec(&execution)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| format!("a decoded execution does not round-trip: {e}"))?;
    if again != execution {
        return Err(format!("a decoded execution changes when stored again: {execution:?} became {again:?}"));
    }
    Ok(())
}

/// Every saved input of every target still passes its check.
#[test]
fn corpus_replays() {
    let served = Served::new();
    let mut replayed = 0;
    for target in TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} has no inputs", dir.display());
        for file in files {
            let input = std::fs::read(&file).unwrap();
            let result = match target {
                "mcp_request" | "approval_routes" => served.check(&input),
                "openapi_spec" => check_spec(&input),
                "toml_config" => check_config(&input),
                _ => check_record(&input),
            };
            if let Err(reason) = result {
                panic!("{}: {reason}", file.display());
            }
            replayed += 1;
        }
    }
    println!("replayed {replayed} saved inputs");
}
