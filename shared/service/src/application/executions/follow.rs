//! Watching a run from outside: `resume` of a running execution follows it
//! (and may ask it to stop), and a browser-mode `resume` waits for the
//! person at the link, up to a bound measured on the runtime's timer.

use std::time::Duration;

use executor_core::{Decider, ElicitationMode, Execution, ExecutionEvent, ExecutionState};
use executor_store::{Access, StoreError};

use super::outcome::{not_found, paused_result, pending_step, settled, waits_for_connect};
use super::recorder::Write;
use super::{ExecutionResult, Executions, POLL_INTERVAL, ResumeError, SETTLE_ATTEMPTS};

impl Executions {
    /// `resume` of a running execution: with `cancel`, ask its runner to stop
    /// at the next safe point; either way wait, up to the response budget,
    /// for its outcome (a result, an error, a pause, or `running` again).
    pub(super) async fn follow(
        &self,
        mut execution: Execution,
        cancel: Option<Decider>,
    ) -> Result<ExecutionResult, ResumeError> {
        if let Some(by) = cancel {
            self.request_cancel(&mut execution, by).await?;
        }
        self.await_outcome(execution, None, self.runner.budget).await
    }

    /// Mark the stored run as cancelled; its runner reads it within a second.
    pub(super) async fn request_cancel(&self, execution: &mut Execution, by: Decider) -> Result<(), ResumeError> {
        for _ in 0..SETTLE_ATTEMPTS {
            if execution.cancel_requested() || !execution.is_running() {
                return Ok(());
            }
            match self
                .runner
                .recorder
                .record(execution, ExecutionEvent::RequestCancel { by: by.clone() }, (Write::Update, None))
                .await
            {
                Ok(_) => {
                    tracing::info!(executor.execution.id = execution.id.as_str(), "cancellation requested");
                    return Ok(());
                }
                // A heartbeat or the settle came first: look again.
                Err(StoreError::Conflict { .. }) => {
                    *execution = self.load(Access::Internal, &execution.id).await?;
                }
                Err(e) => return Err(not_found(&execution.id, e)),
            }
        }
        Ok(())
    }

    /// Wait (at most `wait`) while the execution runs or stays at the pause
    /// `watched` (browser mode: the human has not decided it yet), then report
    /// where it stands. A browser-mode pause is reported with a fresh link, so
    /// the caller can always show one.
    pub(super) async fn await_outcome(
        &self,
        mut execution: Execution,
        watched: Option<u32>,
        wait: Duration,
    ) -> Result<ExecutionResult, ResumeError> {
        // How long this request may take is the transport's time, not the
        // domain's: it is measured on the runtime's timer, deadlines on the clock.
        let until = tokio::time::Instant::now() + wait;
        loop {
            let now = self.runner.clock.now();
            let waiting = tokio::time::Instant::now() < until;
            match execution.state() {
                ExecutionState::Paused { deadline } if now >= *deadline => {
                    self.runner.recorder.expire(&mut execution, now).await?;
                    return Err(ResumeError::Expired(execution.id));
                }
                ExecutionState::Paused { .. } if waiting && pending_step(&execution) == watched => {}
                ExecutionState::Running | ExecutionState::Resuming { .. } if waiting => {}
                ExecutionState::Paused { .. }
                    if execution.mode == ElicitationMode::Browser || waits_for_connect(&execution) =>
                {
                    match self.runner.recorder.open_link(&mut execution).await {
                        Ok(token) => return Ok(paused_result(&execution, Some(token))),
                        // Decided meanwhile: look again.
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => return Err(not_found(&execution.id, e)),
                    }
                }
                _ => return settled(&execution),
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            execution = self.load(Access::Internal, &execution.id).await?;
        }
    }
}
