//! Counters an operator can alarm on, written as CloudWatch Embedded Metric
//! Format (EMF) lines: CloudWatch Logs turns them into metrics, so counting
//! costs no API call.
//!
//! Code calls [`count`] or [`add`], which emit a `tracing` event on the
//! [`TARGET`] target. In Lambda the [`Emf`] layer adds the events up and
//! [`crate::Telemetry::flush`] writes one EMF document per invocation (only
//! the metrics that moved). Without that layer nothing listens to the target,
//! so `executor serve` and tests pay only `tracing`'s disabled-callsite check.
//!
//! A few metrics are levels (how many there are now, not how often something
//! happened), set with [`level`]: written on every flush while above zero,
//! and once more when they fall to zero, so an alarm sees a level that
//! persists without each invocation having to measure it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The `tracing` target of metric events; no log or span layer shows them.
pub const TARGET: &str = "executor::metrics";

/// What is counted. The names are the CloudWatch metric names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// `execute` ran new code.
    ExecutionsStarted,
    /// An execution returned a result (first run or after an approval).
    ExecutionsCompleted,
    /// An execution ended with an error, a declined approval included.
    ExecutionsFailed,
    /// An execution paused for approval (each pause counts).
    ExecutionsPaused,
    /// A pause was claimed with `accept`.
    ApprovalsAccepted,
    /// A pause was claimed with `decline` or `cancel`.
    ApprovalsDeclined,
    /// A paused execution expired without a decision (its approval window closed).
    ApprovalsExpired,
    /// Journaled tool calls answered from the journal by resumes.
    ReplaySteps,
    /// Alarm decisions (`executor_core::alarm::decide_session_alarm`), by kind.
    AlarmsIgnored,
    AlarmsRescheduled,
    AlarmsLeaseExtended,
    AlarmsDestroyed,
    SessionsCreated,
    /// Ended by their alarm or by `DELETE /mcp`.
    SessionsDestroyed,
    /// A session's activity could not be written (the store failed): its alarm
    /// may see it idle for longer than it was.
    ActivityWriteFailures,
    /// `execute` or `resume` refused with `busy`: the host's cap on concurrent runs was reached.
    ExecutionsBusy,
    /// An execution nothing ran any more (its runner stopped) was settled as `interrupted`;
    /// counted in `ExecutionsFailed` too.
    ExecutionsInterrupted,
    /// A request refused with `quota_exceeded`: an owner was over one of their quotas.
    QuotaRejections,
    /// A level ([`level`]): the configured sources this process has not connected (each is retried).
    SourcesUnavailable,
    /// The history of an execution that ended within its answer could not be
    /// written (the store failed): the audit trail misses it.
    HistoryNotWritten,
}

impl Metric {
    pub const ALL: [Metric; 20] = [
        Metric::ExecutionsStarted,
        Metric::ExecutionsCompleted,
        Metric::ExecutionsFailed,
        Metric::ExecutionsPaused,
        Metric::ApprovalsAccepted,
        Metric::ApprovalsDeclined,
        Metric::ApprovalsExpired,
        Metric::ReplaySteps,
        Metric::AlarmsIgnored,
        Metric::AlarmsRescheduled,
        Metric::AlarmsLeaseExtended,
        Metric::AlarmsDestroyed,
        Metric::SessionsCreated,
        Metric::SessionsDestroyed,
        Metric::ActivityWriteFailures,
        Metric::ExecutionsBusy,
        Metric::ExecutionsInterrupted,
        Metric::QuotaRejections,
        Metric::SourcesUnavailable,
        Metric::HistoryNotWritten,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::ExecutionsStarted => "ExecutionsStarted",
            Metric::ExecutionsCompleted => "ExecutionsCompleted",
            Metric::ExecutionsFailed => "ExecutionsFailed",
            Metric::ExecutionsPaused => "ExecutionsPaused",
            Metric::ApprovalsAccepted => "ApprovalsAccepted",
            Metric::ApprovalsDeclined => "ApprovalsDeclined",
            Metric::ApprovalsExpired => "ApprovalsExpired",
            Metric::ReplaySteps => "ReplaySteps",
            Metric::AlarmsIgnored => "AlarmsIgnored",
            Metric::AlarmsRescheduled => "AlarmsRescheduled",
            Metric::AlarmsLeaseExtended => "AlarmsLeaseExtended",
            Metric::AlarmsDestroyed => "AlarmsDestroyed",
            Metric::SessionsCreated => "SessionsCreated",
            Metric::SessionsDestroyed => "SessionsDestroyed",
            Metric::ActivityWriteFailures => "ActivityWriteFailures",
            Metric::ExecutionsBusy => "ExecutionsBusy",
            Metric::ExecutionsInterrupted => "ExecutionsInterrupted",
            Metric::QuotaRejections => "QuotaRejections",
            Metric::SourcesUnavailable => "SourcesUnavailable",
            Metric::HistoryNotWritten => "HistoryNotWritten",
        }
    }

    /// Set with [`level`] rather than counted.
    pub fn is_level(self) -> bool {
        matches!(self, Metric::SourcesUnavailable)
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|m| *m == self).unwrap_or_default()
    }
}

/// Count one occurrence.
pub fn count(metric: Metric) {
    add(metric, 1);
}

/// Count `n` occurrences.
pub fn add(metric: Metric, n: u64) {
    tracing::event!(target: TARGET, tracing::Level::INFO, metric = metric.name(), value = n);
}

/// Set a level metric to `value` (see the module's documentation).
pub fn level(metric: Metric, value: u64) {
    tracing::event!(target: TARGET, tracing::Level::INFO, metric = metric.name(), level = value);
}

