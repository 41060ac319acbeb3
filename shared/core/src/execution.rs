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
//! invocation, which takes it with `continue`, replays the journal and goes
//! on). `hand_on`, `heartbeat` and `request_cancel` keep the status and change
//! who runs it, its sign of life, or what its runner is asked to do.
//! ```
//!
//! [`next_status`] is the one place that says which transitions exist, and
//! [`Execution::apply`] the only code that changes an execution's status,
//! claim, heartbeat, cancel flag, resume count or expiry: those fields are
//! private, so nothing else can. Stores persist the result with a write
//! conditional on `version`, so two racing claims cannot both win.
//!
//! ```compile_fail
//! # fn f(e: &mut executor_core::Execution) {
//! e.resumes = 0; // only `apply` changes what the state machine guards
//! # }
//! ```

mod event;
#[cfg(test)]
mod tests;

pub use event::{Actor, Applied, Channel, Decider, ExecutionEvent, next_status};

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ApprovalLinks, ElicitationMode, ExecutionId, Journal, Principal, SessionId, Timestamp, ToolkitName};

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
    /// Every status, in the order the lifecycle goes through them.
    pub const ALL: [ExecutionStatus; 7] =
        [Self::Running, Self::Paused, Self::Resuming, Self::Completed, Self::Failed, Self::Declined, Self::Expired];

    /// The status named `name` (as [`ExecutionStatus::as_str`] writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == name)
    }

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("execution {id} is {from} and cannot {event}")]
    Illegal { id: ExecutionId, from: &'static str, event: &'static str },
    #[error("execution {id} waited for approval until {deadline} and has expired; run the code again")]
    ApprovalExpired { id: ExecutionId, deadline: Timestamp },
    #[error("execution {id} has no pending call to decide on")]
    NothingPending { id: ExecutionId },
    #[error("execution {id} already has a runner; it is continued once")]
    AlreadyClaimed { id: ExecutionId },
}

