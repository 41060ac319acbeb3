//! The storage ports. Every mutation is conditional (create-if-absent or
//! update-if-version); every read says whose view it takes.

use std::time::Duration;

use async_trait::async_trait;
use executor_core::{
    ApiKey, ConsoleSecret, ConsoleSecretKind, Event, Execution, ExecutionId, ExecutionRecord, Grant, GrantId,
    HistoryAppend, HistoryEntry, OAuthClient, OAuthState, Principal, QuotaLimit, Receipt, Session, SessionId,
    SourceConnection, Timestamp, TokenHash,
};

use crate::StoreError;

/// Whose view a read takes.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// A caller: records of other owners do not exist for them.
    Owner(&'a Principal),
    /// The service itself (alarms act on any owner's sessions).
    Internal,
}

impl Access<'_> {
    pub fn permits(&self, owner: &Principal) -> bool {
        match self {
            Access::Owner(caller) => *caller == owner,
            Access::Internal => true,
        }
    }
}

#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Store a new session; `AlreadyExists` if a live one has its id.
    async fn create_session(&self, session: &Session) -> Result<(), StoreError>;

    /// `NotFound` when absent, expired or not visible to `access`.
    async fn get_session(&self, access: Access<'_>, id: &SessionId) -> Result<Session, StoreError>;

    /// Write `session` if the stored version is still `session.version`, then bump
    /// `session.version`. `Conflict` if it changed, `NotFound` if it is gone.
    async fn update_session(&self, session: &mut Session) -> Result<(), StoreError> {
        self.update_session_emitting(session, &[]).await
    }

    /// `update_session`, storing `events` in the outbox in the same atomic write:
    /// both are written or neither.
    async fn update_session_emitting(&self, session: &mut Session, events: &[Event]) -> Result<(), StoreError>;

    /// Every live, active session with an alarm set, for a local host to re-arm
    /// its timers after a restart. (A scan: for the local host, not for AWS.)
    async fn armed_sessions(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError>;
}

/// What a write of an execution stores beside it, in the same atomic write:
/// all of it is written, or none.
#[derive(Debug, Default, Clone, Copy)]
pub struct Emitted<'a> {
    /// Lifecycle events, kept in the outbox until delivered.
    pub events: &'a [Event],
    /// The change's entries in the execution's history, and its record as it now stands.
    pub history: Option<&'a HistoryAppend>,
    /// Only with a create: the idempotency key the new execution takes,
    /// written only if no live receipt holds it (else nothing is written:
    /// `AlreadyExists { what: "idempotency key" }`).
    pub receipt: Option<&'a Receipt>,
    /// A pause stored without its owner's grants read first: written only if
    /// none of them lets a call it waits on run (else nothing is written:
    /// [`StoreError::is_grant_held`]).
    pub ungranted: Option<Ungranted<'a>>,
}

impl<'a> Emitted<'a> {
    pub fn events(events: &'a [Event]) -> Self {
        Self { events, history: None, receipt: None, ungranted: None }
    }
}

/// At most this many tools in one [`Ungranted`]: each is a condition (two on a
/// toolkit's endpoint) in the write, whose items DynamoDB caps at 100.
pub const MAX_UNGRANTED_TOOLS: usize = 8;

/// The tools a pause waits on for approval, and whose grants would let them
/// run: `owner`'s, given on `/mcp` or, when the execution is a toolkit's, on
/// that toolkit. The write is conditional on there being no live one.
#[derive(Debug, Clone, Copy)]
pub struct Ungranted<'a> {
    pub owner: &'a Principal,
    pub toolkit: Option<&'a executor_core::ToolkitName>,
    /// Each once; at most [`MAX_UNGRANTED_TOOLS`].
    pub tools: &'a [String],
}

#[async_trait]
pub trait ExecutionStore: Send + Sync {
    /// Store a new execution; `AlreadyExists` if a live one has its id.
    /// `TooLarge` if its snapshot exceeds [`crate::MAX_SNAPSHOT_BYTES`].
    async fn create_execution(&self, execution: &Execution) -> Result<(), StoreError> {
        self.create_execution_emitting(execution, Emitted::default()).await
    }

