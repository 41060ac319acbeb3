//! Telemetry, set up in one place for the three Lambda functions and
//! `executor serve`: the other crates only emit `tracing` spans and events
//! (and [`count`] metrics); this crate decides where they go.
//!
//! - Logs: JSON lines on stdout in Lambda (one per event, with the request id
//!   and trace id), human-readable lines on stderr in `executor serve`. The
//!   filter is `RUST_LOG` (in Lambda, `AWS_LAMBDA_LOG_LEVEL` first), by
//!   default [`DEFAULT_LOG_FILTER`].
//! - Spans: exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is
//!   set, in batches from a background thread; [`Telemetry::flush`] pushes
//!   them out within a bound. Without an endpoint nothing is built.
//! - Metrics: CloudWatch EMF lines in Lambda, one per invocation ([`count`], [`add`], [`level`]).
//! - Trace context: [`adopt`], [`remote_parent`], [`xray_parent`],
//!   [`traceparent`] and [`link`].
//!
//! Only our crates' spans (targets `executor*`) are exported, and only at
//! `INFO` or above; dependencies (rmcp logs whole JSON-RPC messages at `TRACE`)
//! stay at `WARN` in the logs unless `RUST_LOG` says otherwise.
//!
//! Numbers on spans are recorded as `i64`, OpenTelemetry's integer type:
//! `tracing-opentelemetry` would export unsigned values as text.

mod context;
mod export;
mod json_logs;
#[cfg(feature = "lambda")]
pub mod lambda;
mod metrics;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::ExporterBuildError;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Dispatch;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};

pub use context::{TRACE_ID_FIELD, adopt, link, remote_parent, traceparent, xray_parent};
pub use export::otlp_provider;
pub use metrics::{Metric, TARGET as METRICS_TARGET, add, count, level};

use crate::json_logs::JsonLogs;
use crate::metrics::Emf;

/// Our crates at `INFO`, every other crate at `WARN`.
pub const DEFAULT_LOG_FILTER: &str = "warn,executor=info";

/// The longest [`Telemetry::flush`] waits for the span exporter by default
/// (`EXECUTOR_TELEMETRY_FLUSH_MS`).
pub const DEFAULT_FLUSH_WITHIN: Duration = Duration::from_millis(500);

/// The CloudWatch namespace of the metrics by default (`EXECUTOR_METRICS_NAMESPACE`).
pub const DEFAULT_METRICS_NAMESPACE: &str = "Executor";

/// Where log and metric lines go: called once per line, without the newline.
pub type Lines = Arc<dyn Fn(&str) + Send + Sync>;

/// Lines to standard output, whole (Lambda sends each to CloudWatch Logs).
pub fn stdout_lines() -> Lines {
    Arc::new(|line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
    })
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the log filter {filter:?} is not valid (see RUST_LOG): {reason}")]
    Filter { filter: String, reason: String },
    #[error("OTLP span export cannot start: {0}")]
    Export(#[from] ExporterBuildError),
    #[error("telemetry was already set up in this process")]
    AlreadySet,
    #[error("{name} must be {expected}, not {value:?}")]
    Setting { name: &'static str, expected: &'static str, value: String },
}

/// How a [`Telemetry::flush`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Every finished span was handed to the exporter and it answered (or there is no exporter).
    Done,
    /// The exporter failed; the spans are lost, the function carries on.
    Failed,
    /// The exporter did not answer within the bound; it goes on in the background.
    TimedOut,
}

/// The handle the hosts keep: flushes and shuts down what [`Builder`] set up.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    provider: Option<SdkTracerProvider>,
    metrics: Option<Metrics>,
    flush_within: Duration,
}

struct Metrics {
    emf: Emf,
    lines: Lines,
    namespace: String,
    service: &'static str,
}

