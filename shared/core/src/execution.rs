//! An execution and its lifecycle as an explicit state machine.
//!
//! ```text
//! running ──pause──▶ paused ──claim──▶ resuming ──complete──▶ completed
//!    │                 │                  │  ├──fail──────▶ failed
//!    │                 │                  │  ├──interrupt─▶ failed (nothing is running it any more)
//!    │                 └──expire──▶ expired◀─┤  ├──decline───▶ declined
//!    └─complete / fail / decline / interrupt / expire ▶ …  └──pause──▶ paused (the next approval)
//!
//! running and resuming both go to running on `yield` (handed on to another
//! invocation, which replays the journal and goes on).
//! ```
//!
//! [`next_status`] is the one place that says which transitions exist; every
//! change goes through [`Execution::apply`]. Stores persist the result with a
//! write conditional on `version`, so two racing claims cannot both win.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ApprovalLinks, ElicitationMode, ExecutionId, Journal, Principal, SessionId, Timestamp, TokenHash, ToolkitName,
};

/// The decision a human or the model made on a paused call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    Accept,
    Decline,
    Cancel,
}

impl ApprovalAction {
    /// `accept`, `decline` or `cancel`, as clients and forms send it.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "accept" => Ok(Self::Accept),
            "decline" => Ok(Self::Decline),
            "cancel" => Ok(Self::Cancel),
            other => Err(format!("the action must be accept, decline or cancel, not {other:?}")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

/// Why an execution failed, as reported to the client (`error:{code, message}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionFailure {
    pub code: String,
    pub message: String,
    /// For `quota_exceeded`, when waiting helps: how long until a retry may pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ExecutionFailure {
    /// What [`ExecutionEvent::Interrupt`] records.
    pub fn interrupted() -> Self {
        Self {
            code: "interrupted".into(),
            message: "the host stopped while running this execution (its heartbeat stopped); whether a call in \
                      flight then reached the upstream is unknown, and nothing is retried (every call is made at \
                      most once). Check the upstream, then run new code if needed"
                .into(),
            retry_after_ms: None,
        }
    }

    /// A request over a quota: `quota_exceeded`, with `retryAfterMs` when waiting helps.
    pub fn quota(exceeded: &crate::QuotaExceeded) -> Self {
        Self { code: "quota_exceeded".into(), message: exceeded.to_string(), retry_after_ms: exceeded.retry_after_ms() }
    }
}

/// How often a runner renews the heartbeat of the execution it runs.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);

/// A running or resuming execution whose heartbeat is this old has nothing
/// running it: the next read settles it as interrupted.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(30);

/// The state with the data that only exists in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExecutionState {
    Running,
    /// Waiting for a decision on `journal.pending` until `deadline`.
    Paused {
        deadline: Timestamp,
    },
    /// One resumer claimed it with this decision and is running the continuation.
    Resuming {
        action: ApprovalAction,
    },
    Completed {
        result: Value,
    },
    Failed {
        error: ExecutionFailure,
    },
    /// The decision declined or cancelled the call and the code did not recover.
    Declined {
        error: ExecutionFailure,
    },
    Expired,
}

/// The state without its data: what the transition table and storage indexes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    Running,
    Paused,
    Resuming,
    Completed,
    Failed,
    Declined,
    Expired,
}

impl ExecutionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Resuming => "resuming",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Declined => "declined",
            Self::Expired => "expired",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Declined | Self::Expired)
    }
}

