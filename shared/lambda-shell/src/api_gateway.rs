//! API Gateway (HTTP API, payload 2.0) events in and answers out, converted
//! here rather than by `lambda_http`, which builds each request's URI from
//! the client's `X-Forwarded-Proto` and `Host` (and panics on one it cannot
//! parse) and resolves `..` and `%2e%2e` in the path. Here the path is the
//! one API Gateway routed on, byte for byte (`rawPath`: the stack's one stage
//! is `$default`, which adds no prefix); `Host` and `X-Forwarded-Proto`
//! are what API Gateway knows (`requestContext.domainName`, HTTPS), whatever
//! the client sent; and anything that makes no HTTP request is a 400.

use std::collections::BTreeMap;

use base64::Engine;
use bytes::Bytes;
use http::header::{COOKIE, HOST, SET_COOKIE};
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

/// The parts of an HTTP API event the host needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    #[serde(default)]
    raw_path: String,
    #[serde(default)]
    raw_query_string: String,
    #[serde(default)]
    cookies: Vec<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    request_context: RequestContext,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    is_base64_encoded: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestContext {
    #[serde(default)]
    domain_name: Option<String>,
    http: HttpContext,
}

#[derive(Deserialize)]
struct HttpContext {
    method: String,
}

/// Why an event makes no HTTP request: answered 400, like a server
/// answers a request it cannot parse.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadRequest {
    #[error("`{0}` is no HTTP method")]
    Method(String),
    #[error("the path and query are no valid request target; percent-encode them")]
    Target,
    #[error("the body is marked base64 but is not: {0}; send it as is, or encode it whole")]
    Body(base64::DecodeError),
}

impl Event {
    /// The request the host is given.
    pub(crate) fn into_request(self) -> Result<Request<Bytes>, BadRequest> {
        let method = Method::from_bytes(self.request_context.http.method.as_bytes())
            .map_err(|_| BadRequest::Method(self.request_context.http.method.clone()))?;
        let path = if self.raw_path.is_empty() { "/" } else { self.raw_path.as_str() };
        let target = match self.raw_query_string.as_str() {
            "" => path.to_owned(),
            query => format!("{path}?{query}"),
        };
        // Origin form only: `//host/...` or `http://...` would name an authority.
        if !target.starts_with('/') || target.starts_with("//") {
            return Err(BadRequest::Target);
        }
        let uri: http::Uri = target.parse().map_err(|_| BadRequest::Target)?;
        let body = match self.body {
            None => Bytes::new(),
            Some(body) if self.is_base64_encoded => {
                Bytes::from(base64::engine::general_purpose::STANDARD.decode(body).map_err(BadRequest::Body)?)
            }
            Some(body) => Bytes::from(body),
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            // A header HTTP cannot carry is dropped, as a proxy would.
            if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
                headers.append(name, value);
            }
        }
        if !self.cookies.is_empty()
            && let Ok(value) = HeaderValue::from_str(&self.cookies.join("; "))
        {
            headers.insert(COOKIE, value);
        }
        origin(&mut headers, self.request_context.domain_name.as_deref());
        let mut request = Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        Ok(request)
    }
}

/// Where the request came in, as API Gateway knows it: `Host` is its domain
/// name and the scheme HTTPS (plain HTTP only on a loopback domain: a local
/// stand-in). Links and metadata are built from these headers when
/// `EXECUTOR_PUBLIC_URL` is unset, so the client's own values are replaced.
fn origin(headers: &mut HeaderMap, domain: Option<&str>) {
    headers.remove(HOST);
    let authority = domain.filter(|d| !d.contains('@')).and_then(|d| d.parse::<Authority>().ok());
    let loopback = authority.as_ref().is_some_and(|a| {
        let host = a.host().trim_start_matches('[').trim_end_matches(']');
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    });
    if let Some(value) = authority.and_then(|a| HeaderValue::from_str(a.as_str()).ok()) {
        headers.insert(HOST, value);
    }
    let scheme = if loopback { "http" } else { "https" };
    headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static(scheme));
}

