//! The application layer, framework-neutral: the hosts (Lambda functions and
//! `executor serve`) call it; it calls the domain, the sandbox and the store ports.

mod alarms;
#[cfg(feature = "conformance")]
mod conformance;
mod executions;
mod host;
mod ids;
mod mcp;
mod oidc;
mod results;

pub use alarms::Alarms;
pub use executions::{ExecutionResult, Executions, ResumeError};
pub use host::{ConfigError, Host, HostConfig};
pub use oidc::OidcConfig;
