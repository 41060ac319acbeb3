//! API keys: 256-bit random bearer tokens, stored only as their SHA-256.

use std::path::Path;
use std::time::SystemTime;

use executor_core::{ApiKey, Principal, PrincipalError, TokenHash};
use executor_store::{EmbeddedStore, KeyStore, StoreError};

/// Prefix that makes a leaked token recognisable to secret scanners.
const TOKEN_PREFIX: &str = "exk_";

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("the system random source failed ({0}); try again")]
    Random(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Create a key for `owner` in the embedded store under `data_dir`; returns the token.
pub async fn create(owner: &str, data_dir: &Path) -> Result<String, KeysError> {
    let owner = Principal::parse(owner)?;
    let store = EmbeddedStore::open(data_dir)?;
    issue(&store, owner).await
}

/// Create and store a new key; the token is returned and never stored.
pub async fn issue(store: &impl KeyStore, owner: Principal) -> Result<String, KeysError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| KeysError::Random(e.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let key = ApiKey { hash: TokenHash::of_token(&token), owner, created_at: SystemTime::now().into() };
    store.create_key(&key).await?;
    Ok(token)
}
