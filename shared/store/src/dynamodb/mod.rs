//! The DynamoDB adapter: one table, conditional writes, chunked snapshots.
//!
//! Layout (docs/storage.md has the full schema):
//! - `SESSION#<id>` / `SESSION`: a session;
//! - `SESSION#<id>` / `PAUSED#<executionId>`: index of the session's paused work;
//! - `EXEC#<id>` / `EXEC`: an execution, holding chunk 0 of its snapshot;
//! - `EXEC#<id>` / `CHUNK#nnnn`: further chunks of a large snapshot;
//! - `KEYS` / `KEY#<sha256>`: an API key;
//! - `QUOTA#<owner>` / `HOUR#<start>` and `SLOTS`: quota counters (`quota.rs`);
//! - `GRANTS#<owner>` / `GRANT#<tool>`: a remembered approval;
//! - `CONNS#<owner>` / `CONN#<source>`: an owner's OAuth tokens for a source (sealed);
//! - `OAUTH#<executionId>` / `STATE`: the authorization in progress of an execution's pause;
//! - `SOURCE#<namespace>` / `OAUTHCLIENT`: a source's client registration with
//!   its upstream's authorization server;
//! - `OUTBOX` / `EVENT#<time>#<id>`: an undelivered lifecycle event, written in
//!   the transaction of the change it describes;
//! - `AUDIT#<executionId>` / `PART#<part>.<n>` and `AUDITS#<owner>` /
//!   `EXEC#<created>#<executionId>`: an execution's history and its listing (`history.rs`).

mod chunks;
mod console;
mod errors;
mod history;
mod item;
mod quota;
mod table;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Get, Put, TransactGetItem, TransactWriteItem};
use chunks::{Layout, Piece, Seen};
use executor_core::{
    ApiKey, Clock, Event, Execution, ExecutionId, ExecutionState, Grant, GrantId, OAuthClient, OAuthState, Principal,
    Receipt, Session, SessionId, SourceConnection, SystemClock, Timestamp, TokenHash,
};
use item::{
    BODY, CHUNK_VERSIONS, CHUNKS, EXPIRES_AT, GRANT_ID, Item, KIND, OWNER, PK, SESSION_ID, SK, STATE_HASH, STATUS,
    STEPS_CHUNKS, TAKEN, VERSION, WRITE_ID, b, get_b, get_n, get_s, is_live, n, now_secs, s, ttl,
};

use crate::records::{self, API_KEY, CONNECTION, EVENT, EXECUTION, GRANT, OAUTH_CLIENT, OAUTH_STATE, SESSION};
use crate::traced::traced;
use crate::{
    Access, ConnectionStore, Emitted, ExecutionStore, GrantStore, KeyStore, KeyUse, OAuthClientStore, OutboxStore,
    SessionStore, StoreError, Ungranted,
};

/// The backend named in store spans.
const BACKEND: &str = "dynamodb";

/// How often a transaction cancelled by a concurrent transaction is retried
/// before the writer is told it lost (`Conflict`).
const CONFLICT_RETRIES: u32 = 5;

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Decides what has expired (an item past `expires_at` reads as absent).
    clock: Arc<dyn Clock>,
    /// The chunk items of large executions, as last read or written here.
    seen: Arc<Seen>,
}

/// What a conditional write requires of the stored item.
#[derive(Clone, Copy)]
enum Expect {
    /// No live item under the key.
    Absent,
    /// A live item at this version.
    Version(u64),
}