/// Sums of the metric events seen since the last [`Emf::take`], and the levels.
#[derive(Clone, Default)]
pub(crate) struct Emf {
    counts: Arc<[AtomicU64; Metric::ALL.len()]>,
    levels: Arc<[AtomicU64; Metric::ALL.len()]>,
    /// A level set since the last take: written even when it is zero.
    changed: Arc<[AtomicBool; Metric::ALL.len()]>,
}

impl Emf {
    /// What was counted since the last call (then reset), and each level
    /// above zero or changed since then.
    pub fn take(&self) -> Vec<(Metric, u64)> {
        Metric::ALL
            .iter()
            .filter_map(|m| {
                let at = m.index();
                if m.is_level() {
                    let value = self.levels[at].load(Ordering::Relaxed);
                    let changed = self.changed[at].swap(false, Ordering::Relaxed);
                    return (value > 0 || changed).then_some((*m, value));
                }
                let n = self.counts[at].swap(0, Ordering::Relaxed);
                (n > 0).then_some((*m, n))
            })
            .collect()
    }
}

impl<S: Subscriber> Layer<S> for Emf {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        #[derive(Default)]
        struct Read {
            metric: Option<Metric>,
            value: u64,
            level: Option<u64>,
        }
        impl Visit for Read {
            fn record_str(&mut self, field: &Field, value: &str) {
                if field.name() == "metric" {
                    self.metric = Metric::ALL.into_iter().find(|m| m.name() == value);
                }
            }
            fn record_u64(&mut self, field: &Field, value: u64) {
                match field.name() {
                    "value" => self.value = value,
                    "level" => self.level = Some(value),
                    _ => {}
                }
            }
            fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
        }
        let mut read = Read::default();
        event.record(&mut read);
        match (read.metric, read.level) {
            (Some(metric), Some(level)) if metric.is_level() => {
                self.levels[metric.index()].store(level, Ordering::Relaxed);
                self.changed[metric.index()].store(true, Ordering::Relaxed);
            }
            (Some(metric), None) if !metric.is_level() => {
                self.counts[metric.index()].fetch_add(read.value, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// One EMF document: `counts` under `namespace`, with the one dimension
/// `Service` (mcp, approval, alarm), stamped `timestamp_ms`.
pub(crate) fn emf_document(namespace: &str, service: &str, counts: &[(Metric, u64)], timestamp_ms: u64) -> Value {
    let definitions: Vec<Value> = counts.iter().map(|(m, _)| json!({ "Name": m.name(), "Unit": "Count" })).collect();
    let mut document = Map::new();
    document.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{ "Namespace": namespace, "Dimensions": [["Service"]], "Metrics": definitions }],
        }),
    );
    document.insert("Service".into(), json!(service));
    for (metric, n) in counts {
        document.insert(metric.name().into(), json!(n));
    }
    Value::Object(document)
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn events_are_summed_per_metric_and_taken_once() {
        let emf = Emf::default();
        let subscriber = tracing_subscriber::registry().with(emf.clone());
        tracing::subscriber::with_default(subscriber, || {
            count(Metric::ExecutionsStarted);
            count(Metric::ExecutionsStarted);
            add(Metric::ReplaySteps, 7);
            add(Metric::ReplaySteps, 0);
        });
        assert_eq!(emf.take(), [(Metric::ExecutionsStarted, 2), (Metric::ReplaySteps, 7)]);
        assert_eq!(emf.take(), []);
    }

    #[test]
    fn a_level_is_written_while_above_zero_and_once_at_zero() {
        let emf = Emf::default();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(emf.clone()));
        let set = |n| tracing::dispatcher::with_default(&dispatch, || level(Metric::SourcesUnavailable, n));
        assert_eq!(emf.take(), [], "never set: not written");
        set(2);
        set(1);
        assert_eq!(emf.take(), [(Metric::SourcesUnavailable, 1)], "the last value, not a sum");
        assert_eq!(emf.take(), [(Metric::SourcesUnavailable, 1)], "still above zero: written again");
        set(0);
        assert_eq!(emf.take(), [(Metric::SourcesUnavailable, 0)], "the fall to zero is written once");
        assert_eq!(emf.take(), []);
        // Counted as a count, a level is ignored (and the other way round).
        tracing::dispatcher::with_default(&dispatch, || {
            count(Metric::SourcesUnavailable);
            tracing::event!(target: TARGET, tracing::Level::INFO, metric = "ReplaySteps", level = 3u64);
        });
        assert_eq!(emf.take(), []);
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in Metric::ALL.iter().enumerate() {
            assert_eq!(a.index(), i);
            assert!(Metric::ALL[i + 1..].iter().all(|b| a.name() != b.name()), "{a:?}");
        }
    }

    /// The shape CloudWatch's EMF specification asks for: the metric values
    /// at the root, their definitions and dimension keys under `_aws`.
    #[test]
    fn emf_document_shape() {
        let counts = [(Metric::ExecutionsPaused, 1), (Metric::ApprovalsAccepted, 2)];
        let document = emf_document("Executor", "mcp", &counts, 1_700_000_000_123);
        assert_eq!(
            document,
            json!({
                "_aws": {
                    "Timestamp": 1_700_000_000_123u64,
                    "CloudWatchMetrics": [{
                        "Namespace": "Executor",
                        "Dimensions": [["Service"]],
                        "Metrics": [
                            { "Name": "ExecutionsPaused", "Unit": "Count" },
                            { "Name": "ApprovalsAccepted", "Unit": "Count" },
                        ],
                    }],
                },
                "Service": "mcp",
                "ExecutionsPaused": 1,
                "ApprovalsAccepted": 2,
            })
        );
    }
}
