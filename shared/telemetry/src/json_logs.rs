//! Logs as JSON lines, one per event, for CloudWatch Logs: the event's level,
//! target, message and fields, and the fields of every span it happened in
//! (the Lambda request id from the invocation span, `trace_id` from the
//! request span, execution and session ids where known), flattened so that
//! CloudWatch Logs Insights can filter on them directly.

use std::fmt;
use std::time::SystemTime;

use executor_core::Timestamp;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::Lines;

pub(crate) struct JsonLogs {
    lines: Lines,
}

impl JsonLogs {
    pub fn new(lines: Lines) -> Self {
        Self { lines }
    }
}

/// A span's fields as recorded so far, kept in the span's extensions.
struct SpanFields(Map<String, Value>);

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for JsonLogs {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = Map::new();
        attrs.record(&mut Fields(&mut fields));
        span.extensions_mut().insert(SpanFields(fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(fields) = span.extensions_mut().get_mut::<SpanFields>() {
            values.record(&mut Fields(&mut fields.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::from(Timestamp::from(SystemTime::now()).to_rfc3339()));
        line.insert("level".into(), Value::from(metadata.level().as_str()));
        line.insert("target".into(), Value::from(metadata.target()));
        if let Some(scope) = ctx.event_scope(event) {
            let mut innermost = None;
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    line.extend(fields.0.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                innermost = Some(span.name());
            }
            if let Some(name) = innermost {
                line.insert("span".into(), Value::from(name));
            }
        }
        event.record(&mut Fields(&mut line));
        (self.lines)(&Value::Object(line).to_string());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn one_line_per_event_with_the_fields_of_its_spans() {
        let captured = Arc::new(Mutex::new(Vec::new()));
        let sink = captured.clone();
        let lines: Lines = Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned()));
        let subscriber = tracing_subscriber::registry().with(JsonLogs::new(lines));
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("lambda.invocation", requestId = "req-1");
            let _outer = outer.enter();
            let inner = tracing::info_span!("mcp.request", trace_id = tracing::field::Empty, status = 0u64);
            inner.record("trace_id", "0af7651916cd43dd8448eb211c80319c");
            let _inner = inner.enter();
            tracing::info!(execution = "e1", "execution paused");
        });
        let lines = captured.lock().unwrap();
        assert_eq!(lines.len(), 1);
        let line: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(line["requestId"], "req-1");
        assert_eq!(line["trace_id"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(line["execution"], "e1");
        assert_eq!(line["message"], "execution paused");
        assert_eq!(line["span"], "mcp.request");
        assert_eq!(line["level"], "INFO");
    }
}
