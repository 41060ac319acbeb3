//! Executions' history from the command line: `executor executions list` (a
//! table of the recorded executions, newest first) and `executor executions
//! show ID` (one execution's record and every entry of its history). Every
//! owner's, as an admin sees them (`Access::Internal`) unless `--owner` picks
//! one. Like the other admin commands, a command runs on a store here, or in
//! the `executor serve` that holds the embedded store (`crate::admin`).
//!
//! Statuses are as of the moment the command runs ([`ExecutionRecord::status_at`]):
//! a pause whose window closed is listed as expired even when nothing read
//! the execution again to record that.

use std::fmt;

use executor_core::{ExecutionId, ExecutionRecord, ExecutionStatus, IdError, Principal, PrincipalError, Timestamp};
use executor_store::{Access, HistoryStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::entry_fields;

/// How many executions `list` shows unless told, and at most.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum ExecutionsError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid --status {0:?}: give one of running, paused, resuming, completed, failed, declined, expired")]
    Status(String),
    #[error("invalid --limit {0}: give a number from 1 to {MAX_LIMIT}")]
    Limit(usize),
    #[error("invalid execution id: {0}; `executor executions list` shows the ids")]
    Id(#[from] IdError),
    #[error(
        "no execution has the id {0:?} in the history (or its history has expired); `executor executions list` \
         shows the ids"
    )]
    UnknownId(String),
    #[error("the store did not take the listing's cursor (it was not its own); run the command again")]
    Cursor,
    #[error(transparent)]
    Store(StoreError),
}

/// What an `executions` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    ExecutionsList {
        /// One owner's; `None`: every owner's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        /// Created at or after this (`crate::since`, resolved where the command was typed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<Timestamp>,
        limit: usize,
    },
    ExecutionsShow {
        id: String,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    ExecutionsListed { executions: Vec<ExecutionRow> },
    ExecutionShown { execution: ExecutionRow, toolkit: Option<String>, entries: Vec<EntryRow> },
}

/// One execution as `executions list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionRow {
    pub id: String,
    pub owner: String,
    /// As of when the command ran.
    pub status: String,
    pub created: String,
    pub updated: String,
    /// The tool a paused execution waits on a decision for (`tools.<path>`), and until when.
    #[serde(default)]
    pub waiting_on: Option<(String, String)>,
}

/// One history entry as `executions show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRow {
    pub at: String,
    /// `created`, `called`, `paused`, `decided`, `connected` or `settled`.
    pub kind: String,
    /// The entry's other fields as `key=value`, in the entry's order.
    pub fields: Vec<String>,
}

/// Run `command` on `store`, statuses as of `now`.
pub async fn run(store: &impl HistoryStore, command: Command, now: Timestamp) -> Result<Reply, ExecutionsError> {
    match command {
        Command::ExecutionsList { owner, status, since, limit } => {
            let owner = owner.as_deref().map(Principal::parse).transpose()?;
            let status = status.as_deref().map(parse_status).transpose()?;
            if !(1..=MAX_LIMIT).contains(&limit) {
                return Err(ExecutionsError::Limit(limit));
            }
            let access = owner.as_ref().map_or(Access::Internal, Access::Owner);
            let records = list(store, access, Filter { status, since, limit, now }).await?;
            Ok(Reply::ExecutionsListed { executions: records.iter().map(|r| row(r, now)).collect() })
        }
        Command::ExecutionsShow { id } => {
            let parsed = ExecutionId::parse(id.as_str())?;
            let (record, entries) = match store.execution_history(Access::Internal, &parsed).await {
                Ok(found) => found,
                Err(StoreError::NotFound { .. }) => return Err(ExecutionsError::UnknownId(id)),
                Err(e) => return Err(ExecutionsError::Store(e)),
            };
            let entries = entries.iter().map(entry_row).collect();
            let toolkit = record.toolkit.as_ref().map(ToString::to_string);
            Ok(Reply::ExecutionShown { execution: row(&record, now), toolkit, entries })
        }
    }
}

fn parse_status(given: &str) -> Result<ExecutionStatus, ExecutionsError> {
    let wanted = given.trim().to_ascii_lowercase();
    ExecutionStatus::parse(&wanted).ok_or_else(|| ExecutionsError::Status(given.to_owned()))
}

struct Filter {
    status: Option<ExecutionStatus>,
    since: Option<Timestamp>,
    limit: usize,
    now: Timestamp,
}