/// How long a settled or expired execution stays readable (then the store
/// forgets it), so a late approval link says "expired" rather than "not found".
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub id: ExecutionId,
    pub owner: Principal,
    /// `None` for stateless (2026-07-28) executions.
    pub session_id: Option<SessionId>,
    pub code: String,
    pub journal: Journal,
    state: ExecutionState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When storage may forget the record (DynamoDB TTL); reads treat it as gone after.
    expires_at: Timestamp,
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
    heartbeat_at: Option<Timestamp>,
    /// Someone asked a running execution to stop; its runner sees it at its
    /// next heartbeat and stops at the next safe point.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cancel_requested: bool,
    /// A random id the latest claimer wrote with its claim: after a claim write
    /// whose answer was lost, the claimer reads the execution again and knows
    /// the claim is its own only if this is its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claim: Option<String>,
    /// The toolkit whose endpoint started it: its continuations see that
    /// toolkit's tools and policy, and only that endpoint (or an unscoped
    /// owner) may resume it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitName>,
    /// The credential the code was sent with (`key:<owner>/<key id>`, an
    /// OIDC identity), so whoever decides a pause sees who asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<crate::DecidedBy>,
    /// Decisions claimed so far (each resume that ran): counted in the claim's
    /// own write, against the resume cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    resumes: u32,
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
            asked_by: None,
            resumes: 0,
            version: 0,
        }
    }

    /// A state set directly, for tables of other modules' tests.
    #[cfg(test)]
    pub(crate) fn with_state(mut self, state: ExecutionState) -> Self {
        self.state = state;
        self
    }

    pub fn state(&self) -> &ExecutionState {
        &self.state
    }

    pub fn status(&self) -> ExecutionStatus {
        self.state.status()
    }

    /// When storage may forget the record; reads treat it as gone after.
    pub fn expires_at(&self) -> Timestamp {
        self.expires_at
    }

    /// When its runner last said it still runs it.
    pub fn heartbeat_at(&self) -> Option<Timestamp> {
        self.heartbeat_at
    }

    /// Whether someone asked its runner to stop.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested
    }

    /// The id of whoever runs it now (`None`: handed on, nobody yet).
    pub fn claim(&self) -> Option<&str> {
        self.claim.as_deref()
    }

    /// Decisions claimed so far.
    pub fn resumes(&self) -> u32 {
        self.resumes
    }

    /// Whether something runs it now (a run handed on, or a continuation).
    pub fn is_running(&self) -> bool {
        matches!(self.state, ExecutionState::Running | ExecutionState::Resuming { .. })
    }

    /// Whether nothing runs this running or resuming execution any more: its
    /// last sign of life (the latest heartbeat or write) is [`HEARTBEAT_STALE`]
    /// old. A live runner renews it far more often, whatever the run's length.
    pub fn is_stranded(&self, now: Timestamp) -> bool {
        let alive = self.heartbeat_at.map_or(self.updated_at, |beat| beat.max(self.updated_at));
        self.is_running() && now >= alive.plus(HEARTBEAT_STALE)
    }

    /// Apply `event` at `now` and say what happened, or leave the execution
    /// untouched and say why not.
    pub fn apply(&mut self, event: ExecutionEvent, now: Timestamp) -> Result<Applied, TransitionError> {
        let from = self.status();
        let Some(to) = next_status(from, &event) else {
            return Err(TransitionError::Illegal { id: self.id.clone(), from: from.as_str(), event: event.name() });
        };
        self.check(&event, now)?;
        let applied = Applied { event: event.name(), by: event.actor(), at: now, from, to };
        if event.moves_on() {
            self.updated_at = now;
        }
        match event {
            ExecutionEvent::HandOn { claim, lease } => {
                self.claim = Some(claim);
                self.heartbeat_at = Some(now);
                self.expires_at = now.plus(lease).plus(RETENTION);
            }
            ExecutionEvent::Pause { journal, deadline } => {
                self.journal = journal;
                self.links.reset();
                self.expires_at = deadline.plus(RETENTION);
                self.state = ExecutionState::Paused { deadline };
            }
            ExecutionEvent::Claim { action, link, claim, by: _ } => {
                self.links.spend(link);
                self.resumes += 1;
                self.claim = Some(claim);
                self.heartbeat_at = Some(now);
                self.state = ExecutionState::Resuming { action };
            }
            ExecutionEvent::Continue { claim } => {
                self.claim = Some(claim);
                self.heartbeat_at = Some(now);
            }
            ExecutionEvent::Heartbeat => self.heartbeat_at = Some(now),
            ExecutionEvent::RequestCancel { .. } => self.cancel_requested = true,
            ExecutionEvent::Yield { journal, lease } => {
                self.journal = journal;
                self.claim = None;
                self.heartbeat_at = Some(now);
                self.expires_at = now.plus(lease).plus(RETENTION);
                self.state = ExecutionState::Running;
            }
            // The approval window's end already set how long it is kept.
            ExecutionEvent::Expire => self.state = ExecutionState::Expired,
            ExecutionEvent::Complete { result } => self.settle(ExecutionState::Completed { result }, now),
            ExecutionEvent::Fail { error } => self.settle(ExecutionState::Failed { error }, now),
            ExecutionEvent::Decline { error } => self.settle(ExecutionState::Declined { error }, now),
            ExecutionEvent::Interrupt => {
                self.settle(ExecutionState::Failed { error: ExecutionFailure::interrupted() }, now)
            }
        }
        Ok(applied)
    }

    /// The guards beyond the table: what the event needs of this execution's data.
    fn check(&self, event: &ExecutionEvent, now: Timestamp) -> Result<(), TransitionError> {
        let id = || self.id.clone();
        match (event, &self.state) {
            (ExecutionEvent::Pause { journal, .. }, _) if journal.pending.is_empty() => {
                Err(TransitionError::NothingPending { id: id() })
            }
            (ExecutionEvent::Claim { .. }, ExecutionState::Paused { deadline }) if now >= *deadline => {
                Err(TransitionError::ApprovalExpired { id: id(), deadline: *deadline })
            }
            (ExecutionEvent::HandOn { .. } | ExecutionEvent::Continue { .. }, _) if self.claim.is_some() => {
                Err(TransitionError::AlreadyClaimed { id: id() })
            }
            _ => Ok(()),
        }
    }

    /// A final state, kept readable for [`RETENTION`].
    fn settle(&mut self, state: ExecutionState, now: Timestamp) {
        self.state = state;
        self.expires_at = now.plus(RETENTION);
    }
}
