//! The key layout and record encoding both adapters share (see docs/storage.md).

use executor_core::{Event, Execution, ExecutionId, Grant, Principal, SessionId, Timestamp, TokenHash};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::StoreError;

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
    match &grant.toolkit {
        None => format!("{GRANT_PREFIX}{}", grant.tool),
        Some(toolkit) => format!("{GRANT_PREFIX}@{toolkit}/{}", grant.tool),
    }
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
