//! The key layout and record encoding both adapters share (see docs/storage.md).

use executor_core::{
    Event, Execution, ExecutionId, ExecutionRecord, Grant, HistoryAppend, HistoryEntry, Principal, SessionId,
    Timestamp, TokenHash, ToolkitName,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{StoreError, Ungranted};

/// Largest execution snapshot (the JSON of code, journal and state). DynamoDB
/// caps one transaction at 4 MB; this leaves room for keys and the other items
/// written with it.
pub const MAX_SNAPSHOT_BYTES: usize = 3_500_000;

/// Largest body in one DynamoDB item (400 KB item limit, minus headroom for the
/// other attributes). Larger execution snapshots are split into chunks of this size.
pub const MAX_ITEM_BODY_BYTES: usize = 350_000;

pub(crate) const SESSION: &str = "session";
pub(crate) const EXECUTION: &str = "execution";
pub(crate) const API_KEY: &str = "API key";
pub(crate) const GRANT: &str = "grant";
pub(crate) const EVENT: &str = "outbox event";
pub(crate) const CONNECTION: &str = "connection";
pub(crate) const OAUTH_STATE: &str = "OAuth state";
pub(crate) const OAUTH_CLIENT: &str = "OAuth client registration";

pub(crate) const SESSION_SK: &str = "SESSION";
pub(crate) const EXECUTION_SK: &str = "EXEC";
/// All API keys share one partition, so they can be listed with one query.
pub(crate) const KEYS_PK: &str = "KEYS";
pub(crate) const KEY_PREFIX: &str = "KEY#";
pub(crate) const PAUSED_PREFIX: &str = "PAUSED#";
pub(crate) const GRANT_PREFIX: &str = "GRANT#";
pub(crate) const CONNECTION_PREFIX: &str = "CONN#";
pub(crate) const OAUTH_STATE_SK: &str = "STATE";
/// Undelivered events share one partition, so the oldest are read with one query.
pub(crate) const OUTBOX_PK: &str = "OUTBOX";
pub(crate) const EVENT_PREFIX: &str = "EVENT#";

/// A source's client registration: one item per source.
pub(crate) const OAUTH_CLIENT_SK: &str = "OAUTHCLIENT";

pub(crate) fn oauth_client_pk(source: &str) -> String {
    format!("SOURCE#{source}")
}

pub(crate) const CONSOLE_SECRET: &str = "console secret";
/// Every console secret's partition starts so (a revoke ranges over them on redb).
pub(crate) const CONSOLE_PK_PREFIX: &str = "CONSOLE#";
pub(crate) const CONSOLE_SK: &str = "SECRET";

/// One item per token hash, whatever its kind: a hash names one token, and
/// signing out deletes by the hash alone.
pub(crate) fn console_pk(hash: &TokenHash) -> String {
    format!("{CONSOLE_PK_PREFIX}{}", hash.as_str())
}

pub(crate) const QUOTA: &str = "quota counter";
/// A quota's concurrency slots: one item per owner.
pub(crate) const SLOTS_SK: &str = "SLOTS";

/// An owner's quota counters share one partition.
pub(crate) fn quota_pk(owner: &executor_core::Principal) -> String {
    format!("QUOTA#{owner}")
}

/// The counter of the hour starting at `window`.
pub(crate) fn hour_sk(window: executor_core::Timestamp) -> String {
    format!("HOUR#{}", window.as_millis())
}

pub(crate) fn session_pk(id: &SessionId) -> String {
    format!("SESSION#{id}")
}

pub(crate) fn execution_pk(id: &ExecutionId) -> String {
    format!("EXEC#{id}")
}

/// An owner's grants share one partition: policy evaluation reads them with one query.
pub(crate) fn grants_pk(owner: &Principal) -> String {
    format!("GRANTS#{owner}")
}

/// One grant per owner, tool and toolkit: `GRANT#<tool>` for a grant given on
/// `/mcp`, `GRANT#@<toolkit>/<tool>` for one given on a toolkit (no tool path
/// starts with `@`, so the two never meet).
pub(crate) fn grant_sk(grant: &Grant) -> String {
    grant_sk_of(&grant.tool, grant.toolkit.as_ref())
}

fn grant_sk_of(tool: &str, toolkit: Option<&ToolkitName>) -> String {
    match toolkit {
        None => format!("{GRANT_PREFIX}{tool}"),
        Some(toolkit) => format!("{GRANT_PREFIX}@{toolkit}/{tool}"),
    }
}

/// The keys of every grant that would let a call of `ungranted` run: for
/// each tool, the one given on `/mcp`, and the one given on the toolkit.
pub(crate) fn grant_keys(ungranted: &Ungranted<'_>) -> Vec<(String, String)> {
    let pk = grants_pk(ungranted.owner);
    let scopes = [None, ungranted.toolkit];
    let scopes = if ungranted.toolkit.is_some() { &scopes[..] } else { &scopes[..1] };
    let keys = ungranted.tools.iter().flat_map(|tool| scopes.iter().map(move |scope| grant_sk_of(tool, *scope)));
    keys.map(|sk| (pk.clone(), sk)).collect()
}

/// An owner's connections share one partition: listed with one query.
pub(crate) fn connections_pk(owner: &Principal) -> String {
    format!("CONNS#{owner}")
}

/// One connection per owner and source.
pub(crate) fn connection_sk(source: &str) -> String {
    format!("{CONNECTION_PREFIX}{source}")
}

/// The authorization in progress of an execution's pause (one at a time).
pub(crate) fn oauth_state_pk(execution: &ExecutionId) -> String {
    format!("OAUTH#{execution}")
}

/// Oldest first: the time (zero-padded milliseconds), then the id (whose
/// zero-padded version orders the events of one subject written in the same millisecond).
pub(crate) fn event_sk(event: &Event) -> String {
    format!("{EVENT_PREFIX}{:013}#{}", event.time.as_millis(), event.id)
}

/// An outbox item's value: the event, and when the item may be forgotten.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredEvent {
    pub event: Event,
    pub expires_at: Timestamp,
}

