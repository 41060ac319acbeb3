//! Executions' histories in the embedded store: the DynamoDB items
//! (docs/storage.md#history) under the same keys, each value the item's
//! `body` beside its `expires_at` ([`records::Expiring`]). A history written
//! with an execution goes in the same write transaction, so a write refused
//! for its condition stores none of it.

use std::ops::Bound;

use async_trait::async_trait;
use executor_core::{ExecutionId, ExecutionRecord, HistoryAppend, HistoryEntry, Timestamp};
use redb::{ReadOnlyTable, ReadableDatabase, ReadableTable, WriteTransaction};
use serde::Deserialize;

use super::{BACKEND, EmbeddedStore, Failure, ITEMS};
use crate::records::{self, AUDIT_RECORD, Expiring, HISTORY, HISTORY_PART, HistoryPart};
use crate::traced::traced;
use crate::{Access, AuditLine, HistoryStore, Page, StoreError};

type Items = ReadOnlyTable<(&'static str, &'static str), &'static [u8]>;

/// An item's key and value: (pk, sk, value).
type Encoded = (String, String, Vec<u8>);

/// A history append as the items it writes, encoded before the transaction starts.
pub(super) struct EncodedHistory {
    listing: Encoded,
    parts: Vec<Encoded>,
}

pub(super) fn encode_history(append: &HistoryAppend) -> Result<EncodedHistory, StoreError> {
    let record = &append.record;
    let listing = Expiring { expires_at: append.keep_until, body: record };
    let listing =
        (records::audits_pk(&record.owner), records::audit_sk(record), records::encode(AUDIT_RECORD, &listing)?);
    let pk = records::history_pk(&record.id);
    let parts = records::split_history(append)?
        .into_iter()
        .map(|(sk, part)| {
            let value = Expiring { expires_at: append.keep_until, body: part };
            Ok((pk.clone(), sk, records::encode(HISTORY, &value)?))
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(EncodedHistory { listing, parts })
}

/// Only the expiry of a stored audit item.
#[derive(Deserialize)]
struct Expiry {
    expires_at: Timestamp,
}

/// Put the listing item over whatever is there, and each part where no live
/// one is: `AlreadyExists` otherwise, with nothing of `history` written
/// (every part is checked before anything is put).
pub(super) fn write_history(txn: &WriteTransaction, history: &EncodedHistory, now: Timestamp) -> Result<(), Failure> {
    let mut table = txn.open_table(ITEMS)?;
    for (pk, sk, _) in &history.parts {
        if let Some(stored) = table.get((pk.as_str(), sk.as_str()))? {
            let stored: Expiry = records::decode(HISTORY, stored.value()).map_err(Failure::Store)?;
            if now < stored.expires_at {
                return Err(Failure::Store(StoreError::AlreadyExists { what: HISTORY_PART }));
            }
        }
    }
    let (pk, sk, value) = &history.listing;
    table.insert((pk.as_str(), sk.as_str()), value.as_slice())?;
    for (pk, sk, value) in &history.parts {
        table.insert((pk.as_str(), sk.as_str()), value.as_slice())?;
    }
    Ok(())
}

/// The live (sort key, record) listing items of `pk` between `low` (included)
/// and `high` (excluded), newest first, at most `limit + 1` of them.
fn newest_listed(
    table: &Items,
    pk: &str,
    (low, high): (&str, &str),
    limit: usize,
    now: Timestamp,
) -> Result<Vec<(String, ExecutionRecord)>, Failure> {
    let mut listed = Vec::new();
    for entry in table.range((pk, low)..(pk, high))?.rev() {
        let (key, value) = entry?;
        let stored: Expiring<ExecutionRecord> = records::decode(AUDIT_RECORD, value.value()).map_err(Failure::Store)?;
        if now < stored.expires_at {
            listed.push((key.value().1.to_owned(), stored.body));
        }
        if listed.len() > limit {
            break;
        }
    }
    Ok(listed)
}

/// Every owner's live listing items, (sort key, record), in no order.
fn every_listed(table: &Items, now: Timestamp) -> Result<Vec<(String, ExecutionRecord)>, Failure> {
    let mut listed = Vec::new();
    // Every listing partition, `AUDITS#<owner>`, sorts between these.
    let start = (records::AUDITS_PK_PREFIX, "");
    for entry in table.range(start..("AUDITS$", ""))? {
        let (key, value) = entry?;
        let (_, sk) = key.value();
        if !sk.starts_with(records::AUDIT_EXEC_PREFIX) {
            continue;
        }
        let stored: Expiring<ExecutionRecord> = records::decode(AUDIT_RECORD, value.value()).map_err(Failure::Store)?;
        if now < stored.expires_at {
            listed.push((sk.to_owned(), stored.body));
        }
    }
    Ok(listed)
}

/// Up to `limit + 1` live history items after `after` (pk, sk), in key order.
fn history_after(
    table: &Items,
    after: Option<(&str, &str)>,
    limit: usize,
    now: Timestamp,
) -> Result<Vec<Encoded>, Failure> {
    // Every history partition, `AUDIT#<executionId>`, sorts between these.
    let start = match after {
        Some(key) => Bound::Excluded(key),
        None => Bound::Included((records::HISTORY_PK_PREFIX, "")),
    };
    let mut found = Vec::new();
    for entry in table.range::<(&str, &str)>((start, Bound::Excluded(("AUDIT$", ""))))? {
        let (key, value) = entry?;
        let stored: Expiry = records::decode(HISTORY, value.value()).map_err(Failure::Store)?;
        if now < stored.expires_at {
            let (pk, sk) = key.value();
            found.push((pk.to_owned(), sk.to_owned(), value.value().to_vec()));
        }
        if found.len() > limit {
            break;
        }
    }
    Ok(found)
}

impl EmbeddedStore {
    async fn write_history_now(&self, history: EncodedHistory, now: Timestamp) -> Result<(), StoreError> {
        self.write("store an execution's history", move |txn| write_history(txn, &history, now)).await
    }

    /// Run `f` over the items table in a read transaction on the blocking
    /// pool, once every history handed on before is written.
    async fn read_audit<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&Items) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.queue.settled().await;
        let db = self.db.clone();
        let read = move || -> Result<T, Failure> { f(&db.begin_read()?.open_table(ITEMS)?) };
        tokio::task::spawn_blocking(read)
            .await
            .map_err(|e| StoreError::backend(operation, e))?
            .map_err(|e| e.into_store_error(operation))
    }
}

