//! What MCP tasks need of executions: an execution that is stored from its
//! start (the task id is the execution id), read as it stands, and cancelled
//! without waiting. The protocol side is `mcp_tools::tasks`.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    ApprovalAction, Channel, Decider, ElicitationMode, Execution, ExecutionId, ExecutionState, Principal, SessionId,
};
use executor_sandbox::Tools;
use executor_store::{Access, StoreError};

use super::claim::Decision;
use super::outcome::settled;
use super::runner::Runner;
use super::{Asker, ExecutionResult, Executions, Refused, ResumeError};

impl Executions {
    /// Start `code` as a task: the answer comes at once (`running`, or the
    /// outcome if it was that quick), and whatever the run ends with is
    /// stored for `tasks/get` and `tasks/result`. `Err` when it was refused
    /// before it ran (nothing stored, so there is no task).
    pub async fn execute_as_task(
        &self,
        asker: Asker<'_>,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        tools: Arc<dyn Tools>,
    ) -> Result<Result<ExecutionResult, Refused>, StoreError> {
        let runner = Runner { budget: Duration::ZERO, stored_outcomes: true, ..self.runner.clone() };
        let at_once = Executions { runner, ..self.clone() };
        at_once.start(asker, session, mode, code, tools).await
    }

    /// The execution `id` of `owner` as it stands (a pause past its window
    /// expired, a silent run interrupted), for a caller whose view is `tools`.
    pub async fn task(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<Execution, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        self.runner.tools.scope(&execution, tools)?;
        Ok(execution)
    }

    /// The execution `id` of `owner` as [`Executions::task`] reads it, with
    /// the result it stands at (`running`, the pause, the outcome; an expired
    /// pause is [`ResumeError::Expired`]), for the 2026-07-28 `tasks/get`.
    pub async fn task_outcome(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<(Execution, Result<ExecutionResult, ResumeError>), ResumeError> {
        let execution = self.task(owner, id, tools).await?;
        let outcome = settled(&execution);
        Ok((execution, outcome))
    }

    /// Stop the execution without waiting for it: a running one at its next
    /// safe point (its runner reads the request within a second), a paused
    /// one now, with no call made. A settled one stays as it is.
    pub async fn cancel_task(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<Execution, ResumeError> {
        let mut execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.runner.tools.scope(&execution, tools)?;
        if execution.is_running() {
            self.request_cancel(&mut execution, Decider::model(Channel::Task)).await?;
            return Ok(execution);
        }
        if matches!(execution.state(), ExecutionState::Paused { .. }) {
            // The owner cancels their own pause in any mode: no call is made.
            match self
                .decide(execution, Decision::plain(ApprovalAction::Cancel, Decider::model(Channel::Task)), tools)
                .await
            {
                Ok(_) | Err(ResumeError::AlreadySettled(_)) => {}
                Err(error) => return Err(error),
            }
            return self.load(Access::Owner(owner), id).await;
        }
        Err(ResumeError::AlreadySettled(id.clone()))
    }
}