impl Expect {
    /// The condition expression and its values.
    fn condition(self, now: Timestamp) -> (&'static str, Vec<(&'static str, AttributeValue)>) {
        match self {
            Expect::Absent => ("attribute_not_exists(pk) OR expires_at <= :now", vec![(":now", now_secs(now))]),
            Expect::Version(v) => {
                ("version = :expected AND expires_at > :now", vec![(":now", now_secs(now)), (":expected", n(v))])
            }
        }
    }
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into(), clock: Arc::new(SystemClock), seen: Arc::default() }
    }

    /// The same store judging expiry by `clock` (tests move a manual clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// From the standard `AWS_*` variables (`AWS_ENDPOINT_URL` and `AWS_REGION`
    /// included) and `EXECUTOR_TABLE`.
    pub async fn from_env() -> Result<Self, StoreError> {
        let table = std::env::var("EXECUTOR_TABLE").map_err(|_| StoreError::Backend {
            operation: "configure the DynamoDB store",
            detail: "EXECUTOR_TABLE is not set; set it to the name of the DynamoDB table".into(),
        })?;
        let config = executor_aws::sdk_config().await.map_err(|e| StoreError::backend("configure AWS", e))?;
        Ok(Self::new(Client::new(config), table))
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// A failed call as one line naming the table, the operation and the likely fix.
    fn sdk_error<E, R>(&self, operation: &'static str, error: SdkError<E, R>) -> StoreError
    where
        E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        errors::sdk_error(&self.client, &self.table, operation, error)
    }

    /// Create the table with the production schema if it is missing.
    pub async fn create_table(&self) -> Result<(), StoreError> {
        table::create_table(&self.client, &self.table).await
    }

    async fn get_item(&self, operation: &'static str, pk: String, sk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item::key(pk, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error(operation, e))?;
        Ok(out.item)
    }

    /// Read a live item visible to `access`, or `NotFound`.
    async fn get_visible(
        &self,
        what: &'static str,
        operation: &'static str,
        pk: String,
        sk: &str,
        access: Access<'_>,
    ) -> Result<Item, StoreError> {
        let found = self.get_item(operation, pk, sk).await?;
        match found {
            Some(item) if is_live(&item, what, self.clock.now())? && access.permits(&parse_owner(&item, what)?) => {
                Ok(item)
            }
            _ => Err(StoreError::NotFound { what }),
        }
    }

    /// Every item under `pk` whose sort key starts with `prefix` (consistent read, all pages).
    async fn query_prefix(&self, operation: &'static str, pk: String, prefix: &str) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":prefix", s(prefix))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(operation, e))?;
            items.extend(page.items.unwrap_or_default());
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// A single-item conditional put.
    async fn put(
        &self,
        what: &'static str,
        operation: &'static str,
        mut item: Item,
        expect: Expect,
    ) -> Result<(), StoreError> {
        item.insert(WRITE_ID.into(), s(random_token().map_err(|e| StoreError::backend(operation, e))?));
        let (condition, values) = expect.condition(self.clock.now());
        let mut request =
            self.client.put_item().table_name(&self.table).set_item(Some(item.clone())).condition_expression(condition);
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e)) if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) => {
                self.condition_failed(what, operation, &item, expect).await
            }
            Err(e) => Err(self.sdk_error(operation, e)),
        }
    }

    /// Why a condition failed: someone else's write, or no live item at all.
    /// Or our own write: the SDK retried a request whose first attempt landed
    /// but whose answer was lost. The stored item is then exactly `item`,
    /// including its write id, which no other writer shares (two claims with the
    /// same content are still two writes), and the write succeeded.
    async fn condition_failed(
        &self,
        what: &'static str,
        operation: &'static str,
        item: &Item,
        expect: Expect,
    ) -> Result<(), StoreError> {
        let (Ok(pk), Ok(sk)) = (get_s(item, PK, what), get_s(item, SK, what)) else {
            return Err(StoreError::Conflict { what });
        };
        let stored = self.get_item(operation, pk.to_owned(), sk).await?;
        match (stored, expect) {
            (Some(stored), _) if stored == *item => Ok(()),
            (_, Expect::Absent) => Err(StoreError::AlreadyExists { what }),
            (Some(stored), _) if is_live(&stored, what, self.clock.now()).unwrap_or(false) => {
                Err(StoreError::Conflict { what })
            }
            _ => Err(StoreError::NotFound { what }),
        }
    }

    /// Write `items` atomically; `first`, if given, is the first one and the
    /// condition it carries (of the others, only history parts carry one).
    async fn transact(
        &self,
        what: &'static str,
        operation: &'static str,
        items: Vec<TransactWriteItem>,
        first: Option<(&Item, Expect)>,
    ) -> Result<(), StoreError> {
        self.transact_naming(what, operation, items, first, &[]).await
    }

    /// [`Self::transact`], where each item at `named[i].0` (an idempotency
    /// receipt, a grant's absence) answers its own failed condition as
    /// `AlreadyExists { what: named[i].1 }`.
    async fn transact_naming(
        &self,
        what: &'static str,
        operation: &'static str,
        items: Vec<TransactWriteItem>,
        first: Option<(&Item, Expect)>,
        named: &[(usize, &'static str)],
    ) -> Result<(), StoreError> {
        let mut backoff = Duration::from_millis(20);
        for attempt in 0..=CONFLICT_RETRIES {
            // The SDK's own retries of this attempt reuse the token, so DynamoDB
            // applies the transaction once; our retries after a cancellation are
            // new transactions with new tokens.
            let token = random_token().map_err(|e| StoreError::backend(operation, e))?;
            let request = self.client.transact_write_items().set_transact_items(Some(items.clone()));
            let sent = request.client_request_token(token).send().await;
            let Err(error) = sent else { return Ok(()) };
            let reasons: Vec<String> = match error.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
                    e.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_owned()).collect()
                }
                _ => return Err(self.sdk_error(operation, error)),
            };
            if let (Some("ConditionalCheckFailed"), Some((meta, expect))) = (reasons.first().map(String::as_str), first)
            {
                return self.condition_failed(what, operation, meta, expect).await;
            }
            let failed = |at: usize| reasons.get(at).map(String::as_str) == Some("ConditionalCheckFailed");
            if let Some((_, named)) = named.iter().find(|(at, _)| failed(*at)) {
                return Err(StoreError::AlreadyExists { what: named });
            }
            // Any other condition is a history part's: that part is stored already.
            if reasons.iter().any(|r| r == "ConditionalCheckFailed") {
                return Err(StoreError::AlreadyExists { what: records::HISTORY_PART });
            }
            let conflicted = reasons.iter().any(|r| r == "TransactionConflict");
            if !conflicted || attempt == CONFLICT_RETRIES {
                return Err(if conflicted {
                    StoreError::Conflict { what }
                } else {
                    StoreError::backend(operation, format!("transaction cancelled: {}", reasons.join(", ")))
                });
            }
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// Write an execution: its item with chunk 0, further chunks, its entry
    /// in the session's paused index, and what is emitted with it, in one transaction.
    async fn write_execution(
        &self,
        operation: &'static str,
        execution: &Execution,
        expect: Expect,
        emitted: Emitted<'_>,
    ) -> Result<(), StoreError> {
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(operation, e);
        let layout = Layout::of(execution)?;
        let history = self.history_items(operation, emitted.history)?;
        let pk = records::execution_pk(&execution.id);
        // A chunk item that already holds these bytes at the version this write
        // replaces is left alone (it keeps the version that wrote it).
        let stored = match expect {
            Expect::Version(expected) => self.seen.at(execution.id.as_str(), expected).unwrap_or_default(),
            Expect::Absent => Vec::new(),
        };
        let expires_at = execution.expires_at().as_secs_ceil();
        let chunk_expires_at = execution.expires_at().plus(chunks::CHUNK_TTL_SLACK).as_secs_ceil();
        let pieces: Vec<(Piece, bool)> = layout
            .chunks
            .iter()
            .enumerate()
            .map(|(i, bytes)| match stored.get(i) {
                Some(piece) if piece.serves(bytes, expires_at) => (piece.clone(), false),
                _ => (Piece::new(execution.version, chunk_expires_at, bytes), true),
            })
            .collect();

        let mut meta = item::key(pk.clone(), records::EXECUTION_SK);
        meta.insert(KIND.into(), s("execution"));
        meta.insert(OWNER.into(), s(execution.owner.as_str()));
        meta.insert(STATUS.into(), s(execution.status().as_str()));
        meta.insert(VERSION.into(), n(execution.version));
        meta.insert(EXPIRES_AT.into(), ttl(execution.expires_at()));
        meta.insert(CHUNKS.into(), n(1 + layout.chunks.len() as u64));
        if !layout.chunks.is_empty() {
            meta.insert(STEPS_CHUNKS.into(), n(layout.steps_chunks as u64));
            let written: Vec<Piece> = pieces.iter().map(|(piece, _)| piece.clone()).collect();
            meta.insert(CHUNK_VERSIONS.into(), s(chunks::versions_attribute(&written)));
        }
        meta.insert(BODY.into(), b(&layout.head));
        meta.insert(WRITE_ID.into(), s(random_token().map_err(|e| StoreError::backend(operation, e))?));
        if let Some(session) = &execution.session_id {
            meta.insert(SESSION_ID.into(), s(session.as_str()));
        }

        let put = |item: Item, expect: Option<Expect>| -> Result<TransactWriteItem, StoreError> {
            let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
            if let Some(expect) = expect {
                let (condition, values) = expect.condition(self.clock.now());
                put = put.condition_expression(condition);
                for (name, value) in values {
                    put = put.expression_attribute_values(name, value);
                }
            }
            Ok(TransactWriteItem::builder().put(put.build().map_err(build)?).build())
        };

        let mut items = vec![put(meta.clone(), Some(expect))?];
        // Next, so that their failed conditions are told apart from the execution's.
        let mut named = Vec::new();
        if let Some(receipt) = emitted.receipt {
            named.push((items.len(), records::RECEIPT));
            items.push(self.receipt_put(operation, receipt)?);
        }
        for check in self.grant_checks(operation, emitted.ungranted)? {
            named.push((items.len(), GRANT));
            items.push(check);
        }
        for (i, (bytes, (piece, changed))) in layout.chunks.iter().zip(&pieces).enumerate() {
            if !changed {
                continue;
            }
            // Chunks carry the version that wrote them, which the execution item
            // lists, so a reader can tell a chunk that does not belong.
            let mut c = item::key(pk.clone(), &records::chunk_sk(i + 1));
            c.insert(VERSION.into(), n(piece.version));
            c.insert(EXPIRES_AT.into(), n(piece.expires_at));
            c.insert(BODY.into(), b(bytes));
            items.push(put(c, None)?);
        }
        if let Some(session) = &execution.session_id {
            let index_pk = records::session_pk(session);
            let index_sk = records::paused_sk(&execution.id);
            match *execution.state() {
                ExecutionState::Paused { deadline } => {
                    let mut marker = item::key(index_pk, &index_sk);
                    marker.insert(KIND.into(), s("paused"));
                    marker.insert(OWNER.into(), s(execution.owner.as_str()));
                    marker.insert(EXPIRES_AT.into(), ttl(deadline));
                    items.push(put(marker, None)?);
                }
                // Only a claim or an expiry leaves the paused state (the
                // transition table in core), so only they find a marker to delete.
                ExecutionState::Resuming { .. } | ExecutionState::Expired if matches!(expect, Expect::Version(_)) => {
                    let delete =
                        Delete::builder().table_name(&self.table).set_key(Some(item::key(index_pk, &index_sk)));
                    items.push(TransactWriteItem::builder().delete(delete.build().map_err(build)?).build());
                }
                _ => {}
            }
        }
        let events = emitted.events.iter().map(|event| put(event_item(event)?, None));
        items.extend(events.chain(history.into_iter().map(Ok)).collect::<Result<Vec<_>, _>>()?);
        self.transact_naming(EXECUTION, operation, items, Some((&meta, expect)), &named).await?;
        let written = pieces.into_iter().map(|(piece, _)| piece).collect();
        self.seen.remember(execution.id.as_str(), execution.version, written);
        Ok(())
    }

    /// A condition on each grant that would let a call of `ungranted` run:
    /// that there is no live one (a revoked grant is deleted).
    fn grant_checks(
        &self,
        operation: &'static str,
        ungranted: Option<Ungranted<'_>>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let Some(ungranted) = ungranted else { return Ok(Vec::new()) };
        let (condition, values) = Expect::Absent.condition(self.clock.now());
        let check = |(pk, sk): (String, String)| {
            let mut check = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(item::key(pk, &sk)))
                .condition_expression(condition);
            for (name, value) in &values {
                check = check.expression_attribute_values(*name, value.clone());
            }
            let check = check.build().map_err(|e| StoreError::backend(operation, e))?;
            Ok(TransactWriteItem::builder().condition_check(check).build())
        };
        records::grant_keys(&ungranted).into_iter().map(check).collect()
    }

    /// The put of an idempotency receipt: only where no live one holds the key.
    fn receipt_put(&self, operation: &'static str, receipt: &Receipt) -> Result<TransactWriteItem, StoreError> {
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(operation, e);
        let (pk, sk) = records::receipt_key(&receipt.owner, &receipt.key_hash);
        let mut item = item::key(pk, &sk);
        item.insert(KIND.into(), s("receipt"));
        item.insert(OWNER.into(), s(receipt.owner.as_str()));
        item.insert(EXPIRES_AT.into(), ttl(receipt.expires_at));
        item.insert(BODY.into(), b(&records::encode(records::RECEIPT, receipt)?));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(format!("attribute_not_exists({PK}) OR {EXPIRES_AT} <= :now"))
            .expression_attribute_values(":now", now_secs(self.clock.now()))
            .build()
            .map_err(build)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A single-item conditional put, or, with events, a transaction that
    /// writes the item (its condition first) and the events together.
    async fn put_emitting(
        &self,
        what: &'static str,
        operation: &'static str,
        mut item: Item,
        expect: Expect,
        events: &[Event],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return self.put(what, operation, item, expect).await;
        }
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(operation, e);
        item.insert(WRITE_ID.into(), s(random_token().map_err(|e| StoreError::backend(operation, e))?));
        let (condition, values) = expect.condition(self.clock.now());
        let mut first =
            Put::builder().table_name(&self.table).set_item(Some(item.clone())).condition_expression(condition);
        for (name, value) in values {
            first = first.expression_attribute_values(name, value);
        }
        let mut items = vec![TransactWriteItem::builder().put(first.build().map_err(build)?).build()];
        for event in events {
            let put = Put::builder().table_name(&self.table).set_item(Some(event_item(event)?));
            items.push(TransactWriteItem::builder().put(put.build().map_err(build)?).build());
        }
        self.transact(what, operation, items, Some((&item, expect))).await
    }

    /// An execution stored in more than one item: one consistent
    /// `TransactGetItems` reads the execution item and its chunks together.
    async fn read_chunked(&self, pk: &str, mut count: usize) -> Result<Execution, StoreError> {
        const OPERATION: &str = "read a chunked execution";
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(OPERATION, e);
        for _ in 0..3 {
            let mut gets = Vec::with_capacity(count);
            for i in 0..count {
                let sk = if i == 0 { records::EXECUTION_SK.to_owned() } else { records::chunk_sk(i) };
                let get = Get::builder().table_name(&self.table).set_key(Some(item::key(pk.to_owned(), &sk)));
                gets.push(TransactGetItem::builder().get(get.build().map_err(build)?).build());
            }
            let out = self
                .client
                .transact_get_items()
                .set_transact_items(Some(gets))
                .send()
                .await
                .map_err(|e| self.sdk_error(OPERATION, e))?;
            let responses = out.responses();
            let Some(meta) = responses.first().and_then(|r| r.item()) else {
                return Err(StoreError::NotFound { what: EXECUTION });
            };
            let now_count = get_n(meta, CHUNKS, EXECUTION)? as usize;
            if now_count != count {
                // Rewritten with another size between our two reads: read again.
                count = now_count;
                continue;
            }
            let version = get_n(meta, VERSION, EXECUTION)?;
            let versions = match meta.get(CHUNK_VERSIONS) {
                Some(_) => chunks::parse_versions(get_s(meta, CHUNK_VERSIONS, EXECUTION)?)?,
                None => vec![version; count - 1],
            };
            let steps_chunks = if meta.contains_key(STEPS_CHUNKS) { get_n(meta, STEPS_CHUNKS, EXECUTION)? } else { 0 };
            if versions.len() != count - 1 || steps_chunks as usize >= count {
                return Err(StoreError::corrupt(EXECUTION, "its chunk counts disagree"));
            }
            let mut bodies = Vec::with_capacity(count - 1);
            let mut pieces = Vec::with_capacity(count - 1);
            for (i, (response, expected)) in responses.iter().skip(1).zip(&versions).enumerate() {
                let part = response
                    .item()
                    .ok_or_else(|| StoreError::corrupt(EXECUTION, format!("chunk {} of {count} is missing", i + 1)))?;
                if get_n(part, VERSION, EXECUTION)? != *expected {
                    return Err(StoreError::corrupt(EXECUTION, format!("chunk {} belongs to another version", i + 1)));
                }
                let body = get_b(part, BODY, EXECUTION)?;
                pieces.push(Piece::new(*expected, get_n(part, EXPIRES_AT, EXECUTION)?, body));
                bodies.push(body.to_vec());
            }
            let layout = Layout {
                head: get_b(meta, BODY, EXECUTION)?.to_vec(),
                chunks: bodies,
                steps_chunks: steps_chunks as usize,
            };
            let execution = layout.execution()?;
            self.seen.remember(execution.id.as_str(), version, pieces);
            return Ok(execution);
        }
        Err(StoreError::Conflict { what: EXECUTION })
    }
}

