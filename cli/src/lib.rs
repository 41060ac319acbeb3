//! The `executor` command's pieces, as a library so tests drive the same code.

pub mod keys;
pub mod serve;
