//! The calls a run made, for the audit trail: shared between the run, which
//! adds each call as its outcome is journaled, and whoever records the run,
//! which writes them with its next store write (and only then counts them
//! written, so a write that fails loses none). Replayed calls are not added
//! again: they were recorded by the run that made them.

use std::sync::{Arc, Mutex, PoisonError};

use executor_core::Called;

/// Clones share one log.
#[derive(Debug, Clone, Default)]
pub struct CallLog(Arc<Mutex<Log>>);

#[derive(Debug, Default)]
struct Log {
    calls: Vec<Called>,
    /// How many of `calls` a store write has recorded.
    written: usize,
}

impl CallLog {
    pub(crate) fn add(&self, call: Called) {
        self.lock().calls.push(call);
    }

    /// The calls no write has recorded yet, oldest first.
    pub fn unwritten(&self) -> Vec<Called> {
        let log = self.lock();
        log.calls[log.written..].to_vec()
    }

    /// The first `count` of [`CallLog::unwritten`] are stored now.
    pub fn mark_written(&self, count: usize) {
        let mut log = self.lock();
        log.written = (log.written + count).min(log.calls.len());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use executor_core::{CallOutcome, Called};

    use super::CallLog;

    fn call(step: u32) -> Called {
        Called {
            step,
            tool: "gh.list".into(),
            kind: None,
            outcome: CallOutcome::Ok,
            http_status: None,
            error_code: None,
            duration_ms: 0,
            allowed_by: None,
            policy_id: None,
            grant_id: None,
        }
    }

    #[test]
    fn calls_stay_unwritten_until_a_write_records_them() {
        let log = CallLog::default();
        let shared = log.clone();
        log.add(call(0));
        log.add(call(1));
        assert_eq!(shared.unwritten().len(), 2);
        // A write that failed marks nothing: the next one carries them again.
        let seen = shared.unwritten();
        log.add(call(2));
        shared.mark_written(seen.len());
        assert_eq!(shared.unwritten().iter().map(|c| c.step).collect::<Vec<_>>(), [2]);
        shared.mark_written(5);
        assert!(shared.unwritten().is_empty());
    }
}
