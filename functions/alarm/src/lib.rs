//! The alarm function: one EventBridge Scheduler payload
//! `{"sessionId": "...", "scheduledFor": "..."}` in, one alarm decision out.

use executor_core::{AlarmDecision, SessionId, Timestamp};
use executor_scheduler::AlarmPayload;
use executor_service::Alarms;
use executor_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AlarmError {
    #[error("the alarm payload is not {{\"sessionId\", \"scheduledFor\"}}: {0}")]
    Payload(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Decide and act on one alarm that fired at `now`.
pub async fn handle(alarms: &Alarms, payload: serde_json::Value, now: Timestamp) -> Result<AlarmDecision, AlarmError> {
    let payload: AlarmPayload = serde_json::from_value(payload).map_err(|e| AlarmError::Payload(e.to_string()))?;
    let session = SessionId::parse(payload.session_id).map_err(|e| AlarmError::Payload(e.to_string()))?;
    let generation = payload.generation.map(Timestamp::from_millis);
    Ok(alarms.fire(&session, generation, now).await?)
}
