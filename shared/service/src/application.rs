//! What happens, without HTTP: executions (run, pause, claim, replay,
//! settle), what a fired alarm does, MCP sessions, API keys, console sign-ins, remembered
//! approvals, the tools a run sees, the lifecycle event outbox, quotas, and
//! reading the audit trail.
//! `crate::compose` builds them all from the settings.

pub(crate) mod alarms;
pub(crate) mod connected;
pub(crate) mod console;
pub(crate) mod continuations;
pub(crate) mod executions;
pub(crate) mod grants;
pub(crate) mod history;
pub(crate) mod keys;
pub(crate) mod outbox;
pub(crate) mod quotas;
pub(crate) mod random;
pub(crate) mod sessions;