pub(crate) fn encode_event(event: &Event) -> Result<Vec<u8>, StoreError> {
    encode(EVENT, &StoredEvent { event: event.clone(), expires_at: event.deliver_until })
}

pub(crate) fn key_sk(hash: &TokenHash) -> String {
    format!("{KEY_PREFIX}{}", hash.as_str())
}

/// A key's last use (epoch milliseconds): an attribute of its DynamoDB item,
/// a field beside the key's own in its embedded value.
pub(crate) const LAST_USED_AT: &str = "last_used_at";

/// Whether a use at `at` is to be written over the recorded one, `last`:
/// only [`crate::KEY_USE_RESOLUTION`] or more after it (so never backwards).
pub(crate) fn key_use_due(last: Option<Timestamp>, at: Timestamp) -> bool {
    last.is_none_or(|last| at.since(last) >= crate::KEY_USE_RESOLUTION)
}

/// Index item under the session's partition marking one paused execution.
pub(crate) fn paused_sk(id: &ExecutionId) -> String {
    format!("{PAUSED_PREFIX}{id}")
}

pub(crate) fn paused_id_from_sk(sk: &str) -> Result<ExecutionId, StoreError> {
    sk.strip_prefix(PAUSED_PREFIX)
        .and_then(|id| ExecutionId::parse(id).ok())
        .ok_or_else(|| StoreError::corrupt("paused-execution index", format!("bad sort key {sk:?}")))
}

/// Chunk `n` (from 1; chunk 0 lives in the execution item itself).
pub(crate) fn chunk_sk(n: usize) -> String {
    format!("CHUNK#{n:04}")
}

pub(crate) fn encode<T: Serialize>(what: &'static str, record: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(record).map_err(|e| StoreError::corrupt(what, e))
}

pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::corrupt(what, e))
}

/// The stored form of an execution, refused when a pause could not be written
/// in one DynamoDB transaction. Both adapters enforce it so behaviour matches.
pub(crate) fn encode_execution(execution: &Execution) -> Result<Vec<u8>, StoreError> {
    let body = encode(EXECUTION, execution)?;
    if body.len() > MAX_SNAPSHOT_BYTES {
        return Err(StoreError::TooLarge {
            what: "execution snapshot (code, journal and tool results)",
            size: body.len(),
            limit: MAX_SNAPSHOT_BYTES,
            advice: "return less data from the tool calls made before the one that needs approval",
        });
    }
    Ok(body)
}

