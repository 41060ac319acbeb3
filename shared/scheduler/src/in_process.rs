//! Alarms for `executor serve`: a tokio timer per session. The store keeps
//! each session's `alarm_at`, so a restarted host re-arms every alarm from it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use executor_core::{Clock, SessionId, SystemClock, Timestamp};
use tokio::task::JoinHandle;

use executor_store::{StoreError, traced};

use crate::AlarmScheduler;

/// The backend named in store spans.
const BACKEND: &str = "in_process";

type Fire = Arc<dyn Fn(SessionId, Timestamp) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

struct Armed {
    at: Timestamp,
    timer: JoinHandle<()>,
}

#[derive(Clone)]
pub struct InProcessScheduler {
    armed: Arc<Mutex<HashMap<SessionId, Armed>>>,
    fire: Arc<Mutex<Option<Fire>>>,
    /// How long a timer sleeps is `at` minus this clock's now.
    clock: Arc<dyn Clock>,
}

impl Default for InProcessScheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl InProcessScheduler {
    /// A scheduler whose alarms do nothing until [`Self::on_fire`] says what to call.
    pub fn new() -> Self {
        Self { armed: Arc::default(), fire: Arc::default(), clock: Arc::new(SystemClock) }
    }

    /// Timers measured against `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// What an alarm calls when it fires (the service's alarm handler). Set
    /// once the handler exists: the handler itself needs the scheduler.
    pub fn on_fire<F, Fut>(&self, fire: F)
    where
        F: Fn(SessionId, Timestamp) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let fire: Fire = Arc::new(move |id, at| Box::pin(fire(id, at)));
        *self.fire.lock().unwrap() = Some(fire);
    }

    /// When the session's alarm is armed for, if it is.
    pub fn armed_at(&self, session: &SessionId) -> Option<Timestamp> {
        self.armed.lock().unwrap().get(session).map(|a| a.at)
    }
}

#[async_trait]
impl AlarmScheduler for InProcessScheduler {
    async fn schedule(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        traced("scheduler.schedule", BACKEND, async {
            if self.armed_at(session) == Some(at) {
                return Ok(());
            }
            let (id, armed, fire) = (session.clone(), self.armed.clone(), self.fire.clone());
            let delay = at.since(self.clock.now());
            let timer = tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                // Disarm first: whatever the handler arms next is a new alarm.
                let current = armed.lock().unwrap().get(&id).map(|a| a.at);
                if current == Some(at) {
                    armed.lock().unwrap().remove(&id);
                }
                let handler = fire.lock().unwrap().clone();
                if let Some(handler) = handler {
                    handler(id, at).await;
                }
            });
            if let Some(previous) = self.armed.lock().unwrap().insert(session.clone(), Armed { at, timer }) {
                previous.timer.abort();
            }
            Ok(())
        })
        .await
    }

    async fn cancel(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        traced("scheduler.cancel", BACKEND, async {
            let mut armed = self.armed.lock().unwrap();
            if armed.get(session).is_some_and(|a| a.at == at)
                && let Some(armed) = armed.remove(session)
            {
                armed.timer.abort();
            }
            Ok(())
        })
        .await
    }
}
