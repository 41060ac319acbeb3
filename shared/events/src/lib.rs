//! Where lifecycle events go (docs/events.md): the [`EventSink`] port and its
//! adapters, an EventBridge bus (`PutEvents`) and a webhook (an HTTP POST of
//! each event's JSON). The outbox in the service decides when to send; a
//! sink only sends one event and says whether it arrived.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::error::DisplayErrorContext;
use aws_sdk_eventbridge::primitives::DateTime;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use executor_core::{EVENT_SOURCE, Event};

/// How long one delivery may take before it counts as failed (and is retried later).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error(
        "the event webhook {url} answered {status}; it must answer 2xx once it has the event (the event is retried)"
    )]
    WebhookRefused { url: String, status: u16 },
    #[error("the event webhook {url} could not be reached ({detail}); the event is retried")]
    WebhookUnreachable { url: String, detail: String },
    #[error(
        "EventBridge refused the event on bus {bus} ({detail}); check that the bus exists and that this function \
         may call events:PutEvents on it (the event is retried)"
    )]
    EventBus { bus: String, detail: String },
    #[error("could not set up the EventBridge client: {0}")]
    Setup(String),
}

/// Sends one event; `Ok` once the other side has it.
#[async_trait]
pub trait EventSink: fmt::Debug + Send + Sync {
    async fn send(&self, event: &Event) -> Result<(), SinkError>;
}

/// Where events go, as configured (`EXECUTOR_EVENT_BUS`, `EXECUTOR_EVENT_WEBHOOK`):
/// either, both, or neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSettings {
    /// An EventBridge bus name or ARN.
    pub bus: Option<String>,
    /// An https URL, or http on a loopback address.
    pub webhook: Option<String>,
}

impl EventSettings {
    pub fn is_enabled(&self) -> bool {
        self.bus.is_some() || self.webhook.is_some()
    }

    /// The sinks these settings name (`None` when there are none). The bus
    /// uses the process's AWS configuration.
    pub async fn connect(&self) -> Result<Option<Arc<dyn EventSink>>, SinkError> {
        let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
        if let Some(bus) = &self.bus {
            let config = executor_aws::sdk_config().await.map_err(|e| SinkError::Setup(e.to_string()))?;
            sinks.push(Arc::new(EventBus::new(Client::new(config), bus.clone())));
        }
        if let Some(url) = &self.webhook {
            sinks.push(Arc::new(Webhook::new(url.clone())?));
        }
        Ok(match sinks.len() {
            0 => None,
            1 => sinks.pop(),
            _ => Some(Arc::new(Both(sinks))),
        })
    }
}

/// What an event bus setting must be.
pub const BUS_EXPECTED: &str = "an EventBridge event bus name (letters, digits, '.', '-', '_') or its ARN";
/// What a webhook setting must be.
pub const WEBHOOK_EXPECTED: &str = "an https:// URL, or http:// on a loopback address (127.0.0.1, ::1, localhost)";