impl ExecutionState {
    pub fn status(&self) -> ExecutionStatus {
        match self {
            Self::Running => ExecutionStatus::Running,
            Self::Paused { .. } => ExecutionStatus::Paused,
            Self::Resuming { .. } => ExecutionStatus::Resuming,
            Self::Completed { .. } => ExecutionStatus::Completed,
            Self::Failed { .. } => ExecutionStatus::Failed,
            Self::Declined { .. } => ExecutionStatus::Declined,
            Self::Expired => ExecutionStatus::Expired,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Something that happens to an execution.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionEvent {
    /// A call needs approval; the journal holds it as pending.
    Pause {
        journal: Journal,
        deadline: Timestamp,
    },
    /// A decision arrived and this resumer takes the execution; `link` is the
    /// approval link it came through, if any.
    Claim {
        action: ApprovalAction,
        link: Option<TokenHash>,
    },
    Complete {
        result: Value,
    },
    Fail {
        error: ExecutionFailure,
    },
    /// The decision declined or cancelled the call and the code did not recover,
    /// or a running execution was cancelled.
    Decline {
        error: ExecutionFailure,
    },
    /// Handed on at a point where no call was in flight: the journal holds
    /// every call made, and whoever claims it next replays it and goes on.
    Yield {
        journal: Journal,
    },
    /// The approval window or the session's lease ran out, or a resumer vanished.
    Expire,
    /// The run's heartbeat stopped: whatever ran it stopped (a crash, a Lambda
    /// timed out or recycled mid-run). It is not run again: a call in flight
    /// may already have reached the upstream.
    Interrupt,
}

impl ExecutionEvent {
    fn name(&self) -> &'static str {
        match self {
            Self::Pause { .. } => "pause",
            Self::Claim { .. } => "claim",
            Self::Complete { .. } => "complete",
            Self::Fail { .. } => "fail",
            Self::Decline { .. } => "decline",
            Self::Yield { .. } => "yield",
            Self::Expire => "expire",
            Self::Interrupt => "interrupt",
        }
    }
}

/// The transition table: the status an event leads to, or `None` if it is illegal.
pub fn next_status(from: ExecutionStatus, event: &ExecutionEvent) -> Option<ExecutionStatus> {
    use ExecutionEvent as E;
    use ExecutionStatus as S;
    Some(match (from, event) {
        (S::Running | S::Resuming, E::Pause { .. }) => S::Paused,
        (S::Paused, E::Claim { .. }) => S::Resuming,
        (S::Running | S::Resuming, E::Complete { .. }) => S::Completed,
        (S::Running | S::Resuming, E::Fail { .. }) => S::Failed,
        (S::Running | S::Resuming, E::Decline { .. }) => S::Declined,
        (S::Running | S::Paused | S::Resuming, E::Expire) => S::Expired,
        (S::Running | S::Resuming, E::Interrupt) => S::Failed,
        (S::Running | S::Resuming, E::Yield { .. }) => S::Running,
        _ => return None,
    })
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("execution {id} is {from} and cannot {event}")]
    Illegal { id: ExecutionId, from: &'static str, event: &'static str },
    #[error("execution {id} waited for approval until {deadline} and has expired; run the code again")]
    ApprovalExpired { id: ExecutionId, deadline: Timestamp },
    #[error("execution {id} has no pending call to decide on")]
    NothingPending { id: ExecutionId },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub id: ExecutionId,
    pub owner: Principal,
    /// `None` for stateless (2026-07-28) executions.
    pub session_id: Option<SessionId>,
    pub code: String,
    pub journal: Journal,
    pub state: ExecutionState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When storage may forget the record (DynamoDB TTL); reads treat it as gone after.
    pub expires_at: Timestamp,
    /// How the pauses of this execution reach a human.
    #[serde(default)]
    pub mode: ElicitationMode,
    /// Browser links that may decide the current pause.
    #[serde(default)]
    pub links: ApprovalLinks,
    /// `console` output of the latest segment, kept so a settled outcome can be
    /// read back (a browser-mode `resume` returns what the approval page ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// The W3C `traceparent` of the span that recorded the latest pause, when
    /// traces are exported: the resume that follows links its trace to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_trace: Option<String>,
    /// When whoever runs it (a running or resuming execution) last said it
    /// still does; see [`HEARTBEAT_STALE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_at: Option<Timestamp>,
    /// Someone asked a running execution to stop; its runner sees it at its
    /// next heartbeat and stops at the next safe point.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// A random id the latest claimer wrote with its claim: after a claim write
    /// whose answer was lost, the claimer reads the execution again and knows
    /// the claim is its own only if this is its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// The toolkit whose endpoint started it: its continuations see that
    /// toolkit's tools and policy, and only that endpoint (or an unscoped
    /// owner) may resume it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitName>,
    /// Decisions claimed so far (each resume that ran): counted in the claim's
    /// own write, against the resume cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumes: u32,
    /// Bumped by every stored write; writes are conditional on it.
    pub version: u64,
}

impl Execution {
    pub fn start(
        id: ExecutionId,
        owner: Principal,
        session_id: Option<SessionId>,
        mode: ElicitationMode,
        code: impl Into<String>,
        journal: Journal,
        expires_at: Timestamp,
    ) -> Self {
        let now = journal.started_at;
        Self {
            id,
            owner,
            session_id,
            code: code.into(),
            journal,
            state: ExecutionState::Running,
            created_at: now,
            updated_at: now,
            expires_at,
            mode,
            links: ApprovalLinks::default(),
            logs: Vec::new(),
            pause_trace: None,
            heartbeat_at: None,
            cancel_requested: false,
            claim: None,
            toolkit: None,
            resumes: 0,
            version: 0,
        }
    }

