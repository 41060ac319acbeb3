//! Idempotent `execute`: a client that lost the answer to `execute` and sends
//! it again with the same `idempotencyKey` gets the first run's outcome (or
//! where it stands now), and nothing runs twice. The key is stored with the
//! first execution, in the same conditional write, as a receipt: of any
//! number of racing repeats exactly one creates it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{ExecutionId, Principal, Timestamp};

/// How long a key stays taken: a repeat within it returns the first outcome.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The longest key a client may send.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyKeyError {
    #[error("`idempotencyKey` must not be empty")]
    Empty,
    #[error("`idempotencyKey` is {0} characters, over the limit of {MAX_IDEMPOTENCY_KEY_CHARS}")]
    TooLong(usize),
    #[error("`idempotencyKey` must not contain control characters")]
    Control,
}

/// A client's key for one `execute`, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(key: &str) -> Result<Self, IdempotencyKeyError> {
        let chars = key.chars().count();
        match key {
            "" => Err(IdempotencyKeyError::Empty),
            _ if chars > MAX_IDEMPOTENCY_KEY_CHARS => Err(IdempotencyKeyError::TooLong(chars)),
            _ if key.chars().any(char::is_control) => Err(IdempotencyKeyError::Control),
            _ => Ok(Self(key.to_owned())),
        }
    }

    /// SHA-256 of the key, hex: what the store keys the receipt by (the key
    /// itself is the client's and is not stored).
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

/// SHA-256 of code, hex: a repeat must send the same code.
pub fn code_sha256(code: &str) -> String {
    hex::encode(Sha256::digest(code.as_bytes()))
}

/// That `owner` used a key for `execution`, until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub owner: Principal,
    pub key_hash: String,
    pub execution_id: ExecutionId,
    pub code_sha256: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

impl Receipt {
    pub fn new(owner: &Principal, key: &IdempotencyKey, execution: &ExecutionId, code: &str, now: Timestamp) -> Self {
        Self {
            owner: owner.clone(),
            key_hash: key.hash(),
            execution_id: execution.clone(),
            code_sha256: code_sha256(code),
            created_at: now,
            expires_at: now.plus(IDEMPOTENCY_WINDOW),
        }
    }

    /// Whether a repeat with `code` is the same request.
    pub fn same_code(&self, code: &str) -> bool {
        self.code_sha256 == code_sha256(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        let long = "k".repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1);
        let at_limit = "é".repeat(MAX_IDEMPOTENCY_KEY_CHARS);
        let cases: [(&str, Result<(), IdempotencyKeyError>); 5] = [
            ("retry-1", Ok(())),
            (&at_limit, Ok(())),
            ("", Err(IdempotencyKeyError::Empty)),
            (&long, Err(IdempotencyKeyError::TooLong(MAX_IDEMPOTENCY_KEY_CHARS + 1))),
            ("a\nb", Err(IdempotencyKeyError::Control)),
        ];
        for (key, expected) in cases {
            assert_eq!(IdempotencyKey::parse(key).map(drop), expected, "{key:?}");
        }
    }

    #[test]
    fn a_receipt_knows_its_code_and_window() {
        let owner = Principal::parse("ana").unwrap();
        let key = IdempotencyKey::parse("k1").unwrap();
        let id = ExecutionId::parse("e1").unwrap();
        let receipt = Receipt::new(&owner, &key, &id, "return 1", Timestamp::from_millis(5));
        assert!(receipt.same_code("return 1") && !receipt.same_code("return 2"));
        assert_eq!(receipt.expires_at, Timestamp::from_millis(5).plus(IDEMPOTENCY_WINDOW));
        assert_ne!(receipt.key_hash, "k1", "the key itself is not kept");
        assert_eq!(receipt.key_hash, IdempotencyKey::parse("k1").unwrap().hash());
    }
}