/// The answer API Gateway turns into the HTTP response: `Set-Cookie` in
/// `cookies`, other repeated headers joined with commas, a body that is not
/// UTF-8 in base64.
pub(crate) fn answer(response: Response<Bytes>) -> Value {
    let (parts, body) = response.into_parts();
    let mut headers = serde_json::Map::new();
    let mut cookies = Vec::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if name == SET_COOKIE {
            cookies.push(value);
            continue;
        }
        match headers.get_mut(name.as_str()) {
            Some(Value::String(joined)) => *joined = format!("{joined},{value}"),
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    let (body, encoded) = match String::from_utf8(body.to_vec()) {
        Ok(text) => (text, false),
        Err(binary) => (base64::engine::general_purpose::STANDARD.encode(binary.into_bytes()), true),
    };
    json!({
        "statusCode": parts.status.as_u16(),
        "headers": headers,
        "cookies": cookies,
        "body": body,
        "isBase64Encoded": encoded,
    })
}

/// A 400 for an event that makes no HTTP request.
pub(crate) fn bad_request(reason: &BadRequest) -> Value {
    let mut response = Response::new(Bytes::from(format!("bad request: {reason}")));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    answer(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(path: &str, query: &str, headers: Value, domain: Value) -> Event {
        serde_json::from_value(json!({
            "rawPath": path, "rawQueryString": query, "headers": headers,
            "requestContext": {"domainName": domain, "http": {"method": "POST"}},
            "body": "aGk=", "isBase64Encoded": true, "cookies": ["a=1", "b=2"],
        }))
        .unwrap()
    }

    #[test]
    fn the_path_is_taken_as_routed_and_the_origin_from_the_domain() {
        let headers = json!({"host": "evil.example", "x-forwarded-proto": "1", "x-a": "b"});
        let request = event("/api/%2e%2e/x/../y", "q=1", headers, json!("abc.execute-api.eu-west-1.amazonaws.com"))
            .into_request()
            .unwrap();
        assert_eq!(request.uri().to_string(), "/api/%2e%2e/x/../y?q=1");
        assert_eq!(request.headers()[HOST], "abc.execute-api.eu-west-1.amazonaws.com");
        assert_eq!(request.headers()["x-forwarded-proto"], "https");
        assert_eq!(request.headers()["x-a"], "b");
        assert_eq!(request.headers()[COOKIE], "a=1; b=2");
        assert_eq!(request.body().as_ref(), b"hi");
        let local = event("/", "", json!({}), json!("127.0.0.1:8080")).into_request().unwrap();
        assert_eq!(local.headers()["x-forwarded-proto"], "http");
        for domain in [json!(null), json!("a b"), json!("user@evil.example"), json!("bücher.example")] {
            let request = event("/", "", json!({"host": "evil.example"}), domain.clone()).into_request().unwrap();
            assert!(request.headers().get(HOST).is_none(), "{domain}");
            assert_eq!(request.headers()["x-forwarded-proto"], "https", "{domain}");
        }
    }

    #[test]
    fn what_makes_no_request_is_refused() {
        for (path, query) in [("http://evil.example/", ""), ("//evil.example/x", ""), ("/a b", ""), ("/", "a b")] {
            let refused = event(path, query, json!({}), json!(null)).into_request();
            assert!(matches!(refused, Err(BadRequest::Target)), "{path}?{query}");
        }
        let mut bad_body = event("/", "", json!({}), json!(null));
        bad_body.body = Some("not base64!".into());
        assert!(matches!(bad_body.into_request(), Err(BadRequest::Body(_))));
        let mut bad_method = event("/", "", json!({}), json!(null));
        bad_method.request_context.http.method = "PO ST".into();
        assert!(matches!(bad_method.into_request(), Err(BadRequest::Method(_))));
    }

    #[test]
    fn answers_carry_cookies_apart_and_binary_in_base64() {
        let mut response = Response::new(Bytes::from_static(&[0xff, 0x00]));
        response.headers_mut().append(SET_COOKIE, HeaderValue::from_static("a=1"));
        response.headers_mut().append(SET_COOKIE, HeaderValue::from_static("b=2"));
        response.headers_mut().append("vary", HeaderValue::from_static("x"));
        response.headers_mut().append("vary", HeaderValue::from_static("y"));
        let answer = answer(response);
        assert_eq!(answer["cookies"], json!(["a=1", "b=2"]));
        assert_eq!(answer["headers"], json!({"vary": "x,y"}));
        assert_eq!((answer["body"].as_str(), answer["isBase64Encoded"].as_bool()), (Some("/wA="), Some(true)));
        assert_eq!(answer["statusCode"], 200);
    }
}
