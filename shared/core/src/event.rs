//! Lifecycle events: what changed, for people and systems outside the
//! executor (docs/events.md). They are derived here, purely, from the state
//! change a store write makes; the store keeps them in its outbox with that
//! write, and the sinks deliver them.
//!
//! An event carries no secret: ids, the owner, the tool path, the approval
//! message (already redacted by the catalog, and cut to [`MAX_EVENT_TEXT_BYTES`]),
//! times, the decision, the status and an error code. The one exception is
//! what it is for: a browser-mode pause's approval link.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{Decider, Execution, ExecutionState, ExecutionStatus, Session, Timestamp, cut_text};

/// `source` of every event.
pub const EVENT_SOURCE: &str = "executor";

/// At most this much of the approval message (which shows the arguments) goes in an event.
pub const MAX_EVENT_TEXT_BYTES: usize = 2 * 1024;

/// The `detail-type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "Execution Paused")]
    ExecutionPaused,
    #[serde(rename = "Execution Decided")]
    ExecutionDecided,
    #[serde(rename = "Execution Completed")]
    ExecutionCompleted,
    #[serde(rename = "Execution Failed")]
    ExecutionFailed,
    #[serde(rename = "Execution Expired")]
    ExecutionExpired,
    #[serde(rename = "Session Destroyed")]
    SessionDestroyed,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionPaused => "Execution Paused",
            Self::ExecutionDecided => "Execution Decided",
            Self::ExecutionCompleted => "Execution Completed",
            Self::ExecutionFailed => "Execution Failed",
            Self::ExecutionExpired => "Execution Expired",
            Self::SessionDestroyed => "Session Destroyed",
        }
    }
}

/// One event, as the outbox stores it until it is delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique, and the same on every delivery attempt (consumers may drop
    /// repeats by it): the subject, the version its write produced, and the
    /// event's place in that write. Zero-padded, so ids of one subject sort
    /// in the order they were written.
    pub id: String,
    pub detail_type: EventType,
    pub time: Timestamp,
    /// The `detail` object, as sent.
    pub detail: Value,
    /// The outbox forgets an event it could not deliver by then: it would no
    /// longer help anyone (a pause's event is useless after its window).
    pub deliver_until: Timestamp,
}

impl Event {
    /// The JSON a webhook receives: `{id, source, "detail-type", time, detail}`.
    pub fn envelope(&self) -> Value {
        json!({
            "id": self.id,
            "source": EVENT_SOURCE,
            "detail-type": self.detail_type.as_str(),
            "time": self.time.to_rfc3339(),
            "detail": self.detail,
        })
    }
}