    pub fn status(&self) -> ExecutionStatus {
        self.state.status()
    }

    /// Whether nothing runs this running or resuming execution any more: its
    /// last sign of life (the latest heartbeat or write) is [`HEARTBEAT_STALE`]
    /// old. A live runner renews it far more often, whatever the run's length.
    pub fn is_stranded(&self, now: Timestamp) -> bool {
        let alive = self.heartbeat_at.map_or(self.updated_at, |beat| beat.max(self.updated_at));
        matches!(self.state, ExecutionState::Running | ExecutionState::Resuming { .. })
            && now >= alive.plus(HEARTBEAT_STALE)
    }

    /// Apply `event` at `now`, or leave the execution untouched and say why not.
    pub fn apply(&mut self, event: ExecutionEvent, now: Timestamp) -> Result<(), TransitionError> {
        let from = self.status();
        if next_status(from, &event).is_none() {
            return Err(TransitionError::Illegal { id: self.id.clone(), from: from.as_str(), event: event.name() });
        }
        self.state = match event {
            ExecutionEvent::Pause { journal, deadline } => {
                if journal.pending.is_empty() {
                    return Err(TransitionError::NothingPending { id: self.id.clone() });
                }
                self.journal = journal;
                self.links.reset();
                ExecutionState::Paused { deadline }
            }
            ExecutionEvent::Claim { action, link } => {
                if let ExecutionState::Paused { deadline } = self.state
                    && now >= deadline
                {
                    return Err(TransitionError::ApprovalExpired { id: self.id.clone(), deadline });
                }
                self.links.spend(link);
                ExecutionState::Resuming { action }
            }
            ExecutionEvent::Complete { result } => ExecutionState::Completed { result },
            ExecutionEvent::Fail { error } => ExecutionState::Failed { error },
            ExecutionEvent::Decline { error } => ExecutionState::Declined { error },
            ExecutionEvent::Yield { journal } => {
                self.journal = journal;
                ExecutionState::Running
            }
            ExecutionEvent::Expire => ExecutionState::Expired,
            ExecutionEvent::Interrupt => ExecutionState::Failed { error: ExecutionFailure::interrupted() },
        };
        self.updated_at = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{LinkStatus, PendingCall};

    const ALL: [ExecutionStatus; 7] = [
        ExecutionStatus::Running,
        ExecutionStatus::Paused,
        ExecutionStatus::Resuming,
        ExecutionStatus::Completed,
        ExecutionStatus::Failed,
        ExecutionStatus::Declined,
        ExecutionStatus::Expired,
    ];

    fn failure() -> ExecutionFailure {
        ExecutionFailure { code: "c".into(), message: "m".into(), retry_after_ms: None }
    }

    fn events() -> [ExecutionEvent; 8] {
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.add_pending(PendingCall::new(0, "a.write", json!({}), "?"));
        [
            ExecutionEvent::Pause { journal, deadline: Timestamp::from_millis(10_000) },
            ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None },
            ExecutionEvent::Complete { result: json!(1) },
            ExecutionEvent::Fail { error: failure() },
            ExecutionEvent::Decline { error: failure() },
            ExecutionEvent::Expire,
            ExecutionEvent::Interrupt,
            ExecutionEvent::Yield { journal: Journal::new(Timestamp::from_millis(0), 1) },
        ]
    }

