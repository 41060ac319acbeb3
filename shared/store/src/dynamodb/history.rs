//! Executions' histories on DynamoDB (docs/storage.md#history):
//! - `AUDIT#<executionId>` / `PART#<part>.<n>`: the entries one write added
//!   (in items of about 300 KB), with the record as that write left it;
//! - `AUDITS#<owner>` / `EXEC#<created>#<executionId>`: the execution's record,
//!   rewritten by every write with history, so an owner's executions are
//!   listed newest first with one `Query`.
//!
//! Both are written in the transaction of the change they describe, with the
//! history's own TTL (`keep_until`), independent of the execution's.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use executor_core::{ExecutionId, ExecutionRecord, HistoryAppend, HistoryEntry, Timestamp};

use super::item::{
    self, BODY, EXPIRES_AT, Item, KIND, OWNER, PK, SK, STATUS, b, get_b, get_s, is_live, now_secs, s, ttl,
};
use super::{BACKEND, DynamoStore, parse_owner};
use crate::records::{self, AUDIT_RECORD, HISTORY, HistoryPart};
use crate::traced::traced;
use crate::{Access, AuditLine, HistoryStore, Page, StoreError};

/// The `kind` of a history part item.
const HISTORY_KIND: &str = "history";
/// The `kind` of a listing item.
const LISTING_KIND: &str = "audit_execution";

impl DynamoStore {
    /// The puts that store `append` in a transaction: its listing item (plain:
    /// the write's own condition admits one writer), then its parts, each only
    /// where no live part is (a part is written once, never overwritten).
    pub(super) fn history_items(
        &self,
        operation: &'static str,
        append: Option<&HistoryAppend>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let Some(append) = append else { return Ok(Vec::new()) };
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(operation, e);
        let record = &append.record;
        let mut listing = item::key(records::audits_pk(&record.owner), &records::audit_sk(record));
        listing.insert(KIND.into(), s(LISTING_KIND));
        listing.insert(OWNER.into(), s(record.owner.as_str()));
        listing.insert(STATUS.into(), s(record.status.as_str()));
        listing.insert(EXPIRES_AT.into(), ttl(append.keep_until));
        listing.insert(BODY.into(), b(&records::encode(AUDIT_RECORD, record)?));
        let put = Put::builder().table_name(&self.table).set_item(Some(listing)).build().map_err(build)?;
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        let pk = records::history_pk(&record.id);
        let now = now_secs(self.clock.now());
        for (sk, part) in records::split_history(append)? {
            let mut part_item = item::key(pk.clone(), &sk);
            part_item.insert(KIND.into(), s(HISTORY_KIND));
            part_item.insert(OWNER.into(), s(record.owner.as_str()));
            part_item.insert(EXPIRES_AT.into(), ttl(append.keep_until));
            part_item.insert(BODY.into(), b(&records::encode(HISTORY, &part)?));
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(part_item))
                .condition_expression(format!("attribute_not_exists({PK}) OR {EXPIRES_AT} <= :now"))
                .expression_attribute_values(":now", now.clone())
                .build()
                .map_err(build)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        Ok(items)
    }

