//! Trace context: where a request's trace comes from (W3C `traceparent` and
//! `tracestate` headers, or the Lambda X-Ray trace header), and the W3C
//! `traceparent` of a span, which a pause stores so that the resume that
//! follows, in another request, another process or another day, can link to it.
//!
//! Everything here is a no-op returning `None` when no OpenTelemetry layer is
//! installed, except reading the request's own headers.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The span field that carries the W3C trace id into log lines.
pub const TRACE_ID_FIELD: &str = "trace_id";

/// The parent a request names with `traceparent` (and `tracestate`), if valid.
pub fn remote_parent(headers: &http::HeaderMap) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Make `span` (an entry point: a request, an alarm) continue the trace that
/// the request `headers` name, if any, and record the trace id in its
/// [`TRACE_ID_FIELD`] for the logs. Otherwise the span continues the current
/// OpenTelemetry context: in Lambda, the sampled X-Ray trace of the
/// invocation; elsewhere, a new trace. Call it before the span is entered.
pub fn adopt(span: &Span, headers: Option<&http::HeaderMap>) {
    if span.is_disabled() {
        return;
    }
    let inherited = headers.and_then(remote_parent).or_else(|| {
        let current = Context::current();
        current.span().span_context().is_valid().then_some(current)
    });
    let trace_id = match inherited {
        Some(cx) => {
            let id = cx.span().span_context().trace_id();
            // Fails only when no OpenTelemetry layer is installed: the logs still get the id.
            let _ = span.set_parent(cx);
            id
        }
        None => span.context().span().span_context().trace_id(),
    };
    if trace_id != TraceId::INVALID {
        span.record(TRACE_ID_FIELD, trace_id.to_string());
    }
}

/// The parent named by a Lambda X-Ray trace header
/// (`Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`),
/// only when it is sampled: Lambda passes an unsampled header when active
/// tracing is off, and inheriting that decision would drop every trace.
pub fn xray_parent(header: &str) -> Option<Context> {
    let mut root = None;
    let mut parent = None;
    let mut sampled = false;
    for part in header.split(';') {
        match part.trim().split_once('=') {
            Some(("Root", value)) => root = Some(value),
            Some(("Parent", value)) => parent = Some(value),
            Some(("Sampled", value)) => sampled = value == "1",
            _ => {}
        }
    }
    let root = root?.strip_prefix("1-")?;
    let (epoch, unique) = root.split_once('-')?;
    if epoch.len() != 8 || unique.len() != 24 {
        return None;
    }
    let trace_id = TraceId::from_hex(&format!("{epoch}{unique}")).ok()?;
    let span_id = SpanId::from_hex(parent?).ok()?;
    let context = SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, true, TraceState::default());
    (sampled && context.is_valid()).then(|| Context::new().with_remote_span_context(context))
}

/// The W3C `traceparent` of `span`, or `None` when it is not exported.
pub fn traceparent(span: &Span) -> Option<String> {
    let cx = span.context();
    let context = cx.span().span_context().clone();
    context
        .is_valid()
        .then(|| format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8()))
}

/// Link `span` to the span a stored `traceparent` names, with
/// `executor.link = relation` on the link (e.g. `paused_by`).
pub fn link(span: &Span, traceparent: &str, relation: &'static str) {
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    let context = cx.span().span_context().clone();
    if context.is_valid() {
        span.add_link_with_attributes(context, vec![KeyValue::new("executor.link", relation)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w3c_headers() {
        let mut headers = http::HeaderMap::new();
        assert!(remote_parent(&headers).is_none());
        headers.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".parse().unwrap());
        headers.insert("tracestate", "vendor=x".parse().unwrap());
        let cx = remote_parent(&headers).unwrap();
        let context = cx.span().span_context().clone();
        assert_eq!(context.trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(context.span_id().to_string(), "b7ad6b7169203331");
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(context.trace_state().get("vendor"), Some("x"));
        headers.insert("traceparent", "00-00000000000000000000000000000000-b7ad6b7169203331-01".parse().unwrap());
        assert!(remote_parent(&headers).is_none(), "an all-zero trace id is invalid");
    }

    #[test]
    fn xray_headers() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let cx = xray_parent(header).unwrap();
        let context = cx.span().span_context().clone();
        assert_eq!(context.trace_id().to_string(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(context.span_id().to_string(), "53995c3f42cd8ad8");
        assert!(context.is_remote() && context.is_sampled());
        for unusable in [
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",
            "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            "Root=1-5759e988-bd86;Parent=53995c3f42cd8ad8;Sampled=1",
            "Parent=53995c3f42cd8ad8;Sampled=1",
            "",
        ] {
            assert!(xray_parent(unusable).is_none(), "{unusable}");
        }
    }

    #[test]
    fn nothing_without_an_opentelemetry_layer() {
        let span = tracing::info_span!("x");
        assert_eq!(traceparent(&span), None);
        link(&span, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "paused_by");
    }
}
