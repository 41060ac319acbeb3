//! The `executor` command's pieces, as a library so tests drive the same code.

#[cfg(unix)]
pub mod admin;
pub mod args;
pub mod audit;
pub mod commands;
pub mod connections;
pub mod console;
pub mod data_dir;
pub mod executions;
pub mod grants;
pub mod health;
pub mod keys;
pub mod policy;
pub mod serve;
pub mod since;