/// Events are worth delivering for a day at most (a pause's, until its window closes).
const EVENT_LIFETIME: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The events of a write that takes an execution from `before` (`None`: it is
/// being created) to `after`, whose stored version will be `written_version`.
/// `approval_url` is the link a browser-mode pause opened with this write;
/// `decider`, who decided, when a decision made the change.
/// Writes that change no status (a heartbeat, a fresh link) have none.
pub fn execution_events(
    before: Option<ExecutionStatus>,
    after: &Execution,
    written_version: u64,
    approval_url: Option<&str>,
    decider: Option<&Decider>,
    now: Timestamp,
) -> Vec<Event> {
    let status = after.status();
    if before == Some(status) {
        return Vec::new();
    }
    let mut detail = Map::new();
    detail.insert("executionId".into(), json!(after.id));
    detail.insert("owner".into(), json!(after.owner));
    if let Some(session) = &after.session_id {
        detail.insert("sessionId".into(), json!(session));
    }
    let pending = after.journal.pending.first();
    let mut deliver_until = now.plus(EVENT_LIFETIME);
    let detail_type = match after.state() {
        ExecutionState::Running => return Vec::new(),
        ExecutionState::Paused { deadline } => {
            if let Some(call) = pending {
                detail.insert("tool".into(), json!(call.path));
                detail.insert("message".into(), json!(cut_text(&call.message, MAX_EVENT_TEXT_BYTES)));
            }
            detail.insert("calls".into(), paused_calls(&after.journal.pending));
            detail.insert("expiresAt".into(), json!(deadline.to_rfc3339()));
            if let Some(url) = approval_url {
                detail.insert("approvalUrl".into(), json!(url));
            }
            deliver_until = *deadline;
            EventType::ExecutionPaused
        }
        ExecutionState::Resuming { action } => {
            if let Some(call) = pending {
                detail.insert("tool".into(), json!(call.path));
            }
            detail.insert("decision".into(), json!(action.as_str()));
            if let Some(decider) = decider {
                detail.insert("channel".into(), json!(decider.channel.as_str()));
                detail.insert("decidedBy".into(), json!(decider.by));
            }
            EventType::ExecutionDecided
        }
        ExecutionState::Completed { .. } => EventType::ExecutionCompleted,
        ExecutionState::Failed { error } | ExecutionState::Declined { error } => {
            detail.insert("error".into(), json!({ "code": error.code }));
            EventType::ExecutionFailed
        }
        ExecutionState::Expired => {
            if let Some(call) = pending {
                detail.insert("tool".into(), json!(call.path));
            }
            EventType::ExecutionExpired
        }
    };
    detail.insert("status".into(), json!(status.as_str()));
    vec![Event {
        id: format!("execution.{}.{written_version:010}.0", after.id),
        detail_type,
        time: now,
        detail: Value::Object(detail),
        deliver_until,
    }]
}

/// Every call one decision on a pause covers, `{tool, message}` each: the
/// messages share [`MAX_EVENT_TEXT_BYTES`] (at least [`MIN_CALL_TEXT_BYTES`]
/// each), so a large batch cannot make an event too big to deliver.
fn paused_calls(pending: &[crate::PendingCall]) -> Value {
    let each = (MAX_EVENT_TEXT_BYTES / pending.len().max(1)).max(MIN_CALL_TEXT_BYTES);
    let calls = pending.iter().map(|call| json!({ "tool": call.path, "message": cut_text(&call.message, each) }));
    Value::Array(calls.collect())
}

/// The least of its message each call of a batch keeps in a pause's event.
const MIN_CALL_TEXT_BYTES: usize = 256;

/// The event of destroying `session`, whose stored version will be `written_version`.
pub fn session_destroyed(session: &Session, written_version: u64, now: Timestamp) -> Event {
    Event {
        id: format!("session.{}.{written_version:010}.0", session.id),
        detail_type: EventType::SessionDestroyed,
        time: now,
        detail: json!({ "sessionId": session.id, "owner": session.owner, "status": "destroyed" }),
        deliver_until: now.plus(EVENT_LIFETIME),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        ApprovalAction, ElicitationMode, ExecutionFailure, ExecutionId, Journal, PendingCall, Principal, SessionId,
    };

    fn execution(state: ExecutionState) -> Execution {
        let mut journal = Journal::new(Timestamp::from_millis(0), 7);
        journal.add_pending(PendingCall::new(3, "gh.issues.create", json!({"title": "t"}), "Create an issue?"));
        let e = Execution::start(
            ExecutionId::parse("e1").unwrap(),
            Principal::parse("ana").unwrap(),
            Some(SessionId::parse("s1").unwrap()),
            ElicitationMode::Browser,
            "code",
            journal,
            Timestamp::from_millis(0),
        );
        e.with_state(state)
    }

    #[test]
    fn each_status_change_has_its_event_and_no_change_has_none() {
        let deadline = Timestamp::from_millis(600_000);
        let now = Timestamp::from_millis(1_000);
        let failure = ExecutionFailure { code: "declined".into(), message: "no".into(), retry_after_ms: None };
        let cases = [
            (None, ExecutionState::Paused { deadline }, Some(EventType::ExecutionPaused)),
            (Some(ExecutionStatus::Resuming), ExecutionState::Paused { deadline }, Some(EventType::ExecutionPaused)),
            (Some(ExecutionStatus::Paused), ExecutionState::Paused { deadline }, None),
            (
                Some(ExecutionStatus::Paused),
                ExecutionState::Resuming { action: ApprovalAction::Accept },
                Some(EventType::ExecutionDecided),
            ),
            (
                Some(ExecutionStatus::Resuming),
                ExecutionState::Completed { result: json!(1) },
                Some(EventType::ExecutionCompleted),
            ),
            (
                Some(ExecutionStatus::Resuming),
                ExecutionState::Declined { error: failure.clone() },
                Some(EventType::ExecutionFailed),
            ),
            (
                Some(ExecutionStatus::Running),
                ExecutionState::Failed { error: failure },
                Some(EventType::ExecutionFailed),
            ),
            (Some(ExecutionStatus::Paused), ExecutionState::Expired, Some(EventType::ExecutionExpired)),
            (None, ExecutionState::Running, None),
            (Some(ExecutionStatus::Running), ExecutionState::Running, None),
        ];
        for (before, state, expected) in cases {
            let events = execution_events(before, &execution(state.clone()), 4, None, None, now);
            assert_eq!(events.iter().map(|e| e.detail_type).collect::<Vec<_>>(), Vec::from_iter(expected), "{state:?}");
        }
    }

    #[test]
    fn a_pause_says_what_who_until_when_and_where_to_decide() {
        let deadline = Timestamp::from_millis(600_000);
        let e = execution(ExecutionState::Paused { deadline });
        let [event] =
            execution_events(None, &e, 0, Some("https://x/approvals/e1?token=t"), None, Timestamp::from_millis(5))
                .try_into()
                .unwrap();
        assert_eq!(event.id, "execution.e1.0000000000.0");
        assert_eq!(event.deliver_until, deadline, "a pause's event is useless after its window");
        assert_eq!(
            event.envelope(),
            json!({
                "id": "execution.e1.0000000000.0",
                "source": "executor",
                "detail-type": "Execution Paused",
                "time": "1970-01-01T00:00:00.005Z",
                "detail": {
                    "executionId": "e1",
                    "owner": "ana",
                    "sessionId": "s1",
                    "tool": "gh.issues.create",
                    "message": "Create an issue?",
                    "calls": [{"tool": "gh.issues.create", "message": "Create an issue?"}],
                    "expiresAt": "1970-01-01T00:10:00.000Z",
                    "approvalUrl": "https://x/approvals/e1?token=t",
                    "status": "paused",
                },
            })
        );
    }

    #[test]
    fn the_message_is_cut_to_the_event_limit() {
        let mut e = execution(ExecutionState::Paused { deadline: Timestamp::from_millis(9) });
        e.journal.pending[0].message = "x".repeat(10 * MAX_EVENT_TEXT_BYTES);
        let events = execution_events(None, &e, 0, None, None, Timestamp::from_millis(1));
        let message = events[0].detail["message"].as_str().unwrap();
        assert!(message.len() < MAX_EVENT_TEXT_BYTES + 64, "{} bytes", message.len());
    }

    #[test]
    fn a_pause_over_a_batch_names_every_call_within_the_limit() {
        let mut e = execution(ExecutionState::Paused { deadline: Timestamp::from_millis(9) });
        e.journal.add_pending(PendingCall::new(4, "gh.issues.close", json!({"n": 7}), "Close #7?"));
        let events = execution_events(None, &e, 0, None, None, Timestamp::from_millis(1));
        assert_eq!(
            events[0].detail["calls"],
            json!([
                {"tool": "gh.issues.create", "message": "Create an issue?"},
                {"tool": "gh.issues.close", "message": "Close #7?"},
            ])
        );
        // A large batch of long messages: each is cut, so the event stays deliverable.
        for step in 5..105 {
            e.journal.add_pending(PendingCall::new(step, "gh.issues.close", json!({}), "y".repeat(4096)));
        }
        let events = execution_events(None, &e, 0, None, None, Timestamp::from_millis(1));
        let calls = events[0].detail["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 102);
        let bytes = serde_json::to_string(&events[0].detail).unwrap().len();
        assert!(bytes < 102 * (MIN_CALL_TEXT_BYTES + 64) + 4096, "{bytes} bytes");
    }

    #[test]
    fn a_decision_says_through_which_channel_and_who_decided() {
        let e = execution(ExecutionState::Resuming { action: ApprovalAction::Accept });
        let owner = Principal::parse("ana").unwrap();
        let by = crate::DecidedBy::key(&owner, &crate::TokenHash::of_token("tok"));
        let decider = Decider { channel: crate::Channel::OwnerApi, by: by.clone() };
        let before = Some(ExecutionStatus::Paused);
        let events = execution_events(before, &e, 2, None, Some(&decider), Timestamp::from_millis(1));
        assert_eq!(events[0].detail["channel"], "api");
        assert_eq!(events[0].detail["decidedBy"], by.as_str());
        assert_eq!(events[0].detail["decision"], "accept");
    }

    #[test]
    fn a_failure_carries_its_code_only() {
        let error = ExecutionFailure { code: "upstream_error".into(), message: "details".into(), retry_after_ms: None };
        let e = execution(ExecutionState::Failed { error });
        let events = execution_events(Some(ExecutionStatus::Running), &e, 2, None, None, Timestamp::from_millis(1));
        assert_eq!(events[0].detail["error"], json!({ "code": "upstream_error" }));
        assert_eq!(events[0].detail["status"], "failed");
    }
}