/// A fresh random token: a transaction's idempotency token (at most 36
/// characters) or an item's write id.
fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

fn parse_owner(item: &Item, what: &'static str) -> Result<executor_core::Principal, StoreError> {
    executor_core::Principal::parse(get_s(item, OWNER, what)?).map_err(|e| StoreError::corrupt(what, e))
}

/// An outbox item: kept until delivered, or until the event is no use (TTL).
fn event_item(event: &Event) -> Result<Item, StoreError> {
    let mut item = item::key(records::OUTBOX_PK.to_owned(), &records::event_sk(event));
    item.insert(KIND.into(), s("event"));
    item.insert(EXPIRES_AT.into(), ttl(event.deliver_until));
    item.insert(BODY.into(), b(&records::encode_event(event)?));
    Ok(item)
}

fn session_item(session: &Session) -> Result<Item, StoreError> {
    let body = records::encode_small(SESSION, session)?;
    let mut item = item::key(records::session_pk(&session.id), records::SESSION_SK);
    item.insert(KIND.into(), s("session"));
    item.insert(OWNER.into(), s(session.owner.as_str()));
    item.insert(STATUS.into(), s(if session.is_active() { "active" } else { "destroyed" }));
    item.insert(VERSION.into(), n(session.version));
    item.insert(EXPIRES_AT.into(), ttl(session.expires_at));
    item.insert(BODY.into(), b(&body));
    Ok(item)
}

