//! `executor audit export`: every owner's history as JSON lines, one a
//! history entry: `{"executionId", "owner", ...the entry}` (docs/audit.md).
//!
//! One command exports one page ([`PAGE`] entries at most) and the cursor of
//! the next; the `executor` command asks for page after page until there is
//! none. Through the admin socket (one command, one JSON line back) this
//! keeps every answer bounded, however long the history: the server never
//! holds the whole export, the socket never carries more than a page, and a
//! page is written out before the next is read. Run on a store the command
//! opened itself, the same loop asks the store directly.

use std::fmt;

use executor_core::Timestamp;
use executor_store::{AuditLine, HistoryStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// History entries per page: an entry is at most a few kilobytes (a paused
/// call's arguments are cut to 2 KiB), so an answer stays within a megabyte or two.
pub const PAGE: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the store did not take the export's cursor (it expired or was not its own); run the export again")]
    Cursor,
    #[error(transparent)]
    Store(StoreError),
}

/// What an `audit` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// A page of the export: entries at or after `since`, from `cursor` (the previous page's `next`).
    AuditExport {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<Timestamp>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor: Option<String>,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    /// JSON lines as the export writes them; `next`: ask again from there.
    AuditExported {
        lines: Vec<String>,
        #[serde(default)]
        next: Option<String>,
    },
}

/// Run `command` on `store`.
pub async fn run(store: &impl HistoryStore, command: Command) -> Result<Reply, AuditError> {
    let Command::AuditExport { since, cursor } = command;
    let page = match store.export_history(since, PAGE, cursor.as_deref()).await {
        Ok(page) => page,
        Err(StoreError::NotFound { what: "cursor" }) => return Err(AuditError::Cursor),
        Err(e) => return Err(AuditError::Store(e)),
    };
    Ok(Reply::AuditExported { lines: page.items.iter().map(line).collect(), next: page.next })
}

/// One line of the export: the entry's execution and owner, then the entry
/// (`HistoryEntry::to_json`), its fields in the order the entry declares them.
pub fn line(audit: &AuditLine) -> String {
    let mut fields = vec![
        ("executionId".to_owned(), Value::String(audit.execution.to_string())),
        ("owner".to_owned(), Value::String(audit.owner.to_string())),
    ];
    fields.extend(entry_fields(&audit.entry));
    let members: Vec<String> =
        fields.iter().map(|(key, value)| format!("{}:{value}", Value::String(key.clone()))).collect();
    format!("{{{}}}", members.join(","))
}

/// The fields of `entry.to_json()` in the order the entry declares them (`at`,
/// `type`, then the type's own), where a JSON object would sort them by name:
/// a person reads `decision=accept channel=browser decidedBy=...` in the order
/// it happened in, not alphabetically.
pub fn entry_fields(entry: &executor_core::HistoryEntry) -> Vec<(String, Value)> {
    let Value::Object(mut json) = entry.to_json() else {
        return Vec::new();
    };
    // Serialising to text keeps the declared order; its keys give that order.
    let order = serde_json::to_string(entry)
        .ok()
        .and_then(|text| serde_json::from_str::<KeysInOrder>(&text).ok())
        .map_or_else(Vec::new, |keys| keys.0);
    let mut fields: Vec<(String, Value)> =
        order.into_iter().filter_map(|key| json.remove(&key).map(|value| (key, value))).collect();
    // Anything `to_json` adds beyond the entry's own fields, after them.
    fields.extend(json);
    fields
}

/// A JSON object's keys, in the order they are written.
struct KeysInOrder(Vec<String>);

impl<'de> Deserialize<'de> for KeysInOrder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KeysInOrder;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<KeysInOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(KeysInOrder(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// What the command prints: the lines, one after another.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self::AuditExported { lines, .. } = self;
        f.write_str(&lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use executor_core::{
        ApprovalAction, DecidedBy, ExecutionId, Happened, HistoryEntry, Principal, Timestamp, TokenHash,
    };
    use serde_json::json;

    use super::*;

    fn decided() -> HistoryEntry {
        let owner = Principal::parse("ana").unwrap();
        HistoryEntry {
            at: Timestamp::parse_rfc3339("2026-12-01T10:00:00Z").unwrap(),
            what: Happened::Decided {
                decision: ApprovalAction::Accept,
                channel: "browser".into(),
                decided_by: DecidedBy::key(&owner, &TokenHash::of_token("tok")),
            },
        }
    }

    #[test]
    fn an_export_line_is_the_entry_with_its_execution_and_owner_first() {
        let audit = AuditLine {
            execution: ExecutionId::parse("e1").unwrap(),
            owner: Principal::parse("ana").unwrap(),
            entry: decided(),
        };
        let line = line(&audit);
        let by = DecidedBy::key(&audit.owner, &TokenHash::of_token("tok"));
        assert_eq!(
            line,
            format!(
                r#"{{"executionId":"e1","owner":"ana","at":"2026-12-01T10:00:00.000Z","type":"decided","decision":"accept","channel":"browser","decidedBy":"{}"}}"#,
                by.as_str()
            )
        );
        let mut expected = audit.entry.to_json();
        expected["executionId"] = json!("e1");
        expected["owner"] = json!("ana");
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), expected, "exactly the entry's JSON, and the two");
    }

    #[test]
    fn fields_keep_the_order_the_entry_declares() {
        let keys: Vec<String> = entry_fields(&decided()).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["at", "type", "decision", "channel", "decidedBy"]);
    }

    #[test]
    fn export_pages_do_not_collide_with_other_commands_on_the_admin_socket() {
        let export = serde_json::to_string(&Command::AuditExport { since: None, cursor: None }).unwrap();
        assert_eq!(export, r#"{"command":"audit_export"}"#);
        assert!(serde_json::from_str::<crate::keys::Command>(&export).is_err());
        assert!(serde_json::from_str::<crate::grants::Command>(&export).is_err());
        let reply = Reply::AuditExported { lines: vec!["{}".into(), "{}".into()], next: None };
        assert_eq!(reply.to_string(), "{}\n{}");
    }
}
