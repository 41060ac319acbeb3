//! The embedded adapter for `executor serve`: one redb file under the data dir.
//!
//! redb because it is pure Rust (no C toolchain), ACID with fsync on commit, and
//! maintained. Its write transactions are serialised, so a read-check-write
//! inside one is exactly a conditional write: concurrent claims cannot both win.
//! Keys mirror the DynamoDB layout (`pk`, `sk`); values are the records' JSON.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{
    ApiKey, Clock, Event, Execution, ExecutionId, ExecutionState, Grant, GrantId, OAuthClient, OAuthState, Principal,
    Receipt, Session, SessionId, SourceConnection, SystemClock, Timestamp, TokenHash,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use crate::data_dir::{self, Exposed};
use crate::records::{self, API_KEY, CONNECTION, EVENT, EXECUTION, GRANT, OAUTH_CLIENT, OAUTH_STATE, RECEIPT, SESSION};

#[path = "embedded_console.rs"]
mod console;
#[path = "embedded_history.rs"]
mod history;
#[path = "embedded_history_queue.rs"]
mod history_queue;
#[path = "embedded_quota.rs"]
mod quota;
use crate::traced::traced;
use crate::{
    Access, ConnectionStore, Emitted, ExecutionStore, GrantStore, KeyStore, KeyUse, OAuthClientStore, OutboxStore,
    SessionStore, StoreError,
};

/// The backend named in store spans.
const BACKEND: &str = "redb";

/// All items, keyed like the DynamoDB table: (partition key, sort key).
const ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("items");

const FILE_NAME: &str = "executor.redb";

/// Value of a paused-execution index item.
#[derive(Serialize, Deserialize)]
struct PausedMarker {
    owner: Principal,
    expires_at: Timestamp,
}

#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    /// Histories written after their answer; the last clone dropped writes what is left.
    queue: Arc<history_queue::HistoryQueue>,
    /// Decides what has expired (an item past `expires_at` reads as absent).
    clock: Arc<dyn Clock>,
}

impl EmbeddedStore {
    /// Open (or create) the store in `data_dir`, creating the directory if
    /// needed. What this creates is private to its user (the directory 0700,
    /// the store file 0600); [`EmbeddedStore::exposed`] reports what is not.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        crate::create_data_dir(data_dir)
            .map_err(|e| StoreError::backend("create the data directory", format!("{}: {e}", data_dir.display())))?;
        let path = data_dir.join(FILE_NAME);
        // Made here, before redb opens it, so that it is never readable by others.
        data_dir::create_private_file(&path)
            .map_err(|e| StoreError::backend("create the embedded store", format!("{}: {e}", path.display())))?;
        let db = Database::create(&path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::backend(
                "open the embedded store",
                format!(
                    "{} is in use by another executor process (one process at a time may open it); \
                     wait for that process to finish, or stop it",
                    path.display()
                ),
            ),
            other => StoreError::backend("open the embedded store", format!("{}: {other}", path.display())),
        })?;
        let db = Arc::new(db);
        let queue = Arc::new(history_queue::HistoryQueue::start(db.clone()));
        let store = Self { db, queue, clock: Arc::new(SystemClock) };
        store.write_blocking("create tables", |txn| {
            txn.open_table(ITEMS)?;
            Ok(())
        })?;
        store.purge_expired()?;
        Ok(store)
    }

    /// The same store judging expiry by `clock` (tests move a manual clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The data directory and store file in `data_dir` if other users of the
    /// machine may open them (made so before this version, or by hand): each
    /// says the `chmod` that makes it private. Nothing is changed.
    pub fn exposed(data_dir: &Path) -> Vec<Exposed> {
        data_dir::exposed(data_dir, &data_dir.join(FILE_NAME))
    }

    /// Delete items past their `expires_at` (DynamoDB's TTL does this on AWS).
    /// Runs at open; returns how many items it removed.
    pub fn purge_expired(&self) -> Result<usize, StoreError> {
        /// Every record but API keys has `expires_at`; nothing else is decoded.
        #[derive(Deserialize)]
        struct Expiry {
            expires_at: Option<Timestamp>,
        }
        let now = self.clock.now();
        self.write_blocking("purge expired items", |txn| {
            let mut table = txn.open_table(ITEMS)?;
            let mut expired = Vec::new();
            for entry in table.iter()? {
                let (key, value) = entry?;
                let expiry: Expiry = records::decode("stored item", value.value()).map_err(Failure::Store)?;
                if expiry.expires_at.is_some_and(|at| at <= now) {
                    let (pk, sk) = key.value();
                    expired.push((pk.to_owned(), sk.to_owned()));
                }
            }
            for (pk, sk) in &expired {
                table.remove((pk.as_str(), sk.as_str()))?;
            }
            Ok(expired.len())
        })
    }

    fn write_blocking<T>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&WriteTransaction) -> Result<T, Failure>,
    ) -> Result<T, StoreError> {
        let txn = self.db.begin_write().map_err(|e| StoreError::backend(operation, e))?;
        // Dropping an uncommitted transaction aborts it: a failed condition writes nothing.
        let value = f(&txn).map_err(|e| e.into_store_error(operation))?;
        txn.commit().map_err(|e| StoreError::backend(operation, e))?;
        Ok(value)
    }

    /// Run a write transaction on the blocking pool.
    async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&WriteTransaction) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write_blocking(operation, f))
            .await
            .map_err(|e| StoreError::backend(operation, e))?
    }

    /// Run `f` over the items table in a read transaction on the blocking pool.
    async fn read_items<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&redb::ReadOnlyTable<(&'static str, &'static str), &'static [u8]>) -> Result<T, redb::Error>
        + Send
        + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || -> Result<T, redb::Error> { f(&db.begin_read()?.open_table(ITEMS)?) })
            .await
            .map_err(|e| StoreError::backend(operation, e))?
            .map_err(|e| StoreError::backend(operation, e))
    }

    /// The (sort key, value) pairs under `pk` whose sort key starts with `prefix`
    /// (which ends in `#`), on the blocking pool.
    async fn range(
        &self,
        operation: &'static str,
        pk: String,
        prefix: &'static str,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        // Every sort key under the prefix sorts before the prefix with '#' bumped to '$'.
        let end = format!("{}$", prefix.trim_end_matches('#'));
        self.read_items(operation, move |table| {
            let range = table.range((pk.as_str(), prefix)..(pk.as_str(), end.as_str()))?;
            range
                .map(|entry| {
                    let (key, value) = entry?;
                    Ok((key.value().1.to_owned(), value.value().to_vec()))
                })
                .collect()
        })
        .await
    }

    /// Read one item on the blocking pool.
    async fn get(&self, operation: &'static str, pk: String, sk: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_items(operation, move |table| Ok(table.get((pk.as_str(), sk.as_str()))?.map(|v| v.value().to_vec())))
            .await
    }
}

