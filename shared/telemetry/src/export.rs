//! Span export over OTLP (HTTP/protobuf) to `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (`/v1/traces` is appended; `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TIMEOUT` are honoured
//! as the OpenTelemetry specification says).
//!
//! The batch processor exports from a thread of its own, which has no tokio
//! runtime; its HTTP requests are handed to the runtime that set telemetry up,
//! on the reqwest client the rest of the workspace uses (no second HTTP stack).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{ExporterBuildError, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// Where spans go, from the environment (`lookup`, e.g. `std::env::var`):
/// `None` when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces variant) is unset,
/// and then nothing is built and nothing connects anywhere. Call it on a tokio runtime.
pub fn otlp_provider(
    service: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SdkTracerProvider>, ExporterBuildError> {
    let configured = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    if configured("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && configured("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
    {
        return Ok(None);
    }
    let timeout = configured("OTEL_EXPORTER_OTLP_TIMEOUT")
        .and_then(|ms| ms.trim().parse().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis);
    let client = executor_http_client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| ExporterBuildError::InternalFailure(format!("the OTLP HTTP client: {e}")))?;
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| ExporterBuildError::InternalFailure(format!("OTLP export needs a tokio runtime: {e}")))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(OnRuntime { client, runtime })
        .build()?;
    // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` win over our name.
    let mut resource = Resource::builder();
    if configured("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service.to_owned());
    }
    Ok(Some(SdkTracerProvider::builder().with_resource(resource.build()).with_batch_exporter(exporter).build()))
}

/// reqwest's async client, driven by a tokio runtime from any thread.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let (status, headers, body) = self
            .runtime
            .spawn(async move {
                let response = client.execute(request).await?;
                let (status, headers) = (response.status(), response.headers().clone());
                Ok::<_, reqwest::Error>((status, headers, response.bytes().await?))
            })
            .await??;
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