/// Small records (sessions, keys) must fit one item on every adapter.
pub(crate) fn encode_small<T: Serialize>(what: &'static str, record: &T) -> Result<Vec<u8>, StoreError> {
    let body = encode(what, record)?;
    if body.len() > MAX_ITEM_BODY_BYTES {
        return Err(StoreError::TooLarge {
            what,
            size: body.len(),
            limit: MAX_ITEM_BODY_BYTES,
            advice: "send smaller client info and capabilities",
        });
    }
    Ok(body)
}

/// An idempotency key taken by an execution (`execute`'s `idempotencyKey`).
pub(crate) const RECEIPT: &str = "idempotency key";

/// An owner's idempotency keys share one partition, keyed by the key's hash.
pub(crate) fn receipt_key(owner: &Principal, key_hash: &str) -> (String, String) {
    (format!("IDEMP#{owner}"), format!("KEY#{key_hash}"))
}

pub(crate) const HISTORY: &str = "execution history";
pub(crate) const HISTORY_PART: &str = "execution history part";
pub(crate) const AUDIT_RECORD: &str = "execution record";
pub(crate) const CURSOR: &str = "cursor";

/// A history item's entries are cut at about this many bytes of JSON, so an
/// item (with its record and keys) stays well under DynamoDB's 400 KB.
pub(crate) const MAX_HISTORY_ITEM_BYTES: usize = 300_000;

/// The entries one write may add: what fits one DynamoDB transaction beside a
/// small execution (the split items' part numbers have 3 digits, far more than this needs).
pub(crate) const MAX_HISTORY_WRITE_BYTES: usize = 3_000_000;

/// An execution's history: one partition, its parts in write order.
pub(crate) const HISTORY_PK_PREFIX: &str = "AUDIT#";
pub(crate) const PART_PREFIX: &str = "PART#";
/// Every owner's listing partition starts so (the CLI lists across them).
pub(crate) const AUDITS_PK_PREFIX: &str = "AUDITS#";
pub(crate) const AUDIT_EXEC_PREFIX: &str = "EXEC#";

pub(crate) fn history_pk(id: &ExecutionId) -> String {
    format!("{HISTORY_PK_PREFIX}{id}")
}

/// Item `n` of the history `part` (the version its write stored): zero-padded,
/// so sort keys order the items as written.
pub(crate) fn history_sk(part: u64, n: usize) -> String {
    format!("{PART_PREFIX}{part:010}.{n:03}")
}

/// An owner's executions share one partition: listed newest first with one query.
pub(crate) fn audits_pk(owner: &Principal) -> String {
    format!("{AUDITS_PK_PREFIX}{owner}")
}

/// By creation time (13-digit epoch ms, so the text order is the time order), then id.
pub(crate) fn audit_sk(record: &ExecutionRecord) -> String {
    format!("{AUDIT_EXEC_PREFIX}{:013}#{}", record.created_at.as_millis(), record.id)
}

/// The lowest sort key of an execution created at or after `since`.
pub(crate) fn since_sk(since: Timestamp) -> String {
    format!("{AUDIT_EXEC_PREFIX}{:013}", since.as_millis())
}

fn bad_cursor() -> StoreError {
    StoreError::NotFound { what: CURSOR }
}

/// A listing's cursor, the sort key of the last item of the page before:
/// `EXEC#<13 digits>#<executionId>`, or `NotFound` for anything else.
pub(crate) fn listing_cursor(cursor: &str) -> Result<&str, StoreError> {
    let well_formed = cursor.len() <= crate::MAX_CURSOR_BYTES
        && cursor.strip_prefix(AUDIT_EXEC_PREFIX).and_then(|rest| rest.split_once('#')).is_some_and(|(ms, id)| {
            ms.len() == 13 && ms.bytes().all(|b| b.is_ascii_digit()) && ExecutionId::parse(id).is_ok()
        });
    if well_formed { Ok(cursor) } else { Err(bad_cursor()) }
}