/// `value` as a bus name or ARN, or `None` when it is not one.
pub fn parse_bus(value: &str) -> Option<String> {
    let value = value.trim();
    let name_ok = |name: &str| {
        !name.is_empty()
            && name.len() <= 256
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    let ok = match value.strip_prefix("arn:") {
        Some(rest) => rest.split(':').count() == 5 && rest.rsplit_once(":event-bus/").is_some_and(|(_, n)| name_ok(n)),
        None => name_ok(value),
    };
    ok.then(|| value.to_owned())
}

/// `value` as a webhook URL, or `None` when it is not one: events carry
/// approval links, so they travel encrypted unless they stay on this machine.
pub fn parse_webhook(value: &str) -> Option<String> {
    let value = value.trim();
    let uri: http::Uri = value.parse().ok()?;
    let host = uri.host()?;
    if host.is_empty() || uri.authority()?.as_str().contains('@') {
        return None;
    }
    match uri.scheme_str()? {
        "https" => Some(value.to_owned()),
        "http" if is_loopback(host) => Some(value.to_owned()),
        _ => None,
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Every event to each of several sinks; it counts as sent when all have it.
#[derive(Debug)]
struct Both(Vec<Arc<dyn EventSink>>);

#[async_trait]
impl EventSink for Both {
    async fn send(&self, event: &Event) -> Result<(), SinkError> {
        for sink in &self.0 {
            sink.send(event).await?;
        }
        Ok(())
    }
}

/// `PutEvents` to one bus: source `executor`, the event's type as
/// `detail-type`, its detail as `detail`.
#[derive(Debug, Clone)]
pub struct EventBus {
    client: Client,
    bus: String,
}

impl EventBus {
    pub fn new(client: Client, bus: String) -> Self {
        Self { client, bus }
    }
}

#[async_trait]
impl EventSink for EventBus {
    async fn send(&self, event: &Event) -> Result<(), SinkError> {
        let refused = |detail: String| SinkError::EventBus { bus: self.bus.clone(), detail };
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(EVENT_SOURCE)
            .detail_type(event.detail_type.as_str())
            .detail(event.detail.to_string())
            .time(DateTime::from_millis(i64::try_from(event.time.as_millis()).unwrap_or(i64::MAX)))
            .build();
        let sent = self.client.put_events().entries(entry).send();
        let out = tokio::time::timeout(SEND_TIMEOUT, sent)
            .await
            .map_err(|_| refused(format!("no answer within {} s", SEND_TIMEOUT.as_secs())))?
            .map_err(|e| refused(DisplayErrorContext(&e).to_string()))?;
        if out.failed_entry_count() > 0 {
            let entry = out.entries().first();
            let code = entry.and_then(|e| e.error_code()).unwrap_or("unknown");
            let message = entry.and_then(|e| e.error_message()).unwrap_or("");
            return Err(refused(format!("{code}: {message}")));
        }
        Ok(())
    }
}

/// A POST of the event's JSON (`{id, source, "detail-type", time, detail}`)
/// to a URL; any 2xx answer means it arrived. Redirects are not followed.
#[derive(Debug, Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: String,
}

impl Webhook {
    pub fn new(url: String) -> Result<Self, SinkError> {
        let mut builder =
            executor_http_client::builder().timeout(SEND_TIMEOUT).redirect(reqwest::redirect::Policy::none());
        // A receiver on this machine is reached directly, never through a proxy.
        if url.parse::<http::Uri>().ok().and_then(|u| u.host().map(is_loopback)).unwrap_or(false) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| SinkError::Setup(e.to_string()))?;
        Ok(Self { client, url })
    }
}

#[async_trait]
impl EventSink for Webhook {
    async fn send(&self, event: &Event) -> Result<(), SinkError> {
        let url = self.url.clone();
        let response = self
            .client
            .post(&self.url)
            .json(&event.envelope())
            .send()
            .await
            .map_err(|e| SinkError::WebhookUnreachable { url: url.clone(), detail: e.without_url().to_string() })?;
        if !response.status().is_success() {
            return Err(SinkError::WebhookRefused { url, status: response.status().as_u16() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_are_https_or_loopback_http() {
        let cases = [
            ("https://hooks.example.com/executor", true),
            ("http://127.0.0.1:9000/events", true),
            ("http://[::1]:9000/", true),
            ("http://localhost:9000/", true),
            ("http://hooks.example.com/", false),
            ("https://user:pw@hooks.example.com/", false),
            ("ftp://127.0.0.1/", false),
            ("hooks.example.com", false),
            ("", false),
        ];
        for (value, ok) in cases {
            assert_eq!(parse_webhook(value).is_some(), ok, "{value:?}");
        }
    }

    #[test]
    fn buses_are_names_or_arns() {
        let cases = [
            ("default", true),
            ("executor-events.prod_1", true),
            ("arn:aws:events:eu-west-1:123456789012:event-bus/executor", true),
            ("arn:aws:events:eu-west-1:123456789012:rule/executor", false),
            ("bus name", false),
            ("", false),
        ];
        for (value, ok) in cases {
            assert_eq!(parse_bus(value).is_some(), ok, "{value:?}");
        }
    }
}
