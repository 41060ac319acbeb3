//! The SDK's HTTP client, on the reqwest the rest of the workspace uses.
//!
//! The SDK's own default client is a second hyper/rustls stack with HTTP/2;
//! routing the SDK through reqwest (HTTP/1.1, the same rustls) keeps one HTTP
//! and TLS stack in the Lambda bootstraps. DynamoDB, Scheduler and Secrets
//! Manager requests are small JSON bodies held in memory, which is all this
//! connector sends.

use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;

/// An [`HttpClient`] for the SDK that sends through one shared reqwest client.
#[derive(Debug, Clone)]
pub struct ReqwestHttpClient {
    client: reqwest::Client,
}

impl ReqwestHttpClient {
    /// `connect_timeout` applies to every request; the SDK's per-operation
    /// read timeout (none unless configured) is applied per request.
    pub fn new(connect_timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = executor_http_client::builder().connect_timeout(connect_timeout).build()?;
        Ok(Self { client })
    }
}

impl HttpClient for ReqwestHttpClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector { client: self.client.clone(), read_timeout: settings.read_timeout() })
    }
}

#[derive(Debug)]
struct Connector {
    client: reqwest::Client,
    read_timeout: Option<Duration>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = self.client.clone();
        let read_timeout = self.read_timeout;
        HttpConnectorFuture::new(async move {
            let request = request.try_into_http1x().map_err(|e| ConnectorError::user(e.into()))?;
            let (parts, body) = request.into_parts();
            let Some(body) = body.bytes().map(bytes::Bytes::copy_from_slice) else {
                return Err(ConnectorError::user("streaming request bodies are not supported by this client".into()));
            };
            let mut builder = client.request(parts.method, parts.uri.to_string()).headers(parts.headers).body(body);
            if let Some(timeout) = read_timeout {
                builder = builder.timeout(timeout);
            }
            let response = builder.send().await.map_err(classify)?;
            let mut converted = http::Response::builder().status(response.status());
            if let Some(headers) = converted.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await.map_err(classify)?;
            let converted = converted.body(SdkBody::from(body)).map_err(|e| ConnectorError::other(e.into(), None))?;
            HttpResponse::try_from(converted).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// Timeouts and connection failures are transient (the SDK retries them).
fn classify(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_connect() || error.is_request() || error.is_body() {
        ConnectorError::io(error.into())
    } else {
        ConnectorError::other(error.into(), None)
    }
}
