//! The audit trail: an append-only history of each execution that outlives
//! it (docs/audit.md). Entries are derived here, purely, from what a store
//! write records (an applied [`ExecutionEvent`](crate::ExecutionEvent) and the
//! calls the run made since the last write); the store keeps them with that
//! write, so a change is never stored without its entries, nor entries
//! without their change.
//!
//! Nothing secret goes in: tool paths, ids, times, decisions, the principal
//! who decided (an API key's owner and key id, an OIDC identity), status and
//! error codes, and each paused call's arguments as a redacted summary. Never
//! results, never raw arguments.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    Actor, Applied, ApprovalAction, Channel, Effect, Execution, ExecutionId, ExecutionState, ExecutionStatus,
    PendingCall, Principal, Timestamp, TokenHash, ToolkitName, cut_text, redact_secret_fields,
};

/// How long history is kept unless configured (`EXECUTOR_AUDIT_RETENTION_DAYS`): 30 days.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The first characters of an API key's token hash: the ID `executor keys list` shows.
pub const KEY_ID_LEN: usize = 12;

/// At most this much of a paused call's arguments is kept (redacted).
pub const MAX_ARGS_SUMMARY_BYTES: usize = 2 * 1024;

/// The `reason` of a pause no configured rule asked for: writes ask by default.
pub const DEFAULT_RULE: &str = "default";

/// Through which surface new code arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The `execute` tool, answered in the call.
    Mcp,
    /// The `execute` tool as an MCP task.
    Task,
    /// The JSON API.
    Api,
}

/// Who decided a pause (or asked an execution to stop), as the history
/// names them: `key:<owner>/<key id>`, `oidc:<issuer>#<subject>`,
/// `link:<owner>/<link id>` (the holder of an approval or connect link), or
/// `model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DecidedBy(String);

impl DecidedBy {
    pub fn model() -> Self {
        Self("model".into())
    }

    /// The API key whose token hashes to `hash`, of `owner`.
    pub fn key(owner: &Principal, hash: &TokenHash) -> Self {
        Self(format!("key:{owner}/{}", key_id(hash)))
    }

    /// An OIDC identity (its principal already reads `oidc:<issuer>#<subject>`),
    /// or whoever is signed in to the console as `principal`.
    pub fn principal(principal: &Principal) -> Self {
        Self(principal.as_str().to_owned())
    }

    /// Whoever holds the approval link whose token hashes to `hash`, sent to `owner`.
    pub fn link(owner: &Principal, hash: &TokenHash) -> Self {
        Self(format!("link:{owner}/{}", key_id(hash)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The ID of an API key (or link): the first [`KEY_ID_LEN`] hex digits of its hash.
pub fn key_id(hash: &TokenHash) -> &str {
    &hash.as_str()[..KEY_ID_LEN.min(hash.as_str().len())]
}

/// How a call ended, as the history records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    Ok,
    Error,
    /// The policy refused it: nothing was sent.
    Blocked,
}

/// What let a call run without anyone being asked at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowedBy {
    /// A policy rule said run (`policyId` names it).
    Policy,
    /// The owner's "always allow" grant (`grantId` names it).
    Grant,
    /// A decision on its pause.
    Decision,
}

/// One tool call a run made (or was refused), reported by the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Called {
    pub step: u32,
    pub tool: String,
    /// `read` or `write`, as the catalog describes the tool (absent: unknown tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Effect>,
    pub outcome: CallOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The error's code, for `error` and `blocked` outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    pub duration_ms: u64,
    /// Absent for a call refused before any policy was asked (invalid arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<AllowedBy>,
    /// The rule that let it run, or that blocked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

/// What an entry records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum Happened {
    Created {
        code_sha256: String,
        code_bytes: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toolkit: Option<ToolkitName>,
        via: Via,
    },
    Called(Called),
    Paused {
        step: u32,
        tool: String,
        /// The policy id that asked, `default`, or `connect:<source>`.
        reason: String,
        /// The call's arguments, secrets redacted, at most [`MAX_ARGS_SUMMARY_BYTES`].
        args: String,
    },
    Decided {
        decision: ApprovalAction,
        /// `model`, `browser`, `native` or `api`.
        channel: String,
        decided_by: DecidedBy,
    },
    /// The owner connected a per-owner OAuth source a paused call waited for.
    Connected {
        source: String,
    },
    Settled {
        status: ExecutionStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<String>,
    },
}

/// One entry of an execution's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Epoch milliseconds, as stored; [`HistoryEntry::to_json`] shows RFC 3339.
    pub at: Timestamp,
    #[serde(flatten)]
    pub what: Happened,
}

impl HistoryEntry {
    /// The entry as the API, the CLI and the export show it: `at` in RFC 3339.
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        value["at"] = json!(self.at.to_rfc3339());
        value
    }
}

/// The call waiting for a decision, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    pub tool: String,
    /// The approval message (redacted by the catalog).
    pub message: String,
    pub expires_at: Timestamp,
}

/// An execution as its history lists it: kept as long as the history, after
/// the execution itself is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionRecord {
    pub id: ExecutionId,
    pub owner: Principal,
    pub status: ExecutionStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingSummary>,
}

/// At most this much of a pending call's message is listed.
const MAX_PENDING_MESSAGE_BYTES: usize = 2 * 1024;

