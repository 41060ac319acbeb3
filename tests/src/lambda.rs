//! What the Lambda functions are handed by API Gateway (HTTP API, payload
//! 2.0), for the tests that feed the functions' handler or bootstrap events
//! as they arrive on AWS.

use serde_json::{Value, json};

/// An HTTP API event as API Gateway builds it for a request to `domain`
/// (`None`: no `domainName`, as no API Gateway sends), with the client's
/// `headers` as given (a later one of a name replaces an earlier) and its
/// `body`: the text, and whether that text is base64.
pub fn http_event(
    domain: Option<&str>,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: Option<(String, bool)>,
) -> Value {
    let headers: serde_json::Map<String, Value> = headers.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    let (body, encoded) = body.map_or((Value::Null, false), |(body, encoded)| (json!(body), encoded));
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc123", "domainName": domain, "domainPrefix": "abc123",
            "http": { "method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9", "userAgent": "test" },
            "requestId": "req", "routeKey": "$default", "stage": "$default",
            "time": "29/Nov/2026:19:46:21 +0000", "timeEpoch": 1_795_895_181_000u64
        },
        "body": body,
        "isBase64Encoded": encoded
    })
}