/// An export's cursor: the key of the last history item of the page before, `<pk>\n<sk>`.
pub(crate) fn export_cursor(pk: &str, sk: &str) -> String {
    format!("{pk}\n{sk}")
}

/// The (pk, sk) an export cursor names, or `NotFound` for anything this store did not give.
pub(crate) fn parse_export_cursor(cursor: &str) -> Result<(&str, &str), StoreError> {
    let (pk, sk) = cursor.split_once('\n').ok_or_else(bad_cursor)?;
    let id_ok = pk.strip_prefix(HISTORY_PK_PREFIX).is_some_and(|id| ExecutionId::parse(id).is_ok());
    let sk_ok = sk.strip_prefix(PART_PREFIX).and_then(|rest| rest.split_once('.')).is_some_and(|(part, n)| {
        part.len() == 10 && n.len() == 3 && (part.bytes().chain(n.bytes())).all(|b| b.is_ascii_digit())
    });
    if cursor.len() <= crate::MAX_CURSOR_BYTES && id_ok && sk_ok { Ok((pk, sk)) } else { Err(bad_cursor()) }
}

/// A page of listing items, (sort key, record), of every owner: newest first
/// (by sort key, descending: creation time, then id), created at or after
/// `since`, after `cursor` (a sort key), at most `limit` (at least 1).
pub(crate) fn newest_page(
    mut listed: Vec<(String, ExecutionRecord)>,
    since: Option<Timestamp>,
    cursor: Option<&str>,
    limit: usize,
) -> crate::Page<ExecutionRecord> {
    let low = since.map(since_sk);
    listed.retain(|(sk, _)| low.as_ref().is_none_or(|low| sk >= low) && cursor.is_none_or(|c| sk.as_str() < c));
    listed.sort_by(|a, b| b.0.cmp(&a.0));
    let next = (listed.len() > limit).then(|| listed[limit - 1].0.clone());
    listed.truncate(limit);
    crate::Page { items: listed.into_iter().map(|(_, record)| record).collect(), next }
}

/// What one history item holds (its DynamoDB `body`): the execution's record
/// as this write left it, and a contiguous slice of the write's entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HistoryPart {
    pub record: ExecutionRecord,
    pub entries: Vec<HistoryEntry>,
}

/// `append` as the items it is stored in, (sort key, contents), in order: one
/// unless its entries' JSON exceeds [`MAX_HISTORY_ITEM_BYTES`] (a write with no
/// entries still stores one, so the record read back is the latest).
pub(crate) fn split_history(append: &HistoryAppend) -> Result<Vec<(String, HistoryPart)>, StoreError> {
    let too_large = |what, size, limit| StoreError::TooLarge {
        what,
        size,
        limit,
        advice: "record fewer calls between two writes of the execution",
    };
    let mut groups: Vec<Vec<HistoryEntry>> = vec![Vec::new()];
    let (mut group_bytes, mut total) = (0, 0);
    for entry in &append.entries {
        let size = encode(HISTORY, entry)?.len() + 1;
        if size > MAX_HISTORY_ITEM_BYTES {
            return Err(too_large("history entry", size, MAX_HISTORY_ITEM_BYTES));
        }
        total += size;
        if group_bytes + size > MAX_HISTORY_ITEM_BYTES {
            groups.push(Vec::new());
            group_bytes = 0;
        }
        group_bytes += size;
        groups.last_mut().expect("one group at least").push(entry.clone());
    }
    if total > MAX_HISTORY_WRITE_BYTES {
        return Err(too_large("history of one write", total, MAX_HISTORY_WRITE_BYTES));
    }
    Ok(groups
        .into_iter()
        .enumerate()
        .map(|(n, entries)| (history_sk(append.part, n), HistoryPart { record: append.record.clone(), entries }))
        .collect())
}

/// An execution's history from its live parts visible to the reader, in sort
/// key order: the record the last one holds and every entry, oldest first;
/// `NotFound` when there is none.
pub(crate) fn assemble_history(parts: Vec<HistoryPart>) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
    let mut record = None;
    let mut entries = Vec::new();
    for part in parts {
        entries.extend(part.entries);
        record = Some(part.record);
    }
    record.map(|record| (record, entries)).ok_or(StoreError::NotFound { what: HISTORY })
}