    /// `create_execution`, storing what is `emitted` with it in the same
    /// atomic write: all of it is written or none.
    async fn create_execution_emitting(&self, execution: &Execution, emitted: Emitted<'_>) -> Result<(), StoreError>;

    /// `NotFound` when absent, expired or not visible to `access`.
    async fn get_execution(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, StoreError>;

    /// Write `execution` if the stored version is still `execution.version`, then
    /// bump `execution.version`. Of several writers that read the same version,
    /// exactly one succeeds; the others get `Conflict`. This is how a claim
    /// (paused -> resuming), a settle and an expiry are made safe.
    async fn update_execution(&self, execution: &mut Execution) -> Result<(), StoreError> {
        self.update_execution_emitting(execution, Emitted::default()).await
    }

    /// `update_execution`, storing what is `emitted` with it in the same
    /// atomic write: all of it is written or none (a lost race stores nothing).
    async fn update_execution_emitting(
        &self,
        execution: &mut Execution,
        emitted: Emitted<'_>,
    ) -> Result<(), StoreError>;

    /// `owner`'s live receipt for the idempotency key whose hash is
    /// `key_hash`, or `NotFound`. Read consistently.
    async fn find_receipt(&self, owner: &Principal, key_hash: &str) -> Result<Receipt, StoreError>;

    /// Executions of `session` that are paused and still inside their approval window.
    async fn paused_executions(&self, access: Access<'_>, session: &SessionId) -> Result<Vec<ExecutionId>, StoreError>;
}

/// How fresh a key's recorded last use is kept: a use less than this long
/// after the recorded one writes nothing ([`KeyStore::record_key_use`]), so
/// a busy key costs at most one write a minute, not one per request.
pub const KEY_USE_RESOLUTION: Duration = Duration::from_secs(60);

/// A key and when it last authenticated a request, as recorded (to within
/// [`KEY_USE_RESOLUTION`]); `None`: not since it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUse {
    pub key: ApiKey,
    pub last_used: Option<Timestamp>,
}

#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Store a new API key; `AlreadyExists` if its hash is taken.
    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError>;

    /// The key whose token hashes to `hash`, or `NotFound`.
    async fn find_key(&self, hash: &TokenHash) -> Result<ApiKey, StoreError>;

    /// Every key, in no particular order.
    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// Delete a key; `NotFound` if there is none with this hash.
    async fn revoke_key(&self, hash: &TokenHash) -> Result<(), StoreError>;

    /// Record that the key `hash` authenticated a request at `at`. Throttled
    /// here, for every caller: nothing is written unless `at` is at least
    /// [`KEY_USE_RESOLUTION`] after the recorded use, so the recorded time
    /// only moves forward. A key that is gone (revoked meanwhile) stays gone.
    /// The adapters record; this default, for wrappers and test doubles that
    /// keep no use times, records nothing.
    async fn record_key_use(&self, hash: &TokenHash, at: Timestamp) -> Result<(), StoreError> {
        let _ = (hash, at);
        Ok(())
    }

    /// Every key with its last recorded use, in no particular order. The
    /// default (see [`KeyStore::record_key_use`]) knows of no use.
    async fn list_key_uses(&self) -> Result<Vec<KeyUse>, StoreError> {
        Ok(self.list_keys().await?.into_iter().map(|key| KeyUse { key, last_used: None }).collect())
    }
}

/// What a new execution takes from its owner's quotas: each part is counted
/// only if every part fits, in one atomic write.
#[derive(Debug, Clone)]
pub struct QuotaTake {
    pub owner: Principal,
    /// Decides which leases have run out (and the hour window's item lifetime).
    pub now: Timestamp,
    /// One of the hour's executions.
    pub hourly: Option<HourlyTake>,
    /// One of the slots for executions running at once.
    pub slot: Option<SlotTake>,
}

#[derive(Debug, Clone, Copy)]
pub struct HourlyTake {
    /// The start of the fixed hour being counted.
    pub window: Timestamp,
    pub limit: u32,
}

/// A slot held by `execution` until released, or until `lease_until` if
/// whatever held it stopped without releasing it.
#[derive(Debug, Clone)]
pub struct SlotTake {
    pub execution: ExecutionId,
    pub limit: u32,
    pub lease_until: Timestamp,
}

/// Whether a [`QuotaTake`] fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaOutcome {
    Taken,
    /// Nothing was counted: this limit is reached.
    Refused(QuotaLimit),
}

#[async_trait]
pub trait QuotaStore: Send + Sync {
    /// Count `take` if every part is under its limit (conditional updates in
    /// one transaction: of N racing takes against a limit of L, exactly L fit);
    /// otherwise count nothing and say which limit refused it.
    async fn take_quota(&self, take: &QuotaTake) -> Result<QuotaOutcome, StoreError>;