impl Telemetry {
    /// A Lambda function's telemetry (`service`: `mcp`, `approval` or `alarm`),
    /// installed for the whole process: JSON logs and EMF metrics on stdout,
    /// spans over OTLP when an endpoint is configured.
    pub fn lambda(service: &'static str) -> Result<Self, TelemetryError> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let filter = match (env("AWS_LAMBDA_LOG_LEVEL"), env("RUST_LOG")) {
            // Lambda's log level applies to our crates; dependencies stay at WARN.
            (Some(level), _) => format!("warn,executor={}", level.to_ascii_lowercase().replace("fatal", "error")),
            (None, Some(filter)) => filter,
            (None, None) => DEFAULT_LOG_FILTER.to_owned(),
        };
        let namespace = env("EXECUTOR_METRICS_NAMESPACE").unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.into());
        let mut builder = Builder::new(service)
            .json_logs(&filter, stdout_lines())?
            .emf_metrics(&namespace, stdout_lines())
            .flush_within(flush_within(&env)?);
        if let Some(provider) = export::otlp_provider(&format!("executor-{service}"), &env)? {
            builder = builder.spans(provider);
        }
        builder.install()
    }

    /// `executor serve`'s telemetry, installed for the whole process:
    /// human-readable logs on stderr (in colour only on a terminal, and never
    /// with `NO_COLOR` set), spans over OTLP when an endpoint is configured.
    #[cfg(feature = "human")]
    pub fn local() -> Result<Self, TelemetryError> {
        use std::io::IsTerminal;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let filter = env("RUST_LOG").unwrap_or_else(|| DEFAULT_LOG_FILTER.to_owned());
        let colour = colour(std::io::stderr().is_terminal(), env("NO_COLOR").as_deref());
        let mut builder = Builder::new("serve").human_logs(&filter, colour)?.flush_within(flush_within(&env)?);
        if let Some(provider) = export::otlp_provider("executor", &env)? {
            builder = builder.spans(provider);
        }
        builder.install()
    }

    /// Write the metrics counted since the last flush (one EMF line), then
    /// wait for the span exporter, at most the flush bound. Lambda calls it
    /// after the answer has been handed back, so a slow exporter delays only
    /// the next invocation's start, and by no more than the bound.
    pub async fn flush(&self) -> Flushed {
        if let Some(metrics) = &self.inner.metrics {
            let counts = metrics.emf.take();
            if !counts.is_empty() {
                let now =
                    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
                let document = metrics::emf_document(&metrics.namespace, metrics.service, &counts, now);
                (metrics.lines)(&document.to_string());
            }
        }
        let Some(provider) = self.inner.provider.clone() else { return Flushed::Done };
        let bound = self.inner.flush_within;
        // `force_flush` blocks until the exporter answers: off the async workers.
        match tokio::time::timeout(bound, tokio::task::spawn_blocking(move || provider.force_flush())).await {
            Ok(Ok(Ok(()))) => Flushed::Done,
            Ok(Ok(Err(error))) => {
                tracing::warn!(%error, "span export failed; those spans are dropped");
                Flushed::Failed
            }
            Ok(Err(_)) => Flushed::Failed,
            Err(_) => {
                tracing::warn!(bound_ms = bound.as_millis() as u64, "span export is slow; not waiting for it");
                Flushed::TimedOut
            }
        }
    }

    /// Flush and stop the exporter (the end of `executor serve`), within the flush bound.
    pub async fn shutdown(&self) {
        self.flush().await;
        if let Some(provider) = self.inner.provider.clone() {
            let bound = self.inner.flush_within;
            let _ = tokio::time::timeout(bound, tokio::task::spawn_blocking(move || provider.shutdown())).await;
        }
    }
}

/// Colour codes only reach a terminal, and `NO_COLOR` (any non-empty value,
/// as no-color.org defines it) turns them off there too.
#[cfg(feature = "human")]
fn colour(terminal: bool, no_color: Option<&str>) -> bool {
    terminal && no_color.is_none_or(str::is_empty)
}

fn flush_within(env: &dyn Fn(&str) -> Option<String>) -> Result<Duration, TelemetryError> {
    let Some(value) = env("EXECUTOR_TELEMETRY_FLUSH_MS") else { return Ok(DEFAULT_FLUSH_WITHIN) };
    value.trim().parse().map(Duration::from_millis).map_err(|_| TelemetryError::Setting {
        name: "EXECUTOR_TELEMETRY_FLUSH_MS",
        expected: "a whole number of milliseconds",
        value,
    })
}

enum Logs {
    None,
    Json(Lines, Box<Targets>),
    /// The filter, and whether lines carry colour codes.
    #[cfg(feature = "human")]
    Human(Box<Targets>, bool),
}

/// Telemetry put together piece by piece: the hosts use [`Telemetry::lambda`]
/// and [`Telemetry::local`]; tests and benches build their own (an in-memory
/// exporter, captured lines) and install it where they need it.
pub struct Builder {
    service: &'static str,
    logs: Logs,
    provider: Option<SdkTracerProvider>,
    metrics: Option<(String, Lines)>,
    flush_within: Duration,
}

impl Builder {
    pub fn new(service: &'static str) -> Self {
        Self { service, logs: Logs::None, provider: None, metrics: None, flush_within: DEFAULT_FLUSH_WITHIN }
    }

    /// JSON log lines, filtered by `filter` (`warn,executor=debug`: see [`DEFAULT_LOG_FILTER`]).
    pub fn json_logs(mut self, filter: &str, lines: Lines) -> Result<Self, TelemetryError> {
        self.logs = Logs::Json(lines, Box::new(log_filter(filter)?));
        Ok(self)
    }

    /// Human-readable log lines on stderr, filtered by `filter` (as for
    /// [`Builder::json_logs`]), with ANSI colour codes when `colour`.
    #[cfg(feature = "human")]
    pub fn human_logs(mut self, filter: &str, colour: bool) -> Result<Self, TelemetryError> {
        self.logs = Logs::Human(Box::new(log_filter(filter)?), colour);
        Ok(self)
    }

    /// Export our spans through `provider`.
    pub fn spans(mut self, provider: SdkTracerProvider) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Count [`Metric`]s and write them as EMF lines under `namespace` on each flush.
    pub fn emf_metrics(mut self, namespace: &str, lines: Lines) -> Self {
        self.metrics = Some((namespace.to_owned(), lines));
        self
    }