/// A part's entries at or after `since`, as the export writes them.
pub(crate) fn audit_lines(part: HistoryPart, since: Option<Timestamp>) -> impl Iterator<Item = crate::AuditLine> {
    let HistoryPart { record, entries } = part;
    entries
        .into_iter()
        .filter(move |entry| since.is_none_or(|since| entry.at >= since))
        .map(move |entry| crate::AuditLine { execution: record.id.clone(), owner: record.owner.clone(), entry })
}

/// How the embedded store keeps an audit item: the DynamoDB `body` with the
/// TTL that is an attribute there (`purge_expired` reads `expires_at`).
#[derive(Serialize, Deserialize)]
pub(crate) struct Expiring<T> {
    pub expires_at: Timestamp,
    pub body: T,
}

#[cfg(test)]
mod tests {
    use executor_core::{ExecutionStatus, Happened};

    use super::*;

    fn appended(entries: usize, tool_bytes: usize) -> HistoryAppend {
        let at = Timestamp::from_millis(1_700_000_000_000);
        let record = ExecutionRecord {
            id: ExecutionId::parse("e1").unwrap(),
            owner: Principal::parse("alice").unwrap(),
            status: ExecutionStatus::Running,
            created_at: at,
            updated_at: at,
            toolkit: None,
            pending: None,
        };
        let entry = |n: usize| HistoryEntry {
            at: at.plus(std::time::Duration::from_millis(n as u64)),
            what: Happened::Connected { source: format!("{n}{}", "s".repeat(tool_bytes)) },
        };
        HistoryAppend { record, part: 7, entries: (0..entries).map(entry).collect(), keep_until: at }
    }

    #[test]
    fn a_large_write_is_split_in_order_into_items_under_the_limit() {
        let append = appended(2_000, 400);
        let parts = split_history(&append).unwrap();
        assert!(parts.len() >= 3, "{} items", parts.len());
        let sks: Vec<&str> = parts.iter().map(|(sk, _)| sk.as_str()).collect();
        assert_eq!(sks[..2], ["PART#0000000007.000", "PART#0000000007.001"]);
        for (_, part) in &parts {
            assert_eq!(part.record, append.record, "every item carries the record");
            assert!(encode(HISTORY, &part.entries).unwrap().len() <= MAX_HISTORY_ITEM_BYTES);
        }
        let rejoined: Vec<HistoryEntry> = parts.into_iter().flat_map(|(_, part)| part.entries).collect();
        assert_eq!(rejoined, append.entries, "contiguous slices, in order");
        // A write with no entries still records its record.
        assert_eq!(split_history(&appended(0, 0)).unwrap().len(), 1);
    }

    #[test]
    fn oversized_entries_and_writes_are_refused() {
        let refused = split_history(&appended(1, MAX_HISTORY_ITEM_BYTES));
        assert!(matches!(refused, Err(StoreError::TooLarge { what: "history entry", .. })), "{refused:?}");
        let refused = split_history(&appended(12_000, 300));
        assert!(matches!(refused, Err(StoreError::TooLarge { what: "history of one write", .. })), "{refused:?}");
    }

    #[test]
    fn cursors_are_only_what_a_listing_or_an_export_gives() {
        assert_eq!(listing_cursor("EXEC#1700000000000#e1").unwrap(), "EXEC#1700000000000#e1");
        for bad in ["", "EXEC#", "EXEC#1700000000000", "EXEC#170000000000x#e1", "EXEC#1700000000000#e 1", "SESSION#s1"]
        {
            assert!(matches!(listing_cursor(bad), Err(StoreError::NotFound { what: CURSOR })), "{bad:?}");
        }
        let cursor = export_cursor("AUDIT#e1", "PART#0000000007.001");
        assert_eq!(parse_export_cursor(&cursor).unwrap(), ("AUDIT#e1", "PART#0000000007.001"));
        for bad in
            ["AUDIT#e1", "AUDIT#e1\nPART#7.001", "AUDITS#alice\nPART#0000000007.001", "AUDIT#\nPART#0000000007.001"]
        {
            assert!(matches!(parse_export_cursor(bad), Err(StoreError::NotFound { what: CURSOR })), "{bad:?}");
        }
    }
}