    /// Give back the slot `execution` took (a no-op if it is gone).
    async fn release_slot(&self, owner: &Principal, execution: &ExecutionId) -> Result<(), StoreError>;
}

#[async_trait]
pub trait GrantStore: Send + Sync {
    /// Store a grant; `AlreadyExists` if its owner has a live grant for its tool.
    async fn create_grant(&self, grant: &Grant) -> Result<(), StoreError>;

    /// The live grants of `owner`, in no particular order. Read consistently, so a
    /// revoke is seen by the next read.
    async fn list_grants(&self, owner: &Principal) -> Result<Vec<Grant>, StoreError>;

    /// Every owner's live grants, in no particular order: an admin command
    /// (`executor grants list` without `--owner`; a `Scan` on DynamoDB), not a request path.
    async fn all_grants(&self) -> Result<Vec<Grant>, StoreError>;

    /// Delete the grant `id` and return it; `NotFound` when absent, expired or not
    /// visible to `access`. (With `Access::Internal` this looks through every
    /// owner's grants: an admin command, not a request path.)
    async fn revoke_grant(&self, access: Access<'_>, id: &GrantId) -> Result<Grant, StoreError>;
}

/// Lifecycle events stored with the writes they describe (the `*_emitting`
/// writes), kept until they are delivered.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Undelivered events, oldest first, at most `limit`. An event past its
    /// `deliver_until` is absent.
    async fn pending_events(&self, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// Forget a delivered event; a no-op if it is already gone (another
    /// process delivered it too).
    async fn delete_event(&self, event: &Event) -> Result<(), StoreError>;
}

/// Owners' connections to per-owner OAuth sources (one item per owner and
/// source), and the authorizations in progress.
#[async_trait]
pub trait ConnectionStore: Send + Sync {
    /// `owner`'s live connection to `source`, or `NotFound`. Read consistently.
    async fn get_connection(&self, owner: &Principal, source: &str) -> Result<SourceConnection, StoreError>;

    /// `owner`'s live connections, in no particular order.
    async fn list_connections(&self, owner: &Principal) -> Result<Vec<SourceConnection>, StoreError>;

    /// Store `connection`: with `expected` `None` only if there is no live one
    /// (`AlreadyExists` otherwise), else only over the stored version
    /// `expected` (`Conflict` or `NotFound` otherwise). Sets its version.
    async fn save_connection(&self, connection: &mut SourceConnection, expected: Option<u64>)
    -> Result<(), StoreError>;

    /// Forget `owner`'s connection to `source`: any version (`None`) or only
    /// version `expected`. `NotFound` if there is none; `Conflict` if it changed.
    async fn delete_connection(&self, owner: &Principal, source: &str, expected: Option<u64>)
    -> Result<(), StoreError>;

    /// Store `state` as the authorization in progress of its execution, one
    /// per execution: it replaces any earlier one (which no take finds from
    /// then on), unless that one is taken and not yet released (`Conflict`).
    async fn put_oauth_state(&self, state: &OAuthState) -> Result<(), StoreError>;

    /// Mark `execution`'s authorization taken and return it, if it is the one
    /// whose state hashes to `hash`, live and not taken yet: a state is used
    /// once. It stays stored (blocking puts) until released. `NotFound`
    /// otherwise: absent, expired, replaced or already taken.
    async fn take_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<OAuthState, StoreError>;

    /// Forget `execution`'s authorization if it is still the one under `hash`
    /// (a no-op if it is gone or was replaced).
    async fn release_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<(), StoreError>;
}

/// The approver's console's secrets (`executor_core::console`): sign-in
/// links, OIDC sign-ins under way and signed-in browsers, each under the hash
/// of its token.
#[async_trait]
pub trait ConsoleStore: Send + Sync {
    /// Store `secret` under its hash: `AlreadyExists` if one is stored there.
    async fn put_console_secret(&self, secret: &ConsoleSecret) -> Result<(), StoreError>;

    /// Remove the live secret of `kind` under `hash` and return it: a link or
    /// an OIDC sign-in is used once, so of any number of concurrent takes
    /// exactly one gets it. `NotFound` when absent, expired, of another kind
    /// or already taken.
    async fn take_console_secret(&self, kind: ConsoleSecretKind, hash: &TokenHash)
    -> Result<ConsoleSecret, StoreError>;