#[async_trait]
impl HistoryStore for EmbeddedStore {
    async fn append_history(&self, append: &HistoryAppend) -> Result<(), StoreError> {
        traced("store.append_history", BACKEND, async {
            let history = encode_history(append)?;
            self.write_history_now(history, self.clock.now()).await
        })
        .await
    }

    async fn queue_history(&self, append: HistoryAppend) -> Result<(), StoreError> {
        traced("store.queue_history", BACKEND, async {
            let now = self.clock.now();
            match self.queue.hand_on(append, now) {
                Ok(()) => Ok(()),
                Err(append) => self.write_history_now(encode_history(&append)?, now).await,
            }
        })
        .await
    }

    async fn list_executions(
        &self,
        access: Access<'_>,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ExecutionRecord>, StoreError> {
        traced("store.list_executions", BACKEND, async {
            let (limit, now) = (limit.max(1), self.clock.now());
            let cursor = cursor.map(records::listing_cursor).transpose()?.map(str::to_owned);
            let Access::Owner(owner) = access else {
                let listed = self.read_audit("list every owner's executions", move |t| every_listed(t, now)).await?;
                return Ok(records::newest_page(listed, since, cursor.as_deref(), limit));
            };
            let pk = records::audits_pk(owner);
            let low = since.map_or_else(|| records::AUDIT_EXEC_PREFIX.to_owned(), records::since_sk);
            let high = cursor.unwrap_or_else(|| "EXEC$".to_owned());
            if high < low {
                return Ok(Page { items: Vec::new(), next: None });
            }
            let listed =
                self.read_audit("list executions", move |t| newest_listed(t, &pk, (&low, &high), limit, now)).await?;
            Ok(records::newest_page(listed, None, None, limit))
        })
        .await
    }

    async fn execution_history(
        &self,
        access: Access<'_>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
        traced("store.execution_history", BACKEND, async {
            self.queue.settled().await;
            let values =
                self.range("read an execution's history", records::history_pk(id), records::PART_PREFIX).await?;
            let now = self.clock.now();
            let mut parts = Vec::new();
            for (_, bytes) in values {
                let stored: Expiring<HistoryPart> = records::decode(HISTORY, &bytes)?;
                if now < stored.expires_at && access.permits(&stored.body.record.owner) {
                    parts.push(stored.body);
                }
            }
            records::assemble_history(parts)
        })
        .await
    }

    async fn export_history(
        &self,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<AuditLine>, StoreError> {
        traced("store.export_history", BACKEND, async {
            let (limit, now) = (limit.max(1), self.clock.now());
            let after = match cursor {
                Some(cursor) => {
                    let (pk, sk) = records::parse_export_cursor(cursor)?;
                    Some((pk.to_owned(), sk.to_owned()))
                }
                None => None,
            };
            let mut found = self
                .read_audit("export the history", move |table| {
                    history_after(table, after.as_ref().map(|(pk, sk)| (pk.as_str(), sk.as_str())), limit, now)
                })
                .await?;
            let next = (found.len() > limit).then(|| records::export_cursor(&found[limit - 1].0, &found[limit - 1].1));
            found.truncate(limit);
            let mut lines = Vec::new();
            for (_, _, bytes) in found {
                let stored: Expiring<HistoryPart> = records::decode(HISTORY, &bytes)?;
                lines.extend(records::audit_lines(stored.body, since));
            }
            Ok(Page { items: lines, next })
        })
        .await
    }
}
