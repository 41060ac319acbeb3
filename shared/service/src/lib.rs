//! The application layer, framework-neutral: the hosts (Lambda functions and
//! `executor serve`) call it; it calls the domain, the sandbox and the store ports.

mod executions;
mod ids;

pub use executions::{ExecutionResult, Executions, ResumeError};
