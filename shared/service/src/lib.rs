//! The application layer, framework-neutral: the hosts (Lambda functions and
//! `executor serve`) call it; it calls the domain, the sandbox and the store ports.

mod alarms;
mod approval_page;
mod approvals;
mod auth;
mod config;
#[cfg(feature = "conformance")]
mod conformance;
mod connections;
mod continuations;
mod executions;
mod grants;
mod host;
mod jsonrpc;
mod jwt_crypto;
mod mcp_tools;
mod native;
mod oidc;
mod outbox;
mod quotas;
mod random;
mod responses;
mod results;
mod sessions;
mod spans;
mod toolkits;
mod visible;

pub use alarms::Alarms;
pub use auth::KEY_CACHE_TTL;
pub use config::{ConfigError, EventsSetupError, HostConfig};
pub use continuations::{ContinuationError, Continuations};
pub use executions::{ExecutionResult, Executions, ResumeError};
pub use grants::Grants;
pub use host::Host;
pub use native::RequestStateKey;
pub use oidc::{OidcConfig, TOOLKIT_CLAIM};
pub use outbox::{Events, RETRY_INTERVAL as EVENT_RETRY_INTERVAL};
pub use random::ApprovalToken;
pub use toolkits::ToolkitEndpoint;