#[async_trait]
impl SessionStore for DynamoStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        traced("store.create_session", BACKEND, async {
            self.put(SESSION, "create a session", session_item(session)?, Expect::Absent).await
        })
        .await
    }

    async fn get_session(&self, access: Access<'_>, id: &SessionId) -> Result<Session, StoreError> {
        traced("store.get_session", BACKEND, async {
            let item = self
                .get_visible(SESSION, "read a session", records::session_pk(id), records::SESSION_SK, access)
                .await?;
            records::decode(SESSION, get_b(&item, BODY, SESSION)?)
        })
        .await
    }

    async fn armed_sessions(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        traced("store.armed_sessions", BACKEND, async {
            const OPERATION: &str = "list armed sessions";
            let mut armed = Vec::new();
            let mut start = None;
            loop {
                let page = self
                    .client
                    .scan()
                    .table_name(&self.table)
                    .filter_expression("sk = :session AND #status = :active")
                    .expression_attribute_names("#status", STATUS)
                    .expression_attribute_values(":session", s(records::SESSION_SK))
                    .expression_attribute_values(":active", s("active"))
                    .consistent_read(true)
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|e| self.sdk_error(OPERATION, e))?;
                for item in page.items() {
                    if !is_live(item, SESSION, self.clock.now())? {
                        continue;
                    }
                    let session: Session = records::decode(SESSION, get_b(item, BODY, SESSION)?)?;
                    if let Some(at) = session.alarm_at {
                        armed.push((session.id, at));
                    }
                }
                start = page.last_evaluated_key;
                if start.is_none() {
                    return Ok(armed);
                }
            }
        })
        .await
    }

    async fn update_session_emitting(&self, session: &mut Session, events: &[Event]) -> Result<(), StoreError> {
        traced("store.update_session", BACKEND, async {
            let expected = session.version;
            let mut next = session.clone();
            next.version = expected + 1;
            let item = session_item(&next)?;
            self.put_emitting(SESSION, "update a session", item, Expect::Version(expected), events).await?;
            session.version = next.version;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl ExecutionStore for DynamoStore {
    async fn create_execution_emitting(&self, execution: &Execution, emitted: Emitted<'_>) -> Result<(), StoreError> {
        traced("store.create_execution", BACKEND, async {
            self.write_execution("create an execution", execution, Expect::Absent, emitted).await
        })
        .await
    }

    async fn get_execution(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, StoreError> {
        traced("store.get_execution", BACKEND, async {
            let pk = records::execution_pk(id);
            let meta =
                self.get_visible(EXECUTION, "read an execution", pk.clone(), records::EXECUTION_SK, access).await?;
            let count = get_n(&meta, CHUNKS, EXECUTION)? as usize;
            let execution: Execution = if count <= 1 {
                self.seen.forget(id.as_str());
                records::decode(EXECUTION, get_b(&meta, BODY, EXECUTION)?)?
            } else {
                self.read_chunked(&pk, count).await?
            };
            // The chunked read may have seen a newer write; check it again.
            if !access.permits(&execution.owner) || self.clock.now() >= execution.expires_at() {
                return Err(StoreError::NotFound { what: EXECUTION });
            }
            Ok(execution)
        })
        .await
    }

    async fn update_execution_emitting(
        &self,
        execution: &mut Execution,
        emitted: Emitted<'_>,
    ) -> Result<(), StoreError> {
        traced("store.update_execution", BACKEND, async {
            let expected = execution.version;
            let mut next = execution.clone();
            next.version = expected + 1;
            self.write_execution("update an execution", &next, Expect::Version(expected), emitted).await?;
            execution.version = next.version;
            Ok(())
        })
        .await
    }

    async fn find_receipt(&self, owner: &Principal, key_hash: &str) -> Result<Receipt, StoreError> {
        traced("store.find_receipt", BACKEND, async {
            let (pk, sk) = records::receipt_key(owner, key_hash);
            let what = records::RECEIPT;
            match self.get_item("read an idempotency key", pk, &sk).await? {
                Some(item) if is_live(&item, what, self.clock.now())? => {
                    let receipt: Receipt = records::decode(what, get_b(&item, BODY, what)?)?;
                    if receipt.owner != *owner {
                        return Err(StoreError::NotFound { what });
                    }
                    Ok(receipt)
                }
                _ => Err(StoreError::NotFound { what }),
            }
        })
        .await
    }

    async fn paused_executions(&self, access: Access<'_>, session: &SessionId) -> Result<Vec<ExecutionId>, StoreError> {
        traced("store.paused_executions", BACKEND, async {
            const WHAT: &str = "paused-execution index";
            let markers = self
                .query_prefix("list paused executions", records::session_pk(session), records::PAUSED_PREFIX)
                .await?;
            let mut ids = Vec::new();
            for marker in &markers {
                if is_live(marker, WHAT, self.clock.now())? && access.permits(&parse_owner(marker, WHAT)?) {
                    ids.push(records::paused_id_from_sk(get_s(marker, SK, WHAT)?)?);
                }
            }
            Ok(ids)
        })
        .await
    }
}

#[async_trait]
impl KeyStore for DynamoStore {
    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        traced("store.create_key", BACKEND, async {
            let body = records::encode_small(API_KEY, key)?;
            let mut item = item::key(records::KEYS_PK.to_owned(), &records::key_sk(&key.hash));
            item.insert(KIND.into(), s("api_key"));
            item.insert(OWNER.into(), s(key.owner.as_str()));
            item.insert(BODY.into(), b(&body));
            // Keys never expire, so "absent" is simply "no item".
            let request = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(format!("attribute_not_exists({SK})"));
            match request.send().await {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
                {
                    Err(StoreError::AlreadyExists { what: API_KEY })
                }
                Err(e) => Err(self.sdk_error("create an API key", e)),
            }
        })
        .await
    }

    async fn find_key(&self, hash: &TokenHash) -> Result<ApiKey, StoreError> {
        traced("store.find_key", BACKEND, async {
            let item = self.get_item("read an API key", records::KEYS_PK.to_owned(), &records::key_sk(hash)).await?;
            let item = item.ok_or(StoreError::NotFound { what: API_KEY })?;
            records::decode(API_KEY, get_b(&item, BODY, API_KEY)?)
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        traced("store.list_keys", BACKEND, async {
            let items = self.query_prefix("list API keys", records::KEYS_PK.to_owned(), records::KEY_PREFIX).await?;
            items.iter().map(|item| records::decode(API_KEY, get_b(item, BODY, API_KEY)?)).collect()
        })
        .await
    }

    async fn revoke_key(&self, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.revoke_key", BACKEND, async {
            let deleted = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::KEYS_PK.to_owned(), &records::key_sk(hash))))
                .condition_expression(format!("attribute_exists({SK})"))
                .send()
                .await;
            match deleted {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
                {
                    Err(StoreError::NotFound { what: API_KEY })
                }
                Err(e) => Err(self.sdk_error("revoke an API key", e)),
            }
        })
        .await
    }

    async fn record_key_use(&self, hash: &TokenHash, at: Timestamp) -> Result<(), StoreError> {
        traced("store.record_key_use", BACKEND, async {
            // One conditional update, the throttle in its condition (as
            // `records::key_use_due`): every instance may try, a use within the
            // resolution of the recorded one changes nothing, and a revoked key's
            // item is not brought back.
            let resolution = u64::try_from(crate::KEY_USE_RESOLUTION.as_millis()).unwrap_or(u64::MAX);
            let cutoff = at.as_millis().saturating_sub(resolution);
            let last = records::LAST_USED_AT;
            let updated = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::KEYS_PK.to_owned(), &records::key_sk(hash))))
                .update_expression(format!("SET {last} = :at"))
                .condition_expression(format!(
                    "attribute_exists({SK}) AND (attribute_not_exists({last}) OR {last} <= :cutoff)"
                ))
                .expression_attribute_values(":at", n(at.as_millis()))
                .expression_attribute_values(":cutoff", n(cutoff))
                .send()
                .await;
            match updated {
                Ok(_) => Ok(()),
                // Not due, or the key is gone: nothing to record.
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
                {
                    Ok(())
                }
                Err(e) => Err(self.sdk_error("record an API key's use", e)),
            }
        })
        .await
    }

    async fn list_key_uses(&self) -> Result<Vec<KeyUse>, StoreError> {
        traced("store.list_keys", BACKEND, async {
            let items = self.query_prefix("list API keys", records::KEYS_PK.to_owned(), records::KEY_PREFIX).await?;
            items
                .iter()
                .map(|item| {
                    let key = records::decode(API_KEY, get_b(item, BODY, API_KEY)?)?;
                    let last_used = match item.contains_key(records::LAST_USED_AT) {
                        true => Some(Timestamp::from_millis(get_n(item, records::LAST_USED_AT, API_KEY)?)),
                        false => None,
                    };
                    Ok(KeyUse { key, last_used })
                })
                .collect()
        })
        .await
    }
}

