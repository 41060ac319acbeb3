//! Where a stored execution stands, as the result an entry point answers with.

use executor_core::{Execution, ExecutionId, ExecutionState};
use executor_store::StoreError;

use super::{ExecutionResult, ResumeError};
use crate::application::random::ApprovalToken;

/// Whether the execution's pause waits for its owner to connect a source.
pub(super) fn waits_for_connect(execution: &Execution) -> bool {
    execution.journal.pending.first().is_some_and(|call| call.connect.is_some())
}

/// Which pause an execution is at: the step of its first pending call.
pub(super) fn pending_step(execution: &Execution) -> Option<u32> {
    execution.journal.pending.first().map(|call| call.step)
}

pub(super) fn paused_result(execution: &Execution, link: Option<ApprovalToken>) -> ExecutionResult {
    let ExecutionState::Paused { deadline } = *execution.state() else { unreachable!("only called after a pause") };
    ExecutionResult::Paused {
        execution_id: execution.id.clone(),
        expires_at: deadline,
        pending: execution.journal.pending.clone(),
        logs: execution.logs.clone(),
        link,
        mode: execution.mode,
    }
}

/// Where a stored execution stands, as a result.
pub(super) fn settled(execution: &Execution) -> Result<ExecutionResult, ResumeError> {
    let execution_id = execution.id.clone();
    let logs = execution.logs.clone();
    Ok(match execution.state() {
        ExecutionState::Paused { .. } => paused_result(execution, None),
        ExecutionState::Running | ExecutionState::Resuming { .. } => ExecutionResult::Running { execution_id },
        ExecutionState::Completed { result } => {
            ExecutionResult::Completed { execution_id, result: result.clone(), logs }
        }
        ExecutionState::Failed { error } | ExecutionState::Declined { error } => {
            ExecutionResult::Failed { execution_id, error: error.clone(), logs }
        }
        ExecutionState::Expired => return Err(ResumeError::Expired(execution_id)),
    })
}

/// How a resume ended, for its span: the result's status or the resume error's code.
pub(super) fn outcome_name(result: &Result<ExecutionResult, ResumeError>) -> &'static str {
    match result {
        Ok(result) => result.status(),
        Err(error) => error.code(),
    }
}

/// A store's "not found" is the execution's; anything else is the store's.
pub(super) fn not_found(id: &ExecutionId, e: StoreError) -> ResumeError {
    match e {
        StoreError::NotFound { .. } => ResumeError::NotFound(id.clone()),
        other => ResumeError::Store(other),
    }
}
