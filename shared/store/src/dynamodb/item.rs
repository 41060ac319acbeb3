//! Attribute names and conversions between DynamoDB items and plain values.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use executor_core::Timestamp;

use crate::StoreError;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) const PK: &str = "pk";
pub(crate) const SK: &str = "sk";
/// TTL attribute: epoch seconds.
pub(crate) const EXPIRES_AT: &str = "expires_at";
pub(crate) const KIND: &str = "kind";
pub(crate) const OWNER: &str = "owner";
pub(crate) const VERSION: &str = "version";
pub(crate) const STATUS: &str = "status";
pub(crate) const SESSION_ID: &str = "session_id";
pub(crate) const CHUNKS: &str = "chunks";
/// On executions split into chunks: how many chunk items (from `CHUNK#0001`) hold journal steps.
pub(crate) const STEPS_CHUNKS: &str = "steps_chunks";
/// On executions split into chunks: the version that wrote each chunk item, e.g. `3,3,5`.
pub(crate) const CHUNK_VERSIONS: &str = "chunk_versions";
pub(crate) const BODY: &str = "body";
/// On grants: the grant's id, so a revoke deletes that grant and not a newer one for the same tool.
pub(crate) const GRANT_ID: &str = "grant_id";
/// On OAuth states: the SHA-256 of the `state` parameter, which a take must present.
pub(crate) const STATE_HASH: &str = "state_hash";
/// On OAuth states: whether a callback took it (then no new state replaces it until it is released).
pub(crate) const TAKEN: &str = "taken";
/// A fresh random id per write: how a writer recognises its own write after a
/// lost answer, even when another writer stored an item with the same content.
pub(crate) const WRITE_ID: &str = "write_id";

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn b(bytes: &[u8]) -> AttributeValue {
    AttributeValue::B(Blob::new(bytes))
}

pub(crate) fn ttl(at: Timestamp) -> AttributeValue {
    n(at.as_secs_ceil())
}

/// `now` in TTL units for condition expressions: an item is live while
/// `expires_at > :now`.
pub(crate) fn now_secs(now: Timestamp) -> AttributeValue {
    n(now.as_millis() / 1000)
}

pub(crate) fn key(pk: String, sk: &str) -> Item {
    HashMap::from([(PK.to_owned(), s(pk)), (SK.to_owned(), s(sk))])
}

pub(crate) fn get_s<'a>(item: &'a Item, name: &str, what: &'static str) -> Result<&'a str, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::corrupt(what, format!("attribute {name} is missing or not a string"))),
    }
}

pub(crate) fn get_n(item: &Item, name: &str, what: &'static str) -> Result<u64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => {
            v.parse().map_err(|_| StoreError::corrupt(what, format!("attribute {name} is not a whole number")))
        }
        _ => Err(StoreError::corrupt(what, format!("attribute {name} is missing or not a number"))),
    }
}

pub(crate) fn get_b<'a>(item: &'a Item, name: &str, what: &'static str) -> Result<&'a [u8], StoreError> {
    match item.get(name) {
        Some(AttributeValue::B(v)) => Ok(v.as_ref()),
        _ => Err(StoreError::corrupt(what, format!("attribute {name} is missing or not binary"))),
    }
}

/// Reads treat an item past its TTL as absent: DynamoDB deletes it only within ~48 h.
pub(crate) fn is_live(item: &Item, what: &'static str, now: Timestamp) -> Result<bool, StoreError> {
    let expires_at_secs = get_n(item, EXPIRES_AT, what)?;
    Ok(expires_at_secs.saturating_mul(1000) > now.as_millis())
}