#[async_trait]
impl ConnectionStore for DynamoStore {
    async fn get_connection(&self, owner: &Principal, source: &str) -> Result<SourceConnection, StoreError> {
        traced("store.get_connection", BACKEND, async {
            let found = self
                .get_item("read a connection", records::connections_pk(owner), &records::connection_sk(source))
                .await?;
            match found {
                Some(item) if is_live(&item, CONNECTION, self.clock.now())? => {
                    records::decode(CONNECTION, get_b(&item, BODY, CONNECTION)?)
                }
                _ => Err(StoreError::NotFound { what: CONNECTION }),
            }
        })
        .await
    }

    async fn list_connections(&self, owner: &Principal) -> Result<Vec<SourceConnection>, StoreError> {
        traced("store.list_connections", BACKEND, async {
            let items = self
                .query_prefix("list connections", records::connections_pk(owner), records::CONNECTION_PREFIX)
                .await?;
            let now = self.clock.now();
            let mut connections = Vec::new();
            for item in &items {
                if is_live(item, CONNECTION, now)? {
                    connections.push(records::decode(CONNECTION, get_b(item, BODY, CONNECTION)?)?);
                }
            }
            Ok(connections)
        })
        .await
    }

    async fn save_connection(
        &self,
        connection: &mut SourceConnection,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        traced("store.save_connection", BACKEND, async {
            let mut next = connection.clone();
            next.version = expected.map_or(1, |v| v + 1);
            let body = records::encode_small(CONNECTION, &next)?;
            let mut item = item::key(records::connections_pk(&next.owner), &records::connection_sk(&next.source));
            item.insert(KIND.into(), s("connection"));
            item.insert(OWNER.into(), s(next.owner.as_str()));
            item.insert(VERSION.into(), n(next.version));
            item.insert(EXPIRES_AT.into(), ttl(next.expires_at));
            item.insert(BODY.into(), b(&body));
            let expect = expected.map_or(Expect::Absent, Expect::Version);
            self.put(CONNECTION, "store a connection", item, expect).await?;
            connection.version = next.version;
            Ok(())
        })
        .await
    }

