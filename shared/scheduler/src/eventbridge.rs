//! EventBridge Scheduler: one one-time schedule per alarm generation
//! (`executor-session-<sessionId>-<at ms>`), `at(...)` in UTC, deleted by
//! Scheduler after it fires (`ActionAfterCompletion: DELETE`), targeting the
//! alarm function. Schedules are only ever created or deleted, never updated:
//! the schedule that is firing deletes itself, so updating it to the next
//! time would lose the next alarm.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target};
use executor_core::{SessionId, Timestamp};

use crate::AlarmPayload;
use executor_store::{StoreError, traced};

use crate::AlarmScheduler;

/// Where schedules go and what they invoke (`EXECUTOR_SCHEDULE_GROUP`,
/// `EXECUTOR_ALARM_TARGET_ARN`, `EXECUTOR_SCHEDULER_ROLE_ARN`).
#[derive(Debug, Clone)]
pub struct SchedulerTarget {
    pub group: String,
    pub target_arn: String,
    pub role_arn: String,
}

impl SchedulerTarget {
    pub fn from_env() -> Result<Self, StoreError> {
        let var = |name: &str| {
            std::env::var(name).map_err(|_| StoreError::Backend {
                operation: "configure EventBridge Scheduler",
                detail: format!("{name} is not set; the CDK stack sets it on the functions"),
            })
        };
        Ok(Self {
            group: var("EXECUTOR_SCHEDULE_GROUP")?,
            target_arn: var("EXECUTOR_ALARM_TARGET_ARN")?,
            role_arn: var("EXECUTOR_SCHEDULER_ROLE_ARN")?,
        })
    }
}

#[derive(Clone)]
pub struct EventBridgeScheduler {
    client: Client,
    target: SchedulerTarget,
}

/// The backend named in store spans.
const BACKEND: &str = "eventbridge_scheduler";

/// Throttled calls are retried this often, with doubling waits, on top of the SDK's own retries.
const THROTTLE_RETRIES: u32 = 4;

impl EventBridgeScheduler {
    pub fn new(client: Client, target: SchedulerTarget) -> Self {
        Self { client, target }
    }

    /// From the standard `AWS_*` variables and the `EXECUTOR_SCHEDULE_GROUP`,
    /// `EXECUTOR_ALARM_TARGET_ARN` and `EXECUTOR_SCHEDULER_ROLE_ARN` wiring.
    pub async fn from_env() -> Result<Self, StoreError> {
        let target = SchedulerTarget::from_env()?;
        let config = executor_aws::sdk_config().await.map_err(|e| StoreError::backend("configure AWS", e))?;
        Ok(Self::new(Client::new(config), target))
    }

    /// At most 64 characters: 17 + a 32-character session id + 1 + 13 digits.
    pub fn name(session: &SessionId, at: Timestamp) -> String {
        format!("executor-session-{session}-{}", at.as_millis())
    }

    /// `at(yyyy-mm-ddThh:mm:ss)`: the schedule expression wants whole seconds,
    /// rounded up so an alarm never fires before its time.
    pub fn expression(at: Timestamp) -> String {
        let rounded = Timestamp::from_millis(at.as_secs_ceil() * 1000).to_rfc3339();
        format!("at({})", &rounded[..19])
    }

    async fn create(&self, session: &SessionId, at: Timestamp) -> Result<(), Failure> {
        let payload = AlarmPayload {
            session_id: session.to_string(),
            scheduled_for: at.to_rfc3339(),
            generation: Some(at.as_millis()),
        };
        let input = serde_json::to_string(&payload).expect("the payload serialises");
        let target = Target::builder()
            .arn(&self.target.target_arn)
            .role_arn(&self.target.role_arn)
            .input(input)
            .build()
            .map_err(|e| Failure { code: None, detail: e.to_string() })?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| Failure { code: None, detail: e.to_string() })?;
        // The client token makes a retried create (a lost answer) the same create.
        let name = Self::name(session, at);
        self.client
            .create_schedule()
            .client_token(&name)
            .name(&name)
            .group_name(&self.target.group)
            .schedule_expression(Self::expression(at))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .target(target)
            .action_after_completion(ActionAfterCompletion::Delete)
            .send()
            .await
            .map(|_| ())
            .map_err(Failure::from)
    }
}

/// A failed Scheduler call: its error code (for the cases handled) and the full text.
struct Failure {
    code: Option<String>,
    detail: String,
}

impl<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug> From<SdkError<E, R>> for Failure {
    fn from(error: SdkError<E, R>) -> Self {
        Self { code: error.code().map(str::to_owned), detail: DisplayErrorContext(&error).to_string() }
    }
}

fn code(failure: &Failure) -> Option<&str> {
    failure.code.as_deref()
}

#[async_trait]
impl AlarmScheduler for EventBridgeScheduler {
    /// Create the generation's schedule; one that exists already is this very
    /// alarm (armed by an earlier attempt), so arming twice is not an error.
    async fn schedule(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        traced("scheduler.schedule", BACKEND, async {
            let mut wait = Duration::from_millis(100);
            for attempt in 0..=THROTTLE_RETRIES {
                match self.create(session, at).await {
                    Ok(()) => return Ok(()),
                    Err(e) if code(&e) == Some("ConflictException") => return Ok(()),
                    Err(e) if code(&e) == Some("ThrottlingException") && attempt < THROTTLE_RETRIES => {
                        tokio::time::sleep(wait).await;
                        wait *= 2;
                    }
                    Err(e) => return Err(StoreError::backend("schedule a session alarm", e.detail)),
                }
            }
            Err(StoreError::backend("schedule a session alarm", "still throttled after retries"))
        })
        .await
    }

    async fn cancel(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        traced("scheduler.cancel", BACKEND, async {
            let mut wait = Duration::from_millis(100);
            for attempt in 0..=THROTTLE_RETRIES {
                let deleted = self
                    .client
                    .delete_schedule()
                    .name(Self::name(session, at))
                    .group_name(&self.target.group)
                    .send()
                    .await
                    .map_err(Failure::from);
                match deleted {
                    Ok(_) => return Ok(()),
                    Err(e) if code(&e) == Some("ResourceNotFoundException") => return Ok(()),
                    Err(e) if code(&e) == Some("ThrottlingException") && attempt < THROTTLE_RETRIES => {
                        tokio::time::sleep(wait).await;
                        wait *= 2;
                    }
                    Err(e) => return Err(StoreError::backend("cancel a session alarm", e.detail)),
                }
            }
            Err(StoreError::backend("cancel a session alarm", "still throttled after retries"))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_are_whole_utc_seconds_rounded_up() {
        let cases = [
            (0, "at(1970-01-01T00:00:00)"),
            (1, "at(1970-01-01T00:00:01)"),
            (1_764_445_581_000, "at(2025-11-29T19:46:21)"),
        ];
        for (millis, expected) in cases {
            assert_eq!(EventBridgeScheduler::expression(Timestamp::from_millis(millis)), expected);
        }
    }
}
