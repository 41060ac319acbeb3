//! `execute` with an `idempotencyKey`: at most one run per owner and key
//! within [`IDEMPOTENCY_WINDOW`](executor_core::IDEMPOTENCY_WINDOW). The
//! first is stored as running before it runs, with a receipt for the key in
//! the same conditional write, so of any number of racing repeats exactly
//! one runs; every other one (and any later repeat) answers where that run
//! stands, and runs nothing.

use std::sync::Arc;

use executor_core::{ElicitationMode, IdempotencyKey, Principal, Receipt, SessionId};
use executor_sandbox::Tools;
use executor_store::{Access, StoreError};

use super::entry::{Refused, recorded};
use super::outcome::settled;
use super::{Asker, ExecutionResult, Executions};

/// Why a keyed `execute` did nothing.
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    #[error(
        "this idempotencyKey was already used with different code in the last 24 hours; send a new key with new code"
    )]
    KeyReused,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Executions {
    /// Run new code once for `key`: a repeat with the same code answers the
    /// first run's outcome, or where it stands now (`running`, paused).
    pub async fn execute_once(
        &self,
        (asker, session): (impl Into<Asker<'_>>, Option<&SessionId>),
        mode: ElicitationMode,
        code: String,
        key: &IdempotencyKey,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, OnceError> {
        let (store, asker) = (&self.runner.store, asker.into());
        let owner = asker.owner;
        match store.find_receipt(owner, &key.hash()).await {
            Ok(receipt) => return self.repeat(owner, &receipt, &code).await,
            Err(StoreError::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        let admitted = match self.admit(owner).await? {
            Ok(admitted) => admitted,
            Err(Refused { execution_id, error }) => {
                return Ok(ExecutionResult::Failed { execution_id, error, logs: Vec::new() });
            }
        };
        let (mut execution, segment) = self.new_execution(&admitted, asker, session, mode, code.clone(), &tools)?;
        let receipt = Receipt::new(owner, key, &execution.id, &code, self.runner.clock.now());
        match self.runner.hand_on_once(&mut execution, &segment, &receipt).await {
            Ok(()) => {}
            // A racing repeat took the key first: its run is the one.
            Err(StoreError::AlreadyExists { .. }) => {
                if let (Some(gate), Some(quota)) = (&self.runner.quotas, admitted.held.quota) {
                    gate.release(quota).await;
                }
                let receipt = store.find_receipt(owner, &key.hash()).await?;
                return self.repeat(owner, &receipt, &code).await;
            }
            Err(error) => return Err(error.into()),
        }
        Ok(self.runner.run(execution, true, segment, tools, admitted.held).await.map_err(recorded)?)
    }

    /// Where the execution that took the key stands, for a repeat of `code`.
    async fn repeat(&self, owner: &Principal, receipt: &Receipt, code: &str) -> Result<ExecutionResult, OnceError> {
        if !receipt.same_code(code) {
            return Err(OnceError::KeyReused);
        }
        tracing::info!(executor.execution.id = receipt.execution_id.as_str(), "repeated execute answered");
        let execution = self.load(Access::Owner(owner), &receipt.execution_id).await.map_err(recorded)?;
        Ok(settled(&execution).map_err(recorded)?)
    }
}
