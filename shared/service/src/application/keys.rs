//! API keys: a bearer key's owner and toolkit, read by the SHA-256 of the
//! token (only that is stored), with its use recorded.
//!
//! A verified key is remembered for [`KEY_CACHE_TTL`] (by the host's clock),
//! so a request on a live session reads the store once (its session), not
//! twice. The price is the revocation delay: a key revoked where this process
//! does not hear of it (another Lambda instance, `executor keys revoke --store
//! dynamodb`) still works here until its entry expires. `executor serve` on
//! the embedded store hears of every revocation (the admin socket calls
//! [`crate::Host::forget_keys`]), so there a revoked key stops at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use executor_core::{Clock, Principal, Timestamp, TokenHash, ToolkitName};
use executor_store::{KeyStore, StoreError};

/// How long a verified API key is taken on trust: the longest a key revoked
/// elsewhere keeps working in this process.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(60);
/// Keys remembered at once (a few hundred bytes each): past it the entry
/// closest to expiry makes room.
const KEY_CACHE_ENTRIES: usize = 4096;

/// Why a token is no key.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    #[error("Unauthorized: the API key is not valid")]
    Unknown,
    #[error("{0}")]
    Store(StoreError),
}

/// A key [`Keys::verify`] found: who holds it, the toolkit it is scoped to,
/// and its hash (what names it in decisions, computed once a request).
pub(crate) struct VerifiedKey {
    pub owner: Principal,
    pub toolkit: Option<ToolkitName>,
    pub hash: TokenHash,
}

pub(crate) struct Keys {
    store: Arc<dyn KeyStore>,
    verified: KeyCache,
}

/// Keys read from the store, with when they must be read again.
struct KeyCache {
    clock: Arc<dyn Clock>,
    entries: Mutex<HashMap<TokenHash, Verified>>,
}

#[derive(Clone)]
struct Verified {
    owner: Principal,
    toolkit: Option<ToolkitName>,
    until: Timestamp,
}

impl KeyCache {
    fn get(&self, hash: &TokenHash) -> Option<Verified> {
        let now = self.clock.now();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(hash).filter(|v| v.until > now).cloned()
    }

    fn put(&self, hash: TokenHash, owner: Principal, toolkit: Option<ToolkitName>) {
        let now = self.clock.now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= KEY_CACHE_ENTRIES && !entries.contains_key(&hash) {
            entries.retain(|_, v| v.until > now);
            if entries.len() >= KEY_CACHE_ENTRIES
                && let Some(first) = entries.iter().min_by_key(|(_, v)| v.until).map(|(k, _)| k.clone())
            {
                entries.remove(&first);
            }
        }
        entries.insert(hash, Verified { owner, toolkit, until: now.plus(KEY_CACHE_TTL) });
    }

    fn clear(&self) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

impl Keys {
    pub fn new(store: Arc<dyn KeyStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, verified: KeyCache { clock, entries: Mutex::new(HashMap::new()) } }
    }

    /// Read every key from the store again: one was revoked.
    pub fn forget(&self) {
        self.verified.clear();
    }

    /// The owner of the key `token`, and the toolkit it is scoped to, if any.
    pub async fn verify(&self, token: &str) -> Result<VerifiedKey, KeyError> {
        let hash = TokenHash::of_token(token);
        if let Some(Verified { owner, toolkit, .. }) = self.verified.get(&hash) {
            return Ok(VerifiedKey { owner, toolkit, hash });
        }
        match self.store.find_key(&hash).await {
            Ok(key) => {
                // Read from the store at most once a minute per key (the cache), and the store
                // throttles too. Best effort: `keys list` shows it; a failed write refuses no one.
                let _ = self.store.record_key_use(&hash, self.verified.clock.now()).await;
                self.verified.put(hash.clone(), key.owner.clone(), key.toolkit.clone());
                Ok(VerifiedKey { owner: key.owner, toolkit: key.toolkit, hash })
            }
            Err(StoreError::NotFound { .. }) => Err(KeyError::Unknown),
            Err(e) => Err(KeyError::Store(e)),
        }
    }
}