    async fn delete_connection(
        &self,
        owner: &Principal,
        source: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        traced("store.delete_connection", BACKEND, async {
            let key = item::key(records::connections_pk(owner), &records::connection_sk(source));
            let mut request = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key.clone()))
                .expression_attribute_values(":now", now_secs(self.clock.now()));
            request = match expected {
                None => request.condition_expression(format!("{EXPIRES_AT} > :now")),
                Some(version) => request
                    .condition_expression(format!("{EXPIRES_AT} > :now AND {VERSION} = :expected"))
                    .expression_attribute_values(":expected", n(version)),
            };
            match request.send().await {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
                {
                    // Gone, or (when a version was expected) changed meanwhile.
                    let stored = self
                        .get_item(
                            "delete a connection",
                            records::connections_pk(owner),
                            &records::connection_sk(source),
                        )
                        .await?;
                    match stored {
                        Some(item) if is_live(&item, CONNECTION, self.clock.now())? => {
                            Err(StoreError::Conflict { what: CONNECTION })
                        }
                        _ => Err(StoreError::NotFound { what: CONNECTION }),
                    }
                }
                Err(e) => Err(self.sdk_error("delete a connection", e)),
            }
        })
        .await
    }

    async fn put_oauth_state(&self, state: &OAuthState) -> Result<(), StoreError> {
        traced("store.put_oauth_state", BACKEND, async {
            const OPERATION: &str = "store an OAuth state";
            let pk = records::oauth_state_pk(&state.execution_id);
            let mut item = item::key(pk.clone(), records::OAUTH_STATE_SK);
            item.insert(KIND.into(), s("oauth_state"));
            item.insert(OWNER.into(), s(state.owner.as_str()));
            item.insert(STATE_HASH.into(), s(state.hash.as_str()));
            item.insert(TAKEN.into(), AttributeValue::Bool(false));
            item.insert(EXPIRES_AT.into(), ttl(state.expires_at));
            item.insert(BODY.into(), b(&records::encode_small(OAUTH_STATE, state)?));
            item.insert(WRITE_ID.into(), s(random_token().map_err(|e| StoreError::backend(OPERATION, e))?));
            // Replaces whatever is stored, unless a callback holds it (taken, live).
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression(format!("attribute_not_exists(pk) OR {EXPIRES_AT} <= :now OR {TAKEN} = :untaken"))
                .expression_attribute_values(":now", now_secs(self.clock.now()))
                .expression_attribute_values(":untaken", AttributeValue::Bool(false))
                .send()
                .await;
            match put {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
                {
                    // Our own write, if the SDK retried a request whose answer was lost.
                    match self.get_item(OPERATION, pk, records::OAUTH_STATE_SK).await? {
                        Some(stored) if stored == item => Ok(()),
                        _ => Err(StoreError::Conflict { what: OAUTH_STATE }),
                    }
                }
                Err(e) => Err(self.sdk_error(OPERATION, e)),
            }
        })
        .await
    }

    async fn take_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<OAuthState, StoreError> {
        traced("store.take_oauth_state", BACKEND, async {
            const OPERATION: &str = "take an OAuth state";
            let pk = records::oauth_state_pk(execution);
            let write_id = random_token().map_err(|e| StoreError::backend(OPERATION, e))?;
            let taken = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(item::key(pk.clone(), records::OAUTH_STATE_SK)))
                .update_expression(format!("SET {TAKEN} = :taken, {WRITE_ID} = :write"))
                .condition_expression(format!("{STATE_HASH} = :hash AND {TAKEN} = :untaken AND {EXPIRES_AT} > :now"))
                .expression_attribute_values(":taken", AttributeValue::Bool(true))
                .expression_attribute_values(":untaken", AttributeValue::Bool(false))
                .expression_attribute_values(":write", s(write_id.clone()))
                .expression_attribute_values(":hash", s(hash.as_str()))
                .expression_attribute_values(":now", now_secs(self.clock.now()))
                .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
                .send()
                .await;
            let item = match taken {
                Ok(out) => out.attributes,
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
                {
                    // Taken by us if the SDK retried a request whose answer was lost: the write id says.
                    self.get_item(OPERATION, pk, records::OAUTH_STATE_SK)
                        .await?
                        .filter(|stored| stored.get(WRITE_ID) == Some(&s(write_id.clone())))
                }
                Err(e) => return Err(self.sdk_error(OPERATION, e)),
            };
            match item {
                Some(item) => records::decode(OAUTH_STATE, get_b(&item, BODY, OAUTH_STATE)?),
                None => Err(StoreError::NotFound { what: OAUTH_STATE }),
            }
        })
        .await
    }

    async fn release_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.release_oauth_state", BACKEND, async {
            let deleted = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::oauth_state_pk(execution), records::OAUTH_STATE_SK)))
                .condition_expression(format!("{STATE_HASH} = :hash"))
                .expression_attribute_values(":hash", s(hash.as_str()))
                .send()
                .await;
            match deleted {
                // Gone, or replaced by a newer state: nothing of this one is left.
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
                {
                    Ok(())
                }
                Err(e) => Err(self.sdk_error("release an OAuth state", e)),
            }
        })
        .await
    }
}

