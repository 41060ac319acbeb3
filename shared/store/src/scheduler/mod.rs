//! The two `AlarmScheduler` adapters and the payload an alarm carries.

mod eventbridge;
mod in_process;

pub use eventbridge::{EventBridgeScheduler, SchedulerTarget};
pub use in_process::InProcessScheduler;
use serde::{Deserialize, Serialize};

/// What the alarm function receives: `{"sessionId": "...", "scheduledFor": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmPayload {
    pub session_id: String,
    /// RFC 3339, UTC.
    pub scheduled_for: String,
}
