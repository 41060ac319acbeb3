//! The MCP function: API Gateway (HTTP API, payload 2.0) events in, the
//! framework-neutral host's answers out. Buffered: no streams are opened.

use bytes::Bytes;
use executor_service::Host;
use lambda_http::{Body, Request, Response};

/// Answer one API Gateway request.
pub async fn handle(host: &Host, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        // Any other body kind the runtime adds later is refused, not guessed at.
        _ => return host.body_too_large().map(|b| Body::Text(String::from_utf8_lossy(&b).into_owned())),
    };
    let response = host.handle(http::Request::from_parts(parts, body)).await;
    response.map(|bytes| match String::from_utf8(bytes.to_vec()) {
        Ok(text) if text.is_empty() => Body::Empty,
        Ok(text) => Body::Text(text),
        Err(binary) => Body::Binary(binary.into_bytes()),
    })
}
