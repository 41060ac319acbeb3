//! One place that builds the application's services from the settings and
//! their dependencies (the store, the sandbox, the alarm scheduler), for
//! every host: `executor serve` and the Lambda shell (through
//! [`crate::Host::new`]) and the alarm function.

use std::sync::Arc;

use executor_sandbox::Sandbox;
use executor_scheduler::AlarmScheduler;
use executor_store::{OutboxStore, Store};

use crate::application::alarms::Alarms;
use crate::application::console::ConsoleSignIn;
use crate::application::executions::Executions;
use crate::application::grants::Grants;
use crate::application::history::History;
use crate::application::outbox::Events;
use crate::application::quotas::QuotaGate;
use crate::application::sessions::Sessions;
use crate::config::HostConfig;

/// The application's services, wired to each other and to the store.
#[derive(Clone)]
pub struct Services {
    pub executions: Arc<Executions>,
    /// What a fired alarm (an in-process timer or the alarm function) calls.
    pub alarms: Arc<Alarms>,
    pub grants: Arc<Grants>,
    /// The audit trail, as its owners read it.
    pub history: Arc<History>,
    /// The lifecycle event outbox, when events are on.
    pub events: Option<Events>,
    pub(crate) sessions: Arc<Sessions>,
    /// Console sign-ins and sessions.
    pub console: Arc<ConsoleSignIn>,
}

/// Build every service from `config`. Nothing runs yet: a host serves
/// requests with them (and the alarm function uses only `alarms`).
pub fn compose<S: Store + 'static>(
    store: Arc<S>,
    sandbox: Sandbox,
    scheduler: Arc<dyn AlarmScheduler>,
    config: &HostConfig,
) -> Services {
    let clock = config.clock.clone();
    let views = config.toolkits.iter().map(|t| (t.name.clone(), t.tools.clone())).collect();
    let grants = Arc::new(Grants::new(store.clone(), clock.clone(), config.grant_ttl));
    let events = config.event_sink.clone().map(|sink| {
        let outbox: Arc<dyn OutboxStore> = store.clone();
        Events::new(outbox, sink, clock.clone(), config.event_links())
    });
    let executions = Arc::new(
        Executions::new(store.clone(), sandbox, config.timeouts, clock.clone())
            .with_approval_wait(config.approval_wait)
            .with_audit_retention(config.audit_retention)
            .with_max_concurrent(config.max_concurrent_executions)
            .with_response_budget(config.response_budget)
            .with_continuations(config.continuations.clone())
            .with_toolkits(views)
            .with_quotas(QuotaGate::new(store.clone(), config.quotas.clone()))
            .with_grants(grants.clone())
            .with_connections(config.connections.clone())
            .with_events(events.clone()),
    );
    let alarms =
        Arc::new(Alarms::new(store.clone(), store.clone(), scheduler, config.timeouts).with_events(events.clone()));
    let history = Arc::new(History::new(store.clone(), clock.clone()));
    let console = Arc::new(ConsoleSignIn::new(store.clone(), clock.clone(), config.console_session));
    let sessions =
        Arc::new(Sessions::new(store, alarms.clone(), clock, config.activity_interval, config.session_retention));
    Services { executions, alarms, grants, history, events, sessions, console }
}