    /// The live secret of `kind` under `hash`, read consistently (a session
    /// signed out a moment ago is gone); `NotFound` otherwise.
    async fn get_console_secret(&self, kind: ConsoleSecretKind, hash: &TokenHash) -> Result<ConsoleSecret, StoreError>;

    /// Forget the secret under `hash` (sign out); a no-op if it is gone.
    async fn delete_console_secret(&self, hash: &TokenHash) -> Result<(), StoreError>;

    /// Forget every console session of `owner` (signed out everywhere) and
    /// say how many there were. An administrator's command: on DynamoDB a
    /// `Scan`, never a request's path.
    async fn revoke_console_sessions(&self, owner: &Principal) -> Result<usize, StoreError>;
}

/// Client registrations with the authorization servers of OAuth-protected
/// upstream MCP servers, one per source, shared by every instance.
#[async_trait]
pub trait OAuthClientStore: Send + Sync {
    /// The live registration of `source`, or `NotFound`.
    async fn get_oauth_client(&self, source: &str) -> Result<OAuthClient, StoreError>;

    /// Store `client` and bump `client.version`. Version 0 creates it
    /// (`AlreadyExists` if a live one is stored: another instance registered
    /// first); any other version replaces the stored registration only if it
    /// is still at that version (`Conflict` otherwise, `NotFound` if it is gone).
    async fn put_oauth_client(&self, client: &mut OAuthClient) -> Result<(), StoreError>;
}

/// A page of a listing and where the next one starts (`None`: this was the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque: pass it back to get the next page.
    pub next: Option<String>,
}

/// One history entry with the execution it belongs to, as the export writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    pub execution: ExecutionId,
    pub owner: Principal,
    pub entry: HistoryEntry,
}

/// The longest cursor a listing accepts (a sort key); longer ones are refused.
pub const MAX_CURSOR_BYTES: usize = 512;

/// Executions' histories (docs/audit.md): written with the changes they
/// describe (`Emitted::history`), kept until their own expiry, independent
/// of the execution's.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Store the history of an execution that is itself never stored (it
    /// ended within its answer): its record and entries, in one atomic write.
    async fn append_history(&self, append: &HistoryAppend) -> Result<(), StoreError>;

    /// [`HistoryStore::append_history`] for a history whose execution already
    /// has its answer, so nobody waits on the write: a store may take it now
    /// and write it moments later with others (the embedded store: one
    /// commit for all that arrived meanwhile). It is visible to every read
    /// through this store once this returns, and written before the store
    /// closes; a crash of the process first loses it, and a refusal found
    /// then is logged and counted (`HistoryNotWritten`) instead of returned.
    /// By default (DynamoDB: a Lambda may be frozen once it answers) it is
    /// written now. Taken whole, so that a store writing it later can also
    /// encode it later, off the answer's path.
    async fn queue_history(&self, append: HistoryAppend) -> Result<(), StoreError> {
        self.append_history(&append).await
    }

    /// The execution records `access` may see (one owner's; every owner's
    /// with `Access::Internal`), newest created first, created at or after
    /// `since`, at most `limit`, from where `cursor` (a page's `next`) left
    /// off. Expired records are absent. A malformed or over-long cursor is
    /// `NotFound { what: "cursor" }`; a cursor only says where to start, so
    /// one taken from another owner's listing reveals nothing of theirs.
    async fn list_executions(
        &self,
        access: Access<'_>,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ExecutionRecord>, StoreError>;

    /// The record of `id` as its latest write left it, and every entry of
    /// its history, oldest first. `NotFound` when absent, expired, or not
    /// visible to `access`.
    async fn execution_history(
        &self,
        access: Access<'_>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError>;

    /// Every owner's entries at or after `since`, a page at a time (at most
    /// `limit` history items' worth), in no particular order across
    /// executions and in order within one. For an export: it reads the whole
    /// history (a `Scan` on DynamoDB), never a request's path.
    async fn export_history(
        &self,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<AuditLine>, StoreError>;
}

/// Everything the service needs from storage, in one object.
pub trait Store:
    SessionStore
    + ExecutionStore
    + HistoryStore
    + KeyStore
    + QuotaStore
    + GrantStore
    + OutboxStore
    + ConnectionStore
    + OAuthClientStore
    + ConsoleStore
{
}

impl<
    T: SessionStore
        + ExecutionStore
        + HistoryStore
        + KeyStore
        + QuotaStore
        + GrantStore
        + OutboxStore
        + ConnectionStore
        + OAuthClientStore
        + ConsoleStore,
> Store for T
{
}