/// Up to `limit` records that have `status` (as of `now`), newest first: the
/// store's pages one after another, as a status filter may leave few of a page.
async fn list(
    store: &impl HistoryStore,
    access: Access<'_>,
    filter: Filter,
) -> Result<Vec<ExecutionRecord>, ExecutionsError> {
    let Filter { status, since, limit, now } = filter;
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = match store.list_executions(access, since, limit, cursor.as_deref()).await {
            Ok(page) => page,
            Err(StoreError::NotFound { what: "cursor" }) => return Err(ExecutionsError::Cursor),
            Err(e) => return Err(ExecutionsError::Store(e)),
        };
        let matching = page.items.into_iter().filter(|r| status.is_none_or(|s| r.status_at(now) == s));
        records.extend(matching.take(limit - records.len()));
        match page.next {
            Some(next) if records.len() < limit => cursor = Some(next),
            _ => break,
        }
    }
    // The store lists newest first; kept so across pages however it orders equal times.
    records.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    Ok(records)
}

fn row(record: &ExecutionRecord, now: Timestamp) -> ExecutionRow {
    let status = record.status_at(now);
    let waiting_on = match (&record.pending, status) {
        (Some(pending), ExecutionStatus::Paused) => {
            Some((format!("tools.{}", pending.tool), pending.expires_at.to_rfc3339()))
        }
        _ => None,
    };
    ExecutionRow {
        id: record.id.to_string(),
        owner: record.owner.to_string(),
        status: status.as_str().to_owned(),
        created: record.created_at.to_rfc3339(),
        updated: record.updated_at.to_rfc3339(),
        waiting_on,
    }
}

fn entry_row(entry: &executor_core::HistoryEntry) -> EntryRow {
    let mut fields = entry_fields(entry);
    let mut take = |name: &str| {
        fields.iter().position(|(k, _)| k == name).map(|i| fields.remove(i).1).and_then(|v| v.as_str().map(Into::into))
    };
    let at = take("at").unwrap_or_else(|| entry.at.to_rfc3339());
    let kind = take("type").unwrap_or_default();
    let fields = fields.into_iter().map(|(key, value)| format!("{key}={}", shown(&value))).collect();
    EntryRow { at, kind, fields }
}

/// A field's value on a line of `key=value`s: text as it is, unless it is
/// empty, has spaces or control characters, or starts with a quote: then
/// quoted as JSON (so an entry stays one line, its fields can be told apart,
/// and a quoted value is never mistaken for one that was not). Numbers and
/// the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text)
            if !text.is_empty()
                && !text.starts_with('"')
                && !text.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            text.clone()
        }
        other => other.to_string(),
    }
}

/// What the command prints.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ExecutionsListed { executions } if executions.is_empty() => write!(
                f,
                "No executions recorded match. Each run of `execute` is recorded, and kept for 30 days unless \
                 EXECUTOR_AUDIT_RETENTION_DAYS says otherwise."
            ),
            Self::ExecutionsListed { executions } => table(f, executions),
            Self::ExecutionShown { execution, toolkit, entries } => {
                let e = execution;
                write!(f, "id          {}\nowner       {}\nstatus      {}", e.id, e.owner, e.status)?;
                write!(f, "\ncreated     {}\nupdated     {}", e.created, e.updated)?;
                write!(f, "\ntoolkit     {}", toolkit.as_deref().unwrap_or("-"))?;
                if let Some((tool, until)) = &e.waiting_on {
                    write!(f, "\nwaiting on  {tool}, for a decision until {until}")?;
                }
                if entries.is_empty() {
                    return write!(f, "\n\nNo history entries.");
                }
                writeln!(f)?;
                for entry in entries {
                    write!(f, "\n{}  {}", entry.at, entry.kind)?;
                    if !entry.fields.is_empty() {
                        write!(f, "  {}", entry.fields.join(" "))?;
                    }
                }
                Ok(())
            }
        }
    }
}

fn table(f: &mut fmt::Formatter<'_>, rows: &[ExecutionRow]) -> fmt::Result {
    let width = |column: fn(&ExecutionRow) -> &str, header: &str| {
        rows.iter().map(|r| column(r).len()).chain([header.len()]).max().unwrap_or_default()
    };
    let id = width(|r| &r.id, "ID");
    let owner = width(|r| &r.owner, "OWNER");
    let status = width(|r| &r.status, "STATUS");
    let created = width(|r| &r.created, "CREATED");
    let updated = width(|r| &r.updated, "UPDATED");
    write!(
        f,
        "{:id$}  {:owner$}  {:status$}  {:created$}  {:updated$}  WAITING ON",
        "ID", "OWNER", "STATUS", "CREATED", "UPDATED"
    )?;
    for r in rows {
        let waiting = r.waiting_on.as_ref().map_or("-", |(tool, _)| tool.as_str());
        write!(
            f,
            "\n{:id$}  {:owner$}  {:status$}  {:created$}  {:updated$}  {waiting}",
            r.id, r.owner, r.status, r.created, r.updated
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
