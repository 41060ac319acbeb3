//! A counting proxy in front of moto: every AWS call a test's clients make goes
//! through it and is recorded before it is forwarded, so a test can assert
//! exactly which DynamoDB and Scheduler operations an operation of the service
//! made, and what they cost.
//!
//! DynamoDB names its operation in `X-Amz-Target` (`DynamoDB_20120810.GetItem`);
//! Scheduler is a REST API (`POST /schedules/{name}` is `CreateSchedule`).
//!
//! Capacity units are computed here from the items on the wire, by DynamoDB's
//! rules for on-demand tables, because moto reports a fixed `ConsumedCapacity`
//! whatever the size: an item's size is the sum of its attribute names' and
//! values' lengths; a write costs one unit per started KB, a strongly
//! consistent read one per started 4 KB (a query: of all items read together),
//! and inside a transaction twice that. A delete or update is charged by
//! DynamoDB at the stored item's size, which the request does not show: every
//! item the service deletes or updates (paused markers, keys, quota counters,
//! grants) is under 1 KB, so each counts as one unit.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::Value;

/// One AWS call, as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The operation: `GetItem`, `TransactWriteItems`, `CreateSchedule`, ...
    pub operation: String,
    /// Write capacity units (on-demand write request units) it consumed.
    pub write_units: u64,
    /// Read capacity units (on-demand read request units) it consumed.
    pub read_units: u64,
    /// The items it writes, in order.
    pub writes: Vec<Write>,
}

/// One item a write call puts, deletes or updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub action: &'static str,
    /// The item's sort key (`EXEC`, `CHUNK#0001`, `PAUSED#<id>`, ...).
    pub sk: String,
    /// The item's size by DynamoDB's rules (0 for deletes and updates).
    pub bytes: u64,
}

pub struct CountingProxy {
    /// Point an SDK's `AWS_ENDPOINT_URL` here.
    pub endpoint: String,
    calls: Arc<Mutex<Vec<Call>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[derive(Clone)]
struct Forward {
    moto: String,
    http: reqwest::Client,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl CountingProxy {
    /// A proxy on a free loopback port, forwarding to this test binary's moto.
    pub async fn start() -> Self {
        let moto = crate::moto().endpoint.clone();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let http = executor_http_client::builder().build().expect("an HTTP client for the proxy");
        let forward = Forward { moto, http, calls: calls.clone() };
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("a loopback port for the counting proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("the proxy's address"));
        let app = Router::new().fallback(forward_call).with_state(forward);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the counting proxy serves");
        });
        Self { endpoint, calls, server }
    }

    /// The SDK configuration that sends every call through this proxy.
    pub fn sdk_config(&self) -> executor_aws::SdkConfig {
        crate::sdk_config_at(&self.endpoint, "us-east-1")
    }

    pub fn dynamodb_client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config())
    }

    pub fn scheduler_client(&self) -> aws_sdk_scheduler::Client {
        aws_sdk_scheduler::Client::new(&self.sdk_config())
    }

    /// The calls recorded since the last `take`, and forget them.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

/// How many calls of each operation, e.g. `{"GetItem": 2, "PutItem": 1}`.
pub fn operations(calls: &[Call]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for call in calls {
        *counts.entry(call.operation.clone()).or_default() += 1;
    }
    counts
}

/// Total write and read units of `calls`.
pub fn units(calls: &[Call]) -> (u64, u64) {
    (calls.iter().map(|c| c.write_units).sum(), calls.iter().map(|c| c.read_units).sum())
}