/// Inside a transaction: a store answer (condition failed, ...) or a redb error.
enum Failure {
    Store(StoreError),
    Db(redb::Error),
}

impl<E: Into<redb::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Db(e.into())
    }
}

impl Failure {
    fn into_store_error(self, operation: &'static str) -> StoreError {
        match self {
            Failure::Store(e) => e,
            Failure::Db(e) => StoreError::backend(operation, e),
        }
    }
}

/// A record written with conditions: sessions and executions.
trait Versioned: Clone + Send + Serialize + for<'de> Deserialize<'de> + 'static {
    const WHAT: &'static str;
    fn key(&self) -> (String, &'static str);
    fn owner(&self) -> &Principal;
    fn version(&self) -> u64;
    fn set_version(&mut self, version: u64);
    fn expires_at(&self) -> Timestamp;
    fn encode(&self) -> Result<Vec<u8>, StoreError>;
    /// Items that change together with the record, in the same transaction.
    fn write_related(&self, _txn: &WriteTransaction) -> Result<(), Failure> {
        Ok(())
    }
}

/// Sessions and executions carry the same bookkeeping fields.
macro_rules! versioned {
    ($record:ty, $what:expr, $pk:path, $sk:path, $expires_at:expr, $encode:expr $(, $related:item)?) => {
        impl Versioned for $record {
            const WHAT: &'static str = $what;
            fn key(&self) -> (String, &'static str) {
                ($pk(&self.id), $sk)
            }
            fn owner(&self) -> &Principal {
                &self.owner
            }
            fn version(&self) -> u64 {
                self.version
            }
            fn set_version(&mut self, version: u64) {
                self.version = version;
            }
            fn expires_at(&self) -> Timestamp {
                $expires_at(self)
            }
            fn encode(&self) -> Result<Vec<u8>, StoreError> {
                $encode(self)
            }
            $($related)?
        }
    };
}

versioned!(Session, SESSION, records::session_pk, records::SESSION_SK, |s: &Session| s.expires_at, |s| {
    records::encode_small(SESSION, s)
});
versioned!(
    Execution,
    EXECUTION,
    records::execution_pk,
    records::EXECUTION_SK,
    Execution::expires_at,
    records::encode_execution,
    fn write_related(&self, txn: &WriteTransaction) -> Result<(), Failure> {
        index_paused(txn, self)
    }
);

