//! Quotas per owner: how many executions an owner may start an hour and run
//! at once, how often one execution may be resumed, and how many tool calls
//! it may make. The limits are data; the store counts them with conditional
//! writes and the service refuses what is over.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Principal, Timestamp};

/// The resume cap when none is configured: stops pause/resume loops.
pub const DEFAULT_RESUMES_PER_EXECUTION: u32 = 100;

/// The hourly limit counts executions started in fixed clock hours.
pub const QUOTA_WINDOW: Duration = Duration::from_secs(3600);

/// What `retryAfterMs` says when a running execution of the owner must end
/// first: there is no reset time to wait for, only a short retry.
pub const CONCURRENT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// One owner's limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_per_hour: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_executions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes_per_execution: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls_per_execution: Option<u32>,
}

impl QuotaLimits {
    /// Unlimited, except the resume cap.
    pub fn defaults() -> Self {
        Self { resumes_per_execution: Some(DEFAULT_RESUMES_PER_EXECUTION), ..Self::default() }
    }

    /// These limits with every limit `overrides` sets in its place.
    pub fn overridden_by(self, overrides: &QuotaLimits) -> Self {
        Self {
            executions_per_hour: overrides.executions_per_hour.or(self.executions_per_hour),
            concurrent_executions: overrides.concurrent_executions.or(self.concurrent_executions),
            resumes_per_execution: overrides.resumes_per_execution.or(self.resumes_per_execution),
            tool_calls_per_execution: overrides.tool_calls_per_execution.or(self.tool_calls_per_execution),
        }
    }
}

/// Everyone's limits: the defaults (`EXECUTOR_QUOTA_*`) and per-owner
/// overrides (`[quotas]` in the sources file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    pub defaults: QuotaLimits,
    pub owners: BTreeMap<Principal, QuotaLimits>,
}

impl Default for Quotas {
    fn default() -> Self {
        Self { defaults: QuotaLimits::defaults(), owners: BTreeMap::new() }
    }
}

impl Quotas {
    pub fn for_owner(&self, owner: &Principal) -> QuotaLimits {
        match self.owners.get(owner) {
            Some(overrides) => self.defaults.overridden_by(overrides),
            None => self.defaults,
        }
    }
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaLimit {
    ExecutionsPerHour,
    ConcurrentExecutions,
    ResumesPerExecution,
    ToolCallsPerExecution,
}

impl QuotaLimit {
    /// The setting that raises it.
    pub fn variable(self) -> &'static str {
        match self {
            Self::ExecutionsPerHour => "EXECUTOR_QUOTA_EXECUTIONS_PER_HOUR",
            Self::ConcurrentExecutions => "EXECUTOR_QUOTA_CONCURRENT_EXECUTIONS",
            Self::ResumesPerExecution => "EXECUTOR_QUOTA_RESUMES_PER_EXECUTION",
            Self::ToolCallsPerExecution => "EXECUTOR_QUOTA_TOOL_CALLS_PER_EXECUTION",
        }
    }

    /// Its name in metrics and `[quotas]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionsPerHour => "executions_per_hour",
            Self::ConcurrentExecutions => "concurrent_executions",
            Self::ResumesPerExecution => "resumes_per_execution",
            Self::ToolCallsPerExecution => "tool_calls_per_execution",
        }
    }
}

/// A request over a limit: nothing ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaExceeded {
    pub limit: QuotaLimit,
    /// The limit's value for this owner.
    pub allowed: u32,
    /// When waiting helps: how long until the limit lets one more through.
    pub retry_after: Option<Duration>,
    /// When the hourly limit resets.
    pub resets_at: Option<Timestamp>,
}

impl QuotaExceeded {
    /// The hourly limit is used up until the window containing `now` ends.
    pub fn hourly(allowed: u32, now: Timestamp) -> Self {
        let (_, end) = hour_window(now);
        let retry_after = Duration::from_millis(end.as_millis() - now.as_millis());
        Self { limit: QuotaLimit::ExecutionsPerHour, allowed, retry_after: Some(retry_after), resets_at: Some(end) }
    }