async fn forward_call(State(forward): State<Forward>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.expect("the request body");
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let url = format!("{}{}", forward.moto, parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"));
    let mut outbound = forward.http.request(parts.method.clone(), url).body(body.clone());
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
            outbound = outbound.header(name, value);
        }
    }
    let answer = outbound.send().await.expect("moto answers the proxy");
    let status = answer.status();
    let headers = answer.headers().clone();
    let answer_body = answer.bytes().await.expect("moto's answer body");
    let call = match target {
        Some(target) => dynamodb_call(&target, &body, &answer_body),
        None => scheduler_call(parts.method.as_str(), parts.uri.path()),
    };
    if let Some(call) = call {
        forward.calls.lock().unwrap().push(call);
    }
    let mut response = Response::new(Body::from(answer_body));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if !matches!(name.as_str(), "content-length" | "connection" | "transfer-encoding") {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// A DynamoDB call (`target` is `DynamoDB_20120810.<Operation>`) and its units.
fn dynamodb_call(target: &str, request: &Bytes, answer: &Bytes) -> Option<Call> {
    let operation = target.rsplit('.').next()?.to_owned();
    let request: Value = serde_json::from_slice(request).unwrap_or_default();
    let answer: Value = serde_json::from_slice(answer).unwrap_or_default();
    let mut call = Call { operation, write_units: 0, read_units: 0, writes: Vec::new() };
    match call.operation.as_str() {
        "PutItem" => {
            let bytes = item_size(&request["Item"]);
            call.write_units = write_units(bytes);
            call.writes.push(Write { action: "put", sk: sort_key(&request["Item"]), bytes });
        }
        "DeleteItem" | "UpdateItem" => {
            call.write_units = 1;
            let action = if call.operation == "DeleteItem" { "delete" } else { "update" };
            call.writes.push(Write { action, sk: sort_key(&request["Key"]), bytes: 0 });
        }
        "TransactWriteItems" => {
            for entry in request["TransactItems"].as_array().into_iter().flatten() {
                let write = if let Some(put) = entry.get("Put") {
                    let bytes = item_size(&put["Item"]);
                    Write { action: "put", sk: sort_key(&put["Item"]), bytes }
                } else if let Some(delete) = entry.get("Delete") {
                    Write { action: "delete", sk: sort_key(&delete["Key"]), bytes: 0 }
                } else if let Some(update) = entry.get("Update") {
                    Write { action: "update", sk: sort_key(&update["Key"]), bytes: 0 }
                } else {
                    Write { action: "check", sk: sort_key(&entry["ConditionCheck"]["Key"]), bytes: 0 }
                };
                call.write_units += 2 * write_units(write.bytes);
                call.writes.push(write);
            }
        }
        "GetItem" => call.read_units = read_units(item_size(&answer["Item"])),
        "Query" | "Scan" => {
            let total = answer["Items"].as_array().into_iter().flatten().map(item_size).sum();
            call.read_units = read_units(total);
        }
        "TransactGetItems" => {
            for response in answer["Responses"].as_array().into_iter().flatten() {
                call.read_units += 2 * read_units(item_size(&response["Item"]));
            }
        }
        _ => {}
    }
    Some(call)
}

/// A Scheduler call, named by its REST route; the group calls tests make are left out.
fn scheduler_call(method: &str, path: &str) -> Option<Call> {
    if !path.starts_with("/schedules/") {
        return None;
    }
    let operation = match method {
        "POST" => "CreateSchedule",
        "PUT" => "UpdateSchedule",
        "DELETE" => "DeleteSchedule",
        _ => "GetSchedule",
    };
    Some(Call { operation: operation.into(), write_units: 0, read_units: 0, writes: Vec::new() })
}

fn sort_key(item: &Value) -> String {
    item["sk"]["S"].as_str().unwrap_or_default().to_owned()
}

/// One unit per started KB (at least one).
fn write_units(bytes: u64) -> u64 {
    bytes.div_ceil(1024).max(1)
}

/// One unit per started 4 KB of a strongly consistent read (at least one, even of nothing).
fn read_units(bytes: u64) -> u64 {
    bytes.div_ceil(4096).max(1)
}

/// An item's size by DynamoDB's rules: its attribute names plus their values.
fn item_size(item: &Value) -> u64 {
    item.as_object().into_iter().flatten().map(|(name, value)| name.len() as u64 + value_size(value)).sum()
}

/// The size of one attribute value in DynamoDB's JSON form (`{"S": "..."}` etc.).
fn value_size(value: &Value) -> u64 {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else { return 0 };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, |s| s.len() as u64),
        "N" => number_size(inner.as_str().unwrap_or_default()),
        "B" => base64_len(inner.as_str().unwrap_or_default()),
        "BOOL" | "NULL" => 1,
        "SS" => inner.as_array().into_iter().flatten().map(|s| s.as_str().map_or(0, |s| s.len() as u64)).sum(),
        "NS" => inner.as_array().into_iter().flatten().map(|s| number_size(s.as_str().unwrap_or_default())).sum(),
        "BS" => inner.as_array().into_iter().flatten().map(|s| base64_len(s.as_str().unwrap_or_default())).sum(),
        "L" => 3 + inner.as_array().into_iter().flatten().map(|v| 1 + value_size(v)).sum::<u64>(),
        "M" => {
            3 + inner.as_object().into_iter().flatten().map(|(k, v)| 1 + k.len() as u64 + value_size(v)).sum::<u64>()
        }
        _ => 0,
    }
}

/// About one byte per two significant digits, plus one.
fn number_size(number: &str) -> u64 {
    let digits = number.chars().filter(char::is_ascii_digit).count() as u64;
    digits.div_ceil(2) + 1
}

/// The decoded length of base64 text.
fn base64_len(text: &str) -> u64 {
    let padding = text.bytes().rev().take_while(|&b| b == b'=').count() as u64;
    (text.len() as u64 / 4 * 3).saturating_sub(padding)
}