/// What a write stores beside its record, encoded before the transaction
/// starts: outbox items (sort key, value) and the history.
#[derive(Default)]
struct Beside {
    events: Vec<(String, Vec<u8>)>,
    history: Option<history::EncodedHistory>,
    receipt: Option<Receipt>,
    /// The grants that must be absent (`Emitted::ungranted`), by key.
    ungranted: Vec<(String, String)>,
}

impl Beside {
    fn events(events: &[Event]) -> Result<Self, StoreError> {
        let events = events.iter().map(|event| Ok((records::event_sk(event), records::encode_event(event)?)));
        let events = events.collect::<Result<_, StoreError>>()?;
        Ok(Self { events, history: None, receipt: None, ungranted: Vec::new() })
    }

    fn of(emitted: Emitted<'_>) -> Result<Self, StoreError> {
        let history = emitted.history.map(history::encode_history).transpose()?;
        let ungranted = emitted.ungranted.as_ref().map(records::grant_keys).unwrap_or_default();
        Ok(Self { history, receipt: emitted.receipt.cloned(), ungranted, ..Self::events(emitted.events)? })
    }

    fn write(&self, txn: &WriteTransaction, now: Timestamp) -> Result<(), Failure> {
        let mut table = txn.open_table(ITEMS)?;
        if let Some(receipt) = &self.receipt {
            let (pk, sk) = records::receipt_key(&receipt.owner, &receipt.key_hash);
            let taken = match table.get((pk.as_str(), sk.as_str()))? {
                Some(stored) => {
                    now < records::decode::<Receipt>(RECEIPT, stored.value()).map_err(Failure::Store)?.expires_at
                }
                None => false,
            };
            if taken {
                return Err(Failure::Store(StoreError::AlreadyExists { what: RECEIPT }));
            }
            let body = serde_json::to_vec(receipt).map_err(|e| Failure::Store(StoreError::corrupt(RECEIPT, e)))?;
            table.insert((pk.as_str(), sk.as_str()), body.as_slice())?;
        }
        for (pk, sk) in &self.ungranted {
            if let Some(stored) = table.get((pk.as_str(), sk.as_str()))?
                && records::decode::<Grant>(GRANT, stored.value()).map_err(Failure::Store)?.is_live(now)
            {
                return Err(Failure::Store(StoreError::AlreadyExists { what: GRANT }));
            }
        }
        for (sk, body) in &self.events {
            table.insert((records::OUTBOX_PK, sk.as_str()), body.as_slice())?;
        }
        drop(table);
        match &self.history {
            Some(history) => history::write_history(txn, history, now),
            None => Ok(()),
        }
    }
}

impl EmbeddedStore {
    async fn create<T: Versioned>(
        &self,
        operation: &'static str,
        record: &T,
        beside: Beside,
    ) -> Result<(), StoreError> {
        let body = record.encode()?;
        let record = record.clone();
        let now = self.clock.now();
        self.write(operation, move |txn| {
            let (pk, sk) = record.key();
            create_if_absent::<T>(txn, &pk, sk, &body, now)?;
            record.write_related(txn)?;
            beside.write(txn, now)
        })
        .await
    }

