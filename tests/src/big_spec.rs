//! Generated OpenAPI documents of any size, for the catalog index's tests and
//! the cold-start bench: no download, the same bytes for the same seed.
//!
//! Shaped like big real APIs, whose bytes are mostly schemas (about 3.7 KB per
//! operation here): resources with five operations each (list, create, get,
//! update, delete), tags (or not), operation ids (or not, and sometimes the
//! same twice), path-item and operation parameters in path, query and header,
//! JSON bodies, and `$ref`s to shared, nested and self-referencing schemas
//! with long descriptions.

use serde_json::{Map, Value, json};

const WORDS: [&str; 24] = [
    "account",
    "invoice",
    "customer",
    "payment",
    "order",
    "shipment",
    "ticket",
    "project",
    "member",
    "report",
    "webhook",
    "token",
    "repository",
    "issue",
    "comment",
    "label",
    "release",
    "deployment",
    "secret",
    "schedule",
    "metric",
    "alert",
    "dashboard",
    "audit",
];

/// splitmix64: small, and enough to vary the shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len() as u64) as usize]
    }

    fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// A document of at least `bytes` bytes of JSON (a resource more at most).
pub fn openapi_json(bytes: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "Audit".into(),
        json!({"type": "object", "description": "Who changed what, and when.", "properties": {
            "by": {"type": "string"}, "at": {"type": "string", "format": "date-time"},
            "previous": {"$ref": "#/components/schemas/Audit"}}}),
    );
    let mut size = 0;
    let mut i = 0;
    while size < bytes {
        let resource = format!("{}{i}", rng.word());
        let (item, schema) = resource_paths(&mut rng, &resource, i);
        let (path_one, path_all) = (format!("/v1/{resource}/{{id}}"), format!("/v1/{resource}"));
        let (one, all) = item;
        size += one.to_string().len() + all.to_string().len() + schema.to_string().len();
        paths.insert(path_all, all);
        paths.insert(path_one, one);
        schemas.insert(format!("R{i}"), schema);
        i += 1;
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "generated", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": {"Trace": {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}},
        },
    })
    .to_string()
}

/// The resource's two path items (one, all) and its schema.
fn resource_paths(rng: &mut Rng, resource: &str, i: usize) -> ((Value, Value), Value) {
    let reference = json!({"$ref": format!("#/components/schemas/R{i}")});
    let ok = |schema: Value| json!({"200": {"description": "ok", "content": {"application/json": {"schema": schema}}}});
    let tags = if rng.chance(80) { json!([rng.word()]) } else { json!([]) };
    let operation = |rng: &mut Rng, verb: &str, body: Option<bool>, response: Value| {
        let mut op = Map::new();
        op.insert("tags".into(), tags.clone());
        match rng.below(10) {
            0 => {} // no operationId: named after method and path
            // Sometimes an id another operation has too: named `_2`.
            1 => {
                op.insert("operationId".into(), json!(format!("{verb}Shared{}", i / 2)));
            }
            _ => {
                op.insert("operationId".into(), json!(format!("{verb}{resource}")));
            }
        }
        op.insert("summary".into(), json!(format!("{verb} {}", rng.sentence(4))));
        let words = 20 + rng.below(30) as usize;
        op.insert("description".into(), json!(rng.sentence(words)));
        let mut parameters = Vec::new();
        if rng.chance(30) {
            parameters.push(json!({"$ref": "#/components/parameters/Trace"}));
        }
        if verb == "list" {
            parameters.push(json!({"name": "limit", "in": "query", "schema": {"type": "integer"}}));
            parameters.push(
                json!({"name": "labels", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}),
            );
        }
        if rng.chance(10) {
            // The same name as the path parameter, in the query: argument `query_id`.
            parameters.push(json!({"name": "id", "in": "query", "schema": {"type": "string"}}));
        }
        op.insert("parameters".into(), Value::Array(parameters));
        if let Some(required) = body {
            op.insert(
                "requestBody".into(),
                json!({"required": required, "content": {"application/json": {"schema": reference.clone()}}}),
            );
        }
        op.insert("responses".into(), response);
        Value::Object(op)
    };
    let all = json!({
        "get": operation(rng, "list", None, ok(json!({"type": "array", "items": reference.clone()}))),
        "post": operation(rng, "create", Some(true), ok(reference.clone())),
    });
    let update_body = rng.chance(50);
    let mut one = json!({
        "get": operation(rng, "get", None, ok(reference.clone())),
        "patch": operation(rng, "update", Some(update_body), ok(reference.clone())),
        "delete": operation(rng, "delete", None, json!({"204": {"description": "gone"}})),
    });
    one["parameters"] = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"},
                                "description": "The resource's id"}]);
    let mut properties = Map::new();
    // About 100 properties: real big documents hold several KB per operation, mostly schemas.
    for p in 0..(60 + rng.below(100)) {
        let words = 8 + rng.below(16) as usize;
        let description = rng.sentence(words);
        let property = match rng.below(6) {
            0 => json!({"type": "integer", "description": description}),
            1 => json!({"type": "array", "items": {"type": "string"}, "description": description}),
            2 => json!({"$ref": format!("#/components/schemas/R{}", rng.below(i as u64 + 1))}),
            3 => json!({"$ref": "#/components/schemas/Audit"}),
            4 => json!({"enum": ["active", "archived", "pending"], "description": description}),
            _ => json!({"type": "string", "description": description}),
        };
        properties.insert(format!("{}_{p}", rng.word()), property);
    }
    let schema =
        json!({"type": "object", "required": ["id"], "description": rng.sentence(12), "properties": properties});
    ((one, all), schema)
}
