//! Fresh identifiers, seeds and approval tokens from the system's random source.

use std::fmt;

use executor_core::{ExecutionId, GrantId, SessionId, TokenHash};

/// 128 random bits, hex: unguessable, so an id alone grants nothing.
fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

pub(crate) fn execution_id() -> Result<ExecutionId, getrandom::Error> {
    Ok(ExecutionId::parse(random_hex()?).expect("hex is a valid id"))
}

pub(crate) fn grant_id() -> Result<GrantId, getrandom::Error> {
    Ok(GrantId::parse(random_hex()?).expect("hex is a valid id"))
}

/// Marks a claim as written by this resumer (see `Execution::claim`).
pub(crate) fn claim_id() -> Result<String, getrandom::Error> {
    random_hex()
}

pub(crate) fn session_id() -> Result<SessionId, getrandom::Error> {
    Ok(SessionId::parse(random_hex()?).expect("hex is a valid id"))
}

/// The value of the approval page's double-submit CSRF cookie.
pub(crate) fn csrf_token() -> Result<String, getrandom::Error> {
    random_hex()
}

pub(crate) fn seed() -> Result<u64, getrandom::Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

/// A browser approval token: 256 random bits, shown once in a link; only its
/// hash is stored. `Debug` does not print it, so it stays out of logs.
#[derive(Clone, PartialEq, Eq)]
pub struct ApprovalToken(String);

impl ApprovalToken {
    /// The approval page's link for execution `id` on the deployment at `base_url`.
    pub(crate) fn approval_url(&self, base_url: &str, id: &ExecutionId) -> String {
        format!("{}/approvals/{id}?token={}", base_url.trim_end_matches('/'), self.as_str())
    }

    pub(crate) fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Self(hex::encode(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn hash(&self) -> TokenHash {
        Self::hash_of(&self.0)
    }

    pub(crate) fn hash_of(token: &str) -> TokenHash {
        TokenHash::of_token(token)
    }
}

impl fmt::Debug for ApprovalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApprovalToken(..)")
    }
}