    async fn read<T: Versioned>(
        &self,
        operation: &'static str,
        key: (String, &'static str),
        access: Access<'_>,
    ) -> Result<T, StoreError> {
        let bytes = self.get(operation, key.0, key.1.to_owned()).await?;
        visible(bytes, access, self.clock.now())
    }

    async fn update<T: Versioned>(
        &self,
        operation: &'static str,
        record: &mut T,
        beside: Beside,
    ) -> Result<(), StoreError> {
        let expected = record.version();
        let mut next = record.clone();
        next.set_version(expected + 1);
        let body = next.encode()?;
        let now = self.clock.now();
        self.write(operation, move |txn| {
            let (pk, sk) = next.key();
            update_if_version::<T>(txn, &pk, sk, expected, &body, now)?;
            next.write_related(txn)?;
            beside.write(txn, now)
        })
        .await?;
        record.set_version(expected + 1);
        Ok(())
    }
}

/// The live record stored under `(pk, sk)`, if any.
fn live<T: Versioned>(txn: &WriteTransaction, pk: &str, sk: &str, now: Timestamp) -> Result<Option<T>, Failure> {
    let table = txn.open_table(ITEMS)?;
    let Some(bytes) = table.get((pk, sk))? else { return Ok(None) };
    let record: T = records::decode(T::WHAT, bytes.value()).map_err(Failure::Store)?;
    Ok((now < record.expires_at()).then_some(record))
}

fn create_if_absent<T: Versioned>(
    txn: &WriteTransaction,
    pk: &str,
    sk: &str,
    body: &[u8],
    now: Timestamp,
) -> Result<(), Failure> {
    if live::<T>(txn, pk, sk, now)?.is_some() {
        return Err(Failure::Store(StoreError::AlreadyExists { what: T::WHAT }));
    }
    txn.open_table(ITEMS)?.insert((pk, sk), body)?;
    Ok(())
}

fn update_if_version<T: Versioned>(
    txn: &WriteTransaction,
    pk: &str,
    sk: &str,
    expected: u64,
    body: &[u8],
    now: Timestamp,
) -> Result<(), Failure> {
    match live::<T>(txn, pk, sk, now)? {
        None => Err(Failure::Store(StoreError::NotFound { what: T::WHAT })),
        Some(stored) if stored.version() != expected => Err(Failure::Store(StoreError::Conflict { what: T::WHAT })),
        Some(_) => {
            txn.open_table(ITEMS)?.insert((pk, sk), body)?;
            Ok(())
        }
    }
}

/// Keep the session's paused index in step with the execution's state.
fn index_paused(txn: &WriteTransaction, execution: &Execution) -> Result<(), Failure> {
    let Some(session) = &execution.session_id else { return Ok(()) };
    let pk = records::session_pk(session);
    let sk = records::paused_sk(&execution.id);
    let mut table = txn.open_table(ITEMS)?;
    match *execution.state() {
        ExecutionState::Paused { deadline } => {
            let marker = PausedMarker { owner: execution.owner.clone(), expires_at: deadline };
            let body = records::encode("paused-execution index", &marker).map_err(Failure::Store)?;
            table.insert((pk.as_str(), sk.as_str()), body.as_slice())?;
        }
        _ => {
            table.remove((pk.as_str(), sk.as_str()))?;
        }
    }
    Ok(())
}

/// The stored record if it is live and `access` may see it; otherwise `NotFound`.
fn visible<T: Versioned>(bytes: Option<Vec<u8>>, access: Access<'_>, now: Timestamp) -> Result<T, StoreError> {
    let not_found = StoreError::NotFound { what: T::WHAT };
    let record: T = records::decode(T::WHAT, &bytes.ok_or(not_found)?)?;
    if now >= record.expires_at() || !access.permits(record.owner()) {
        return Err(StoreError::NotFound { what: T::WHAT });
    }
    Ok(record)
}

#[async_trait]
impl SessionStore for EmbeddedStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        traced("store.create_session", BACKEND, async {
            self.create("create a session", session, Beside::default()).await
        })
        .await
    }

    async fn get_session(&self, access: Access<'_>, id: &SessionId) -> Result<Session, StoreError> {
        traced("store.get_session", BACKEND, async {
            self.read("read a session", (records::session_pk(id), records::SESSION_SK), access).await
        })
        .await
    }

    async fn update_session_emitting(&self, session: &mut Session, events: &[Event]) -> Result<(), StoreError> {
        traced("store.update_session", BACKEND, async {
            self.update("update a session", session, Beside::events(events)?).await
        })
        .await
    }

    async fn armed_sessions(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        traced("store.armed_sessions", BACKEND, async {
            let values = self
                .read_items("list armed sessions", |table| {
                    let mut values = Vec::new();
                    for entry in table.iter()? {
                        let (key, value) = entry?;
                        if key.value().1 == records::SESSION_SK {
                            values.push(value.value().to_vec());
                        }
                    }
                    Ok(values)
                })
                .await?;
            let now = self.clock.now();
            let mut armed = Vec::new();
            for bytes in values {
                let session: Session = records::decode(SESSION, &bytes)?;
                if let (true, true, Some(at)) = (session.is_active(), now < session.expires_at, session.alarm_at) {
                    armed.push((session.id, at));
                }
            }
            Ok(armed)
        })
        .await
    }
}

#[async_trait]
impl ExecutionStore for EmbeddedStore {
    async fn create_execution_emitting(&self, execution: &Execution, emitted: Emitted<'_>) -> Result<(), StoreError> {
        traced("store.create_execution", BACKEND, async {
            self.create("create an execution", execution, Beside::of(emitted)?).await
        })
        .await
    }

