//! Storage: the ports the service uses and the adapters behind them.
//!
//! Two adapters share one key layout and one set of semantics, proven by one
//! contract test suite (`tests/tests/store_contract.rs`):
//! - [`DynamoStore`]: one DynamoDB table, for AWS (and `--store dynamodb`);
//! - [`EmbeddedStore`]: one redb file under a data dir, for `executor serve`.
//!
//! The layout is documented in `docs/storage.md`.

mod data_dir;
mod dynamodb;
mod embedded;
mod error;
mod ports;
mod records;
mod traced;

pub use data_dir::{Exposed, create_data_dir};
pub use dynamodb::DynamoStore;
pub use embedded::EmbeddedStore;
pub use error::StoreError;
pub use ports::{
    Access, AuditLine, ConnectionStore, ConsoleStore, Emitted, ExecutionStore, GrantStore, HistoryStore, HourlyTake,
    KEY_USE_RESOLUTION, KeyStore, KeyUse, MAX_CURSOR_BYTES, OAuthClientStore, OutboxStore, Page, QuotaOutcome,
    QuotaStore, QuotaTake, SessionStore, SlotTake, Store,
};
pub use ports::{MAX_UNGRANTED_TOOLS, Ungranted};
pub use records::{MAX_ITEM_BODY_BYTES, MAX_SNAPSHOT_BYTES};
pub use traced::traced;