    /// The longest a flush waits for the span exporter.
    pub fn flush_within(mut self, bound: Duration) -> Self {
        self.flush_within = bound;
        self
    }

    /// The subscriber, to install where the caller wants it, and its handle.
    pub fn build(self) -> (Dispatch, Telemetry) {
        let not_metrics =
            || Targets::new().with_default(LevelFilter::TRACE).with_target(METRICS_TARGET, LevelFilter::OFF);
        let (json, human) = match self.logs {
            Logs::None => (None, None),
            Logs::Json(lines, filter) => (Some(JsonLogs::new(lines).with_filter((*filter).and(not_metrics()))), None),
            #[cfg(feature = "human")]
            Logs::Human(filter, colour) => {
                let layer = tracing_subscriber::fmt::layer()
                    .compact()
                    .with_writer(std::io::stderr)
                    .with_target(false)
                    .with_ansi(colour);
                (None, Some(layer.with_filter((*filter).and(not_metrics()))))
            }
        };
        #[cfg(not(feature = "human"))]
        let human: Option<tracing_subscriber::layer::Identity> = human;
        let spans = self.provider.as_ref().map(|provider| {
            // Our spans and events, no dependency's, no metric events, and not the
            // Lambda invocation span (a log context: the request span is the root).
            let exported = Targets::new()
                .with_target("executor", LevelFilter::INFO)
                .with_target(METRICS_TARGET, LevelFilter::OFF)
                .with_target(LAMBDA_TARGET, LevelFilter::OFF);
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("executor"))
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_filter(exported)
        });
        let emf = self.metrics.as_ref().map(|_| Emf::default());
        let counting =
            emf.clone().map(|emf| emf.with_filter(Targets::new().with_target(METRICS_TARGET, LevelFilter::INFO)));
        let subscriber = tracing_subscriber::registry().with(json).with(human).with(spans).with(counting);
        let metrics = self.metrics.zip(emf).map(|((namespace, lines), emf)| Metrics {
            emf,
            lines,
            namespace,
            service: self.service,
        });
        let inner = Inner { provider: self.provider, metrics, flush_within: self.flush_within };
        (Dispatch::new(subscriber), Telemetry { inner: Arc::new(inner) })
    }

    /// Build and install as the process's subscriber.
    pub fn install(self) -> Result<Telemetry, TelemetryError> {
        let (dispatch, telemetry) = self.build();
        tracing::dispatcher::set_global_default(dispatch).map_err(|_| TelemetryError::AlreadySet)?;
        Ok(telemetry)
    }
}

/// The target of the Lambda invocation span.
pub(crate) const LAMBDA_TARGET: &str = "executor::lambda";

/// `RUST_LOG`'s common form: a default level and `target=level` directives,
/// comma-separated (span and field filters are not supported).
fn log_filter(filter: &str) -> Result<Targets, TelemetryError> {
    filter.parse().map_err(|e: tracing_subscriber::filter::ParseError| TelemetryError::Filter {
        filter: filter.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use tokio::sync::Semaphore;

    use super::*;

    /// An exporter that answers only once the test opens its gate.
    #[derive(Debug)]
    struct Gated(Arc<Semaphore>);

    impl SpanExporter for Gated {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            self.0
                .acquire()
                .await
                .map(|permit| permit.forget())
                .map_err(|e| opentelemetry_sdk::error::OTelSdkError::InternalFailure(e.to_string()))
        }
    }

    /// A collector that does not answer holds a flush no longer than its
    /// bound, and the metrics are written before the flush waits at all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_exporter_holds_a_flush_only_for_its_bound() {
        let gate = Arc::new(Semaphore::new(0));
        let provider = SdkTracerProvider::builder().with_batch_exporter(Gated(gate.clone())).build();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let (dispatch, telemetry) = Builder::new("mcp")
            .emf_metrics("Executor", Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned())))
            .spans(provider)
            .flush_within(Duration::from_millis(50))
            .build();
        tracing::dispatcher::with_default(&dispatch, || {
            let _span = tracing::info_span!("execution.run").entered();
            count(Metric::ExecutionsStarted);
        });
        assert_eq!(telemetry.flush().await, Flushed::TimedOut);
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("\"ExecutionsStarted\":1"), "{lines:?}");
        gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    #[test]
    fn bad_filters_are_refused() {
        assert!(Builder::new("mcp").json_logs("executor=loud", stdout_lines()).is_err());
        assert!(Builder::new("mcp").json_logs(DEFAULT_LOG_FILTER, stdout_lines()).is_ok());
    }

    #[cfg(feature = "human")]
    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let cases = [
            (true, None, true),
            (true, Some(""), true),
            (true, Some("1"), false),
            (false, None, false),
            (false, Some("1"), false),
        ];
        for (terminal, no_color, expected) in cases {
            assert_eq!(super::colour(terminal, no_color), expected, "{terminal} {no_color:?}");
        }
    }
}