#[async_trait]
impl GrantStore for DynamoStore {
    async fn create_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        traced("store.create_grant", BACKEND, async {
            let body = records::encode_small(GRANT, grant)?;
            let mut item = item::key(records::grants_pk(&grant.owner), &records::grant_sk(grant));
            item.insert(KIND.into(), s("grant"));
            item.insert(OWNER.into(), s(grant.owner.as_str()));
            item.insert(GRANT_ID.into(), s(grant.id.as_str()));
            item.insert(EXPIRES_AT.into(), ttl(grant.expires_at));
            item.insert(BODY.into(), b(&body));
            self.put(GRANT, "create a grant", item, Expect::Absent).await
        })
        .await
    }

    async fn list_grants(&self, owner: &Principal) -> Result<Vec<Grant>, StoreError> {
        traced("store.list_grants", BACKEND, async {
            let items = self.query_prefix("list grants", records::grants_pk(owner), records::GRANT_PREFIX).await?;
            let now = self.clock.now();
            let mut grants = Vec::new();
            for item in &items {
                if is_live(item, GRANT, now)? {
                    grants.push(records::decode(GRANT, get_b(item, BODY, GRANT)?)?);
                }
            }
            Ok(grants)
        })
        .await
    }

    async fn all_grants(&self) -> Result<Vec<Grant>, StoreError> {
        traced("store.all_grants", BACKEND, async {
            let items = self.scan_kind("list every grant", "grant", GRANT).await?;
            items.iter().map(|item| records::decode(GRANT, get_b(item, BODY, GRANT)?)).collect()
        })
        .await
    }

    async fn revoke_grant(&self, access: Access<'_>, id: &GrantId) -> Result<Grant, StoreError> {
        traced("store.revoke_grant", BACKEND, async {
            let grant = match access {
                Access::Owner(owner) => self.list_grants(owner).await?.into_iter().find(|g| g.id == *id),
                Access::Internal => self.find_grant(id).await?,
            };
            let grant = grant.ok_or(StoreError::NotFound { what: GRANT })?;
            // Conditional on the id: a stale revoke never deletes a newer grant for the same tool.
            let deleted = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::grants_pk(&grant.owner), &records::grant_sk(&grant))))
                .condition_expression(format!("{GRANT_ID} = :id AND {EXPIRES_AT} > :now"))
                .expression_attribute_values(":id", s(id.as_str()))
                .expression_attribute_values(":now", now_secs(self.clock.now()))
                .send()
                .await;
            match deleted {
                Ok(_) => Ok(grant),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
                {
                    Err(StoreError::NotFound { what: GRANT })
                }
                Err(e) => Err(self.sdk_error("revoke a grant", e)),
            }
        })
        .await
    }
}