impl ExecutionRecord {
    pub fn of(execution: &Execution) -> Self {
        let pending = match execution.state() {
            ExecutionState::Paused { deadline } => execution.journal.pending.first().map(|call| PendingSummary {
                tool: call.path.clone(),
                message: cut_text(&call.message, MAX_PENDING_MESSAGE_BYTES),
                expires_at: *deadline,
            }),
            _ => None,
        };
        Self {
            id: execution.id.clone(),
            owner: execution.owner.clone(),
            status: execution.status(),
            created_at: execution.created_at,
            updated_at: execution.updated_at,
            toolkit: execution.toolkit.clone(),
            pending,
        }
    }

    /// The status as of `now`: a pause whose window closed is expired, even
    /// where nobody read the execution again to record it (its item may be
    /// gone by now).
    pub fn status_at(&self, now: Timestamp) -> ExecutionStatus {
        match &self.pending {
            Some(pending) if self.status == ExecutionStatus::Paused && now >= pending.expires_at => {
                ExecutionStatus::Expired
            }
            _ => self.status,
        }
    }

    /// The record as the API shows it (`GET /api/executions`), as of `now`.
    pub fn to_json(&self, now: Timestamp) -> Value {
        let status = self.status_at(now);
        let mut value = json!({
            "id": self.id,
            "status": status.as_str(),
            "createdAt": self.created_at.to_rfc3339(),
            "updatedAt": self.updated_at.to_rfc3339(),
            "toolkit": self.toolkit,
        });
        if let (Some(pending), ExecutionStatus::Paused) = (&self.pending, status) {
            value["pending"] = json!({
                "tool": pending.tool,
                "message": pending.message,
                "expiresAt": pending.expires_at.to_rfc3339(),
            });
        }
        value
    }
}

/// What one store write adds to an execution's history: its record as it now
/// stands and the entries of the change, kept until `keep_until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryAppend {
    pub record: ExecutionRecord,
    /// Orders this write's entries after the earlier writes' (the execution's
    /// stored version after the write: unique, as every write is conditional on it).
    pub part: u64,
    pub entries: Vec<HistoryEntry>,
    pub keep_until: Timestamp,
}

/// The entries an applied event adds, after the `calls` the run made since
/// the last write; `created`: the execution is being stored (or recorded)
/// for the first time, having arrived through this surface.
pub fn entries_of(applied: &Applied, after: &Execution, calls: &[Called], created: Option<Via>) -> Vec<HistoryEntry> {
    let at = applied.at;
    let entry = |what| HistoryEntry { at, what };
    let mut entries = Vec::new();
    if let Some(via) = created {
        entries.push(HistoryEntry { at: after.created_at, what: created_entry(after, via) });
    }
    entries.extend(calls.iter().cloned().map(|call| entry(Happened::Called(call))));
    match (&applied.by, applied.from, applied.to) {
        (_, from, ExecutionStatus::Paused) if from != ExecutionStatus::Paused => {
            entries.extend(after.journal.pending.iter().map(|call| entry(paused(call))));
        }
        (Actor::Decider(decider), ExecutionStatus::Paused, ExecutionStatus::Resuming) => {
            let ExecutionState::Resuming { action } = after.state() else { unreachable!("a claim resumes") };
            entries.push(entry(decided(*action, decider)));
            if decider.channel == Channel::Connect && *action == ApprovalAction::Accept {
                let sources = after.journal.pending.iter().filter_map(|call| call.connect.clone());
                entries.extend(sources.map(|source| entry(Happened::Connected { source })));
            }
        }
        // A decider who changes no status asked a running execution to stop.
        (Actor::Decider(decider), from, to) if from == to => {
            entries.push(entry(decided(ApprovalAction::Cancel, decider)));
        }
        (_, _, to) if to.is_terminal() => {
            let error_code = match after.state() {
                ExecutionState::Failed { error } | ExecutionState::Declined { error } => Some(error.code.clone()),
                _ => None,
            };
            entries.push(entry(Happened::Settled { status: to, error_code }));
        }
        _ => {}
    }
    entries
}

fn created_entry(execution: &Execution, via: Via) -> Happened {
    Happened::Created {
        code_sha256: crate::code_sha256(&execution.code),
        code_bytes: execution.code.len(),
        toolkit: execution.toolkit.clone(),
        via,
    }
}

fn paused(call: &PendingCall) -> Happened {
    let reason = match (&call.connect, &call.rule) {
        (Some(source), _) => format!("connect:{source}"),
        (None, Some(rule)) => rule.clone(),
        (None, None) => DEFAULT_RULE.to_owned(),
    };
    Happened::Paused { step: call.step, tool: call.path.clone(), reason, args: args_summary(&call.args) }
}

fn decided(decision: ApprovalAction, decider: &crate::Decider) -> Happened {
    Happened::Decided { decision, channel: decider.channel.as_str().to_owned(), decided_by: decider.by.clone() }
}

/// A call's arguments as the history keeps them: fields named like secrets
/// redacted, compact, cut to [`MAX_ARGS_SUMMARY_BYTES`].
pub fn args_summary(args: &Value) -> String {
    cut_text(&redact_secret_fields(args).to_string(), MAX_ARGS_SUMMARY_BYTES)
}

#[cfg(test)]
mod tests;
