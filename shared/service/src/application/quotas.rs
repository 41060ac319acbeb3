//! Quotas per owner, applied around executions: a new execution takes one of
//! the hour's executions and a running slot before anything runs (one store
//! transaction, none at all when no such limit is set), and gives the slot
//! back when its run ends. The resume cap is counted in the claim's own write
//! (`Execution::resumes`), so it costs no write of its own.

use std::sync::Arc;
use std::time::Duration;

use executor_core::quota::hour_window;
use executor_core::{ExecutionId, Principal, QuotaExceeded, QuotaLimit, QuotaLimits, Quotas, Timestamp};
use executor_sandbox::{Outcome, SandboxError};
use executor_store::{HourlyTake, QuotaOutcome, QuotaStore, QuotaTake, SlotTake, StoreError};
use executor_telemetry::{Metric, count};

#[derive(Clone)]
pub(crate) struct QuotaGate {
    store: Arc<dyn QuotaStore>,
    quotas: Quotas,
}

/// A running slot to give back when the run ends.
pub(crate) struct Slot {
    owner: Principal,
    execution: ExecutionId,
}

impl QuotaGate {
    pub fn new(store: Arc<dyn QuotaStore>, quotas: Quotas) -> Self {
        Self { store, quotas }
    }

    pub fn limits(&self, owner: &Principal) -> QuotaLimits {
        self.quotas.for_owner(owner)
    }

    /// Take what execution `id` of `owner` needs at `now`; a slot is leased
    /// for `run_limit` in case this process stops without giving it back.
    pub async fn admit(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        now: Timestamp,
        run_limit: Duration,
    ) -> Result<Result<Option<Slot>, QuotaExceeded>, StoreError> {
        let limits = self.limits(owner);
        let hourly = limits.executions_per_hour.map(|limit| HourlyTake { window: hour_window(now).0, limit });
        let slot = limits.concurrent_executions.map(|limit| SlotTake {
            execution: id.clone(),
            limit,
            lease_until: now.plus(run_limit),
        });
        if hourly.is_none() && slot.is_none() {
            return Ok(Ok(None));
        }
        let held = slot.is_some();
        let take = QuotaTake { owner: owner.clone(), now, hourly, slot };
        Ok(match self.store.take_quota(&take).await? {
            QuotaOutcome::Taken => Ok(held.then(|| Slot { owner: owner.clone(), execution: id.clone() })),
            QuotaOutcome::Refused(QuotaLimit::ExecutionsPerHour) => {
                Err(refused(QuotaExceeded::hourly(limits.executions_per_hour.unwrap_or_default(), now)))
            }
            // The store refuses only the two limits it counts.
            QuotaOutcome::Refused(_) => {
                Err(refused(QuotaExceeded::concurrent(limits.concurrent_executions.unwrap_or_default())))
            }
        })
    }

    /// Give the slot back. A failure only delays it: the lease runs out.
    pub async fn release(&self, slot: Slot) {
        if let Err(error) = self.store.release_slot(&slot.owner, &slot.execution).await {
            tracing::warn!(executor.execution.id = slot.execution.as_str(), %error, "quota slot not released; its lease will run out");
        }
    }

    /// The resume cap refuses a claim once `resumes` decisions were claimed.
    pub fn check_resume(&self, owner: &Principal, resumes: u32) -> Result<(), QuotaExceeded> {
        match self.limits(owner).resumes_per_execution {
            Some(cap) if resumes >= cap => {
                Err(refused(QuotaExceeded::per_execution(QuotaLimit::ResumesPerExecution, cap)))
            }
            _ => Ok(()),
        }
    }
}

/// `outcome`, with a run the tool-call cap stopped counted as a refusal.
pub(crate) fn counted(outcome: Outcome) -> Outcome {
    if let Outcome::Failed { error: SandboxError::Quota(exceeded), .. } = &outcome {
        refused(exceeded.clone());
    }
    outcome
}

/// Counted once per refusal, whatever the limit.
pub(crate) fn refused(exceeded: QuotaExceeded) -> QuotaExceeded {
    count(Metric::QuotaRejections);
    tracing::info!(quota = exceeded.limit.as_str(), "quota exceeded");
    exceeded
}
