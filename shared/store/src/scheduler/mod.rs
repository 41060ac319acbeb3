//! The two `AlarmScheduler` adapters and the payload an alarm carries.

mod eventbridge;
mod in_process;

pub use eventbridge::{EventBridgeScheduler, SchedulerTarget};
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