#[async_trait]
impl OAuthClientStore for DynamoStore {
    async fn get_oauth_client(&self, source: &str) -> Result<OAuthClient, StoreError> {
        traced("store.get_oauth_client", BACKEND, async {
            let pk = records::oauth_client_pk(source);
            let found = self.get_item("read an OAuth client registration", pk, records::OAUTH_CLIENT_SK).await?;
            match found {
                Some(item) if is_live(&item, OAUTH_CLIENT, self.clock.now())? => {
                    records::decode(OAUTH_CLIENT, get_b(&item, BODY, OAUTH_CLIENT)?)
                }
                _ => Err(StoreError::NotFound { what: OAUTH_CLIENT }),
            }
        })
        .await
    }

    async fn put_oauth_client(&self, client: &mut OAuthClient) -> Result<(), StoreError> {
        traced("store.put_oauth_client", BACKEND, async {
            let expected = client.version;
            let mut next = client.clone();
            next.version = expected + 1;
            let mut item = item::key(records::oauth_client_pk(&client.source), records::OAUTH_CLIENT_SK);
            item.insert(KIND.into(), s("oauth_client"));
            item.insert(VERSION.into(), n(next.version));
            item.insert(EXPIRES_AT.into(), ttl(next.expires_at));
            item.insert(BODY.into(), b(&records::encode_small(OAUTH_CLIENT, &next)?));
            let expect = if expected == 0 { Expect::Absent } else { Expect::Version(expected) };
            self.put(OAUTH_CLIENT, "store an OAuth client registration", item, expect).await?;
            client.version = next.version;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl OutboxStore for DynamoStore {
    async fn pending_events(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        traced("store.pending_events", BACKEND, async {
            const OPERATION: &str = "list undelivered events";
            let now = self.clock.now();
            let mut events = Vec::new();
            let mut start = None;
            // Pages until `limit` live events: items past their TTL that
            // DynamoDB has not deleted yet are skipped.
            loop {
                let page = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":pk", s(records::OUTBOX_PK))
                    .expression_attribute_values(":prefix", s(records::EVENT_PREFIX))
                    .consistent_read(true)
                    .limit(i32::try_from(limit).unwrap_or(i32::MAX))
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|e| self.sdk_error(OPERATION, e))?;
                for item in page.items() {
                    if is_live(item, EVENT, now)? {
                        let stored: records::StoredEvent = records::decode(EVENT, get_b(item, BODY, EVENT)?)?;
                        events.push(stored.event);
                    }
                }
                start = page.last_evaluated_key;
                if events.len() >= limit || start.is_none() {
                    events.truncate(limit);
                    return Ok(events);
                }
            }
        })
        .await
    }

    async fn delete_event(&self, event: &Event) -> Result<(), StoreError> {
        traced("store.delete_event", BACKEND, async {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::OUTBOX_PK.to_owned(), &records::event_sk(event))))
                .send()
                .await
                .map_err(|e| self.sdk_error("delete a delivered event", e))?;
            Ok(())
        })
        .await
    }
}

impl DynamoStore {
    /// Every live item of `kind`, whoever owns it: a consistent `Scan` of the
    /// whole table (every page), for admin commands, never a request path.
    async fn scan_kind(
        &self,
        operation: &'static str,
        kind: &'static str,
        what: &'static str,
    ) -> Result<Vec<Item>, StoreError> {
        let now = self.clock.now();
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(format!("#kind = :kind AND {EXPIRES_AT} > :now"))
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_values(":kind", s(kind))
                .expression_attribute_values(":now", now_secs(now))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(operation, e))?;
            for item in page.items.unwrap_or_default() {
                // Checked again to the millisecond, as every read does.
                if is_live(&item, what, now)? {
                    items.push(item);
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// The live grant with this id, whoever owns it: a scan, for the admin
    /// command `executor grants revoke` (requests know the owner and query).
    async fn find_grant(&self, id: &GrantId) -> Result<Option<Grant>, StoreError> {
        const OPERATION: &str = "find a grant";
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(format!("#kind = :kind AND {GRANT_ID} = :id"))
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_values(":kind", s("grant"))
                .expression_attribute_values(":id", s(id.as_str()))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(OPERATION, e))?;
            for item in page.items() {
                if is_live(item, GRANT, self.clock.now())? {
                    return Ok(Some(records::decode(GRANT, get_b(item, BODY, GRANT)?)?));
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(None);
            }
        }
    }
}
