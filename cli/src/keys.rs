//! API keys: 256-bit random bearer tokens, stored only as their SHA-256.
//!
//! A `keys` command is a [`Command`] run on a store by [`run`]: here, or in
//! the `executor serve` that holds the embedded store (`crate::admin`).

use std::fmt;

use executor_core::{ApiKey, Clock, Principal, PrincipalError, SystemClock, TokenHash, ToolkitName, ToolkitNameError};
use executor_store::{KeyStore, StoreError};
use serde::{Deserialize, Serialize};

/// Prefix that makes a leaked token recognisable to secret scanners.
const TOKEN_PREFIX: &str = "exk_";
/// How much of a key's hash `keys list` shows and `keys revoke` takes.
pub const ID_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid --toolkit: {0}")]
    Toolkit(#[from] ToolkitNameError),
    #[error("the system random source failed ({0}); try again")]
    Random(String),
    #[error("no key has the id {0:?}; `executor keys list` shows the ids")]
    UnknownId(String),
    #[error("the id {0:?} matches more than one key; give more of it")]
    AmbiguousId(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a `keys` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    Create {
        owner: String,
        /// The toolkit the key is scoped to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toolkit: Option<String>,
    },
    List,
    Revoke {
        id: String,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    Created {
        owner: String,
        token: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toolkit: Option<String>,
    },
    Listed {
        keys: Vec<KeyRow>,
    },
    Revoked {
        id: String,
        owner: String,
    },
}

/// One key as `keys list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub id: String,
    pub owner: String,
    /// `all`, or `toolkit <name>` for a scoped key.
    pub scope: String,
    pub created: String,
}

/// Run `command` on `store`.
pub async fn run(store: &impl KeyStore, command: Command) -> Result<Reply, KeysError> {
    Ok(match command {
        Command::Create { owner, toolkit } => {
            let token = create_scoped(store, &owner, toolkit.as_deref()).await?;
            Reply::Created { owner, token, toolkit }
        }
        Command::List => Reply::Listed { keys: list(store).await? },
        Command::Revoke { id } => {
            let key = revoke(store, &id).await?;
            Reply::Revoked { id: key.hash.as_str()[..ID_LEN].to_owned(), owner: key.owner.to_string() }
        }
    })
}

/// Create and store a new key for `owner`; the token is returned and never stored.
pub async fn create(store: &impl KeyStore, owner: &str) -> Result<String, KeysError> {
    create_scoped(store, owner, None).await
}

/// [`create`], the key scoped to `toolkit` when one is given.
pub async fn create_scoped(store: &impl KeyStore, owner: &str, toolkit: Option<&str>) -> Result<String, KeysError> {
    let owner = Principal::key_owner(owner)?;
    let toolkit = toolkit.map(ToolkitName::parse).transpose()?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| KeysError::Random(e.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let key = ApiKey { hash: TokenHash::of_token(&token), owner, created_at: SystemClock.now(), toolkit };
    store.create_key(&key).await?;
    Ok(token)
}

/// Every key, oldest first.
pub async fn list(store: &impl KeyStore) -> Result<Vec<KeyRow>, KeysError> {
    let mut keys = store.list_keys().await?;
    keys.sort_by_key(|k| k.created_at);
    Ok(keys
        .iter()
        .map(|k| KeyRow {
            id: k.hash.as_str()[..ID_LEN].to_owned(),
            owner: k.owner.to_string(),
            scope: k.toolkit.as_ref().map_or_else(|| "all".to_owned(), |t| format!("toolkit {t}")),
            created: k.created_at.to_rfc3339(),
        })
        .collect())
}

/// Revoke the one key whose hash starts with `id`; returns the key revoked.
pub async fn revoke(store: &impl KeyStore, id: &str) -> Result<ApiKey, KeysError> {
    let keys = store.list_keys().await?;
    let mut matching = keys.into_iter().filter(|k| !id.is_empty() && k.hash.as_str().starts_with(id));
    let key = matching.next().ok_or_else(|| KeysError::UnknownId(id.to_owned()))?;
    if matching.next().is_some() {
        return Err(KeysError::AmbiguousId(id.to_owned()));
    }
    store.revoke_key(&key.hash).await?;
    Ok(key)
}

/// What the command prints.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Created { owner, token, toolkit: None } => {
                writeln!(f, "Created an API key for {owner}. This is the only time the token is shown:\n\n{token}")
            }
            Self::Created { owner, token, toolkit: Some(toolkit) } => writeln!(
                f,
                "Created an API key for {owner}, scoped to toolkit {toolkit}: it works only on \
                 /mcp/toolkits/{toolkit}. This is the only time the token is shown:\n\n{token}"
            ),
            Self::Listed { keys } if keys.is_empty() => {
                write!(f, "No keys. Create one with `executor keys create --owner NAME`.")
            }
            Self::Listed { keys } => {
                let width = keys.iter().map(|k| k.owner.len()).chain(["OWNER".len()]).max().unwrap_or_default();
                let scope = keys.iter().map(|k| k.scope.len()).chain(["SCOPE".len()]).max().unwrap_or_default();
                write!(f, "{:ID_LEN$}  {:width$}  {:scope$}  CREATED", "ID", "OWNER", "SCOPE")?;
                for key in keys {
                    write!(f, "\n{:ID_LEN$}  {:width$}  {:scope$}  {}", key.id, key.owner, key.scope, key.created)?;
                }
                Ok(())
            }
            Self::Revoked { id, owner } => write!(f, "Revoked key {id} of {owner}."),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_have_a_header_and_aligned_columns() {
        let row = |id: &str, owner: &str, scope: &str| KeyRow {
            id: id.into(),
            owner: owner.into(),
            scope: scope.into(),
            created: "2026-01-01T00:00:00Z".into(),
        };
        let listed = Reply::Listed {
            keys: vec![row("0123456789ab", "alice@example.com", "all"), row("ba9876543210", "bob", "toolkit support")],
        };
        assert_eq!(
            listed.to_string(),
            "ID            OWNER              SCOPE            CREATED\n\
             0123456789ab  alice@example.com  all              2026-01-01T00:00:00Z\n\
             ba9876543210  bob                toolkit support  2026-01-01T00:00:00Z"
        );
        assert!(Reply::Listed { keys: vec![] }.to_string().starts_with("No keys."));
        let revoked = Reply::Revoked { id: "0123456789ab".into(), owner: "bob".into() };
        assert_eq!(revoked.to_string(), "Revoked key 0123456789ab of bob.");
    }
}