    /// Every (status, event) pair, written out: a new transition must be added here on purpose.
    #[test]
    fn transition_table() {
        use ExecutionStatus::*;
        // Columns: pause, claim, complete, fail, decline, expire, interrupt, yield.
        let table: [(ExecutionStatus, [Option<ExecutionStatus>; 8]); 7] = [
            (
                Running,
                [
                    Some(Paused),
                    None,
                    Some(Completed),
                    Some(Failed),
                    Some(Declined),
                    Some(Expired),
                    Some(Failed),
                    Some(Running),
                ],
            ),
            (Paused, [None, Some(Resuming), None, None, None, Some(Expired), None, None]),
            (
                Resuming,
                [
                    Some(Paused),
                    None,
                    Some(Completed),
                    Some(Failed),
                    Some(Declined),
                    Some(Expired),
                    Some(Failed),
                    Some(Running),
                ],
            ),
            (Completed, [None; 8]),
            (Failed, [None; 8]),
            (Declined, [None; 8]),
            (Expired, [None; 8]),
        ];
        assert_eq!(table.map(|(s, _)| s), ALL);
        for (from, row) in table {
            for (event, expected) in events().iter().zip(row) {
                assert_eq!(next_status(from, event), expected, "{from:?} + {}", event.name());
            }
            assert_eq!(from.is_terminal(), row.iter().all(Option::is_none), "{from:?}");
        }
    }

    fn execution_in(status: ExecutionStatus) -> Execution {
        let mut e = Execution::start(
            ExecutionId::parse("e1").unwrap(),
            Principal::parse("alice").unwrap(),
            None,
            ElicitationMode::Model,
            "return 1",
            Journal::new(Timestamp::from_millis(0), 1),
            Timestamp::from_millis(1_000_000),
        );
        e.state = match status {
            ExecutionStatus::Running => ExecutionState::Running,
            ExecutionStatus::Paused => ExecutionState::Paused { deadline: Timestamp::from_millis(10_000) },
            ExecutionStatus::Resuming => ExecutionState::Resuming { action: ApprovalAction::Accept },
            ExecutionStatus::Completed => ExecutionState::Completed { result: json!(null) },
            ExecutionStatus::Failed => ExecutionState::Failed { error: failure() },
            ExecutionStatus::Declined => ExecutionState::Declined { error: failure() },
            ExecutionStatus::Expired => ExecutionState::Expired,
        };
        e
    }

    #[test]
    fn only_a_run_whose_heartbeat_is_stale_is_stranded() {
        let claimed = Timestamp::from_millis(100_000);
        let cases = [
            // (status, last heartbeat, now, stranded)
            (ExecutionStatus::Resuming, None, 100_000, false),
            (ExecutionStatus::Resuming, None, 129_999, false),
            (ExecutionStatus::Resuming, None, 130_000, true),
            (ExecutionStatus::Resuming, Some(150_000), 179_999, false),
            (ExecutionStatus::Resuming, Some(150_000), 180_000, true),
            (ExecutionStatus::Running, Some(400_000), 429_999, false),
            (ExecutionStatus::Running, Some(400_000), 430_000, true),
            // A heartbeat older than the latest write does not count against it.
            (ExecutionStatus::Running, Some(50_000), 129_999, false),
            (ExecutionStatus::Paused, None, 900_000, false),
            (ExecutionStatus::Completed, Some(100_000), 900_000, false),
        ];
        for (status, beat, now, stranded) in cases {
            let mut e = execution_in(status);
            e.updated_at = claimed;
            e.heartbeat_at = beat.map(Timestamp::from_millis);
            assert_eq!(e.is_stranded(Timestamp::from_millis(now)), stranded, "{status:?} beat {beat:?} at {now}");
        }
        for status in [ExecutionStatus::Resuming, ExecutionStatus::Running] {
            let mut e = execution_in(status);
            e.apply(ExecutionEvent::Interrupt, Timestamp::from_millis(185_000)).unwrap();
            assert_eq!(e.state, ExecutionState::Failed { error: ExecutionFailure::interrupted() });
        }
    }