    /// At most `limit` live items of partition `pk`, newest (highest sort
    /// key) first, whose sort key meets `condition` (on `:sk`, which is
    /// `bound`), after the sort key `after`; and the sort key to continue
    /// from when more remain. One consistent `Query` (more only when items
    /// past their TTL, not yet deleted, were skipped).
    async fn query_newest(
        &self,
        pk: String,
        condition: &'static str,
        bound: String,
        limit: usize,
        after: Option<&str>,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        const OPERATION: &str = "list executions";
        let now = self.clock.now();
        let mut items = Vec::new();
        let mut start = after.map(|sk| item::key(pk.clone(), sk));
        loop {
            // One more than asked: whether it exists says whether a next page does.
            let want = limit.saturating_add(1) - items.len();
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(condition)
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":sk", s(bound.clone()))
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(OPERATION, e))?;
            for item in page.items.unwrap_or_default() {
                if is_live(&item, AUDIT_RECORD, now)? {
                    items.push(item);
                }
            }
            start = page.last_evaluated_key;
            if items.len() > limit {
                items.truncate(limit);
                let next = items.last().map(|last| get_s(last, SK, AUDIT_RECORD)).transpose()?.map(str::to_owned);
                return Ok((items, next));
            }
            if start.is_none() {
                return Ok((items, None));
            }
        }
    }

    /// At most `limit` live history items, from where the export cursor
    /// `after` left off, and the cursor of the last when more remain: `Scan`s
    /// filtered on `kind`, each evaluating no more items than are still wanted.
    async fn scan_history(&self, limit: usize, after: Option<&str>) -> Result<(Vec<Item>, Option<String>), StoreError> {
        const OPERATION: &str = "export the history";
        let now = self.clock.now();
        let after = after.map(records::parse_export_cursor).transpose()?;
        let mut start = after.map(|(pk, sk)| item::key(pk.to_owned(), sk));
        let mut items = Vec::new();
        loop {
            let want = limit.saturating_add(1) - items.len();
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(format!("#kind = :kind AND {EXPIRES_AT} > :now"))
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_values(":kind", s(HISTORY_KIND))
                .expression_attribute_values(":now", now_secs(now))
                .consistent_read(true)
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(OPERATION, e))?;
            for item in page.items.unwrap_or_default() {
                if is_live(&item, HISTORY, now)? {
                    items.push(item);
                }
            }
            start = page.last_evaluated_key;
            if items.len() > limit {
                items.truncate(limit);
                let last = items.last().expect("limit is at least 1");
                let next = records::export_cursor(get_s(last, PK, HISTORY)?, get_s(last, SK, HISTORY)?);
                return Ok((items, Some(next)));
            }
            if start.is_none() {
                return Ok((items, None));
            }
        }
    }

    /// Every owner's listing items, newest first: a `Scan` of the whole table.
    async fn list_every_owner(
        &self,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ExecutionRecord>, StoreError> {
        let items = self.scan_kind("list every owner's executions", LISTING_KIND, AUDIT_RECORD).await?;
        let listed = items
            .iter()
            .map(|item| {
                let record = records::decode(AUDIT_RECORD, get_b(item, BODY, AUDIT_RECORD)?)?;
                Ok((get_s(item, SK, AUDIT_RECORD)?.to_owned(), record))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(records::newest_page(listed, since, cursor, limit))
    }
}

#[async_trait]
impl HistoryStore for DynamoStore {
    async fn append_history(&self, append: &HistoryAppend) -> Result<(), StoreError> {
        traced("store.append_history", BACKEND, async {
            const OPERATION: &str = "store an execution's history";
            let items = self.history_items(OPERATION, Some(append))?;
            self.transact(HISTORY, OPERATION, items, None).await
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
            let (limit, cursor) = (limit.max(1), cursor.map(records::listing_cursor).transpose()?);
            let owner = match access {
                Access::Owner(owner) => owner,
                Access::Internal => return self.list_every_owner(since, limit, cursor).await,
            };
            let pk = records::audits_pk(owner);
            let (items, next) = match since.map(records::since_sk) {
                // Nothing older than the cursor is that recent (and DynamoDB refuses
                // a start key outside the key condition).
                Some(low) if cursor.is_some_and(|c| c < low.as_str()) => (Vec::new(), None),
                Some(low) => self.query_newest(pk, "pk = :pk AND sk >= :sk", low, limit, cursor).await?,
                None => {
                    let prefix = records::AUDIT_EXEC_PREFIX.to_owned();
                    self.query_newest(pk, "pk = :pk AND begins_with(sk, :sk)", prefix, limit, cursor).await?
                }
            };
            let items = items
                .iter()
                .map(|item| records::decode(AUDIT_RECORD, get_b(item, BODY, AUDIT_RECORD)?))
                .collect::<Result<_, _>>()?;
            Ok(Page { items, next })
        })
        .await
    }

    async fn execution_history(
        &self,
        access: Access<'_>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
        traced("store.execution_history", BACKEND, async {
            let items =
                self.query_prefix("read an execution's history", records::history_pk(id), records::PART_PREFIX).await?;
            let now = self.clock.now();
            let mut parts = Vec::new();
            for item in &items {
                if is_live(item, HISTORY, now)? && access.permits(&parse_owner(item, HISTORY)?) {
                    parts.push(records::decode::<HistoryPart>(HISTORY, get_b(item, BODY, HISTORY)?)?);
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
            let (items, next) = self.scan_history(limit.max(1), cursor).await?;
            let mut lines = Vec::new();
            for item in &items {
                let part: HistoryPart = records::decode(HISTORY, get_b(item, BODY, HISTORY)?)?;
                lines.extend(records::audit_lines(part, since));
            }
            Ok(Page { items: lines, next })
        })
        .await
    }
}
