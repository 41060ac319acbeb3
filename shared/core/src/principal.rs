//! Who is calling: the owner recorded on every session and execution, and the
//! API keys that authenticate them.
//!
//! Two name spaces that never meet: API-key owners are plain names (letters,
//! digits, `.`, `_`, `-`, `@`, `+`: no `:`), and OIDC identities are
//! `oidc:<issuer>#<subject>`. An identity-provider user whose subject happens
//! to equal a key owner's name is therefore someone else. Treating the two as
//! one person is explicit configuration (`EXECUTOR_OIDC_SHARE_KEY_OWNERS`).

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Timestamp;

/// Room for an OIDC issuer URL and subject.
pub const MAX_PRINCIPAL_LEN: usize = 512;
/// API-key owner names are short handles.
pub const MAX_OWNER_NAME_LEN: usize = 64;
/// The prefix of OIDC principals; key owner names cannot contain `:`.
const OIDC_PREFIX: &str = "oidc:";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    #[error("owner name is empty; pass a name such as --owner alice")]
    Empty,
    #[error("owner name is {0} characters long; at most {MAX_PRINCIPAL_LEN} are allowed")]
    TooLong(usize),
    #[error("owner name contains a control character or whitespace other than a plain space")]
    InvalidCharacter,
    #[error(
        "owner name {0:?} is not a plain name: use at most {MAX_OWNER_NAME_LEN} letters, digits, '.', '_', '-', '@' or '+' (e.g. alice or alice@example.com)"
    )]
    NotAName(String),
}

/// The owner of sessions and executions. Reads by anyone else see "not found".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Principal(String);

impl Principal {
    pub fn parse(value: impl Into<String>) -> Result<Self, PrincipalError> {
        let value = value.into();
        if value.trim().is_empty() {
            return Err(PrincipalError::Empty);
        }
        let len = value.chars().count();
        if len > MAX_PRINCIPAL_LEN {
            return Err(PrincipalError::TooLong(len));
        }
        if value.chars().any(|c| c.is_control() || (c.is_whitespace() && c != ' ')) {
            return Err(PrincipalError::InvalidCharacter);
        }
        Ok(Self(value))
    }

    /// An API-key owner: a plain name (`executor keys create --owner NAME`).
    pub fn key_owner(name: &str) -> Result<Self, PrincipalError> {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+');
        if name.trim().is_empty() {
            return Err(PrincipalError::Empty);
        }
        if name.len() > MAX_OWNER_NAME_LEN || !name.chars().all(plain) {
            return Err(PrincipalError::NotAName(name.to_owned()));
        }
        Self::parse(name)
    }

    /// An identity of an OIDC issuer: its own name space, apart from key owners.
    pub fn oidc(issuer: &str, subject: &str) -> Result<Self, PrincipalError> {
        if subject.trim().is_empty() {
            return Err(PrincipalError::Empty);
        }
        Self::parse(format!("{OIDC_PREFIX}{issuer}#{subject}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Principal {
    type Error = PrincipalError;
    fn try_from(value: String) -> Result<Self, PrincipalError> {
        Self::parse(value)
    }
}

impl From<Principal> for String {
    fn from(p: Principal) -> String {
        p.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 of a bearer token, hex encoded. Only this is ever stored, so a leaked
/// table does not leak credentials. Tokens are 256-bit random values, so a fast
/// unsalted hash is enough: there is nothing to brute-force.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokenHash(String);

impl TokenHash {
    pub fn of_token(token: &str) -> Self {
        Self(hex::encode(Sha256::digest(token.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stored API key: the hash of its token and the principal it authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub hash: TokenHash,
    pub owner: Principal,
    pub created_at: Timestamp,
    /// A scoped key works only on this toolkit's endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<crate::ToolkitName>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_validated() {
        let long = "x".repeat(MAX_PRINCIPAL_LEN + 1);
        let cases: [(&str, Result<(), PrincipalError>); 6] = [
            ("alice", Ok(())),
            ("Alice Smith <alice@example.com>", Ok(())),
            ("", Err(PrincipalError::Empty)),
            ("   ", Err(PrincipalError::Empty)),
            (&long, Err(PrincipalError::TooLong(MAX_PRINCIPAL_LEN + 1))),
            ("a\nb", Err(PrincipalError::InvalidCharacter)),
        ];
        for (input, expected) in cases {
            assert_eq!(Principal::parse(input).map(|_| ()), expected, "{input:?}");
        }
    }

    #[test]
    fn key_owners_and_oidc_identities_never_collide() {
        let long = "x".repeat(MAX_OWNER_NAME_LEN + 1);
        let cases: [(&str, bool); 9] = [
            ("alice", true),
            ("alice@example.com", true),
            ("ci-bot_2.prod+x", true),
            ("a b", false),
            ("", false),
            ("oidc:https://idp#alice", false),
            ("alice\u{202E}", false),
            ("ünïcode", false),
            (&long, false),
        ];
        for (name, ok) in cases {
            assert_eq!(Principal::key_owner(name).is_ok(), ok, "{name:?}");
        }
        let idp = Principal::oidc("https://idp.example", "alice").unwrap();
        assert_eq!(idp.as_str(), "oidc:https://idp.example#alice");
        assert_ne!(idp, Principal::key_owner("alice").unwrap());
        assert_ne!(idp, Principal::oidc("https://other.example", "alice").unwrap());
        assert!(Principal::oidc("https://idp.example", " ").is_err());
    }

    #[test]
    fn token_hash_is_sha256_hex() {
        assert_eq!(
            TokenHash::of_token("abc").as_str(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(TokenHash::of_token("abc"), TokenHash::of_token("abd"));
    }
}
