//! The admin commands (`executor keys`, `executor grants`, `executor
//! connections`, `executor executions`, `executor audit`, `executor
//! console`) as one type, so the
//! same command runs here or in the server that holds the store (`crate::admin`).

use std::fmt;

use executor_core::{Clock, SystemClock, Timestamp};
use executor_store::{ConnectionStore, ConsoleStore, GrantStore, HistoryStore, KeyStore};
use serde::{Deserialize, Serialize};

use crate::{audit, connections, console, executions, grants, keys};

/// What the admin commands need of a store.
pub trait AdminStore: KeyStore + GrantStore + ConnectionStore + HistoryStore + ConsoleStore {}

impl<T: KeyStore + GrantStore + ConnectionStore + HistoryStore + ConsoleStore> AdminStore for T {}

/// A command the socket takes: its `command` tag tells which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Command {
    Keys(keys::Command),
    Grants(grants::Command),
    Connections(connections::Command),
    Executions(executions::Command),
    Audit(audit::Command),
    Console(console::Command),
}

impl Command {
    /// Whether the command may create the store it runs on: only `keys
    /// create` (a first key is how a store begins). The others read or change
    /// what is stored, so on a missing store there is nothing for them to do,
    /// and a store made by a mistyped `--data-dir` would only hide the mistake.
    pub fn creates_store(&self) -> bool {
        matches!(self, Self::Keys(keys::Command::Create { .. }))
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply {
    Keys(keys::Reply),
    Grants(grants::Reply),
    Connections(connections::Reply),
    Executions(executions::Reply),
    Audit(audit::Reply),
    Console(console::Reply),
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Keys(reply) => reply.fmt(f),
            Self::Grants(reply) => reply.fmt(f),
            Self::Connections(reply) => reply.fmt(f),
            Self::Executions(reply) => reply.fmt(f),
            Self::Audit(reply) => reply.fmt(f),
            Self::Console(reply) => reply.fmt(f),
        }
    }
}

/// Run `command` on `store`: here, or in the server that holds the store.
pub async fn run(store: &impl AdminStore, command: Command) -> Result<Reply, String> {
    run_at(store, command, SystemClock.now()).await
}

/// [`run`], with statuses as of `now` (a pause past its window is expired).
pub async fn run_at(store: &impl AdminStore, command: Command, now: Timestamp) -> Result<Reply, String> {
    match command {
        Command::Keys(command) => keys::run(store, command).await.map(Reply::Keys).map_err(|e| e.to_string()),
        Command::Grants(command) => grants::run(store, command).await.map(Reply::Grants).map_err(|e| e.to_string()),
        Command::Connections(command) => {
            connections::run(store, command).await.map(Reply::Connections).map_err(|e| e.to_string())
        }
        Command::Executions(command) => {
            executions::run(store, command, now).await.map(Reply::Executions).map_err(|e| e.to_string())
        }
        Command::Audit(command) => audit::run(store, command).await.map(Reply::Audit).map_err(|e| e.to_string()),
        Command::Console(command) => {
            console::run(store, command, now).await.map(Reply::Console).map_err(|e| e.to_string())
        }
    }
}