    #[test]
    fn apply_follows_the_table_and_leaves_rejected_executions_untouched() {
        let now = Timestamp::from_millis(5_000);
        for from in ALL {
            for event in events() {
                let mut e = execution_in(from);
                let before = e.clone();
                let expected = next_status(from, &event);
                match (e.apply(event.clone(), now), expected) {
                    (Ok(()), Some(to)) => {
                        assert_eq!(e.status(), to);
                        assert_eq!(e.updated_at, now);
                    }
                    (Err(TransitionError::Illegal { .. }), None) => assert_eq!(e, before),
                    (got, want) => panic!("{from:?} + {}: got {got:?}, table says {want:?}", event.name()),
                }
            }
        }
    }

    #[test]
    fn claim_guards() {
        let cases = [
            // (now, expect expired)
            (9_999, false),
            (10_000, true),
            (20_000, true),
        ];
        for (now, expired) in cases {
            let mut e = execution_in(ExecutionStatus::Paused);
            let result = e.apply(
                ExecutionEvent::Claim { action: ApprovalAction::Decline, link: None },
                Timestamp::from_millis(now),
            );
            if expired {
                assert!(matches!(result, Err(TransitionError::ApprovalExpired { .. })), "{now}");
                assert_eq!(e.status(), ExecutionStatus::Paused);
            } else {
                assert_eq!(result, Ok(()));
                assert_eq!(e.state, ExecutionState::Resuming { action: ApprovalAction::Decline });
            }
        }
    }

    #[test]
    fn links_are_spent_by_a_claim_and_reset_by_the_next_pause() {
        let (link, other) = (TokenHash::of_token("link"), TokenHash::of_token("other"));
        let mut e = execution_in(ExecutionStatus::Paused);
        e.links.open(link.clone());
        e.links.open(other.clone());
        let claim = ExecutionEvent::Claim { action: ApprovalAction::Accept, link: Some(link.clone()) };
        e.apply(claim, Timestamp::from_millis(1)).unwrap();
        assert_eq!((e.links.status(&link), e.links.status(&other)), (LinkStatus::Spent, LinkStatus::Unknown));
        let pause = events()[0].clone();
        e.apply(pause, Timestamp::from_millis(2)).unwrap();
        e.links.open(other.clone());
        assert_eq!((e.links.status(&link), e.links.status(&other)), (LinkStatus::Spent, LinkStatus::Open));
    }

    #[test]
    fn pause_requires_a_pending_call() {
        let mut e = execution_in(ExecutionStatus::Running);
        let journal = Journal::new(Timestamp::from_millis(0), 1);
        let result =
            e.apply(ExecutionEvent::Pause { journal, deadline: Timestamp::from_millis(1) }, Timestamp::from_millis(0));
        assert!(matches!(result, Err(TransitionError::NothingPending { .. })));
        assert_eq!(e.status(), ExecutionStatus::Running);
    }

    #[test]
    fn state_serialises_with_a_status_tag() {
        let state = ExecutionState::Paused { deadline: Timestamp::from_millis(5) };
        assert_eq!(serde_json::to_value(&state).unwrap(), json!({"status": "paused", "deadline": 5}));
    }
}
