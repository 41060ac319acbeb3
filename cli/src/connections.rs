//! Owners' OAuth connections from the command line: `executor connections
//! list --owner NAME` and `executor connections disconnect --owner NAME
//! SOURCE`. Like `executor grants`, a command runs on a store here, or in the
//! `executor serve` that holds the embedded store (`crate::admin`). Tokens
//! are never shown: they are sealed in the store.

use std::fmt;

use executor_core::{Principal, PrincipalError};
use executor_store::{ConnectionStore, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ConnectionsError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("{owner} has no connection to {source_name}; `executor connections list --owner {owner}` shows theirs")]
    Unknown { owner: String, source_name: String },
    #[error(transparent)]
    Store(StoreError),
}

/// What a `connections` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    ConnectionsList { owner: String },
    ConnectionsDisconnect { owner: String, source: String },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    ConnectionsListed { owner: String, connections: Vec<ConnectionRow> },
    Disconnected { owner: String, source: String },
}

/// One connection as `connections list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionRow {
    pub source: String,
    pub connected: String,
    pub scopes: String,
    /// When the access token expires (`-`: the server gave no lifetime).
    pub expires: String,
}

/// Run `command` on `store`.
pub async fn run(store: &impl ConnectionStore, command: Command) -> Result<Reply, ConnectionsError> {
    match command {
        Command::ConnectionsList { owner } => {
            let principal = Principal::parse(owner.as_str())?;
            let mut connections = store.list_connections(&principal).await.map_err(ConnectionsError::Store)?;
            connections.sort_by(|a, b| a.source.cmp(&b.source));
            let connections = connections
                .into_iter()
                .map(|c| ConnectionRow {
                    source: c.source,
                    connected: c.connected_at.to_rfc3339(),
                    scopes: c.scopes.join(" "),
                    expires: c.access_expires_at.map_or("-".into(), |at| at.to_rfc3339()),
                })
                .collect();
            Ok(Reply::ConnectionsListed { owner, connections })
        }
        Command::ConnectionsDisconnect { owner, source } => {
            let principal = Principal::parse(owner.as_str())?;
            match store.delete_connection(&principal, &source, None).await {
                Ok(()) => Ok(Reply::Disconnected { owner, source }),
                Err(StoreError::NotFound { .. }) => Err(ConnectionsError::Unknown { owner, source_name: source }),
                Err(e) => Err(ConnectionsError::Store(e)),
            }
        }
    }
}

/// What the command prints.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConnectionsListed { owner, connections } if connections.is_empty() => {
                write!(f, "No connections for {owner}. One is made when a call asks them to connect a source.")
            }
            Self::ConnectionsListed { connections, .. } => {
                let source = connections.iter().map(|c| c.source.len()).chain(["SOURCE".len()]).max().unwrap_or(6);
                write!(f, "{:source$}  {:24}  {:24}  SCOPES", "SOURCE", "CONNECTED", "TOKEN EXPIRES")?;
                for c in connections {
                    write!(f, "\n{:source$}  {:24}  {:24}  {}", c.source, c.connected, c.expires, c.scopes)?;
                }
                Ok(())
            }
            Self::Disconnected { owner, source } => {
                write!(f, "Disconnected {owner} from {source}; their next call to it asks them to connect again.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use executor_core::{SourceConnection, Timestamp};
    use executor_store::EmbeddedStore;

    use super::*;

    #[tokio::test]
    async fn list_and_disconnect() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let owner = Principal::parse("alice").unwrap();
        let at = Timestamp::from_millis(4_102_444_800_000);
        let mut connection = SourceConnection {
            owner: owner.clone(),
            source: "crm".into(),
            connected_at: at,
            scopes: vec!["contacts.read".into(), "offline_access".into()],
            access_expires_at: None,
            refreshing_until: None,
            sealed: "opaque".into(),
            expires_at: at,
            version: 0,
        };
        store.save_connection(&mut connection, None).await.unwrap();
        let list = || Command::ConnectionsList { owner: "alice".into() };
        let listed = run(&*store, list()).await.unwrap().to_string();
        assert_eq!(
            listed,
            "SOURCE  CONNECTED                 TOKEN EXPIRES             SCOPES\n\
             crm     2100-01-01T00:00:00.000Z  -                         contacts.read offline_access"
        );
        let disconnect = || Command::ConnectionsDisconnect { owner: "alice".into(), source: "crm".into() };
        let done = run(&*store, disconnect()).await.unwrap().to_string();
        assert!(done.starts_with("Disconnected alice from crm"), "{done}");
        let again = run(&*store, disconnect()).await.unwrap_err().to_string();
        assert!(again.contains("alice has no connection to crm"), "{again}");
        assert!(run(&*store, list()).await.unwrap().to_string().starts_with("No connections for alice"));
    }
}