    pub fn concurrent(allowed: u32) -> Self {
        Self {
            limit: QuotaLimit::ConcurrentExecutions,
            allowed,
            retry_after: Some(CONCURRENT_RETRY_AFTER),
            resets_at: None,
        }
    }

    /// A per-execution limit: waiting does not help.
    pub fn per_execution(limit: QuotaLimit, allowed: u32) -> Self {
        Self { limit, allowed, retry_after: None, resets_at: None }
    }

    pub fn retry_after_ms(&self) -> Option<u64> {
        self.retry_after.map(|d| d.as_millis() as u64)
    }
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (allowed, variable) = (self.allowed, self.limit.variable());
        match self.limit {
            QuotaLimit::ExecutionsPerHour => write!(
                f,
                "quota exceeded: you may start {allowed} execution(s) per hour ({variable}) and have used them; \
                 the count resets at {}; nothing ran",
                self.resets_at.map_or_else(|| "the next full hour".to_owned(), |at| at.to_rfc3339()),
            ),
            QuotaLimit::ConcurrentExecutions => write!(
                f,
                "quota exceeded: you may run {allowed} execution(s) at once ({variable}) and that many are running; \
                 nothing ran: retry when one has finished"
            ),
            QuotaLimit::ResumesPerExecution => write!(
                f,
                "quota exceeded: an execution may be resumed {allowed} time(s) ({variable}) and this one has been; \
                 nothing was decided or run: run new code if you need to go on"
            ),
            QuotaLimit::ToolCallsPerExecution => write!(
                f,
                "quota exceeded: an execution may make {allowed} tool call(s) ({variable}); this one tried to make \
                 more and was stopped before the call: split the work across executions"
            ),
        }
    }
}

/// The fixed clock hour `[start, end)` that contains `now`.
pub fn hour_window(now: Timestamp) -> (Timestamp, Timestamp) {
    let size = QUOTA_WINDOW.as_millis() as u64;
    let start = now.as_millis() / size * size;
    (Timestamp::from_millis(start), Timestamp::from_millis(start + size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_override_the_defaults_limit_by_limit() {
        let alice = Principal::parse("alice").unwrap();
        let defaults = QuotaLimits { executions_per_hour: Some(10), ..QuotaLimits::defaults() };
        let overrides = QuotaLimits { concurrent_executions: Some(2), ..QuotaLimits::default() };
        let quotas = Quotas { defaults, owners: BTreeMap::from([(alice.clone(), overrides)]) };
        let limits = quotas.for_owner(&alice);
        assert_eq!(limits.executions_per_hour, Some(10));
        assert_eq!(limits.concurrent_executions, Some(2));
        assert_eq!(limits.resumes_per_execution, Some(DEFAULT_RESUMES_PER_EXECUTION));
        assert_eq!(quotas.for_owner(&Principal::parse("bob").unwrap()), defaults);
        assert_eq!(Quotas::default().for_owner(&alice), QuotaLimits::defaults());
    }

    #[test]
    fn hour_windows_and_messages() {
        let now = Timestamp::from_millis(7_200_000 + 1_800_000);
        assert_eq!(hour_window(now), (Timestamp::from_millis(7_200_000), Timestamp::from_millis(10_800_000)));
        let hourly = QuotaExceeded::hourly(5, now);
        assert_eq!(hourly.retry_after_ms(), Some(1_800_000));
        let message = hourly.to_string();
        assert!(message.contains("5 execution(s) per hour") && message.contains("resets at"), "{message}");
        assert!(message.contains("EXECUTOR_QUOTA_EXECUTIONS_PER_HOUR"), "{message}");
        let resumes = QuotaExceeded::per_execution(QuotaLimit::ResumesPerExecution, 100);
        assert_eq!(resumes.retry_after_ms(), None);
        assert!(resumes.to_string().contains("resumed 100 time(s)"));
        assert_eq!(QuotaExceeded::concurrent(2).retry_after_ms(), Some(1000));
    }
}
