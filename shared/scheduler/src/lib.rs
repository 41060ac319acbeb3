//! Session alarms: the `AlarmScheduler` port, its two adapters
//! (EventBridge Scheduler on AWS, tokio timers in `executor serve`) and the
//! payload an alarm carries. What an alarm *does* is the service's
//! `Alarms`; this crate only arms and disarms them. Errors are the store's
//! `StoreError`, so the service handles both the same way.

mod eventbridge;
mod in_process;

use async_trait::async_trait;
pub use eventbridge::{EventBridgeScheduler, SchedulerTarget};
use executor_core::{SessionId, Timestamp};
use executor_store::StoreError;
pub use in_process::InProcessScheduler;
use serde::{Deserialize, Serialize};

/// What the alarm function receives:
/// `{"sessionId": "...", "scheduledFor": "...", "generation": <ms>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmPayload {
    pub session_id: String,
    /// RFC 3339, UTC (for people reading the schedule).
    pub scheduled_for: String,
    /// The alarm's generation: the instant it was armed for, in ms since the
    /// epoch. Absent in payloads armed before generations existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// Session alarms: EventBridge Scheduler on AWS, tokio timers locally.
///
/// Each alarm is its own generation, named by the session and the instant it
/// fires (`at`). A reschedule creates the next generation and never touches
/// the one that is firing (a one-time schedule deletes itself after it fires,
/// and an update of it would be deleted with it).
#[async_trait]
pub trait AlarmScheduler: Send + Sync {
    /// Arm the session's alarm for `at`. Idempotent: arming a generation that
    /// is already armed succeeds and arms nothing more.
    async fn schedule(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError>;

    /// Disarm the generation `at`; not an error if there is none.
    async fn cancel(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError>;
}
