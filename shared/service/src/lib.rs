//! The service layer, framework-neutral: the hosts (the Lambda functions and
//! `executor serve`) build it with [`compose`] and hand it requests; it calls
//! the domain, the sandbox and the store ports.
//!
//! Two rooms: `application` holds what happens (executions, alarms, sessions,
//! keys, console sign-ins, grants, the event outbox) and knows no HTTP; `http_edge` holds how
//! it is reached (the parsed routes and their one auth guard, the MCP edge
//! around rmcp, the approval page and JSON API, the console, the connect flow, responses).
//! Between them, `config` (the settings) and `compose` (the services built
//! from them).

mod application;
mod compose;
mod config;
mod http_edge;

pub use application::alarms::Alarms;
pub use application::console::{ConsoleError, ConsoleSignIn, ConsoleToken};
pub use application::continuations::{ContinuationError, Continuations};
pub use application::executions::{ExecutionResult, Executions, OnceError, ResumeError};
pub use application::grants::Grants;
pub use application::history::{History, Listing, MAX_LIST_LIMIT};
pub use application::keys::KEY_CACHE_TTL;
pub use application::outbox::{Events, RETRY_INTERVAL as EVENT_RETRY_INTERVAL};
pub use application::random::ApprovalToken;
pub use compose::{Services, compose};
pub use config::{ConfigError, EventsSetupError, HostConfig, OidcConfig, RequestStateKey, ToolkitEndpoint};
pub use http_edge::host::Host;
pub use http_edge::oidc::TOOLKIT_CLAIM;
