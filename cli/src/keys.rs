//! API keys: 256-bit random bearer tokens, stored only as their SHA-256.

use executor_core::{ApiKey, Clock, Principal, PrincipalError, SystemClock, TokenHash};
use executor_store::{KeyStore, StoreError};

/// Prefix that makes a leaked token recognisable to secret scanners.
const TOKEN_PREFIX: &str = "exk_";
/// How much of a key's hash `keys list` shows and `keys revoke` takes.
pub const ID_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("the system random source failed ({0}); try again")]
    Random(String),
    #[error("no key has the id {0:?}; `executor keys list` shows the ids")]
    UnknownId(String),
    #[error("the id {0:?} matches more than one key; give more of it")]
    AmbiguousId(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Create and store a new key for `owner`; the token is returned and never stored.
pub async fn create(store: &impl KeyStore, owner: &str) -> Result<String, KeysError> {
    let owner = Principal::key_owner(owner)?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| KeysError::Random(e.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let key = ApiKey { hash: TokenHash::of_token(&token), owner, created_at: SystemClock.now() };
    store.create_key(&key).await?;
    Ok(token)
}

/// One line per key: id, owner, creation time; oldest first.
pub async fn list(store: &impl KeyStore) -> Result<Vec<String>, KeysError> {
    let mut keys = store.list_keys().await?;
    keys.sort_by_key(|k| k.created_at);
    Ok(keys
        .iter()
        .map(|k| format!("{}  {}  created {}", &k.hash.as_str()[..ID_LEN], k.owner, k.created_at.to_rfc3339()))
        .collect())
}

/// Revoke the one key whose hash starts with `id`.
pub async fn revoke(store: &impl KeyStore, id: &str) -> Result<(), KeysError> {
    let keys = store.list_keys().await?;
    let mut matching = keys.iter().filter(|k| !id.is_empty() && k.hash.as_str().starts_with(id));
    let key = matching.next().ok_or_else(|| KeysError::UnknownId(id.to_owned()))?;
    if matching.next().is_some() {
        return Err(KeysError::AmbiguousId(id.to_owned()));
    }
    store.revoke_key(&key.hash).await?;
    Ok(())
}
