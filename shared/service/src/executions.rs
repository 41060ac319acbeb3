//! Executions across processes: run, and on a pause persist the snapshot; later
//! claim it (one winner), replay with the decision, and settle.
//!
//! Every state change goes through `Execution::apply` (the one transition
//! table) and is written with `update_execution`, which is conditional on the
//! version read: two racing resumes cannot both run the approved call.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    ApprovalAction, Execution, ExecutionEvent, ExecutionFailure, ExecutionId, ExecutionState, PendingCall, Principal,
    SessionId, Timeouts, Timestamp, TransitionError,
};
use executor_sandbox::{Clock, Outcome, Sandbox, SandboxError, Segment, Snapshot, Tools};
use executor_store::{Access, ExecutionStore, StoreError};
use serde_json::Value;

/// How long a settled or expired execution stays readable (then TTL removes it),
/// so a late approval link says "expired" rather than "not found".
const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What an `execute` or `resume` ended with, for the MCP and approval layers to render.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionResult {
    Completed {
        execution_id: ExecutionId,
        result: Value,
        logs: Vec<String>,
    },
    Failed {
        execution_id: ExecutionId,
        error: ExecutionFailure,
        logs: Vec<String>,
    },
    /// Persisted; waiting for a decision on `pending` until `expires_at`.
    Paused {
        execution_id: ExecutionId,
        expires_at: Timestamp,
        pending: Vec<PendingCall>,
        logs: Vec<String>,
    },
}

/// Why a resume did nothing. `code()` is the `error.code` of DESIGN.md section 4.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("no paused execution {0} exists for you; check the executionId returned by execute")]
    NotFound(ExecutionId),
    #[error("execution {0} waited too long for a decision and expired; run the code again")]
    Expired(ExecutionId),
    #[error("execution {0} was already resumed or finished; its decision was applied once")]
    AlreadySettled(ExecutionId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ResumeError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "execution_not_found",
            Self::Expired(_) => "execution_expired",
            Self::AlreadySettled(_) => "execution_already_settled",
            Self::Store(_) => "store_error",
        }
    }
}

pub struct Executions {
    store: Arc<dyn ExecutionStore>,
    sandbox: Sandbox,
    timeouts: Timeouts,
    clock: Arc<dyn Clock>,
}

impl Executions {
    pub fn new(store: Arc<dyn ExecutionStore>, sandbox: Sandbox, timeouts: Timeouts, clock: Arc<dyn Clock>) -> Self {
        Self { store, sandbox, timeouts, clock }
    }

    /// Run new code. Nothing is stored unless it pauses.
    pub async fn execute(
        &self,
        owner: &Principal,
        session: Option<&SessionId>,
        code: String,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, StoreError> {
        let random = |e: getrandom::Error| StoreError::Backend { operation: "draw random ids", detail: e.to_string() };
        let id = crate::ids::execution_id().map_err(random)?;
        let now = self.clock.now();
        let segment = Segment::start(id.clone(), code.clone(), now, crate::ids::seed().map_err(random)?);
        let outcome = self.sandbox.run(segment, tools).await;
        let (snapshot, logs) = match outcome {
            Outcome::Paused { snapshot, logs } => (snapshot, logs),
            Outcome::Completed { result, logs } => {
                return Ok(ExecutionResult::Completed { execution_id: id, result, logs });
            }
            Outcome::Failed { error, logs } => {
                return Ok(ExecutionResult::Failed { execution_id: id, error: (&error).into(), logs });
            }
        };
        let mut execution =
            Execution::start(id.clone(), owner.clone(), session.cloned(), code, snapshot.journal.clone(), now);
        self.pause(&mut execution, snapshot, now)?;
        self.store.create_execution(&execution).await?;
        Ok(paused_result(&execution, logs))
    }

    /// Apply a decision to a paused execution of `owner` and run it on.
    pub async fn resume(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        action: ApprovalAction,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let not_found = |e: StoreError| match e {
            StoreError::NotFound { .. } => ResumeError::NotFound(id.clone()),
            other => ResumeError::Store(other),
        };
        let mut execution = self.store.get_execution(Access::Owner(owner), id).await.map_err(not_found)?;
        let now = self.clock.now();

        // Claimed: paused -> resuming, conditional on the version just read.
        match execution.apply(ExecutionEvent::Claim { action }, now) {
            Ok(()) => {}
            Err(TransitionError::ApprovalExpired { .. }) => {
                self.expire(&mut execution, now).await?;
                return Err(ResumeError::Expired(id.clone()));
            }
            Err(_) if execution.state == ExecutionState::Expired => return Err(ResumeError::Expired(id.clone())),
            Err(_) => return Err(ResumeError::AlreadySettled(id.clone())),
        }
        match self.store.update_execution(&mut execution).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => return Err(ResumeError::AlreadySettled(id.clone())),
            Err(e) => return Err(not_found(e)),
        }

        // Replayed: the only winner runs the continuation.
        let snapshot = Snapshot { code: execution.code.clone(), journal: execution.journal.clone() };
        let outcome = self.sandbox.run(Segment::resume(id.clone(), snapshot, action), tools).await;
        let now = self.clock.now();

        // Settled, or paused again at the next approval.
        let (result, event) = match outcome {
            Outcome::Paused { snapshot, logs } => {
                self.pause(&mut execution, snapshot, now)?;
                self.store.update_execution(&mut execution).await?;
                return Ok(paused_result(&execution, logs));
            }
            Outcome::Completed { result, logs } => {
                let event = ExecutionEvent::Complete { result: result.clone() };
                (ExecutionResult::Completed { execution_id: id.clone(), result, logs }, event)
            }
            Outcome::Failed { error, logs } => {
                let event = match error {
                    SandboxError::Declined { .. } | SandboxError::Cancelled => ExecutionEvent::Decline,
                    _ => ExecutionEvent::Fail { error: (&error).into() },
                };
                (ExecutionResult::Failed { execution_id: id.clone(), error: (&error).into(), logs }, event)
            }
        };
        execution.apply(event, now).map_err(|e| ResumeError::Store(transition_bug(e)))?;
        execution.expires_at = now.plus(RETENTION);
        self.store.update_execution(&mut execution).await?;
        Ok(result)
    }

    /// Expire a paused execution (its approval window or session ended). A lost
    /// race means someone else settled it first, which is fine.
    pub async fn expire(&self, execution: &mut Execution, now: Timestamp) -> Result<(), StoreError> {
        if execution.apply(ExecutionEvent::Expire, now).is_err() {
            return Ok(());
        }
        match self.store.update_execution(execution).await {
            Ok(()) | Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn pause(&self, execution: &mut Execution, snapshot: Snapshot, now: Timestamp) -> Result<(), StoreError> {
        let deadline = now.plus(self.timeouts.approval_window);
        execution.apply(ExecutionEvent::Pause { journal: snapshot.journal, deadline }, now).map_err(transition_bug)?;
        execution.expires_at = deadline.plus(RETENTION);
        Ok(())
    }
}

/// The sandbox and the state machine disagree: a bug, reported rather than hidden.
fn transition_bug(e: TransitionError) -> StoreError {
    StoreError::Corrupt { what: "execution", detail: e.to_string() }
}

fn paused_result(execution: &Execution, logs: Vec<String>) -> ExecutionResult {
    let ExecutionState::Paused { deadline } = execution.state else { unreachable!("only called after a pause") };
    ExecutionResult::Paused {
        execution_id: execution.id.clone(),
        expires_at: deadline,
        pending: execution.journal.pending.clone(),
        logs,
    }
}