    async fn get_execution(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, StoreError> {
        traced("store.get_execution", BACKEND, async {
            self.read("read an execution", (records::execution_pk(id), records::EXECUTION_SK), access).await
        })
        .await
    }

    async fn update_execution_emitting(
        &self,
        execution: &mut Execution,
        emitted: Emitted<'_>,
    ) -> Result<(), StoreError> {
        traced("store.update_execution", BACKEND, async {
            self.update("update an execution", execution, Beside::of(emitted)?).await
        })
        .await
    }

    async fn find_receipt(&self, owner: &Principal, key_hash: &str) -> Result<Receipt, StoreError> {
        traced("store.find_receipt", BACKEND, async {
            let (pk, sk) = records::receipt_key(owner, key_hash);
            let bytes = self.get("read an idempotency key", pk, sk).await?;
            match bytes.map(|bytes| records::decode::<Receipt>(RECEIPT, &bytes)).transpose()? {
                Some(receipt) if self.clock.now() < receipt.expires_at && receipt.owner == *owner => Ok(receipt),
                _ => Err(StoreError::NotFound { what: RECEIPT }),
            }
        })
        .await
    }

    async fn paused_executions(&self, access: Access<'_>, session: &SessionId) -> Result<Vec<ExecutionId>, StoreError> {
        traced("store.paused_executions", BACKEND, async {
            let markers =
                self.range("list paused executions", records::session_pk(session), records::PAUSED_PREFIX).await?;
            let now = self.clock.now();
            let mut ids = Vec::new();
            for (sk, bytes) in markers {
                let marker: PausedMarker = records::decode("paused-execution index", &bytes)?;
                if now < marker.expires_at && access.permits(&marker.owner) {
                    ids.push(records::paused_id_from_sk(&sk)?);
                }
            }
            Ok(ids)
        })
        .await
    }
}

#[async_trait]
impl KeyStore for EmbeddedStore {
    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        traced("store.create_key", BACKEND, async {
            let body = records::encode_small(API_KEY, key)?;
            let sk = records::key_sk(&key.hash);
            self.write("create an API key", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                if table.get((records::KEYS_PK, sk.as_str()))?.is_some() {
                    return Err(Failure::Store(StoreError::AlreadyExists { what: API_KEY }));
                }
                table.insert((records::KEYS_PK, sk.as_str()), body.as_slice())?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn find_key(&self, hash: &TokenHash) -> Result<ApiKey, StoreError> {
        traced("store.find_key", BACKEND, async {
            let bytes = self.get("read an API key", records::KEYS_PK.to_owned(), records::key_sk(hash)).await?;
            records::decode(API_KEY, &bytes.ok_or(StoreError::NotFound { what: API_KEY })?)
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        traced("store.list_keys", BACKEND, async {
            let values = self.range("list API keys", records::KEYS_PK.to_owned(), records::KEY_PREFIX).await?;
            values.iter().map(|(_, bytes)| records::decode(API_KEY, bytes)).collect()
        })
        .await
    }

    async fn revoke_key(&self, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.revoke_key", BACKEND, async {
            let sk = records::key_sk(hash);
            self.write("revoke an API key", move |txn| {
                match txn.open_table(ITEMS)?.remove((records::KEYS_PK, sk.as_str()))? {
                    Some(_) => Ok(()),
                    None => Err(Failure::Store(StoreError::NotFound { what: API_KEY })),
                }
            })
            .await
        })
        .await
    }

    async fn record_key_use(&self, hash: &TokenHash, at: Timestamp) -> Result<(), StoreError> {
        traced("store.record_key_use", BACKEND, async {
            let sk = records::key_sk(hash);
            // A read first: most uses are not due, and a write transaction
            // would take the store's one writer (and its fsync) for nothing.
            let stored = self.get("read an API key", records::KEYS_PK.to_owned(), sk.clone()).await?;
            let Some(bytes) = stored else { return Ok(()) };
            if !records::key_use_due(last_used(&bytes)?, at) {
                return Ok(());
            }
            self.write("record an API key's use", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let Some(bytes) = table.get((records::KEYS_PK, sk.as_str()))?.map(|v| v.value().to_vec()) else {
                    return Ok(());
                };
                // Checked again inside the transaction: another writer may have recorded a use meanwhile.
                if !records::key_use_due(last_used(&bytes).map_err(Failure::Store)?, at) {
                    return Ok(());
                }
                // The key's own fields are kept as stored; the use sits beside them.
                let mut value: serde_json::Value = records::decode(API_KEY, &bytes).map_err(Failure::Store)?;
                let Some(fields) = value.as_object_mut() else {
                    return Err(Failure::Store(StoreError::corrupt(API_KEY, "not a JSON object")));
                };
                fields.insert(records::LAST_USED_AT.to_owned(), at.as_millis().into());
                let body = records::encode(API_KEY, &value).map_err(Failure::Store)?;
                table.insert((records::KEYS_PK, sk.as_str()), body.as_slice())?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn list_key_uses(&self) -> Result<Vec<KeyUse>, StoreError> {
        traced("store.list_keys", BACKEND, async {
            let values = self.range("list API keys", records::KEYS_PK.to_owned(), records::KEY_PREFIX).await?;
            values
                .iter()
                .map(|(_, bytes)| Ok(KeyUse { key: records::decode(API_KEY, bytes)?, last_used: last_used(bytes)? }))
                .collect()
        })
        .await
    }
}

/// The last use recorded in a stored key's value.
fn last_used(bytes: &[u8]) -> Result<Option<Timestamp>, StoreError> {
    #[derive(Deserialize)]
    struct LastUsed {
        /// `records::LAST_USED_AT`.
        last_used_at: Option<Timestamp>,
    }
    Ok(records::decode::<LastUsed>(API_KEY, bytes)?.last_used_at)
}

#[async_trait]
impl GrantStore for EmbeddedStore {
    async fn create_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        traced("store.create_grant", BACKEND, async {
            let body = records::encode_small(GRANT, grant)?;
            let (pk, sk) = (records::grants_pk(&grant.owner), records::grant_sk(grant));
            let now = self.clock.now();
            self.write("create a grant", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                if let Some(stored) = table.get((pk.as_str(), sk.as_str()))? {
                    let stored: Grant = records::decode(GRANT, stored.value()).map_err(Failure::Store)?;
                    if stored.is_live(now) {
                        return Err(Failure::Store(StoreError::AlreadyExists { what: GRANT }));
                    }
                }
                table.insert((pk.as_str(), sk.as_str()), body.as_slice())?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn list_grants(&self, owner: &Principal) -> Result<Vec<Grant>, StoreError> {
        traced("store.list_grants", BACKEND, async {
            let values = self.range("list grants", records::grants_pk(owner), records::GRANT_PREFIX).await?;
            let now = self.clock.now();
            let mut grants = Vec::new();
            for (_, bytes) in values {
                let grant: Grant = records::decode(GRANT, &bytes)?;
                if grant.is_live(now) {
                    grants.push(grant);
                }
            }
            Ok(grants)
        })
        .await
    }

    async fn all_grants(&self) -> Result<Vec<Grant>, StoreError> {
        traced("store.all_grants", BACKEND, async {
            // Every owner's grant partition, `GRANTS#<owner>`, sorts between these.
            let values = self
                .read_items("list every grant", |table| {
                    let mut values = Vec::new();
                    for entry in table.range(("GRANTS#", "")..("GRANTS$", ""))? {
                        let (key, value) = entry?;
                        if key.value().1.starts_with(records::GRANT_PREFIX) {
                            values.push(value.value().to_vec());
                        }
                    }
                    Ok(values)
                })
                .await?;
            let now = self.clock.now();
            let mut grants = Vec::new();
            for bytes in values {
                let grant: Grant = records::decode(GRANT, &bytes)?;
                if grant.is_live(now) {
                    grants.push(grant);
                }
            }
            Ok(grants)
        })
        .await
    }

    async fn revoke_grant(&self, access: Access<'_>, id: &GrantId) -> Result<Grant, StoreError> {
        traced("store.revoke_grant", BACKEND, async {
            // An owner's grants are one partition; the service's view is every grant partition.
            let (start, end) = match access {
                Access::Owner(owner) => {
                    let pk = records::grants_pk(owner);
                    ((pk.clone(), records::GRANT_PREFIX.to_owned()), (pk, "GRANT$".to_owned()))
                }
                Access::Internal => (("GRANTS#".to_owned(), String::new()), ("GRANTS$".to_owned(), String::new())),
            };
            let owner = match access {
                Access::Owner(owner) => Some(owner.clone()),
                Access::Internal => None,
            };
            let (id, now) = (id.clone(), self.clock.now());
            self.write("revoke a grant", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let mut found = None;
                for entry in table.range((start.0.as_str(), start.1.as_str())..(end.0.as_str(), end.1.as_str()))? {
                    let (key, value) = entry?;
                    let (pk, sk) = key.value();
                    if !sk.starts_with(records::GRANT_PREFIX) {
                        continue;
                    }
                    let grant: Grant = records::decode(GRANT, value.value()).map_err(Failure::Store)?;
                    let visible = owner.as_ref().is_none_or(|owner| *owner == grant.owner);
                    if grant.id == id && grant.is_live(now) && visible {
                        found = Some((pk.to_owned(), sk.to_owned(), grant));
                        break;
                    }
                }
                let Some((pk, sk, grant)) = found else {
                    return Err(Failure::Store(StoreError::NotFound { what: GRANT }));
                };
                table.remove((pk.as_str(), sk.as_str()))?;
                Ok(grant)
            })
            .await
        })
        .await
    }
}

/// The live connection stored under `(pk, sk)`, if any.
fn live_connection(
    table: &redb::Table<(&str, &str), &[u8]>,
    pk: &str,
    sk: &str,
    now: Timestamp,
) -> Result<Option<SourceConnection>, Failure> {
    let Some(bytes) = table.get((pk, sk))? else { return Ok(None) };
    let stored: SourceConnection = records::decode(CONNECTION, bytes.value()).map_err(Failure::Store)?;
    Ok((now < stored.expires_at).then_some(stored))
}

/// Whether the stored connection is the one a conditional write expects.
fn expected_connection(stored: Option<&SourceConnection>, expected: Option<u64>) -> Result<(), Failure> {
    match (stored, expected) {
        (None, None) => Ok(()),
        (Some(_), None) => Err(Failure::Store(StoreError::AlreadyExists { what: CONNECTION })),
        (None, Some(_)) => Err(Failure::Store(StoreError::NotFound { what: CONNECTION })),
        (Some(stored), Some(v)) if stored.version == v => Ok(()),
        (Some(_), Some(_)) => Err(Failure::Store(StoreError::Conflict { what: CONNECTION })),
    }
}

#[async_trait]
impl ConnectionStore for EmbeddedStore {
    async fn get_connection(&self, owner: &Principal, source: &str) -> Result<SourceConnection, StoreError> {
        traced("store.get_connection", BACKEND, async {
            let bytes =
                self.get("read a connection", records::connections_pk(owner), records::connection_sk(source)).await?;
            let stored: SourceConnection =
                records::decode(CONNECTION, &bytes.ok_or(StoreError::NotFound { what: CONNECTION })?)?;
            match self.clock.now() < stored.expires_at {
                true => Ok(stored),
                false => Err(StoreError::NotFound { what: CONNECTION }),
            }
        })
        .await
    }

    async fn list_connections(&self, owner: &Principal) -> Result<Vec<SourceConnection>, StoreError> {
        traced("store.list_connections", BACKEND, async {
            let values =
                self.range("list connections", records::connections_pk(owner), records::CONNECTION_PREFIX).await?;
            let now = self.clock.now();
            let mut connections = Vec::new();
            for (_, bytes) in values {
                let connection: SourceConnection = records::decode(CONNECTION, &bytes)?;
                if now < connection.expires_at {
                    connections.push(connection);
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
            let (pk, sk) = (records::connections_pk(&next.owner), records::connection_sk(&next.source));
            let now = self.clock.now();
            self.write("store a connection", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let stored = live_connection(&table, &pk, &sk, now)?;
                expected_connection(stored.as_ref(), expected)?;
                table.insert((pk.as_str(), sk.as_str()), body.as_slice())?;
                Ok(())
            })
            .await?;
            connection.version = expected.map_or(1, |v| v + 1);
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
            let (pk, sk) = (records::connections_pk(owner), records::connection_sk(source));
            let now = self.clock.now();
            self.write("delete a connection", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let Some(stored) = live_connection(&table, &pk, &sk, now)? else {
                    return Err(Failure::Store(StoreError::NotFound { what: CONNECTION }));
                };
                if expected.is_some() {
                    expected_connection(Some(&stored), expected)?;
                }
                table.remove((pk.as_str(), sk.as_str()))?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn put_oauth_state(&self, state: &OAuthState) -> Result<(), StoreError> {
        traced("store.put_oauth_state", BACKEND, async {
            let body = records::encode_small(OAUTH_STATE, &StoredState { state: state.clone(), taken: false })?;
            let pk = records::oauth_state_pk(&state.execution_id);
            let now = self.clock.now();
            self.write("store an OAuth state", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let stored = stored_state(&table, &pk)?;
                if stored.is_some_and(|stored| stored.taken && now < stored.state.expires_at) {
                    return Err(Failure::Store(StoreError::Conflict { what: OAUTH_STATE }));
                }
                table.insert((pk.as_str(), records::OAUTH_STATE_SK), body.as_slice())?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn take_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<OAuthState, StoreError> {
        traced("store.take_oauth_state", BACKEND, async {
            let pk = records::oauth_state_pk(execution);
            let (hash, now) = (hash.clone(), self.clock.now());
            self.write("take an OAuth state", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let Some(mut stored) = stored_state(&table, &pk)?
                    .filter(|stored| stored.state.hash == hash && !stored.taken && now < stored.state.expires_at)
                else {
                    return Err(Failure::Store(StoreError::NotFound { what: OAUTH_STATE }));
                };
                stored.taken = true;
                let body = records::encode_small(OAUTH_STATE, &stored).map_err(Failure::Store)?;
                table.insert((pk.as_str(), records::OAUTH_STATE_SK), body.as_slice())?;
                Ok(stored.state)
            })
            .await
        })
        .await
    }

    async fn release_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.release_oauth_state", BACKEND, async {
            let pk = records::oauth_state_pk(execution);
            let hash = hash.clone();
            self.write("release an OAuth state", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                if stored_state(&table, &pk)?.is_some_and(|stored| stored.state.hash == hash) {
                    table.remove((pk.as_str(), records::OAUTH_STATE_SK))?;
                }
                Ok(())
            })
            .await
        })
        .await
    }
}

/// An execution's authorization in progress, and whether a callback holds it.
#[derive(Serialize, Deserialize)]
struct StoredState {
    #[serde(flatten)]
    state: OAuthState,
    taken: bool,
}

fn stored_state(table: &redb::Table<(&str, &str), &[u8]>, pk: &str) -> Result<Option<StoredState>, Failure> {
    match table.get((pk, records::OAUTH_STATE_SK))? {
        Some(value) => Ok(Some(records::decode(OAUTH_STATE, value.value()).map_err(Failure::Store)?)),
        None => Ok(None),
    }
}

#[async_trait]
impl OAuthClientStore for EmbeddedStore {
    async fn get_oauth_client(&self, source: &str) -> Result<OAuthClient, StoreError> {
        traced("store.get_oauth_client", BACKEND, async {
            let pk = records::oauth_client_pk(source);
            let bytes = self.get("read an OAuth client registration", pk, records::OAUTH_CLIENT_SK.into()).await?;
            let client: OAuthClient =
                records::decode(OAUTH_CLIENT, &bytes.ok_or(StoreError::NotFound { what: OAUTH_CLIENT })?)?;
            match self.clock.now() < client.expires_at {
                true => Ok(client),
                false => Err(StoreError::NotFound { what: OAUTH_CLIENT }),
            }
        })
        .await
    }

    async fn put_oauth_client(&self, client: &mut OAuthClient) -> Result<(), StoreError> {
        traced("store.put_oauth_client", BACKEND, async {
            let expected = client.version;
            let mut next = client.clone();
            next.version = expected + 1;
            let body = records::encode_small(OAUTH_CLIENT, &next)?;
            let pk = records::oauth_client_pk(&client.source);
            let now = self.clock.now();
            self.write("store an OAuth client registration", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let key = (pk.as_str(), records::OAUTH_CLIENT_SK);
                let stored = match table.get(key)? {
                    Some(value) => {
                        Some(records::decode::<OAuthClient>(OAUTH_CLIENT, value.value()).map_err(Failure::Store)?)
                    }
                    None => None,
                };
                let live = stored.filter(|stored| now < stored.expires_at);
                let refusal = match (expected, live) {
                    (0, None) => None,
                    (0, Some(_)) => Some(StoreError::AlreadyExists { what: OAUTH_CLIENT }),
                    (_, None) => Some(StoreError::NotFound { what: OAUTH_CLIENT }),
                    (_, Some(stored)) if stored.version != expected => {
                        Some(StoreError::Conflict { what: OAUTH_CLIENT })
                    }
                    _ => None,
                };
                if let Some(refusal) = refusal {
                    return Err(Failure::Store(refusal));
                }
                table.insert(key, body.as_slice())?;
                Ok(())
            })
            .await?;
            client.version = expected + 1;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl OutboxStore for EmbeddedStore {
    async fn pending_events(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        traced("store.pending_events", BACKEND, async {
            let values =
                self.range("list undelivered events", records::OUTBOX_PK.to_owned(), records::EVENT_PREFIX).await?;
            let now = self.clock.now();
            let mut events = Vec::new();
            for (_, bytes) in values {
                let stored: records::StoredEvent = records::decode(EVENT, &bytes)?;
                if now < stored.expires_at {
                    events.push(stored.event);
                }
                if events.len() == limit {
                    break;
                }
            }
            Ok(events)
        })
        .await
    }

    async fn delete_event(&self, event: &Event) -> Result<(), StoreError> {
        traced("store.delete_event", BACKEND, async {
            let sk = records::event_sk(event);
            self.write("delete a delivered event", move |txn| {
                txn.open_table(ITEMS)?.remove((records::OUTBOX_PK, sk.as_str()))?;
                Ok(())
            })
            .await
        })
        .await
    }
}
